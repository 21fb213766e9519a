#include "core/npy.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include "core/error.h"
#include "core/float_formats.h"

static_assert(std::endian::native == std::endian::little, "dsv4 .npy I/O assumes a little-endian host");

namespace dsv4 {
namespace {

constexpr std::array<uint8_t, 6> kMagic{0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr size_t kPreamble1 = 10;  // magic, version, uint16 header length
constexpr size_t kPreamble2 = 12;  // magic, version, uint32 header length
constexpr size_t kAlignment = 64;

// --- header dict parsing ---------------------------------------------------------------------------------------------

// A cursor over the Python-literal header: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
  public:
    HeaderParser(std::string_view text, std::string_view name) : text_(text), name_(name) {}

    NpyArray parse() {
        skip_space();
        if (!consume('{')) fail_here("header is not a dict");
        std::optional<std::string> descr;
        std::optional<bool> fortran_order;
        std::optional<std::vector<int64_t>> shape;
        skip_space();
        while (!consume('}')) {
            const std::string key = parse_string("a dict key");
            skip_space();
            if (!consume(':')) fail_here("expected ':' after key '" + key + "'");
            skip_space();
            if (key == "descr" && !descr) {
                descr = parse_string("the descr string");
            } else if (key == "fortran_order" && !fortran_order) {
                fortran_order = parse_bool();
            } else if (key == "shape" && !shape) {
                shape = parse_shape();
            } else {
                fail_here("unexpected or repeated key '" + key + "'");
            }
            skip_space();
            if (!consume(',')) {
                skip_space();
                if (!consume('}')) fail_here("expected ',' or '}'");
                break;
            }
            skip_space();
        }
        skip_space();
        if (pos_ != text_.size()) fail_here("unexpected text after the header dict");
        if (!descr || !fortran_order || !shape) fail("header lacks one of 'descr', 'fortran_order', 'shape'");
        if (*fortran_order) fail("fortran_order True (Fortran-ordered arrays) is not supported, write C order");
        NpyArray array;
        array.dtype = *descr;
        array.shape = std::move(*shape);
        return array;
    }

  private:
    [[noreturn]] void fail(const std::string& problem) const { dsv4::fail("{}: .npy {}", name_, problem); }
    [[noreturn]] void fail_here(const std::string& problem) const {
        dsv4::fail("{}: .npy header: {} at offset {} of \"{}\"", name_, problem, pos_, text_);
    }

    void skip_space() {
        while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n')) ++pos_;
    }
    bool consume(char c) {
        if (pos_ < text_.size() && text_[pos_] == c) {
            ++pos_;
            return true;
        }
        return false;
    }
    bool consume_word(std::string_view word) {
        if (text_.substr(pos_, word.size()) == word) {
            pos_ += word.size();
            return true;
        }
        return false;
    }

    std::string parse_string(const char* what) {
        if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
            fail_here(std::string("expected ") + what + " in quotes");
        }
        const char quote = text_[pos_++];
        const size_t end = text_.find(quote, pos_);
        if (end == std::string_view::npos) fail_here("unterminated string");
        std::string value(text_.substr(pos_, end - pos_));
        pos_ = end + 1;
        return value;
    }

    bool parse_bool() {
        if (consume_word("True")) return true;
        if (consume_word("False")) return false;
        fail_here("fortran_order must be True or False");
    }

    int64_t parse_dimension() {
        if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9')
            fail_here("expected a non-negative integer");
        int64_t value = 0;
        while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
            if (value > (std::numeric_limits<int64_t>::max() - 9) / 10) fail_here("dimension too large");
            value = value * 10 + (text_[pos_++] - '0');
        }
        consume('L');  // Python 2 long literals
        return value;
    }

    std::vector<int64_t> parse_shape() {
        if (!consume('(')) fail_here("shape must be a tuple");
        std::vector<int64_t> shape;
        skip_space();
        while (!consume(')')) {
            shape.push_back(parse_dimension());
            skip_space();
            if (!consume(',')) {
                skip_space();
                if (!consume(')')) fail_here("expected ',' or ')' in shape");
                break;
            }
            skip_space();
        }
        return shape;
    }

    std::string_view text_;
    std::string_view name_;
    size_t pos_ = 0;
};

// Where the header text lies, read from the first bytes of a file (kPreamble2 bytes, or the whole file if shorter).
struct Preamble {
    size_t header_begin;
    size_t header_length;
};

// Checks magic and version.
Preamble parse_preamble(const uint8_t* bytes, size_t size, std::string_view name) {
    if (size < kMagic.size()) fail("{}: too short to be a .npy file ({} bytes)", name, size);
    if (std::memcmp(bytes, kMagic.data(), kMagic.size()) != 0) {
        fail("{}: not a .npy file (bad magic; expected \\x93NUMPY)", name);
    }
    if (size < kPreamble1) fail("{}: .npy file truncated inside its preamble ({} bytes)", name, size);
    const int major = bytes[6];
    const int minor = bytes[7];
    if (major == 1 && minor == 0) {
        return {kPreamble1, static_cast<size_t>(bytes[8]) | (static_cast<size_t>(bytes[9]) << 8)};
    }
    if ((major == 2 || major == 3) && minor == 0) {
        if (size < kPreamble2) fail("{}: .npy file truncated inside its preamble ({} bytes)", name, size);
        uint32_t length = 0;
        std::memcpy(&length, bytes + 8, sizeof(length));
        return {kPreamble2, length};
    }
    fail("{}: unsupported .npy format version {}.{} (1.0, 2.0 and 3.0 are read)", name, major, minor);
}

// Validates the dtype and returns the number of data bytes the shape implies.
size_t expected_data_bytes(const NpyArray& array, std::string_view name) {
    if (!array.dtype.empty() && array.dtype[0] == '>') {
        fail("{}: big-endian dtype '{}' is not supported (write little-endian '<')", name, array.dtype);
    }
    size_t bytes = 0;
    try {
        bytes = npy_item_size(array.dtype);
    } catch (const Error&) {
        fail("{}: unsupported .npy dtype '{}' (supported: <f4, <i4, <i8, |u1, <f2)", name, array.dtype);
    }
    for (int64_t dim : array.shape) {
        if (__builtin_mul_overflow(bytes, static_cast<size_t>(dim), &bytes)) {
            fail("{}: .npy shape is too large", name);
        }
    }
    return bytes;
}

void check_data_length(size_t expected, size_t available, std::string_view name) {
    if (available < expected) {
        fail("{}: .npy data is shorter than the shape implies: {} bytes expected, {} present", name, expected,
             available);
    }
    if (available > expected) {
        fail("{}: .npy file has {} bytes after the data the shape describes", name, available - expected);
    }
}

NpyArray parse_header_text(const uint8_t* bytes, const Preamble& preamble, std::string_view name) {
    const std::string_view text(reinterpret_cast<const char*>(bytes + preamble.header_begin), preamble.header_length);
    return HeaderParser(text, name).parse();
}

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string text = "(";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i > 0) text += ", ";
        text += std::to_string(shape[i]);
    }
    if (shape.size() == 1) text += ",";
    return text + ")";
}

// Preamble and padded header of a file holding `data_bytes` bytes of `dtype` with `shape` (checked to agree).
std::vector<uint8_t> npy_header_bytes(const std::string& dtype, const std::vector<int64_t>& shape, size_t data_bytes) {
    DSV4_CHECK(dtype == "<f4" || dtype == "<i4" || dtype == "<i8",
               "write_npy: dtype '{}' is not written (use <f4, <i4 or <i8)", dtype);
    size_t expected = npy_item_size(dtype);
    for (int64_t dim : shape) {
        DSV4_CHECK(dim >= 0, "write_npy: negative dimension {}", dim);
        DSV4_CHECK(!__builtin_mul_overflow(expected, static_cast<size_t>(dim), &expected),
                   "write_npy: shape too large");
    }
    DSV4_CHECK(data_bytes == expected, "write_npy: {} data bytes for shape {} of {} (expected {})", data_bytes,
               shape_text(shape), dtype, expected);
    std::string header = "{'descr': '" + dtype + "', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
    // Pad with spaces so that preamble + header + '\n' is a multiple of 64 bytes.
    const bool version1 = header.size() + 1 + kAlignment <= 65535;  // the padded length must fit in a uint16
    const size_t preamble = version1 ? kPreamble1 : kPreamble2;
    const size_t unpadded = preamble + header.size() + 1;
    header.append((kAlignment - unpadded % kAlignment) % kAlignment, ' ');
    header.push_back('\n');
    std::vector<uint8_t> out(kMagic.begin(), kMagic.end());
    out.push_back(version1 ? 1 : 2);
    out.push_back(0);
    const auto length = static_cast<uint32_t>(header.size());
    for (size_t i = 0; i < preamble - 8; ++i) out.push_back(static_cast<uint8_t>(length >> (8 * i)));
    out.insert(out.end(), header.begin(), header.end());
    return out;
}

// Writes header and data to a temporary file and renames it over `path`, so `path` is never left half-written.
void write_npy_bytes(const std::string& path, const std::string& dtype, const std::vector<int64_t>& shape,
                     const void* data, size_t data_bytes) {
    const std::vector<uint8_t> header = npy_header_bytes(dtype, shape, data_bytes);
    const std::string temporary = path + ".tmp";
    {
        std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
        if (!file) fail("{}: cannot open for writing", temporary);
        file.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
        if (data_bytes > 0) file.write(static_cast<const char*>(data), static_cast<std::streamsize>(data_bytes));
        file.close();
        if (!file) {
            std::remove(temporary.c_str());
            fail("{}: write error", temporary);
        }
    }
    if (std::rename(temporary.c_str(), path.c_str()) != 0) {
        std::remove(temporary.c_str());
        fail("{}: cannot rename the written file into place", path);
    }
}

size_t element_count(const std::vector<int64_t>& shape) {
    size_t count = 1;
    for (int64_t dim : shape) {
        DSV4_CHECK(dim >= 0, "write_npy: negative dimension {}", dim);
        DSV4_CHECK(!__builtin_mul_overflow(count, static_cast<size_t>(dim), &count), "write_npy: shape too large");
    }
    return count;
}

}  // namespace

int64_t NpyArray::numel() const {
    int64_t count = 1;
    for (int64_t dim : shape) count *= dim;
    return count;
}

size_t npy_item_size(std::string_view dtype) {
    if (dtype == "<f4" || dtype == "<i4") return 4;
    if (dtype == "<i8") return 8;
    if (dtype == "<f2") return 2;
    if (dtype == "|u1") return 1;
    fail("unsupported .npy dtype '{}'", dtype);
}

NpyArray parse_npy(const uint8_t* bytes, size_t size, std::string_view name) {
    const Preamble preamble = parse_preamble(bytes, size, name);
    if (size - preamble.header_begin < preamble.header_length) {
        fail("{}: .npy header truncated: {} bytes announced, {} present", name, preamble.header_length,
             size - preamble.header_begin);
    }
    NpyArray array = parse_header_text(bytes, preamble, name);
    const size_t data_begin = preamble.header_begin + preamble.header_length;
    const size_t expected = expected_data_bytes(array, name);
    check_data_length(expected, size - data_begin, name);
    array.data.assign(bytes + data_begin, bytes + size);
    return array;
}

NpyArray read_npy(const std::string& path) {
    std::error_code error;
    if (!std::filesystem::is_regular_file(path, error)) fail("{}: no such .npy file (or not a regular file)", path);
    const auto file_size = static_cast<size_t>(std::filesystem::file_size(path, error));
    if (error) fail("{}: cannot read the file size: {}", path, error.message());
    std::ifstream file(path, std::ios::binary);
    if (!file) fail("{}: cannot open .npy file for reading", path);
    // Read the preamble and header, then the data straight into the array.
    std::vector<uint8_t> head(std::min(file_size, kPreamble2));
    file.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
    const Preamble preamble = parse_preamble(head.data(), head.size(), path);
    if (file_size - preamble.header_begin < preamble.header_length) {
        fail("{}: .npy header truncated: {} bytes announced, {} present", path, preamble.header_length,
             file_size - preamble.header_begin);
    }
    head.resize(preamble.header_begin + preamble.header_length);
    file.seekg(0);
    file.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
    NpyArray array = parse_header_text(head.data(), preamble, path);
    const size_t expected = expected_data_bytes(array, path);
    check_data_length(expected, file_size - head.size(), path);
    array.data.resize(expected);
    file.read(reinterpret_cast<char*>(array.data.data()), static_cast<std::streamsize>(expected));
    if (!file) fail("{}: read error in .npy data", path);
    return array;
}

std::vector<uint8_t> serialize_npy(const NpyArray& array) {
    std::vector<uint8_t> out = npy_header_bytes(array.dtype, array.shape, array.data.size());
    out.insert(out.end(), array.data.begin(), array.data.end());
    return out;
}

void write_npy(const std::string& path, const NpyArray& array) {
    write_npy_bytes(path, array.dtype, array.shape, array.data.data(), array.data.size());
}

NpyTensor<int32_t> read_npy_i32(const std::string& path) {
    const NpyArray array = read_npy(path);
    NpyTensor<int32_t> tensor{array.shape, std::vector<int32_t>(static_cast<size_t>(array.numel()))};
    if (array.dtype == "<i4") {
        if (!tensor.values.empty()) std::memcpy(tensor.values.data(), array.data.data(), array.data.size());
    } else if (array.dtype == "<i8") {
        for (size_t i = 0; i < tensor.values.size(); ++i) {
            int64_t value = 0;
            std::memcpy(&value, array.data.data() + i * sizeof(value), sizeof(value));
            if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max()) {
                fail("{}: value {} at index {} does not fit in int32", path, value, i);
            }
            tensor.values[i] = static_cast<int32_t>(value);
        }
    } else {
        fail("{}: expected an integer array (<i4 or <i8), found dtype '{}'", path, array.dtype);
    }
    return tensor;
}

NpyTensor<float> read_npy_f32(const std::string& path) {
    const NpyArray array = read_npy(path);
    NpyTensor<float> tensor{array.shape, std::vector<float>(static_cast<size_t>(array.numel()))};
    if (array.dtype == "<f4") {
        if (!tensor.values.empty()) std::memcpy(tensor.values.data(), array.data.data(), array.data.size());
    } else if (array.dtype == "<f2") {
        for (size_t i = 0; i < tensor.values.size(); ++i) {
            uint16_t bits = 0;
            std::memcpy(&bits, array.data.data() + i * sizeof(bits), sizeof(bits));
            tensor.values[i] = decode_fp16(bits);
        }
    } else {
        fail("{}: expected a float array (<f4 or <f2), found dtype '{}'", path, array.dtype);
    }
    return tensor;
}

void write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
    write_npy_bytes(path, "<f4", shape, data, element_count(shape) * sizeof(float));
}

void write_npy_i32(const std::string& path, const int32_t* data, const std::vector<int64_t>& shape) {
    write_npy_bytes(path, "<i4", shape, data, element_count(shape) * sizeof(int32_t));
}

void write_npy_i64(const std::string& path, const int64_t* data, const std::vector<int64_t>& shape) {
    write_npy_bytes(path, "<i8", shape, data, element_count(shape) * sizeof(int64_t));
}

}  // namespace dsv4
