#include "model/checkpoint_convert.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "core/error.h"
#include "loader/checkpoint.h"
#include "loader/checksums.h"
#include "loader/unique_fd.h"
#include "model/fp8_weights.h"
#include "model/weight_binding.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;

constexpr const char* kConfigName = "config.json";

bool is_inside(const fs::path& path, const fs::path& dir) {
    const fs::path rel = fs::weakly_canonical(path).lexically_relative(fs::weakly_canonical(dir));
    return !rel.empty() && *rel.begin() != "..";
}

void check_paths(const CheckpointConversionOptions& o, const fs::path& partial) {
    DSV4_CHECK(fs::is_directory(o.in), "convert-checkpoint: the input {} is not a directory", o.in.string());
    DSV4_CHECK(fs::is_regular_file(o.in / kConfigName), "convert-checkpoint: {} is not a checkpoint (no {})",
               o.in.string(), kConfigName);
    DSV4_CHECK(!o.out.empty() && !fs::exists(o.out),
               "convert-checkpoint: the output {} already exists (convert-checkpoint never overwrites; name a new "
               "directory)",
               o.out.string());
    DSV4_CHECK(!fs::exists(partial), "convert-checkpoint: {} exists (left by an interrupted run?): remove it first",
               partial.string());
    DSV4_CHECK(!is_inside(o.out, o.in), "convert-checkpoint: the output {} is inside the input {}", o.out.string(),
               o.in.string());
}

// Verifies the input against its SHA256SUMS when it has one; returns whether it did.
bool verify_input_sums(const fs::path& in, int threads) {
    if (!fs::exists(in / kSha256SumsFileName)) return false;
    HashOptions hash;
    hash.threads = threads;
    const VerifyReport report =
        verify_checksums(in, read_sha256sums(in / kSha256SumsFileName), checkpoint_core_files(in), hash);
    DSV4_CHECK(report.ok(), "convert-checkpoint: the input {} does not match its {}:\n{}", in.string(),
               kSha256SumsFileName, report.describe());
    return true;
}

// Where a tensor's bytes sit in its shard file.
struct TensorLocation {
    fs::path file;  // relative to the checkpoint directory
    uint64_t offset = 0;
};

std::map<const TensorView*, TensorLocation> locate_tensors(const Checkpoint& checkpoint) {
    std::map<const TensorView*, TensorLocation> where;
    for (const CheckpointTensor& t : checkpoint.tensors()) {
        const SafetensorsFile& file = checkpoint.file_of(t);
        const auto index = static_cast<size_t>(t.view - file.views().data());
        where[t.view] = {fs::relative(file.path(), checkpoint.dir()), file.data_start() + file.infos()[index].offset};
    }
    return where;
}

// Copies every file but config.json and SHA256SUMS byte for byte; returns the copied names.
void copy_files(const fs::path& in, const fs::path& out) {
    for (const std::string& name : list_files_for_checksums(in)) {
        if (name == kConfigName) continue;
        fs::create_directories((out / name).parent_path());
        fs::copy_file(in / name, out / name);
    }
}

void write_config(const fs::path& in, const fs::path& out, Fp8Dialect target) {
    std::ifstream file(in / kConfigName);
    std::stringstream text;
    text << file.rdbuf();
    nlohmann::ordered_json config = nlohmann::ordered_json::parse(text.str());
    config["quantization_config"]["fmt"] = fp8_fmt_name(target);
    std::ofstream(out / kConfigName) << config.dump(2) << "\n";
}

void write_at(const fs::path& path, uint64_t offset, const std::vector<uint8_t>& bytes) {
    const UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    DSV4_CHECK(fd.get() >= 0, "convert-checkpoint: cannot open {} for writing", path.string());
    size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n =
            ::pwrite(fd.get(), bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
        DSV4_CHECK(n > 0, "convert-checkpoint: writing {} failed", path.string());
        done += static_cast<size_t>(n);
    }
}

// Converts every FP8 weight of the input and writes its codes and scales over the copies in `out`.
Fp8ConversionReport convert_fp8_tensors(const ModelConfig& config, const Checkpoint& checkpoint,
                                        const BoundWeights& bound, Fp8Dialect target, const fs::path& out,
                                        int64_t* tensors) {
    const std::map<const TensorView*, TensorLocation> where = locate_tensors(checkpoint);
    return convert_each_fp8_weight(
        config, bound, target, [&](const Fp8WeightTensor& t, std::vector<uint8_t> codes, std::vector<uint8_t> scales) {
            const TensorLocation& wc = where.at(&bound.get(t.weight));
            const TensorLocation& ws = where.at(&bound.get(t.scale));
            write_at(out / wc.file, wc.offset, codes);
            write_at(out / ws.file, ws.offset, scales);
            ++*tensors;
        });
}

// SHA256SUMS of everything in dir, written and then verified against the files.
void write_and_verify_sums(const fs::path& dir, int threads) {
    HashOptions hash;
    hash.threads = threads;
    std::vector<ChecksumEntry> sums = compute_checksums(dir, list_files_for_checksums(dir), hash);
    std::ofstream(dir / kSha256SumsFileName) << format_sha256sums(std::move(sums));
    const VerifyReport report =
        verify_checksums(dir, read_sha256sums(dir / kSha256SumsFileName), checkpoint_core_files(dir), hash);
    DSV4_CHECK(report.ok(), "convert-checkpoint: the written checkpoint does not match its {}:\n{}",
               kSha256SumsFileName, report.describe());
}

// Re-opens the written checkpoint the way load_model will: config, structure, binding and the dialect check.
void check_output(const fs::path& dir, Fp8Dialect target) {
    const ModelConfig config = load_model_config(dir / kConfigName);
    DSV4_CHECK(config.fp8_dialect == target, "convert-checkpoint: the written config.json does not say {}",
               fp8_dialect_label(target));
    const Checkpoint checkpoint = Checkpoint::open(dir);
    const BoundWeights bound = bind_weights(config, checkpoint);
    check_fp8_dialect(fp8_dialect_evidence(config, bound), target, dir.string());
}

uint64_t directory_bytes(const fs::path& dir, int64_t* files) {
    uint64_t bytes = 0;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
        if (!entry.is_regular_file()) continue;
        bytes += entry.file_size();
        ++*files;
    }
    return bytes;
}

CheckpointConversionResult convert_into(const CheckpointConversionOptions& o, const fs::path& partial) {
    CheckpointConversionResult result;
    result.input_sums_verified = verify_input_sums(o.in, o.hash_threads);
    const ModelConfig config = load_model_config(o.in / kConfigName);
    DSV4_CHECK(config.fp8_weights,
               "convert-checkpoint: {} has no FP8 weights (no quantization_config): nothing to "
               "convert",
               o.in.string());
    result.from = config.fp8_dialect;
    DSV4_CHECK(config.fp8_dialect != o.target,
               "convert-checkpoint: {} is already {} (quantization_config.fmt \"{}\"): nothing to convert",
               o.in.string(), fp8_dialect_label(o.target), fp8_fmt_name(o.target));
    const Checkpoint checkpoint = Checkpoint::open(o.in);
    const BoundWeights bound = bind_weights(config, checkpoint);
    check_fp8_dialect(fp8_dialect_evidence(config, bound), config.fp8_dialect, o.in.string());
    fs::create_directories(partial);
    copy_files(o.in, partial);
    write_config(o.in, partial, o.target);
    result.report = convert_fp8_tensors(config, checkpoint, bound, o.target, partial, &result.fp8_tensors);
    write_and_verify_sums(partial, o.hash_threads);
    check_output(partial, o.target);
    result.bytes = directory_bytes(partial, &result.files);
    return result;
}

}  // namespace

CheckpointConversionResult convert_checkpoint(const CheckpointConversionOptions& o) {
    const fs::path partial = fs::path(o.out.string() + ".partial");
    check_paths(o, partial);
    try {
        CheckpointConversionResult result = convert_into(o, partial);
        fs::rename(partial, o.out);
        return result;
    } catch (...) {
        std::error_code ignored;
        fs::remove_all(partial, ignored);
        throw;
    }
}

}  // namespace dsv4
