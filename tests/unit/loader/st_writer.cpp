#include "st_writer.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace dsv4::test {

size_t element_size(const std::string& dtype) {
    static const std::map<std::string, size_t> kSizes{{"F32", 4},     {"F16", 2},     {"BF16", 2}, {"I64", 8},
                                                      {"I32", 4},     {"I8", 1},      {"U8", 1},   {"F8_E4M3", 1},
                                                      {"F8_E5M2", 1}, {"F8_E8M0", 1}, {"F64", 8},  {"BOOL", 1}};
    auto it = kSizes.find(dtype);
    return it == kSizes.end() ? 1 : it->second;
}

std::vector<uint8_t> pattern_bytes(size_t n, uint32_t seed) {
    std::vector<uint8_t> out(n);
    uint32_t state = seed * 2654435761u + 12345u;
    for (auto& b : out) {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        b = static_cast<uint8_t>(state >> 24);
    }
    return out;
}

TestTensor make_tensor(const std::string& name, const std::string& dtype, std::vector<int64_t> shape, uint32_t seed) {
    size_t numel = 1;
    for (int64_t d : shape) numel *= static_cast<size_t>(d);
    return TestTensor{name, dtype, std::move(shape), pattern_bytes(numel * element_size(dtype), seed)};
}

nlohmann::json header_for(const std::vector<TestTensor>& tensors, const std::map<std::string, std::string>& metadata) {
    nlohmann::json header = nlohmann::json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    uint64_t offset = 0;
    for (const auto& t : tensors) {
        header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
        offset += t.bytes.size();
    }
    return header;
}

std::vector<uint8_t> concat_data(const std::vector<TestTensor>& tensors) {
    std::vector<uint8_t> data;
    for (const auto& t : tensors) data.insert(data.end(), t.bytes.begin(), t.bytes.end());
    return data;
}

std::vector<uint8_t> file_image(const std::string& header_text, const std::vector<uint8_t>& data) {
    std::string header = header_text;
    while (header.size() % 8 != 0) header += ' ';
    const uint64_t n = header.size();
    // Sized once and filled with memcpy (GCC 12 -O3 reports a bogus -Warray-bounds for insert() after a resize).
    std::vector<uint8_t> image(8 + header.size() + data.size());
    for (size_t i = 0; i < 8; ++i) image[i] = static_cast<uint8_t>(n >> (8 * i));
    if (!header.empty()) std::memcpy(image.data() + 8, header.data(), header.size());
    if (!data.empty()) std::memcpy(image.data() + 8 + header.size(), data.data(), data.size());
    return image;
}

std::vector<uint8_t> safetensors_image(const std::vector<TestTensor>& tensors,
                                       const std::map<std::string, std::string>& metadata) {
    return file_image(header_for(tensors, metadata).dump(), concat_data(tensors));
}

void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + path.string());
}

void write_text(const std::filesystem::path& path, const std::string& text) {
    write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

void write_sharded_checkpoint(const std::filesystem::path& dir,
                              const std::map<std::string, std::vector<TestTensor>>& shards) {
    nlohmann::json index;
    uint64_t total = 0;
    index["weight_map"] = nlohmann::json::object();
    for (const auto& [file, tensors] : shards) {
        write_bytes(dir / file, safetensors_image(tensors, {{"format", "pt"}}));
        for (const auto& t : tensors) {
            index["weight_map"][t.name] = file;
            total += t.bytes.size();
        }
    }
    index["metadata"] = {{"total_size", total}};
    write_text(dir / "model.safetensors.index.json", index.dump(1));
}

TempDir::TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "dsv4_loader_test_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

}  // namespace dsv4::test
