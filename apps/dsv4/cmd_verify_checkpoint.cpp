// `dsv4 verify-checkpoint --model DIR [--sha256sums FILE] [--threads N]`: checks a checkpoint directory.
//  1. structure: Checkpoint::open (every shard header validated, index and shards agree);
//  2. content: every file listed in SHA256SUMS (--sha256sums, else DIR/SHA256SUMS) is hashed and compared; checkpoint
//     files the list does not cover are reported too. Without a list the sums are computed and printed to stdout in
//     sha256sum format, so `dsv4 verify-checkpoint --model D > D/SHA256SUMS` makes one.
// Status and progress go to stderr; exit status 1 with the list of problems when anything is wrong.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "command.h"
#include "core/error.h"
#include "loader/checkpoint.h"
#include "loader/checksums.h"

namespace dsv4::cli {
namespace {

namespace fs = std::filesystem;

struct VerifyOptions {
    std::string model;
    std::string sha256sums;
    int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
};

// Returns the error text, empty when the structure is sound.
std::string check_structure(const fs::path& dir) {
    try {
        Checkpoint checkpoint = Checkpoint::open(dir);
        std::fprintf(stderr, "structure: OK (%zu tensors in %zu file(s), %s of tensor data)\n",
                     checkpoint.tensors().size(), checkpoint.files().size(),
                     format_bytes(static_cast<double>(checkpoint.total_bytes())).c_str());
        for (const auto& warning : checkpoint.warnings()) std::fprintf(stderr, "warning: %s\n", warning.c_str());
        return {};
    } catch (const Error& e) {
        std::fprintf(stderr, "structure: FAILED\n%s\n", e.what());
        return e.what();
    }
}

void run_verify(const VerifyOptions& options) {
    const fs::path dir = options.model;
    const std::string structure_error = check_structure(dir);

    HashOptions hash;
    hash.threads = options.threads;
    hash.progress = ProgressMode::kAuto;
    hash.progress_stream = stderr;

    fs::path sums_path = options.sha256sums;
    if (sums_path.empty() && fs::exists(dir / kSha256SumsFileName)) sums_path = dir / kSha256SumsFileName;
    if (sums_path.empty()) {
        std::fprintf(stderr, "no %s list: computing the sums (%d threads)\n", kSha256SumsFileName, hash.threads);
        auto sums = compute_checksums(dir, list_files_for_checksums(dir), hash);
        std::fputs(format_sha256sums(std::move(sums)).c_str(), stdout);
        if (!structure_error.empty()) fail("checkpoint structure is invalid (see above)");
        return;
    }
    std::fprintf(stderr, "checking against %s (%d threads)\n", sums_path.c_str(), hash.threads);
    VerifyReport report = verify_checksums(dir, read_sha256sums(sums_path), checkpoint_core_files(dir), hash);
    std::printf("%s\n", report.describe().c_str());
    if (!report.ok() || !structure_error.empty()) {
        fail("checkpoint verification failed: {}{}", report.ok() ? "" : "checksums do not match the list",
             structure_error.empty() ? "" : (report.ok() ? "structure is invalid" : "; structure is invalid"));
    }
    std::printf("checkpoint OK\n");
}

const CommandRegistrar kRegistrar{
    "verify-checkpoint", "Verify a checkpoint: SHA-256 of every file against SHA256SUMS, and its structure",
    [](CLI::App& app) {
        auto options = std::make_shared<VerifyOptions>();
        app.add_option("--model", options->model, "Checkpoint directory")->required()->check(CLI::ExistingDirectory);
        app.add_option("--sha256sums", options->sha256sums,
                       "List of '<sha256>  <file>' lines (default: DIR/SHA256SUMS; absent: print computed sums)")
            ->check(CLI::ExistingFile);
        app.add_option("--threads", options->threads, "Files hashed in parallel")
            ->check(CLI::Range(1, 256))
            ->capture_default_str();
        app.callback([options] { run_verify(*options); });
    }};

}  // namespace
}  // namespace dsv4::cli
