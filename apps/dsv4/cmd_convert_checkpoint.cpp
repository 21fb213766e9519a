// `dsv4 convert-checkpoint --model IN --out OUT --fp8 fnuz|ocp [--threads N]`: the checkpoint with its FP8 weights
// rewritten exactly in the other FP8 dialect (src/model/checkpoint_convert.h: values unchanged, block scales moved
// one binade where needed, everything else copied byte for byte, quantization_config.fmt recorded, SHA256SUMS
// written and verified). Status goes to stderr; exit status 1 with a clear message on bad input.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "command.h"
#include "core/error.h"
#include "loader/progress.h"
#include "model/checkpoint_convert.h"

namespace dsv4::cli {
namespace {

struct ConvertOptions {
    std::string model;
    std::string out;
    std::string fp8;
    int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
};

void run_convert(const ConvertOptions& o) {
    CheckpointConversionOptions c;
    c.in = o.model;
    c.out = o.out;
    c.target = parse_fp8_dialect(o.fp8);
    c.hash_threads = o.threads;
    std::fprintf(stderr, "converting %s to %s -> %s\n", o.model.c_str(),
                 std::string(fp8_dialect_label(c.target)).c_str(), o.out.c_str());
    const CheckpointConversionResult r = convert_checkpoint(c);
    std::fprintf(stderr, "input SHA256SUMS: %s\n", r.input_sums_verified ? "verified" : "none (not checked)");
    std::printf("%s -> %s: %lld FP8 weights, %s\n", std::string(fp8_dialect_label(r.from)).c_str(),
                std::string(fp8_dialect_label(c.target)).c_str(), static_cast<long long>(r.fp8_tensors),
                r.report.describe().c_str());
    std::printf("wrote %s: %lld files, %s, SHA256SUMS verified\n", o.out.c_str(), static_cast<long long>(r.files),
                format_bytes(static_cast<double>(r.bytes)).c_str());
}

const CommandRegistrar kRegistrar{
    "convert-checkpoint", "Rewrite a checkpoint's FP8 weights exactly in the other FP8 dialect (OCP <-> FNUZ)",
    [](CLI::App& app) {
        auto o = std::make_shared<ConvertOptions>();
        app.add_option("--model", o->model, "Input checkpoint directory")->required();
        app.add_option("--out", o->out, "Output directory (must not exist)")->required();
        app.add_option("--fp8", o->fp8, "Target dialect: fnuz (AMD gfx942 / MI300X) or ocp (e4m3fn)")
            ->required()
            ->check(CLI::IsMember({"fnuz", "ocp"}));
        app.add_option("--threads", o->threads, "Files hashed in parallel")->check(CLI::Range(1, 256));
        app.callback([o] { run_convert(*o); });
    }};

}  // namespace
}  // namespace dsv4::cli
