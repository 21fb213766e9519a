// NumPy .npy files: the token inputs and logits outputs of `dsv4 logits` and the test fixtures.
// Writes format 1.0 (2.0 only if a header could not fit 1.0); reads 1.0, 2.0 and 3.0. Little-endian, C order.
// dtypes: "<f4", "<i4", "<i8" read and written; "|u1" and "<f2" also read. Every malformed file is a dsv4::Error
// naming the file and the problem (bad magic, truncated header, header not a dict, fortran_order True, big-endian,
// data shorter or longer than the shape, unsupported dtype, ...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dsv4 {

struct NpyArray {
    std::string dtype;           // NumPy descr, e.g. "<f4"
    std::vector<int64_t> shape;  // empty = a 0-d array holding one element
    std::vector<uint8_t> data;   // numel * item size bytes, C order, little-endian

    int64_t numel() const;
};

template <typename T>
struct NpyTensor {
    std::vector<int64_t> shape;
    std::vector<T> values;
};

// Bytes per element of a supported dtype; throws dsv4::Error for anything else.
size_t npy_item_size(std::string_view dtype);

NpyArray read_npy(const std::string& path);
// Parses a whole .npy file held in memory; `name` is what error messages call it.
NpyArray parse_npy(const uint8_t* bytes, size_t size, std::string_view name);
// Serialises an array (dtype must be writable: <f4, <i4, <i8; data size must match the shape).
std::vector<uint8_t> serialize_npy(const NpyArray& array);
// Writes atomically (a temporary file renamed over `path`).
void write_npy(const std::string& path, const NpyArray& array);

// int32 values: "<i4" as is, "<i8" converted with a range check (token files written by NumPy default to int64).
NpyTensor<int32_t> read_npy_i32(const std::string& path);
// float values: "<f4" as is, "<f2" converted exactly.
NpyTensor<float> read_npy_f32(const std::string& path);

void write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape);
void write_npy_i32(const std::string& path, const int32_t* data, const std::vector<int64_t>& shape);
void write_npy_i64(const std::string& path, const int64_t* data, const std::vector<int64_t>& shape);

}  // namespace dsv4
