// .npy reading and writing: byte-exact output against a file assembled here from the format description, round
// trips, versions 2.0/3.0, typed readers, and one test per kind of malformed input.
#include "core/npy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;

class NpyTest : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("dsv4_npy_test_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    std::string path(const std::string& name) const { return (dir_ / name).string(); }

    std::string write_bytes(const std::string& name, const std::vector<uint8_t>& bytes) const {
        const std::string p = path(name);
        std::ofstream(p, std::ios::binary)
            .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        return p;
    }

    static std::vector<uint8_t> read_bytes(const std::string& p) {
        std::ifstream file(p, std::ios::binary);
        return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
    }

    fs::path dir_;
};

// A .npy file assembled by hand: magic, version, little-endian header length (2 bytes for 1.0, 4 otherwise), the
// header padded with spaces to a 64-byte boundary and ended by '\n', then the data.
std::vector<uint8_t> handmade_npy(const std::string& dict, const std::vector<uint8_t>& data, int major = 1) {
    const size_t preamble = major == 1 ? 10 : 12;
    std::string header = dict;
    while ((preamble + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::vector<uint8_t> out{0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
    out.push_back(static_cast<uint8_t>(header.size() & 0xFF));
    out.push_back(static_cast<uint8_t>(header.size() >> 8));
    if (major != 1) {
        out.push_back(0);
        out.push_back(0);
    }
    out.insert(out.end(), header.begin(), header.end());
    out.insert(out.end(), data.begin(), data.end());
    return out;
}

template <typename T>
std::vector<uint8_t> as_bytes(const std::vector<T>& values) {
    std::vector<uint8_t> bytes(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
}

// Expects read_npy(path) to throw an Error whose message names the file and contains `problem`.
void expect_npy_error(const std::string& p, const std::string& problem) {
    try {
        read_npy(p);
        ADD_FAILURE() << "no error for " << p << " (expected: " << problem << ")";
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find(p), std::string::npos) << message;
        EXPECT_NE(message.find(problem), std::string::npos) << message;
    }
}

TEST_F(NpyTest, WriterOutputIsByteExact) {
    const std::vector<float> values{0.0f, 1.5f, -2.0f, 3.25f, 1e-30f, -7.0f};
    write_npy_f32(path("a.npy"), values.data(), {2, 3});
    const std::vector<uint8_t> expected =
        handmade_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", as_bytes(values));
    EXPECT_EQ(read_bytes(path("a.npy")), expected);
    EXPECT_EQ(expected.size(), 128u + 24u);  // header 128 bytes, as NumPy writes it

    const std::vector<int32_t> ids{5, -1, 129279};
    write_npy_i32(path("b.npy"), ids.data(), {3});
    EXPECT_EQ(read_bytes(path("b.npy")),
              handmade_npy("{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", as_bytes(ids)));

    const std::vector<int64_t> scalar{42};
    write_npy_i64(path("c.npy"), scalar.data(), {});
    EXPECT_EQ(read_bytes(path("c.npy")),
              handmade_npy("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", as_bytes(scalar)));
    EXPECT_FALSE(fs::exists(path("c.npy.tmp")));
}

TEST_F(NpyTest, RoundTripsAndTypedReaders) {
    std::vector<float> logits(4 * 7);
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i) * 0.5f - 3.0f;
    write_npy_f32(path("logits.npy"), logits.data(), {4, 7});
    const NpyTensor<float> f = read_npy_f32(path("logits.npy"));
    EXPECT_EQ(f.shape, (std::vector<int64_t>{4, 7}));
    EXPECT_EQ(f.values, logits);

    const std::vector<int64_t> wide{0, 1, 2147483647, -2147483648LL, 100};
    write_npy_i64(path("tokens64.npy"), wide.data(), {5});
    const NpyTensor<int32_t> t = read_npy_i32(path("tokens64.npy"));
    EXPECT_EQ(t.shape, (std::vector<int64_t>{5}));
    EXPECT_EQ(t.values, (std::vector<int32_t>{0, 1, 2147483647, -2147483647 - 1, 100}));

    write_npy_f32(path("empty.npy"), nullptr, {0, 4});
    const NpyArray empty = read_npy(path("empty.npy"));
    EXPECT_EQ(empty.shape, (std::vector<int64_t>{0, 4}));
    EXPECT_EQ(empty.numel(), 0);
    EXPECT_TRUE(empty.data.empty());

    NpyArray raw = read_npy(path("logits.npy"));
    EXPECT_EQ(raw.dtype, "<f4");
    EXPECT_EQ(serialize_npy(raw), read_bytes(path("logits.npy")));
}

TEST_F(NpyTest, ReadsVersions2And3AndLenientHeaders) {
    const std::vector<int32_t> ids{7, 8, 9, 10};
    for (int major : {2, 3}) {
        const std::string p = write_bytes(
            "v" + std::to_string(major) + ".npy",
            handmade_npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }", as_bytes(ids), major));
        const NpyTensor<int32_t> t = read_npy_i32(p);
        EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 2}));
        EXPECT_EQ(t.values, ids);
    }
    // Double quotes, key order, no trailing comma, Python-2 long literals.
    const std::string p = write_bytes(
        "lenient.npy", handmade_npy("{\"shape\": (4L,),\"fortran_order\":False,  \"descr\":\"<i4\"}", as_bytes(ids)));
    EXPECT_EQ(read_npy_i32(p).values, ids);
}

TEST_F(NpyTest, ReadsU1AndF2) {
    const std::vector<uint8_t> bytes{1, 2, 255};
    const NpyArray u1 = read_npy(
        write_bytes("u1.npy", handmade_npy("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }", bytes)));
    EXPECT_EQ(u1.dtype, "|u1");
    EXPECT_EQ(u1.data, bytes);
    const std::vector<uint16_t> halves{0x3C00, 0xC000, 0x0001, 0x7BFF};  // 1, -2, 2^-24, 65504
    const NpyTensor<float> f = read_npy_f32(write_bytes(
        "f2.npy", handmade_npy("{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }", as_bytes(halves))));
    EXPECT_EQ(f.values, (std::vector<float>{1.0f, -2.0f, 0x1p-24f, 65504.0f}));
}

TEST_F(NpyTest, MalformedFilesAreErrorsNamingTheProblem) {
    const std::vector<uint8_t> four_floats(16, 0);
    const auto npy = [&](const std::string& name, const std::string& dict, const std::vector<uint8_t>& data) {
        return write_bytes(name, handmade_npy(dict, data));
    };
    std::vector<uint8_t> bad_magic =
        handmade_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", four_floats);
    bad_magic[1] = 'X';
    expect_npy_error(write_bytes("magic.npy", bad_magic), "bad magic");
    expect_npy_error(write_bytes("tiny.npy", {0x93, 'N'}), "too short");
    expect_npy_error(write_bytes("preamble.npy", {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0}),
                     "truncated inside its preamble");

    std::vector<uint8_t> truncated = handmade_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", {});
    truncated.resize(40);
    expect_npy_error(write_bytes("truncated.npy", truncated), "header truncated");

    std::vector<uint8_t> version =
        handmade_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", four_floats);
    version[6] = 4;
    expect_npy_error(write_bytes("version.npy", version), "unsupported .npy format version 4.0");

    expect_npy_error(npy("list.npy", "[1, 2, 3]", four_floats), "header is not a dict");
    expect_npy_error(npy("fortran.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", four_floats),
                     "fortran_order True");
    expect_npy_error(npy("big.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", four_floats),
                     "big-endian");
    expect_npy_error(npy("short.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", four_floats),
                     "shorter than the shape");
    expect_npy_error(npy("long.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", four_floats),
                     "4 bytes after the data");
    expect_npy_error(npy("complex.npy", "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", four_floats),
                     "unsupported .npy dtype '<c8'");
    expect_npy_error(npy("missing.npy", "{'descr': '<f4', 'shape': (4,), }", four_floats), "lacks one of");
    expect_npy_error(npy("extra.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'x': 1}", four_floats),
                     "unexpected or repeated key 'x'");
    expect_npy_error(
        npy("dup.npy", "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (4,)}", four_floats),
        "unexpected or repeated key 'descr'");
    expect_npy_error(npy("neg.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }", four_floats),
                     "expected a non-negative integer");
    expect_npy_error(npy("list_shape.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': [4], }", four_floats),
                     "shape must be a tuple");
    expect_npy_error(
        npy("huge.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }",
            four_floats),
        "too large");
    expect_npy_error(npy("unterminated.npy", "{'descr': '<f4", four_floats), "unterminated string");
    expect_npy_error(npy("trailing.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4,)} x", four_floats),
                     "unexpected text after the header dict");
    expect_npy_error(path("does_not_exist.npy"), "no such .npy file");
}

TEST_F(NpyTest, TypedReadersRejectWrongTypesAndOutOfRangeValues) {
    const std::vector<int64_t> too_big{1, 2147483648LL};
    write_npy_i64(path("big.npy"), too_big.data(), {2});
    try {
        read_npy_i32(path("big.npy"));
        ADD_FAILURE() << "no error for an out-of-range int64";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("2147483648 at index 1 does not fit in int32"), std::string::npos)
            << e.what();
    }
    const std::vector<float> f{1.0f};
    write_npy_f32(path("f.npy"), f.data(), {1});
    EXPECT_THROW(read_npy_i32(path("f.npy")), Error);
    const std::vector<int32_t> i{1};
    write_npy_i32(path("i.npy"), i.data(), {1});
    EXPECT_THROW(read_npy_f32(path("i.npy")), Error);
}

TEST_F(NpyTest, WriterRejectsBadArguments) {
    NpyArray mismatched{"<f4", {3}, std::vector<uint8_t>(8)};
    EXPECT_THROW(write_npy(path("x.npy"), mismatched), Error);
    NpyArray unwritable{"<c8", {1}, std::vector<uint8_t>(8)};
    EXPECT_THROW(write_npy(path("x.npy"), unwritable), Error);
    const float one = 1.0f;
    EXPECT_THROW(write_npy_f32(path("x.npy"), &one, {-1}), Error);
    EXPECT_THROW(write_npy_f32((dir_ / "no_such_dir" / "x.npy").string(), &one, {1}), Error);
    EXPECT_FALSE(fs::exists(path("x.npy")));
}

TEST(NpyParse, InMemoryBuffersUseTheGivenName) {
    const std::vector<uint8_t> junk{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    try {
        parse_npy(junk.data(), junk.size(), "buffer-name");
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("buffer-name"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace dsv4
