// SHA-256 known vectors, SHA256SUMS parsing, parallel verification and its mismatch / missing reporting.
#include "loader/checksums.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "error_matchers.h"
#include "loader/sha256.h"
#include "st_writer.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;
using test::expect_error;
using test::TempDir;

constexpr const char* kEmpty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr const char* kAbc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr const char* kHelloNewline = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";
// 1 MiB of ((i * 31 + 7) ^ (i >> 8)) & 0xff, hashed with Python's hashlib.
constexpr const char* kMibPattern = "62db649367f92b7f585bc2eda21acd6f9a37d6d42b3423e69a309baee0bbd6d8";

std::vector<uint8_t> mib_pattern() {
    std::vector<uint8_t> bytes(size_t{1} << 20);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(((i * 31 + 7) ^ (i >> 8)) & 0xff);
    return bytes;
}

std::span<const uint8_t> as_bytes(std::string_view s) {
    return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(Sha256, KnownVectors) {
    EXPECT_EQ(sha256_hex({}), kEmpty);
    EXPECT_EQ(sha256_hex(as_bytes("abc")), kAbc);
    EXPECT_EQ(sha256_hex(mib_pattern()), kMibPattern);
    // FIPS 180-2 long vector: one million 'a', fed in uneven pieces.
    Sha256 hash;
    std::string chunk(999, 'a');
    size_t fed = 0;
    while (fed < 1000000) {
        size_t n = std::min(chunk.size(), 1000000 - fed);
        hash.update(as_bytes(std::string_view(chunk).substr(0, n)));
        fed += n;
    }
    EXPECT_EQ(to_hex(hash.finish()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, FileIsStreamedInChunks) {
    TempDir dir;
    test::write_bytes(dir / "p.bin", mib_pattern());
    uint64_t seen = 0;
    int calls = 0;
    EXPECT_EQ(sha256_file_hex(
                  dir / "p.bin", [&](uint64_t n) { seen += n, ++calls; }, 4097),
              kMibPattern);
    EXPECT_EQ(seen, uint64_t{1} << 20);
    EXPECT_EQ(calls, 256);  // ceil(2^20 / 4097)
    test::write_bytes(dir / "e.bin", {});
    EXPECT_EQ(sha256_file_hex(dir / "e.bin"), kEmpty);
    expect_error([&] { sha256_file_hex(dir / "absent.bin"); }, {"absent.bin", "cannot open"});
    expect_error([&] { sha256_file_hex(dir.path()); }, {"read error"});
}

TEST(Sha256Sums, ParsesBothMarkersAndNormalises) {
    std::string text =
        std::string(kAbc) + "  model-00001-of-00002.safetensors\n" +
        "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD *./encoding/with space.py\r\n" +
        "\n# a comment\n" + kAbc + "  model-00001-of-00002.safetensors\n";  // identical repeat
    auto entries = parse_sha256sums(text, "SHA256SUMS");
    ASSERT_EQ(entries.size(), 2u);
    EXPECT_EQ(entries[0].file, "model-00001-of-00002.safetensors");
    EXPECT_EQ(entries[0].sha256, kAbc);
    EXPECT_EQ(entries[1].file, "encoding/with space.py");
    EXPECT_EQ(entries[1].sha256, kAbc);  // lower-cased
}

TEST(Sha256Sums, MalformedLinesNameSourceAndLine) {
    expect_error([] { parse_sha256sums("abc  file\n", "SUMS"); }, {"SUMS:1", "64 hex"});
    expect_error([] { parse_sha256sums(std::string("\n") + kAbc + " file\n", "SUMS"); }, {"SUMS:2"});
    expect_error([] { parse_sha256sums(std::string(kAbc) + "  \n", "SUMS"); }, {"SUMS:1"});
    expect_error([] { parse_sha256sums(std::string(kAbc) + "  ../etc/passwd\n", "SUMS"); },
                 {"SUMS:1", "'../etc/passwd'", "not a relative path"});
    expect_error([] { parse_sha256sums(std::string(kAbc) + "  /abs\n", "SUMS"); }, {"'/abs'"});
    expect_error([] { parse_sha256sums(std::string("\\") + kAbc + "  a\\nb\n", "SUMS"); }, {"escaped"});
    expect_error([] { parse_sha256sums(std::string(kAbc) + "  f\n" + kEmpty + "  f\n", "SUMS"); },
                 {"SUMS:2", "'f'", "twice with different sums"});
    std::string not_hex = std::string(kAbc);
    not_hex[10] = 'g';
    expect_error([&] { parse_sha256sums(not_hex + "  f\n", "SUMS"); }, {"SUMS:1"});
}

TEST(Sha256Sums, FormatRoundTrips) {
    std::vector<ChecksumEntry> entries{{kAbc, "b.txt"}, {kEmpty, "a.txt"}};
    std::string text = format_sha256sums(entries);
    EXPECT_EQ(text, std::string(kEmpty) + "  a.txt\n" + kAbc + "  b.txt\n");
    EXPECT_EQ(parse_sha256sums(text, "x").size(), 2u);
}

class VerifyTest : public ::testing::Test {
  protected:
    void SetUp() override {
        test::write_text(dir_ / "abc.txt", "abc");
        test::write_text(dir_ / "empty.txt", "");
        test::write_bytes(dir_ / "model.safetensors", mib_pattern());
        fs::create_directory(dir_ / "encoding");
        test::write_text(dir_ / "encoding/hello.txt", "hello\n");
        fs::create_directory(dir_ / ".cache");
        test::write_text(dir_ / ".cache/ignored", "x");
    }
    HashOptions options(int threads) const {
        HashOptions o;
        o.threads = threads;
        return o;
    }
    TempDir dir_;
};

TEST_F(VerifyTest, ComputeListsEveryNonHiddenFile) {
    auto files = list_files_for_checksums(dir_.path());
    EXPECT_EQ(files, (std::vector<std::string>{"abc.txt", "empty.txt", "encoding/hello.txt", "model.safetensors"}));
    for (int threads : {1, 3, 16}) {
        auto sums = compute_checksums(dir_.path(), files, options(threads));
        ASSERT_EQ(sums.size(), 4u);
        EXPECT_EQ(sums[0].sha256, kAbc);
        EXPECT_EQ(sums[1].sha256, kEmpty);
        EXPECT_EQ(sums[2].sha256, kHelloNewline);
        EXPECT_EQ(sums[3].sha256, kMibPattern);
    }
    expect_error(
        [&] {
            compute_checksums(dir_.path(), {"abc.txt", "gone.bin"}, options(2));
        },
        {"1 file(s) could not be hashed", "gone.bin"});
}

TEST_F(VerifyTest, AllGood) {
    std::vector<ChecksumEntry> expected{{kAbc, "abc.txt"},
                                        {kEmpty, "empty.txt"},
                                        {kMibPattern, "model.safetensors"},
                                        {kHelloNewline, "encoding/hello.txt"}};
    VerifyReport report = verify_checksums(dir_.path(), expected, checkpoint_core_files(dir_.path()), options(4));
    EXPECT_TRUE(report.ok()) << report.describe();
    EXPECT_EQ(report.count(FileStatus::kOk), 4u);
    EXPECT_EQ(report.bytes_hashed, (uint64_t{1} << 20) + 3 + 6);
}

TEST_F(VerifyTest, MismatchMissingAndUnlistedAreAllReported) {
    test::write_text(dir_ / "config.json", "{}");
    std::vector<ChecksumEntry> expected{{kEmpty, "abc.txt"},                         // wrong sum
                                        {kAbc, "model-00002-of-00002.safetensors"},  // absent
                                        {kEmpty, "empty.txt"}};
    // model.safetensors and config.json are checkpoint files the list does not cover.
    VerifyReport report = verify_checksums(dir_.path(), expected, checkpoint_core_files(dir_.path()), options(2));
    EXPECT_FALSE(report.ok());
    EXPECT_EQ(report.count(FileStatus::kOk), 1u);
    EXPECT_EQ(report.count(FileStatus::kMismatch), 1u);
    EXPECT_EQ(report.count(FileStatus::kMissing), 1u);
    EXPECT_EQ(report.count(FileStatus::kUnlisted), 2u);
    std::string text = report.describe();
    EXPECT_NE(text.find(std::string("MISMATCH    abc.txt\n            expected ") + kEmpty), std::string::npos) << text;
    EXPECT_NE(text.find(std::string("actual   ") + kAbc), std::string::npos) << text;
    EXPECT_NE(text.find("MISSING     model-00002-of-00002.safetensors"), std::string::npos) << text;
    EXPECT_NE(text.find("UNLISTED    config.json"), std::string::npos) << text;
    EXPECT_NE(text.find("UNLISTED    model.safetensors"), std::string::npos) << text;
    EXPECT_NE(text.find("1 OK, 1 mismatched, 1 missing, 0 unreadable, 2 unlisted"), std::string::npos) << text;
    EXPECT_EQ(text.find("empty.txt"), std::string::npos) << "OK files are not listed: " << text;
}

TEST_F(VerifyTest, UnreadableEntryIsReported) {
    fs::create_directory(dir_ / "sub.safetensors");  // listed, present, but a directory
    VerifyReport report = verify_checksums(dir_.path(), {{kAbc, "sub.safetensors"}}, {}, options(1));
    ASSERT_EQ(report.files.size(), 1u);
    EXPECT_EQ(report.files[0].status, FileStatus::kUnreadable);
    EXPECT_NE(report.describe().find("UNREADABLE  sub.safetensors"), std::string::npos);
}

TEST(Progress, Formatting) {
    EXPECT_EQ(format_bytes(512), "512 B");
    EXPECT_EQ(format_bytes(1536.0 * 1024 * 1024), "1.50 GiB");
    EXPECT_EQ(format_duration(3723), "1h02m03s");
    EXPECT_EQ(format_duration(65), "1m05s");
    EXPECT_EQ(format_duration(7.4), "7s");
    EXPECT_EQ(format_duration(-1), "?");
    std::string line = format_progress("sha256", 512ull << 20, 1024ull << 20, 2.0, 3, 8, true);
    EXPECT_NE(line.find(" 50.0%"), std::string::npos) << line;
    EXPECT_NE(line.find("512.00 MiB / 1.00 GiB"), std::string::npos) << line;
    EXPECT_NE(line.find("256.00 MiB/s"), std::string::npos) << line;
    EXPECT_NE(line.find("ETA 2s"), std::string::npos) << line;
    EXPECT_NE(line.find("3/8 files"), std::string::npos) << line;
    EXPECT_NE(line.find("[###############...............]"), std::string::npos) << line;
}

TEST(Progress, LogModeWritesLines) {
    std::FILE* stream = std::tmpfile();
    ASSERT_NE(stream, nullptr);
    {
        ByteProgress progress("sha256", 100, 2, ProgressMode::kLog, stream, 0.01);
        progress.add_bytes(60);
        progress.item_done();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        progress.add_bytes(40);
        progress.item_done();
    }  // the destructor prints the final line
    std::rewind(stream);
    std::string text(4096, '\0');
    text.resize(std::fread(text.data(), 1, text.size(), stream));
    std::fclose(stream);
    EXPECT_NE(text.find("60.0%"), std::string::npos) << text;
    EXPECT_NE(text.find("100.0%"), std::string::npos) << text;
    EXPECT_NE(text.find("2/2 files"), std::string::npos) << text;
    EXPECT_EQ(text.find('\r'), std::string::npos) << "no carriage returns in log mode";
}

}  // namespace
}  // namespace dsv4
