#include "core/dtype.h"

#include <array>
#include <utility>

namespace dsv4 {
namespace {

constexpr std::array<std::pair<DType, std::string_view>, 13> kNames{{
    {DType::kF32, "F32"},
    {DType::kF16, "F16"},
    {DType::kBF16, "BF16"},
    {DType::kF8E4M3, "F8_E4M3"},
    {DType::kF8E4M3Fnuz, "F8_E4M3_FNUZ"},
    {DType::kF8E5M2, "F8_E5M2"},
    {DType::kF8E5M2Fnuz, "F8_E5M2_FNUZ"},
    {DType::kF8E8M0, "F8_E8M0"},
    {DType::kF4E2M1, "F4_E2M1"},
    {DType::kI64, "I64"},
    {DType::kI32, "I32"},
    {DType::kI8, "I8"},
    {DType::kU8, "U8"},
}};

}  // namespace

std::string_view dtype_name(DType t) {
    for (const auto& [type, name] : kNames) {
        if (type == t) return name;
    }
    return "?";
}

std::optional<DType> parse_safetensors_dtype(std::string_view name) {
    // The set a DeepSeek checkpoint (and our fixtures) can contain; FNUZ and FP4 never appear in safetensors headers.
    static constexpr std::array<std::pair<std::string_view, DType>, 10> kReadable{{
        {"BF16", DType::kBF16},
        {"F16", DType::kF16},
        {"F32", DType::kF32},
        {"I64", DType::kI64},
        {"I32", DType::kI32},
        {"I8", DType::kI8},
        {"U8", DType::kU8},
        {"F8_E4M3", DType::kF8E4M3},
        {"F8_E5M2", DType::kF8E5M2},
        {"F8_E8M0", DType::kF8E8M0},
    }};
    for (const auto& [text, type] : kReadable) {
        if (text == name) return type;
    }
    return std::nullopt;
}

}  // namespace dsv4
