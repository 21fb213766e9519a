// Host-pair throughput of the expert tier (dist/expert_tier_moe.h): the CPU backend computing (token, expert) pairs of
// routed experts of DeepSeek-V4-Flash's shape (hidden 4096, intermediate 2048, FP4 e2m1 + per-32 UE8M0 scales: 12.6
// MB per expert) as the tier calls it (moe_routed over the host experts, one expert id per row). What it answers: how
// many host experts per second a host computes at each thread count and pairs per expert, against the PCIe fetch of
// the same expert (--expert-fetch-min-pairs), and so the host side of issue 19's batch-64 ceiling. Prints a Markdown
// table (for docs/performance-log.md).
//
//   cmake --build --preset release --target host_experts_bench
//   build/release/bench/host_experts_bench [--experts 8] [--pairs 1,2,4] [--threads 1,2] [--numerics reference]
//       [--repeats 5]
//
// Method: `experts` distinct random experts (more bytes than the last-level cache), each given `pairs` rows of random
// activations; one warm-up call, then the median of `repeats` calls. GB/s counts each expert's bytes once per call.
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "bench_program.h"
#include "core/error.h"
#include "loader/tensor_view.h"

namespace dsv4 {
namespace {

constexpr int64_t kHidden = 4096, kInter = 2048;

struct Options {
    int experts = 8;
    std::vector<int> pairs = {1, 2, 4};
    std::vector<int> threads = {1, 2};
    std::string numerics = "reference";
    int repeats = 5;
};

Options parse_args(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        DSV4_CHECK(i + 1 < argc, "{} needs a value", arg);
        const std::string value = argv[++i];
        if (arg == "--experts") {
            o.experts = std::stoi(value);
        } else if (arg == "--pairs") {
            o.pairs = bench::int_list(value);
        } else if (arg == "--threads") {
            o.threads = bench::int_list(value);
        } else if (arg == "--numerics") {
            o.numerics = value;
        } else if (arg == "--repeats") {
            o.repeats = std::stoi(value);
        } else {
            fail("unknown option {}", arg);
        }
    }
    DSV4_CHECK(o.experts > 0 && o.repeats > 0, "--experts and --repeats must be positive");
    return o;
}

// One FP4 matrix [rows, cols] in checkpoint form: random e2m1 codes, scales 2^-4..2^-1 (UE8M0 123..126).
struct Fp4Matrix {
    std::vector<uint8_t> codes, scales;
    std::vector<int64_t> code_shape, scale_shape;
    Fp4Matrix(int64_t rows, int64_t cols, std::mt19937& rng)
        : codes(static_cast<size_t>(rows * cols / 2)),
          scales(static_cast<size_t>(rows * cols / 32)),
          code_shape{rows, cols / 2},
          scale_shape{rows, cols / 32} {
        for (uint8_t& c : codes) c = static_cast<uint8_t>(rng());
        for (uint8_t& s : scales) s = static_cast<uint8_t>(123 + rng() % 4);
    }
    WeightRef upload(Backend& b, int64_t rows, int64_t cols) const {
        const TensorView w{codes.data(), DType::kI8, code_shape, codes.size()};
        const TensorView s{scales.data(), DType::kU8, scale_shape, scales.size()};
        return b.upload_linear(w, &s, WeightFormat::kFp4Row, rows, cols, 1, 32);
    }
};

// Seconds of one moe_routed call over `pairs` rows per expert.
double time_call(Backend& b, const MoeWeights& w, int experts, int pairs, int repeats) {
    const int64_t m = int64_t{experts} * pairs;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal;
    std::vector<float> h(static_cast<size_t>(m * kHidden)), weights(static_cast<size_t>(m), 1.0f / 6);
    for (float& v : h) v = normal(rng);
    std::vector<int32_t> ids(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) ids[i] = static_cast<int32_t>(i % experts);
    const size_t mark = b.scratch_mark();
    Tensor ht = b.alloc(DType::kF32, {m, kHidden}), out = b.alloc(DType::kF32, {m, kHidden});
    Tensor idt = b.alloc(DType::kI32, {m, 1}), wt = b.alloc(DType::kF32, {m, 1});
    b.from_host(ht, h.data());
    b.from_host(idt, ids.data());
    b.from_host(wt, weights.data());
    std::vector<double> seconds;
    for (int r = 0; r <= repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        b.moe_routed(ht, w, wt, idt, 10.0f, out);
        b.synchronize();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r > 0) seconds.push_back(s);  // the first call is the warm-up
    }
    b.scratch_release(mark);
    return bench::median(seconds);
}

int run(int argc, char** argv) {
    const Options o = parse_args(argc, argv);
    std::mt19937 rng(1);
    std::vector<std::vector<Fp4Matrix>> matrices;  // per expert: w1, w2, w3
    for (int e = 0; e < o.experts; ++e) {
        matrices.push_back(
            {Fp4Matrix(kInter, kHidden, rng), Fp4Matrix(kHidden, kInter, rng), Fp4Matrix(kInter, kHidden, rng)});
    }
    std::printf("| threads | pairs / expert | us / expert | GB/s | us / pair |\n|--:|--:|--:|--:|--:|\n");
    for (const int threads : o.threads) {
        auto backend = make_cpu_backend(parse_numerics(o.numerics), threads);
        MoeWeights w;
        for (const auto& m : matrices) {
            w.experts.push_back({m[0].upload(*backend, kInter, kHidden), m[1].upload(*backend, kHidden, kInter),
                                 m[2].upload(*backend, kInter, kHidden)});
        }
        const double expert_bytes = static_cast<double>(w.experts[0].bytes());
        for (const int pairs : o.pairs) {
            const double s = time_call(*backend, w, o.experts, pairs, o.repeats);
            const double per_expert = s / o.experts;
            std::printf("| %d | %d | %.0f | %.2f | %.0f |\n", threads, pairs, per_expert * 1e6,
                        expert_bytes / per_expert / 1e9, per_expert / pairs * 1e6);
        }
    }
    return 0;
}

}  // namespace
}  // namespace dsv4

int main(int argc, char** argv) {
    return dsv4::bench::run_program(dsv4::run, argc, argv);
}
