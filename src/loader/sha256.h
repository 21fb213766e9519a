// SHA-256 through OpenSSL's EVP interface (libcrypto), for checkpoint checksums.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>

namespace dsv4 {

class Sha256 {
  public:
    Sha256();
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;
    ~Sha256();

    void update(std::span<const uint8_t> bytes);
    std::array<uint8_t, 32> finish();  // the object can not be updated afterwards

  private:
    void* ctx_;  // EVP_MD_CTX*, kept opaque so OpenSSL headers stay out of this header
};

// Lower-case hex of bytes.
std::string to_hex(std::span<const uint8_t> bytes);

std::string sha256_hex(std::span<const uint8_t> bytes);

// Hashes a file streamed in chunks of chunk_bytes; on_bytes(n) is called after each chunk of n bytes (progress).
// Throws dsv4::Error naming the file on open / read errors.
std::string sha256_file_hex(const std::filesystem::path& path, const std::function<void(uint64_t)>& on_bytes = {},
                            size_t chunk_bytes = size_t{8} << 20);

}  // namespace dsv4
