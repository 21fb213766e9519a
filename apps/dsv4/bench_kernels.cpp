// `dsv4 bench kernels`: every GEMM shape of DeepSeek-V4-Flash at several activation row counts and the grouped
// routed experts at uniform top-6 routing, on each kernel path that can run them, with TFLOP/s, GB/s and the
// fractions of the FP8 ceiling (cuBLASLt block-scaled 8192^3) and of the copy bandwidth measured in the same run.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_registry.h"
#include "core/error.h"
#ifdef DSV4_WITH_CUDA
#include "backend/cuda/cuda_factory.h"
#endif

namespace dsv4::cli {
namespace {

struct KernelsOptions {
    std::vector<int64_t> rows{1, 8, 64, 256, 2048, 8192};
    std::vector<int64_t> tokens{8, 64, 256, 2048, 8192};
    int experts = 160;
    std::string filter;
    std::string json_out;
};

void run(const KernelsOptions& o) {
#ifdef DSV4_WITH_CUDA
    KernelBenchOptions k;
    k.rows = o.rows;
    k.expert_tokens = o.tokens;
    k.experts = o.experts;
    k.filter = o.filter;
    const KernelBenchResult r = run_kernel_bench(k);
    std::printf(
        "device %s: copy %.2f TB/s, bf16 GEMM %.0f TFLOP/s, FP8 block-scaled GEMM (cuBLASLt 8192^3) %.0f "
        "TFLOP/s\n",
        r.ceilings.device_name.c_str(), r.ceilings.copy_tb_per_s, r.ceilings.bf16_gemm_tflops, r.fp8_tflops);
    std::printf("%-32s %6s %6s %6s %-20s %10s %9s %9s %7s %7s\n", "op", "M", "N", "K", "path", "us", "TFLOP/s", "GB/s",
                "%fp8", "%copy");
    nlohmann::json rows = nlohmann::json::array();
    for (const KernelBenchRow& row : r.rows) {
        std::printf("%-32s %6lld %6lld %6lld %-20s %10.2f %9.1f %9.1f %6.1f%% %6.1f%%\n", row.op.c_str(),
                    static_cast<long long>(row.m), static_cast<long long>(row.n), static_cast<long long>(row.k),
                    row.path.c_str(), row.us, row.tflops, row.gb_per_s, 100.0 * row.fp8_fraction,
                    100.0 * row.copy_fraction);
        rows.push_back({{"op", row.op},
                        {"path", row.path},
                        {"m", row.m},
                        {"n", row.n},
                        {"k", row.k},
                        {"us", row.us},
                        {"tflops", row.tflops},
                        {"gb_per_s", row.gb_per_s},
                        {"fp8_fraction", row.fp8_fraction},
                        {"copy_fraction", row.copy_fraction}});
    }
    if (!o.json_out.empty()) {
        const nlohmann::json out = {{"device", r.ceilings.device_name},
                                    {"copy_tb_per_s", r.ceilings.copy_tb_per_s},
                                    {"bf16_gemm_tflops", r.ceilings.bf16_gemm_tflops},
                                    {"fp8_gemm_tflops", r.fp8_tflops},
                                    {"rows", rows}};
        std::ofstream(o.json_out) << out.dump(2) << "\n";
    }
#else
    (void)o;
    fail("bench kernels: this build has no CUDA backend (configure with the cuda preset)");
#endif
}

const BenchmarkRegistrar kRegistrar{
    "kernels", "GEMM shapes and grouped experts on every kernel path, against the device ceilings (CUDA)",
    [](CLI::App& app) {
        auto o = std::make_shared<KernelsOptions>();
        app.add_option("--rows", o->rows, "Activation rows of the linears")->delimiter(',');
        app.add_option("--tokens", o->tokens, "Tokens routed through the experts (top-6)")->delimiter(',');
        app.add_option("--experts", o->experts, "Routed experts");
        app.add_option("--filter", o->filter, "Only ops whose name contains this");
        app.add_option("--json", o->json_out, "Write the results as JSON");
        app.callback([o] { run(*o); });
    }};

}  // namespace
}  // namespace dsv4::cli
