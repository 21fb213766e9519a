// Checkpoint checksums: SHA256SUMS files (the `sha256sum` format) and parallel hashing/verification of a directory.
//
// SHA256SUMS: one `<64 hex>  <name>` line per file (`<64 hex> *<name>` binary marker accepted), names relative to the
// checkpoint directory (subdirectories allowed; absolute paths and `..` are rejected). Blank lines and lines starting
// with '#' are skipped; the backslash-escaped name form of GNU sha256sum is rejected. A file listed twice with the same
// sum is tolerated, with different sums it is an error.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "loader/progress.h"

namespace dsv4 {

inline constexpr const char* kSha256SumsFileName = "SHA256SUMS";

struct ChecksumEntry {
    std::string sha256;  // 64 lower-case hex digits
    std::string file;    // relative to the checkpoint directory, '/'-separated
};

// Throws dsv4::Error naming source and the line number on malformed lines.
std::vector<ChecksumEntry> parse_sha256sums(std::string_view text, std::string_view source);
std::vector<ChecksumEntry> read_sha256sums(const std::filesystem::path& path);
// The sha256sum text format ("<hex>  <name>\n" per entry), sorted by name.
std::string format_sha256sums(std::vector<ChecksumEntry> entries);

struct HashOptions {
    int threads = 4;  // files hashed in parallel (each file is one sequential stream)
    ProgressMode progress = ProgressMode::kNone;
    std::FILE* progress_stream = stderr;
    double log_interval_s = 10.0;  // for ProgressMode::kLog
};

enum class FileStatus {
    kOk,
    kMismatch,    // hash differs
    kMissing,     // listed, not on disk
    kUnreadable,  // listed, present, but could not be read
    kUnlisted,    // a checkpoint file (shard, index, config.json) that the list does not cover
};

std::string_view file_status_name(FileStatus status);

struct FileCheck {
    std::string file;
    FileStatus status = FileStatus::kOk;
    std::string expected;  // empty for kUnlisted
    std::string actual;    // empty unless hashed
    std::string detail;    // error text for kUnreadable
};

struct VerifyReport {
    std::vector<FileCheck> files;  // sorted by name
    uint64_t bytes_hashed = 0;
    double seconds = 0;

    bool ok() const;
    size_t count(FileStatus status) const;
    // Human-readable: one line per problem file (all of them), then a summary line.
    std::string describe() const;
};

// Hashes dir/<file> for each file, `threads` files at a time; results in input order. Unreadable files throw a
// dsv4::Error naming every such file after all others have been hashed.
std::vector<ChecksumEntry> compute_checksums(const std::filesystem::path& dir, const std::vector<std::string>& files,
                                             const HashOptions& options);

// Verifies every listed file and reports checkpoint_files (relative names) not covered by the list as kUnlisted.
VerifyReport verify_checksums(const std::filesystem::path& dir, const std::vector<ChecksumEntry>& expected,
                              const std::vector<std::string>& checkpoint_files, const HashOptions& options);

// Every regular file under dir (recursively; hidden entries and SHA256SUMS skipped), relative, sorted.
std::vector<std::string> list_files_for_checksums(const std::filesystem::path& dir);

// The files that make up the checkpoint proper: *.safetensors at top level, the index, config.json (those present).
std::vector<std::string> checkpoint_core_files(const std::filesystem::path& dir);

}  // namespace dsv4
