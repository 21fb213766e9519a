// safetensors reader: header validation (pure, fuzzed) and a zero-copy memory-mapped file.
//
// File layout: u64 little-endian N | N bytes of UTF-8 JSON header | data region. The header is an object mapping each
// tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data region), plus an
// optional "__metadata__" object of string -> string.
//
// Validation (every failure is a dsv4::Error naming the file and, where there is one, the tensor):
// - the header is a JSON object with no duplicate keys at any level, at most kMaxHeaderBytes long;
// - each entry is an object with exactly dtype / shape / data_offsets; dtype is one parse_safetensors_dtype() knows;
//   shape is an array of non-negative integers whose product (times the element size) does not overflow;
//   data_offsets is two non-negative integers with begin <= end <= size of the data region;
// - end - begin == numel * element size (FP4 experts are stored as plain I8 [out, in/2], so no special case);
// - no two tensors' byte ranges overlap.
// Allowed (as in the reference implementation's readers, but noted): gaps between tensors, bytes after the last
// tensor, and any tensor order. Tensor data is not guaranteed to be aligned (see TensorView).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "loader/tensor_view.h"

namespace dsv4 {

// Upper bound on the JSON header (the reference implementation uses the same 100 MB limit).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct SafetensorsTensorInfo {
    std::string name;
    DType dtype = DType::kU8;
    std::vector<int64_t> shape;
    uint64_t offset = 0;  // byte offset within the data region
    uint64_t nbytes = 0;
};

struct SafetensorsHeader {
    std::vector<SafetensorsTensorInfo> tensors;   // sorted by name
    std::map<std::string, std::string> metadata;  // "__metadata__"; empty when absent
    uint64_t data_bytes_used = 0;                 // largest tensor end offset (0 with no tensors)

    // Binary search by name; nullptr when absent.
    const SafetensorsTensorInfo* find(std::string_view name) const;
};

// Parses and validates a header. data_size is the length of the data region (bytes after the header).
SafetensorsHeader parse_safetensors_header(std::string_view header_json, uint64_t data_size,
                                           std::string_view file_name);

// A parsed whole-file image: where the data region starts plus the header.
struct SafetensorsImage {
    uint64_t data_start = 0;  // 8 + header length
    SafetensorsHeader header;
};

// Validates a complete file image (length prefix + header + data) held in memory. Same checks as
// SafetensorsFile::open; this is the fuzzer's entry point.
SafetensorsImage parse_safetensors_image(std::span<const uint8_t> image, std::string_view file_name);

// A read-only, MAP_PRIVATE mapping of one .safetensors file. Movable, not copyable; unmaps in the destructor.
class SafetensorsFile {
  public:
    static SafetensorsFile open(const std::filesystem::path& path);

    SafetensorsFile(SafetensorsFile&& other) noexcept;
    SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
    SafetensorsFile(const SafetensorsFile&) = delete;
    SafetensorsFile& operator=(const SafetensorsFile&) = delete;
    ~SafetensorsFile();

    const std::filesystem::path& path() const { return path_; }
    std::string file_name() const { return path_.filename().string(); }
    uint64_t file_size() const { return size_; }
    uint64_t data_start() const { return data_start_; }
    const std::map<std::string, std::string>& metadata() const { return header_.metadata; }

    // Tensors sorted by name; views()[i] belongs to infos()[i].
    const std::vector<SafetensorsTensorInfo>& infos() const { return header_.tensors; }
    const std::vector<TensorView>& views() const { return views_; }
    size_t size() const { return views_.size(); }

    const TensorView* find(std::string_view name) const;  // nullptr when absent
    const TensorView& at(std::string_view name) const;    // throws naming the file and the tensor

    // Paging hints for the mapped bytes of one tensor of this file (no effect on the values read).
    void prefetch(const TensorView& view) const;  // MADV_WILLNEED
    void release(const TensorView& view) const;   // MADV_DONTNEED: drop the pages; they are re-read on next access

  private:
    SafetensorsFile() = default;
    void unmap() noexcept;
    void check_owned(const TensorView& view) const;

    std::filesystem::path path_;
    const uint8_t* base_ = nullptr;  // mapping of the whole file
    uint64_t size_ = 0;
    uint64_t data_start_ = 0;
    SafetensorsHeader header_;
    std::vector<TensorView> views_;
};

}  // namespace dsv4
