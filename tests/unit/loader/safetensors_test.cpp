// safetensors header validation and the mmap'd file: every malformed case gives a dsv4::Error naming file + tensor.
#include "loader/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "core/error.h"
#include "error_matchers.h"
#include "st_writer.h"

namespace dsv4 {
namespace {

using test::expect_error;
using test::file_image;
using test::make_tensor;
using test::TestTensor;

constexpr const char* kFile = "model-00001-of-00002.safetensors";
constexpr const char* kTensor = "layers.0.attn.wq_a.weight";

// Validates a header whose only tensor entry is `entry` (JSON text), with a data region of data_size bytes.
SafetensorsHeader parse_one(const std::string& entry, uint64_t data_size = 64) {
    return parse_safetensors_header("{\"" + std::string(kTensor) + "\": " + entry + "}", data_size, kFile);
}

void expect_entry_error(const std::string& entry, const std::string& detail, uint64_t data_size = 64) {
    expect_error([&] { parse_one(entry, data_size); }, {kFile, std::string("'") + kTensor + "'", detail});
}

TEST(SafetensorsHeader, ValidHeaderGivesSortedTable) {
    std::string json = R"({"__metadata__": {"format": "pt"},
        "b": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]},
        "a": {"dtype": "F32", "shape": [], "data_offsets": [12, 16]},
        "c": {"dtype": "I8", "shape": [0, 5], "data_offsets": [16, 16]}})";
    SafetensorsHeader header = parse_safetensors_header(json, 16, kFile);
    ASSERT_EQ(header.tensors.size(), 3u);
    EXPECT_EQ(header.tensors[0].name, "a");
    EXPECT_EQ(header.tensors[0].shape.size(), 0u);  // a scalar
    EXPECT_EQ(header.tensors[0].nbytes, 4u);
    EXPECT_EQ(header.tensors[1].name, "b");
    EXPECT_EQ(header.tensors[1].dtype, DType::kBF16);
    EXPECT_EQ(header.tensors[1].shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(header.tensors[1].offset, 0u);
    EXPECT_EQ(header.tensors[1].nbytes, 12u);
    EXPECT_EQ(header.tensors[2].nbytes, 0u);
    EXPECT_EQ(header.metadata.at("format"), "pt");
    EXPECT_EQ(header.data_bytes_used, 16u);
    ASSERT_NE(header.find("b"), nullptr);
    EXPECT_EQ(header.find("b")->name, "b");
    EXPECT_EQ(header.find("d"), nullptr);
}

TEST(SafetensorsHeader, MetadataIsOptionalAndGapsAndTrailingBytesAreAllowed) {
    // Gap [4, 8) between the tensors and 8 unused bytes at the end: allowed (and noted in safetensors.h).
    std::string json = R"({"x": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                           "y": {"dtype": "U8", "shape": [4], "data_offsets": [8, 12]}})";
    SafetensorsHeader header = parse_safetensors_header(json, 20, kFile);
    EXPECT_TRUE(header.metadata.empty());
    EXPECT_EQ(header.data_bytes_used, 12u);
}

TEST(SafetensorsHeader, EveryKnownDtypeHasItsSize) {
    const std::pair<const char*, uint64_t> cases[] = {{"BF16", 2},    {"F16", 2},    {"F32", 4}, {"I64", 8},
                                                      {"I32", 4},     {"I8", 1},     {"U8", 1},  {"F8_E4M3", 1},
                                                      {"F8_E5M2", 1}, {"F8_E8M0", 1}};
    for (const auto& [dtype, size] : cases) {
        std::string entry =
            fmt::format(R"({{"dtype": "{}", "shape": [3, 2], "data_offsets": [0, {}]}})", dtype, 6 * size);
        EXPECT_EQ(parse_one(entry).tensors[0].nbytes, 6 * size) << dtype;
        // One byte short is a size mismatch.
        entry = fmt::format(R"({{"dtype": "{}", "shape": [3, 2], "data_offsets": [0, {}]}})", dtype, 6 * size - 1);
        expect_entry_error(entry, "needs " + std::to_string(6 * size));
    }
}

TEST(SafetensorsHeader, UnknownDtypeIsNamed) {
    expect_entry_error(R"({"dtype": "F8_E4M3FN", "shape": [1], "data_offsets": [0, 1]})", "unknown dtype 'F8_E4M3FN'");
    expect_entry_error(R"({"dtype": "F64", "shape": [1], "data_offsets": [0, 8]})", "unknown dtype 'F64'");
    expect_entry_error(R"({"dtype": 7, "shape": [1], "data_offsets": [0, 1]})", "'dtype' is not a string");
}

TEST(SafetensorsHeader, MissingOrUnknownFields) {
    expect_entry_error(R"({"shape": [1], "data_offsets": [0, 1]})", "missing 'dtype'");
    expect_entry_error(R"({"dtype": "U8", "data_offsets": [0, 1]})", "missing 'shape'");
    expect_entry_error(R"({"dtype": "U8", "shape": [1]})", "missing 'data_offsets'");
    expect_entry_error(R"({"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "extra": 1})", "unknown field 'extra'");
    expect_entry_error(R"([1, 2])", "not a JSON object");
}

TEST(SafetensorsHeader, BadShapes) {
    expect_entry_error(R"({"dtype": "U8", "shape": [-1], "data_offsets": [0, 0]})", "non-negative integers");
    expect_entry_error(R"({"dtype": "U8", "shape": [1.5], "data_offsets": [0, 1]})", "non-negative integers");
    expect_entry_error(R"({"dtype": "U8", "shape": [2.0], "data_offsets": [0, 2]})", "non-negative integers");
    expect_entry_error(R"({"dtype": "U8", "shape": ["2"], "data_offsets": [0, 2]})", "non-negative integers");
    expect_entry_error(R"({"dtype": "U8", "shape": 4, "data_offsets": [0, 4]})", "'shape' is not an array");
    expect_entry_error(R"({"dtype": "U8", "shape": [9223372036854775808], "data_offsets": [0, 1]})", "too large");
    // 2^32 * 2^32 elements overflow 64 bits; 2^62 F32 elements overflow the byte count.
    expect_entry_error(R"({"dtype": "U8", "shape": [4294967296, 4294967296], "data_offsets": [0, 1]})",
                       "more elements than fit in 64 bits");
    expect_entry_error(R"({"dtype": "F32", "shape": [4611686018427387904], "data_offsets": [0, 1]})",
                       "overflows 64-bit byte counts");
}

TEST(SafetensorsHeader, BadDataOffsets) {
    expect_entry_error(R"({"dtype": "U8", "shape": [1], "data_offsets": [0]})", "must be [begin, end]");
    expect_entry_error(R"({"dtype": "U8", "shape": [1], "data_offsets": [0, 1, 2]})", "must be [begin, end]");
    expect_entry_error(R"({"dtype": "U8", "shape": [1], "data_offsets": "0,1"})", "must be [begin, end]");
    expect_entry_error(R"({"dtype": "U8", "shape": [1], "data_offsets": [-1, 0]})", "non-negative integers");
    expect_entry_error(R"({"dtype": "U8", "shape": [0], "data_offsets": [5, 4]})", "data_offsets [5, 4]");
    expect_entry_error(R"({"dtype": "U8", "shape": [4], "data_offsets": [62, 66]})", "run past the end", 64);
    expect_entry_error(R"({"dtype": "BF16", "shape": [4], "data_offsets": [0, 7]})", "hold 7 bytes");
}

TEST(SafetensorsHeader, OverlapNamesBothTensors) {
    std::string json = R"({"layers.0.attn.wq_a.weight": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]},
                           "x": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}})";
    expect_error([&] { parse_safetensors_header(json, 16, kFile); },
                 {kFile, "tensor 'layers.0.attn.wq_a.weight': data_offsets [4, 12] overlap 'x' [0, 8]"});
    // A tensor nested inside a long earlier one overlaps too, even past a short one in between.
    json = R"({"big": {"dtype": "U8", "shape": [16], "data_offsets": [0, 16]},
               "a": {"dtype": "U8", "shape": [2], "data_offsets": [2, 4]},
               "b": {"dtype": "U8", "shape": [2], "data_offsets": [10, 12]}})";
    expect_error([&] { parse_safetensors_header(json, 16, kFile); }, {kFile, "'a'", "overlap 'big'"});
    // Empty tensors never overlap; touching ranges do not overlap.
    json = R"({"e": {"dtype": "U8", "shape": [0], "data_offsets": [2, 2]},
               "f": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
               "g": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}})";
    EXPECT_EQ(parse_safetensors_header(json, 8, kFile).tensors.size(), 3u);
}

TEST(SafetensorsHeader, DuplicateTensorNameIsAnError) {
    std::string json = R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                           "w": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})";
    expect_error([&] { parse_safetensors_header(json, 2, kFile); }, {kFile, "'w' twice"});
    expect_entry_error(R"({"dtype": "U8", "dtype": "I8", "shape": [1], "data_offsets": [0, 1]})", "'dtype' twice");
}

TEST(SafetensorsHeader, BadMetadataAndTopLevel) {
    expect_error([] { parse_safetensors_header(R"({"__metadata__": {"k": 1}})", 0, kFile); }, {kFile, "'k'"});
    expect_error([] { parse_safetensors_header(R"({"__metadata__": [1]})", 0, kFile); }, {kFile, "__metadata__"});
    expect_error([] { parse_safetensors_header("[]", 0, kFile); }, {kFile, "not a JSON object"});
    expect_error([] { parse_safetensors_header("{\"a\": ", 0, kFile); }, {kFile, "not valid JSON"});
    expect_error([] { parse_safetensors_header("", 0, kFile); }, {kFile, "not valid JSON"});
    expect_error([] { parse_safetensors_header("{\"\\u0000\": 1}", 0, kFile); }, {kFile});
    expect_error(
        [] { parse_safetensors_header(R"({"": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}})", 0, kFile); },
        {kFile, "empty name"});
    // Ill-formed UTF-8 in a key.
    expect_error([] { parse_safetensors_header("{\"\xff\xfe\": 1}", 0, kFile); }, {kFile, "not valid JSON"});
    // Deep nesting is refused rather than recursed into.
    expect_error([] { parse_safetensors_header(std::string(100000, '[') + std::string(100000, ']'), 0, kFile); },
                 {kFile, "nested deeper"});
}

TEST(SafetensorsHeader, HostileNamesAreEscapedAndCapped) {
    std::string name = "evil\n" + std::string(5000, 'x');
    std::string json =
        "{\"evil\\n" + std::string(5000, 'x') + R"(": {"dtype": "Q", "shape": [], "data_offsets": [0, 0]}})";
    try {
        parse_safetensors_header(json, 0, kFile);
        FAIL() << "no error";
    } catch (const Error& e) {
        std::string message = e.what();
        EXPECT_NE(message.find("'evil\\nxxx"), std::string::npos) << message;
        EXPECT_EQ(message.find('\n'), std::string::npos) << message;
        EXPECT_LT(message.size(), 400u) << message;
    }
}

TEST(SafetensorsImage, LengthPrefixErrors) {
    std::vector<uint8_t> tiny{1, 2, 3};
    expect_error([&] { parse_safetensors_image(tiny, kFile); }, {kFile, "3 bytes", "shorter than"});
    expect_error([&] { parse_safetensors_image({}, kFile); }, {kFile, "0 bytes"});
    std::vector<uint8_t> image = file_image("{}", {});
    image[0] = 200;  // header length 200 > file size
    expect_error([&] { parse_safetensors_image(image, kFile); }, {kFile, "header length 200 runs past"});
    std::vector<uint8_t> huge(16, 0);
    huge[7] = 0x80;  // 2^63
    expect_error([&] { parse_safetensors_image(huge, kFile); }, {kFile, "exceeds"});
    std::vector<uint8_t> max_len(16, 0xff);
    expect_error([&] { parse_safetensors_image(max_len, kFile); }, {kFile, "exceeds"});
}

TEST(SafetensorsImage, ValidImageAndTruncation) {
    std::vector<TestTensor> tensors{make_tensor("a", "F32", {3}, 1), make_tensor(kTensor, "BF16", {2, 2}, 2)};
    std::vector<uint8_t> image = test::safetensors_image(tensors);
    SafetensorsImage parsed = parse_safetensors_image(image, kFile);
    EXPECT_EQ(parsed.header.tensors.size(), 2u);
    EXPECT_EQ(parsed.data_start % 8, 0u);
    EXPECT_EQ(parsed.data_start + 20, image.size());
    image.pop_back();  // truncate one byte: the last tensor no longer fits
    expect_error([&] { parse_safetensors_image(image, kFile); },
                 {kFile, std::string("'") + kTensor + "'", "data_offsets [12, 20]", "file truncated"});
}

}  // namespace
}  // namespace dsv4
