// Validation of safetensors headers and whole-file images (the part the fuzzer drives). See safetensors.h.
#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "loader/json_strict.h"
#include "loader/safetensors.h"
#include "loader/text_util.h"

namespace dsv4 {
namespace {

using nlohmann::json;

// Reads a JSON value that must be a non-negative integer.
uint64_t read_unsigned(const json& value, std::string_view file, std::string_view tensor, std::string_view what) {
    if (!value.is_number_unsigned()) {
        fail("{}: tensor {}: {} must be non-negative integers, got {}", file, quote_name(tensor), what,
             truncated(value.dump()));
    }
    return value.get<uint64_t>();
}

std::vector<int64_t> read_shape(const json& entry, std::string_view file, std::string_view tensor) {
    auto it = entry.find("shape");
    if (it == entry.end()) fail("{}: tensor {}: missing 'shape'", file, quote_name(tensor));
    if (!it->is_array()) fail("{}: tensor {}: 'shape' is not an array", file, quote_name(tensor));
    std::vector<int64_t> shape;
    shape.reserve(it->size());
    for (const json& dim : *it) {
        uint64_t d = read_unsigned(dim, file, tensor, "shape entries");
        if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            fail("{}: tensor {}: shape dimension {} is too large", file, quote_name(tensor), d);
        }
        shape.push_back(static_cast<int64_t>(d));
    }
    return shape;
}

DType read_dtype(const json& entry, std::string_view file, std::string_view tensor) {
    auto it = entry.find("dtype");
    if (it == entry.end()) fail("{}: tensor {}: missing 'dtype'", file, quote_name(tensor));
    if (!it->is_string()) fail("{}: tensor {}: 'dtype' is not a string", file, quote_name(tensor));
    const auto& text = it->get_ref<const std::string&>();
    auto dtype = parse_safetensors_dtype(text);
    if (!dtype) fail("{}: tensor {}: unknown dtype {}", file, quote_name(tensor), quote_name(text));
    return *dtype;
}

// Bytes a tensor of this dtype and shape occupies; fails on overflow or a fractional byte count.
uint64_t expected_nbytes(DType dtype, const std::vector<int64_t>& shape, std::string_view file,
                         std::string_view tensor) {
    uint64_t numel = 1;
    for (int64_t d : shape) {
        if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel)) {
            fail("{}: tensor {}: shape {} has more elements than fit in 64 bits", file, quote_name(tensor),
                 format_shape(shape));
        }
    }
    uint64_t bits = 0;
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_bits(dtype)), &bits)) {
        fail("{}: tensor {}: shape {} of {} overflows 64-bit byte counts", file, quote_name(tensor),
             format_shape(shape), dtype_name(dtype));
    }
    if (bits % 8 != 0) {
        fail("{}: tensor {}: {} elements of {} are not a whole number of bytes", file, quote_name(tensor), numel,
             dtype_name(dtype));
    }
    return bits / 8;
}

SafetensorsTensorInfo read_entry(const std::string& name, const json& entry, uint64_t data_size,
                                 std::string_view file) {
    if (name.empty()) fail("{}: a tensor has an empty name", file);
    if (!entry.is_object()) fail("{}: tensor {}: entry is not a JSON object", file, quote_name(name));
    for (const auto& [key, value] : entry.items()) {
        if (key != "dtype" && key != "shape" && key != "data_offsets") {
            fail("{}: tensor {}: unknown field {}", file, quote_name(name), quote_name(key));
        }
    }
    SafetensorsTensorInfo info;
    info.name = name;
    info.dtype = read_dtype(entry, file, name);
    info.shape = read_shape(entry, file, name);
    uint64_t nbytes = expected_nbytes(info.dtype, info.shape, file, name);

    auto it = entry.find("data_offsets");
    if (it == entry.end()) fail("{}: tensor {}: missing 'data_offsets'", file, quote_name(name));
    if (!it->is_array() || it->size() != 2) {
        fail("{}: tensor {}: 'data_offsets' must be [begin, end], got {}", file, quote_name(name),
             truncated(it->dump()));
    }
    uint64_t begin = read_unsigned((*it)[0], file, name, "data_offsets");
    uint64_t end = read_unsigned((*it)[1], file, name, "data_offsets");
    if (begin > end) fail("{}: tensor {}: data_offsets [{}, {}] have begin > end", file, quote_name(name), begin, end);
    if (end > data_size) {
        fail("{}: tensor {}: data_offsets [{}, {}] run past the end of the data region ({} bytes): file truncated?",
             file, quote_name(name), begin, end, data_size);
    }
    if (end - begin != nbytes) {
        fail("{}: tensor {}: data_offsets [{}, {}] hold {} bytes but {} {} needs {}", file, quote_name(name), begin,
             end, end - begin, dtype_name(info.dtype), format_shape(info.shape), nbytes);
    }
    info.offset = begin;
    info.nbytes = nbytes;
    return info;
}

std::map<std::string, std::string> read_metadata(const json& value, std::string_view file) {
    if (!value.is_object()) fail("{}: '__metadata__' is not a JSON object", file);
    std::map<std::string, std::string> metadata;
    for (const auto& [key, item] : value.items()) {
        if (!item.is_string()) fail("{}: '__metadata__' value {} is not a string", file, quote_name(key));
        metadata.emplace(key, item.get<std::string>());
    }
    return metadata;
}

// Fails if two tensors with at least one byte share a byte. Empty tensors never overlap anything.
void check_no_overlap(const std::vector<SafetensorsTensorInfo>& tensors, std::string_view file) {
    std::vector<const SafetensorsTensorInfo*> by_offset;
    by_offset.reserve(tensors.size());
    for (const auto& t : tensors) {
        if (t.nbytes > 0) by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
        return a->offset != b->offset ? a->offset < b->offset : a->name < b->name;
    });
    const SafetensorsTensorInfo* furthest = nullptr;  // the earlier tensor reaching furthest
    for (const auto* t : by_offset) {
        if (furthest != nullptr && t->offset < furthest->offset + furthest->nbytes) {
            fail("{}: tensor {}: data_offsets [{}, {}] overlap {} [{}, {}]", file, quote_name(t->name), t->offset,
                 t->offset + t->nbytes, quote_name(furthest->name), furthest->offset,
                 furthest->offset + furthest->nbytes);
        }
        if (furthest == nullptr || t->offset + t->nbytes > furthest->offset + furthest->nbytes) furthest = t;
    }
}

}  // namespace

const SafetensorsTensorInfo* SafetensorsHeader::find(std::string_view name) const {
    auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                               [](const SafetensorsTensorInfo& t, std::string_view n) { return t.name < n; });
    return it != tensors.end() && it->name == name ? &*it : nullptr;
}

SafetensorsHeader parse_safetensors_header(std::string_view header_json, uint64_t data_size,
                                           std::string_view file_name) {
    json root = parse_json_strict(header_json, file_name, "header");
    if (!root.is_object()) fail("{}: header is not a JSON object", file_name);
    SafetensorsHeader header;
    header.tensors.reserve(root.size());
    // nlohmann objects iterate in key order, so the table comes out sorted by name.
    for (const auto& [key, value] : root.items()) {
        if (key == "__metadata__") {
            header.metadata = read_metadata(value, file_name);
            continue;
        }
        header.tensors.push_back(read_entry(key, value, data_size, file_name));
        header.data_bytes_used =
            std::max(header.data_bytes_used, header.tensors.back().offset + header.tensors.back().nbytes);
    }
    check_no_overlap(header.tensors, file_name);
    return header;
}

SafetensorsImage parse_safetensors_image(std::span<const uint8_t> image, std::string_view file_name) {
    if (image.size() < 8) {
        fail("{}: file is {} bytes, shorter than the 8-byte header length prefix", file_name, image.size());
    }
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | image[static_cast<size_t>(i)];
    if (header_len > kMaxSafetensorsHeaderBytes) {
        fail("{}: header length {} exceeds the {}-byte limit", file_name, header_len, kMaxSafetensorsHeaderBytes);
    }
    if (header_len > image.size() - 8) {
        fail("{}: header length {} runs past the end of the file ({} bytes)", file_name, header_len, image.size());
    }
    std::string_view header_json(reinterpret_cast<const char*>(image.data() + 8), header_len);
    SafetensorsImage result;
    result.data_start = 8 + header_len;
    result.header = parse_safetensors_header(header_json, image.size() - result.data_start, file_name);
    return result;
}

}  // namespace dsv4
