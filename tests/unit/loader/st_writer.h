// Test utilities: a tiny safetensors writer (valid and deliberately malformed files) and a self-deleting temp dir.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dsv4::test {

struct TestTensor {
    std::string name;
    std::string dtype;  // safetensors spelling, e.g. "BF16"
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
};

// Bytes per element of a safetensors dtype name (tests only use whole-byte types).
size_t element_size(const std::string& dtype);

// Deterministic pseudo-random bytes.
std::vector<uint8_t> pattern_bytes(size_t n, uint32_t seed);

// A tensor with pattern_bytes of the right size for dtype x shape.
TestTensor make_tensor(const std::string& name, const std::string& dtype, std::vector<int64_t> shape, uint32_t seed);

// The header JSON a correct writer produces for these tensors laid out back to back (optionally with metadata).
nlohmann::json header_for(const std::vector<TestTensor>& tensors,
                          const std::map<std::string, std::string>& metadata = {});

// A whole file: u64 LE length | header text padded with spaces to a multiple of 8 | data.
std::vector<uint8_t> file_image(const std::string& header_text, const std::vector<uint8_t>& data);
std::vector<uint8_t> safetensors_image(const std::vector<TestTensor>& tensors,
                                       const std::map<std::string, std::string>& metadata = {});
// The concatenated data of tensors (what header_for's offsets point into).
std::vector<uint8_t> concat_data(const std::vector<TestTensor>& tensors);

void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes);
void write_text(const std::filesystem::path& path, const std::string& text);

// Writes shards (file name -> tensors) and model.safetensors.index.json with the matching weight_map and total_size.
void write_sharded_checkpoint(const std::filesystem::path& dir,
                              const std::map<std::string, std::vector<TestTensor>>& shards);

class TempDir {
  public:
    TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    ~TempDir();
    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

  private:
    std::filesystem::path path_;
};

}  // namespace dsv4::test
