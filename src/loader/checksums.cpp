// SHA256SUMS parsing and parallel checkpoint hashing / verification. See checksums.h.
#include "loader/checksums.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "loader/checkpoint.h"
#include "loader/sha256.h"
#include "loader/text_util.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;

bool is_hex_digit(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// A listed name must stay inside the checkpoint directory.
bool is_safe_relative_name(std::string_view name) {
    if (name.empty() || name.front() == '/' || name.find('\0') != std::string_view::npos) return false;
    size_t start = 0;
    while (start <= name.size()) {
        size_t end = std::min(name.find('/', start), name.size());
        if (name.substr(start, end - start) == "..") return false;
        start = end + 1;
    }
    return true;
}

ChecksumEntry parse_line(std::string_view line, std::string_view source, size_t line_no) {
    if (line.front() == '\\') fail("{}:{}: escaped file names (leading '\\') are not supported", source, line_no);
    if (line.size() < 67 || !std::all_of(line.begin(), line.begin() + 64, is_hex_digit) || line[64] != ' ' ||
        (line[65] != ' ' && line[65] != '*')) {
        fail("{}:{}: expected '<64 hex digits>  <file name>', got {}", source, line_no, quote_name(line, 100));
    }
    ChecksumEntry entry;
    entry.sha256 = std::string(line.substr(0, 64));
    std::transform(entry.sha256.begin(), entry.sha256.end(), entry.sha256.begin(),
                   [](char c) { return static_cast<char>(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c); });
    std::string_view name = line.substr(66);
    while (name.substr(0, 2) == "./") name.remove_prefix(2);
    if (!is_safe_relative_name(name)) {
        fail("{}:{}: file name {} is not a relative path inside the checkpoint", source, line_no, quote_name(name));
    }
    entry.file = std::string(name);
    return entry;
}

struct HashResult {
    std::string sha256;
    std::string error;  // set when the file could not be hashed
};

// Hashes dir/<file> for every file, options.threads at a time, largest files first (better balance).
std::vector<HashResult> hash_in_parallel(const fs::path& dir, const std::vector<std::string>& files,
                                         const HashOptions& options, uint64_t* bytes_total) {
    std::vector<uint64_t> sizes(files.size(), 0);
    for (size_t i = 0; i < files.size(); ++i) {
        std::error_code ec;
        uint64_t size = fs::file_size(dir / files[i], ec);
        sizes[i] = ec ? 0 : size;
    }
    std::vector<size_t> order(files.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
    *bytes_total = std::accumulate(sizes.begin(), sizes.end(), uint64_t{0});

    std::vector<HashResult> results(files.size());
    ByteProgress progress("sha256", *bytes_total, files.size(), options.progress, options.progress_stream,
                          options.log_interval_s);
    std::atomic<size_t> next{0};
    auto worker = [&] {
        for (size_t k = next.fetch_add(1); k < order.size(); k = next.fetch_add(1)) {
            size_t i = order[k];
            try {
                results[i].sha256 = sha256_file_hex(dir / files[i], [&](uint64_t n) { progress.add_bytes(n); });
            } catch (const std::exception& e) {
                results[i].error = e.what();
            }
            progress.item_done();
        }
    };
    size_t n_threads =
        std::clamp<size_t>(static_cast<size_t>(std::max(options.threads, 1)), 1, std::max<size_t>(files.size(), 1));
    std::vector<std::thread> pool;
    for (size_t t = 1; t < n_threads; ++t) pool.emplace_back(worker);
    worker();
    for (auto& thread : pool) thread.join();
    progress.finish();
    return results;
}

}  // namespace

std::vector<ChecksumEntry> parse_sha256sums(std::string_view text, std::string_view source) {
    std::vector<ChecksumEntry> entries;
    std::map<std::string, std::string, std::less<>> seen;  // file -> sum
    size_t line_no = 0;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = std::min(text.find('\n', start), text.size());
        std::string_view line = text.substr(start, end - start);
        start = end + 1;
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.find_first_not_of(" \t") == std::string_view::npos || line.front() == '#') continue;
        ChecksumEntry entry = parse_line(line, source, line_no);
        auto [it, inserted] = seen.emplace(entry.file, entry.sha256);
        if (!inserted) {
            if (it->second != entry.sha256) {
                fail("{}:{}: {} is listed twice with different sums", source, line_no, quote_name(entry.file));
            }
            continue;
        }
        entries.push_back(std::move(entry));
    }
    return entries;
}

std::vector<ChecksumEntry> read_sha256sums(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("{}: cannot open", path.string());
    std::ostringstream text;
    text << in.rdbuf();
    return parse_sha256sums(text.str(), path.string());
}

std::string format_sha256sums(std::vector<ChecksumEntry> entries) {
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.file < b.file; });
    std::string out;
    for (const auto& e : entries) out += fmt::format("{}  {}\n", e.sha256, e.file);
    return out;
}

std::string_view file_status_name(FileStatus status) {
    switch (status) {
        case FileStatus::kOk:
            return "OK";
        case FileStatus::kMismatch:
            return "MISMATCH";
        case FileStatus::kMissing:
            return "MISSING";
        case FileStatus::kUnreadable:
            return "UNREADABLE";
        case FileStatus::kUnlisted:
            return "UNLISTED";
    }
    return "?";
}

bool VerifyReport::ok() const {
    return std::all_of(files.begin(), files.end(), [](const auto& f) { return f.status == FileStatus::kOk; });
}

size_t VerifyReport::count(FileStatus status) const {
    return static_cast<size_t>(
        std::count_if(files.begin(), files.end(), [&](const auto& f) { return f.status == status; }));
}

std::string VerifyReport::describe() const {
    std::string out;
    for (const auto& f : files) {
        switch (f.status) {
            case FileStatus::kOk:
                break;
            case FileStatus::kMismatch:
                out += fmt::format("MISMATCH    {}\n            expected {}\n            actual   {}\n", f.file,
                                   f.expected, f.actual);
                break;
            case FileStatus::kMissing:
                out += fmt::format("MISSING     {}\n", f.file);
                break;
            case FileStatus::kUnreadable:
                out += fmt::format("UNREADABLE  {}: {}\n", f.file, f.detail);
                break;
            case FileStatus::kUnlisted:
                out += fmt::format("UNLISTED    {} (a checkpoint file with no checksum in the list)\n", f.file);
                break;
        }
    }
    double rate = seconds > 0 ? static_cast<double>(bytes_hashed) / seconds : 0;
    out += fmt::format("{} OK, {} mismatched, {} missing, {} unreadable, {} unlisted ({} hashed in {:.1f} s, {}/s)",
                       count(FileStatus::kOk), count(FileStatus::kMismatch), count(FileStatus::kMissing),
                       count(FileStatus::kUnreadable), count(FileStatus::kUnlisted),
                       format_bytes(static_cast<double>(bytes_hashed)), seconds, format_bytes(rate));
    return out;
}

std::vector<ChecksumEntry> compute_checksums(const fs::path& dir, const std::vector<std::string>& files,
                                             const HashOptions& options) {
    uint64_t total = 0;
    std::vector<HashResult> results = hash_in_parallel(dir, files, options, &total);
    std::vector<std::string> errors;
    std::vector<ChecksumEntry> entries;
    for (size_t i = 0; i < files.size(); ++i) {
        if (!results[i].error.empty()) errors.push_back(results[i].error);
        entries.push_back({results[i].sha256, files[i]});
    }
    if (!errors.empty()) {
        fail("{}: {} file(s) could not be hashed:\n{}", dir.string(), errors.size(), join_problems(errors, 20));
    }
    return entries;
}

VerifyReport verify_checksums(const fs::path& dir, const std::vector<ChecksumEntry>& expected,
                              const std::vector<std::string>& checkpoint_files, const HashOptions& options) {
    auto start = std::chrono::steady_clock::now();
    VerifyReport report;
    std::vector<std::string> to_hash;
    std::vector<const ChecksumEntry*> hashed_entries;
    for (const auto& entry : expected) {
        std::error_code ec;
        if (!fs::exists(dir / entry.file, ec)) {
            report.files.push_back({entry.file, FileStatus::kMissing, entry.sha256, "", ""});
        } else {
            to_hash.push_back(entry.file);
            hashed_entries.push_back(&entry);
        }
    }
    std::vector<HashResult> results = hash_in_parallel(dir, to_hash, options, &report.bytes_hashed);
    for (size_t i = 0; i < to_hash.size(); ++i) {
        const ChecksumEntry& entry = *hashed_entries[i];
        FileCheck check{entry.file, FileStatus::kOk, entry.sha256, results[i].sha256, results[i].error};
        if (!results[i].error.empty()) {
            check.status = FileStatus::kUnreadable;
        } else if (results[i].sha256 != entry.sha256) {
            check.status = FileStatus::kMismatch;
        }
        report.files.push_back(std::move(check));
    }
    std::set<std::string_view> listed;
    for (const auto& entry : expected) listed.insert(entry.file);
    for (const auto& file : checkpoint_files) {
        if (listed.count(file) == 0) report.files.push_back({file, FileStatus::kUnlisted, "", "", ""});
    }
    std::sort(report.files.begin(), report.files.end(), [](const auto& a, const auto& b) { return a.file < b.file; });
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return report;
}

std::vector<std::string> list_files_for_checksums(const fs::path& dir) {
    std::vector<std::string> files;
    std::error_code ec;
    fs::recursive_directory_iterator it(dir, ec);
    if (ec) fail("{}: cannot list: {}", dir.string(), ec.message());
    for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (ec) fail("{}: cannot list: {}", dir.string(), ec.message());
        const std::string name = it->path().filename().string();
        if (!name.empty() && name.front() == '.') {
            if (it->is_directory(ec)) it.disable_recursion_pending();
            continue;
        }
        if (!it->is_regular_file(ec)) continue;  // follows symlinks (HF cache snapshots link into blobs/)
        std::string relative = fs::relative(it->path(), dir, ec).generic_string();
        if (relative != kSha256SumsFileName) files.push_back(relative);
    }
    std::sort(files.begin(), files.end());
    return files;
}

std::vector<std::string> checkpoint_core_files(const fs::path& dir) {
    std::vector<std::string> files;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (!entry.is_regular_file(ec)) continue;
        if (entry.path().extension() == ".safetensors" || name == kIndexFileName || name == "config.json") {
            files.push_back(name);
        }
    }
    if (ec) fail("{}: cannot list: {}", dir.string(), ec.message());
    std::sort(files.begin(), files.end());
    return files;
}

}  // namespace dsv4
