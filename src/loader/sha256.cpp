#include "loader/sha256.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "loader/unique_fd.h"

namespace dsv4 {
namespace {

EVP_MD_CTX* as_ctx(void* p) {
    return static_cast<EVP_MD_CTX*>(p);
}

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
    DSV4_CHECK(ctx_ != nullptr, "sha256: EVP_MD_CTX_new failed");
    if (EVP_DigestInit_ex(as_ctx(ctx_), EVP_sha256(), nullptr) != 1) {
        EVP_MD_CTX_free(as_ctx(ctx_));
        fail("sha256: EVP_DigestInit_ex failed");
    }
}

Sha256::~Sha256() {
    EVP_MD_CTX_free(as_ctx(ctx_));
}

void Sha256::update(std::span<const uint8_t> bytes) {
    DSV4_CHECK(EVP_DigestUpdate(as_ctx(ctx_), bytes.data(), bytes.size()) == 1, "sha256: EVP_DigestUpdate failed");
}

std::array<uint8_t, 32> Sha256::finish() {
    std::array<uint8_t, 32> digest{};
    unsigned int length = 0;
    DSV4_CHECK(EVP_DigestFinal_ex(as_ctx(ctx_), digest.data(), &length) == 1 && length == digest.size(),
               "sha256: EVP_DigestFinal_ex failed");
    return digest;
}

std::string to_hex(std::span<const uint8_t> bytes) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (uint8_t b : bytes) {
        out += kDigits[b >> 4];
        out += kDigits[b & 15];
    }
    return out;
}

std::string sha256_hex(std::span<const uint8_t> bytes) {
    Sha256 hash;
    hash.update(bytes);
    return to_hex(hash.finish());
}

std::string sha256_file_hex(const std::filesystem::path& path, const std::function<void(uint64_t)>& on_bytes,
                            size_t chunk_bytes) {
    DSV4_CHECK(chunk_bytes > 0, "sha256: chunk size must be positive");
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) fail("{}: cannot open: {}", path.string(), std::strerror(errno));
    ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);  // a hint: larger read-ahead
    std::vector<uint8_t> buffer(chunk_bytes);
    Sha256 hash;
    for (;;) {
        ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail("{}: read error: {}", path.string(), std::strerror(errno));
        if (n == 0) break;
        hash.update({buffer.data(), static_cast<size_t>(n)});
        if (on_bytes) on_bytes(static_cast<uint64_t>(n));
    }
    return to_hex(hash.finish());
}

}  // namespace dsv4
