// `dsv4 bench kernels` (cuda_factory.h): the model's GEMM shapes and the grouped routed experts on every kernel path
// that can run them (linear_plan.h), timed with events over batches of calls on synthetic weights rotated over
// copies larger than the L2, next to the ceilings measured in the same run.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_factory.h"
#include "core/error.h"

namespace dsv4 {
namespace {

using cuda::CudaBackend;
using cuda::LinearPath;

struct Shape {
    const char* name;
    WeightFormat format;
    int64_t rows, cols;
    int groups = 1;  // grouped output projection: rows over all groups, cols per group
};

// DeepSeek-V4-Flash (hidden 4096, q_lora 1024, 64 heads x 512, 8 output groups of 1024, shared expert 2048).
const Shape kShapes[] = {
    {"wq_a", WeightFormat::kFp8Block, 1024, 4096},
    {"wq_b", WeightFormat::kFp8Block, 32768, 1024},
    {"wkv", WeightFormat::kFp8Block, 512, 4096},
    {"wo_a (8 groups)", WeightFormat::kFp8Block, 8192, 4096, 8},
    {"wo_b", WeightFormat::kFp8Block, 4096, 8192},
    {"shared w1 / w3", WeightFormat::kFp8Block, 2048, 4096},
    {"shared w2", WeightFormat::kFp8Block, 4096, 2048},
    {"indexer wq_b", WeightFormat::kFp8Block, 8192, 1024},
    {"csa compressor wkv / wgate", WeightFormat::kBF16, 1024, 4096},
    {"hca compressor wkv / wgate", WeightFormat::kBF16, 512, 4096},
    {"indexer compressor wkv / wgate", WeightFormat::kBF16, 256, 4096},
    {"indexer weights_proj", WeightFormat::kBF16, 64, 4096},
    {"router gate", WeightFormat::kBF16, 256, 4096},
    {"lm head", WeightFormat::kBF16, 129280, 4096},
};

double weight_bytes(WeightFormat f, int64_t rows, int64_t cols) {
    switch (f) {
        case WeightFormat::kFp8Block:
            return static_cast<double>(rows) * cols;
        case WeightFormat::kFp4Row:
            return static_cast<double>(rows) * cols / 2 + static_cast<double>(rows) * cols / 32;
        case WeightFormat::kBF16:
            return 2.0 * rows * cols;
        case WeightFormat::kF32:
            return 4.0 * rows * cols;
    }
    return 0.0;
}

// Median microseconds per call of `body(i)` (i = call index, for rotating inputs): batches of `calls` between two
// events after two warm-up calls.
template <typename F>
double time_us(cudaStream_t stream, int calls, F&& body) {
    cudaEvent_t a, b;
    DSV4_CUDA(cudaEventCreate(&a));
    DSV4_CUDA(cudaEventCreate(&b));
    body(0);
    body(1);
    std::vector<float> per_call;
    for (int batch = 0; batch < 3; ++batch) {
        DSV4_CUDA(cudaEventRecord(a, stream));
        for (int i = 0; i < calls; ++i) body(i);
        DSV4_CUDA(cudaEventRecord(b, stream));
        DSV4_CUDA(cudaEventSynchronize(b));
        float ms = 0.0f;
        DSV4_CUDA(cudaEventElapsedTime(&ms, a, b));
        per_call.push_back(ms * 1000.0f / static_cast<float>(calls));
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(per_call.begin(), per_call.end());
    return per_call[1];
}

int calls_for(double flops) {
    return std::clamp(static_cast<int>(2e11 / std::max(flops, 1.0)), 3, 50);  // ~0.2 ms of work at 1 PF/s per batch
}

struct Buffers {
    float* x = nullptr;
    float* y = nullptr;
    ~Buffers() {
        cudaFree(x);
        cudaFree(y);
    }
};

KernelBenchRow row_of(const std::string& op, const std::string& path, int64_t m, int64_t n, int64_t k, double us,
                      double flops, double bytes, const KernelBenchResult& r) {
    KernelBenchRow row;
    row.op = op;
    row.path = path;
    row.m = m;
    row.n = n;
    row.k = k;
    row.us = us;
    row.tflops = flops / (us * 1e-6) / 1e12;
    row.gb_per_s = bytes / (us * 1e-6) / 1e9;
    row.fp8_fraction = r.fp8_tflops > 0.0 ? row.tflops / r.fp8_tflops : 0.0;
    row.copy_fraction = r.ceilings.copy_tb_per_s > 0.0 ? row.gb_per_s / (r.ceilings.copy_tb_per_s * 1e3) : 0.0;
    std::fprintf(stderr, "  %s m=%lld %s: %.2f us, %.1f TFLOP/s, %.1f GB/s\n", op.c_str(), static_cast<long long>(m),
                 path.c_str(), us, row.tflops, row.gb_per_s);  // progress
    return row;
}

double fp8_ceiling(CudaBackend& b, float* x, float* y) {
    const int64_t n = 8192;
    const WeightRef w = b.synthetic_linear(WeightFormat::kFp8Block, n, n, 0.02f, 7);
    const size_t mark = b.scratch_mark();
    const cuda::Fp8Act act = b.quantize_fp8(x, n, n, n);
    const double us = time_us(b.stream(), 5, [&](int) { b.linear_fp8(LinearPath::kFp8Lt, act, 0, w, y, n); });
    b.scratch_release(mark);
    return 2.0 * n * n * n / (us * 1e-6) / 1e12;
}

void bench_linears(CudaBackend& b, const KernelBenchOptions& o, const Buffers& buf, KernelBenchResult& r) {
    const int64_t max_m = *std::max_element(o.rows.begin(), o.rows.end());
    for (const Shape& s : kShapes) {
        if (!o.filter.empty() && std::string(s.name).find(o.filter) == std::string::npos) continue;
        const double wbytes = weight_bytes(s.format, s.rows, s.cols);  // groups split the rows
        const int copies = static_cast<int>(std::clamp(std::ceil(256e6 / wbytes), 1.0, 16.0));
        std::vector<WeightRef> weights;
        for (int c = 0; c < copies; ++c) {
            weights.push_back(b.synthetic_linear(s.format, s.rows, s.cols, 1.0f / 64.0f, 100 + c));
        }
        for (int64_t m : o.rows) {
            if (m > max_m) continue;
            const int64_t per = s.rows / s.groups;
            WeightRef slice = weights[0];
            slice.rows = per;
            const cuda::LinearProblem p{Numerics::kFast, slice, m, s.cols, s.groups > 1};
            const LinearPath chosen = cuda::choose_linear_path(p, b.linear_tuning(), "");
            for (LinearPath path :
                 {LinearPath::kFp8Gemv, LinearPath::kFp8Lt, LinearPath::kFp8Wgmma, LinearPath::kGemmBf16,
                  LinearPath::kBf16Lt, LinearPath::kBf16Gemv, LinearPath::kGemv}) {
                if (!cuda::linear_path_unmet(path, p).empty()) continue;
                const bool tensor_cores = path == LinearPath::kGemmBf16 || path == LinearPath::kBf16Lt;
                if ((path == LinearPath::kGemv && m > 64) || (tensor_cores && m < 8)) continue;
                b.force_paths(cuda::linear_path_name(path), "");
                const double flops = 2.0 * m * s.rows * s.cols;
                const double us = time_us(b.stream(), calls_for(flops), [&](int i) {
                    const size_t mark = b.scratch_mark();
                    const WeightRef& w = weights[i % copies];
                    if (s.groups > 1) {
                        b.grouped_linear(Tensor(buf.x, DType::kF32, {m, s.groups, s.cols}), w, s.groups,
                                         Tensor(buf.y, DType::kF32, {m, s.rows}));
                    } else {
                        b.linear(Tensor(buf.x, DType::kF32, {m, s.cols}), w, LinearKind::kQuantized,
                                 Tensor(buf.y, DType::kF32, {m, s.rows}));
                    }
                    b.scratch_release(mark);
                });
                const double bytes = wbytes + 4.0 * m * (s.cols * s.groups + s.rows);
                const std::string name = (path == chosen ? "auto:" : "") + std::string(cuda::linear_path_name(path));
                r.rows.push_back(row_of(s.name, name, m, s.rows, s.cols, us, flops, bytes, r));
            }
        }
    }
    b.force_paths("", "");
}

void bench_experts(CudaBackend& b, const KernelBenchOptions& o, const Buffers& buf, KernelBenchResult& r) {
    if (!o.filter.empty() && std::string("experts").find(o.filter) == std::string::npos) return;
    const int64_t d = 4096, inter = 2048, k = 6;
    MoeWeights mw;
    for (int e = 0; e < o.experts; ++e) {
        mw.experts.push_back({b.synthetic_linear(WeightFormat::kFp4Row, inter, d, 1.0f / 64.0f, 1000 + 3 * e),
                              b.synthetic_linear(WeightFormat::kFp4Row, d, inter, 1.0f / 45.0f, 1001 + 3 * e),
                              b.synthetic_linear(WeightFormat::kFp4Row, inter, d, 1.0f / 64.0f, 1002 + 3 * e)});
    }
    std::mt19937 gen(5);
    for (int64_t n : o.expert_tokens) {
        std::vector<int32_t> ids(n * k);
        std::vector<float> weights(n * k, 1.0f / k);
        std::vector<int32_t> all(o.experts);
        for (int e = 0; e < o.experts; ++e) all[e] = e;
        for (int64_t t = 0; t < n; ++t) {  // 6 distinct experts per token, uniformly
            std::shuffle(all.begin(), all.end(), gen);
            std::copy_n(all.begin(), k, ids.begin() + t * k);
        }
        int32_t* ids_dev = nullptr;
        float* w_dev = nullptr;
        DSV4_CUDA(cudaMalloc(&ids_dev, ids.size() * sizeof(int32_t)));
        DSV4_CUDA(cudaMalloc(&w_dev, weights.size() * sizeof(float)));
        DSV4_CUDA(cudaMemcpy(ids_dev, ids.data(), ids.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
        DSV4_CUDA(cudaMemcpy(w_dev, weights.data(), weights.size() * sizeof(float), cudaMemcpyHostToDevice));
        DSV4_CUDA(cudaDeviceSynchronize());  // pageable copies may still be in flight; the backend's stream is another
        const double pairs = static_cast<double>(n * k);
        const double flops = pairs * 2.0 * 3.0 * d * inter;
        const double touched = o.experts * (1.0 - std::pow(1.0 - static_cast<double>(k) / o.experts, n));
        const double bytes = touched * 3.0 * weight_bytes(WeightFormat::kFp4Row, inter, d) + 4.0 * n * d * 2;
        const cuda::MoePath chosen =
            cuda::choose_moe_path({Numerics::kFast, WeightFormat::kFp4Row, n * k, d, inter}, b.linear_tuning().moe, "");
        for (cuda::MoePath path : {cuda::MoePath::kGroupedFp8, cuda::MoePath::kGroupedBf16, cuda::MoePath::kPerPairGemv,
                                   cuda::MoePath::kFusedGemv, cuda::MoePath::kPerPairMma}) {
            const bool per_pair = path == cuda::MoePath::kPerPairGemv || path == cuda::MoePath::kFusedGemv ||
                                  path == cuda::MoePath::kPerPairMma;
            if (per_pair && n > 256) continue;
            b.force_paths("", cuda::moe_path_name(path));
            const double us = time_us(b.stream(), calls_for(flops), [&](int) {
                const size_t mark = b.scratch_mark();
                b.moe(Tensor(buf.x, DType::kF32, {n, d}), mw, Tensor(w_dev, DType::kF32, {n, k}),
                      Tensor(ids_dev, DType::kI32, {n, k}), 10.0f, Tensor(buf.y, DType::kF32, {n, d}));
                b.scratch_release(mark);
            });
            const std::string name = (path == chosen ? "auto:" : "") + std::string(cuda::moe_path_name(path));
            r.rows.push_back(row_of("experts (160, top-6)", name, n, inter, d, us, flops, bytes, r));
        }
        cudaFree(ids_dev);
        cudaFree(w_dev);
    }
    b.force_paths("", "");
}

// The device sampler (sample_rows) at temperature 1 and top_p 0.95 (the serving protocol's) over `draws` rows of the
// model's 129,280 logits drawn from N(0, 2^2); each call uploads its draws, as a serving step does.
void bench_sampler(CudaBackend& b, const KernelBenchOptions& o, KernelBenchResult& r) {
    if (!o.filter.empty() && std::string("sample").find(o.filter) == std::string::npos) return;
    const int64_t vocab = 129280, most = 64;
    const VecRef logits = b.synthetic_vector(most * vocab, 0.0f, 2.0f, 11);
    int32_t* out = nullptr;
    DSV4_CUDA(cudaMalloc(&out, most * sizeof(int32_t)));
    for (int64_t draws : {int64_t{1}, int64_t{8}, most}) {
        std::vector<RowDraw> rows(static_cast<size_t>(draws));
        for (int64_t i = 0; i < draws; ++i) {
            RowDraw& d = rows[static_cast<size_t>(i)];
            d.row = i;
            d.top_p = 0.95;
            d.uniform = (static_cast<double>(i) + 0.5) / static_cast<double>(draws);
        }
        SampleRowsArgs args;
        args.draws = rows;
        const double us = time_us(b.stream(), 10, [&](int) {
            const size_t mark = b.scratch_mark();
            b.sample_rows(Tensor(const_cast<float*>(logits.data), DType::kF32, {draws, vocab}), args,
                          Tensor(out, DType::kI32, {draws}), nullptr, nullptr);
            b.scratch_release(mark);
        });
        const double bytes = 4.0 * static_cast<double>(draws * vocab);
        r.rows.push_back(row_of("sample (T 1, top_p 0.95)", "device", draws, vocab, 0, us, 0.0, bytes, r));
    }
    cudaFree(out);
}

}  // namespace

KernelBenchResult run_kernel_bench(const KernelBenchOptions& o) {
    KernelBenchResult r;
    r.ceilings = measure_device_ceilings();
    CudaBackend b(Numerics::kFast, cuda_options_from_env({}));
    Buffers buf;
    const int64_t max_m = std::max<int64_t>(8192, *std::max_element(o.rows.begin(), o.rows.end()));
    const size_t x_floats = static_cast<size_t>(max_m) * 8 * 4096, y_floats = static_cast<size_t>(max_m) * 129280;
    DSV4_CUDA(cudaMalloc(&buf.x, x_floats * sizeof(float)));
    DSV4_CUDA(cudaMalloc(&buf.y, y_floats * sizeof(float)));
    const VecRef random = b.synthetic_vector(static_cast<int64_t>(x_floats), 0.0f, 1.0f, 3);
    DSV4_CUDA(cudaMemcpyAsync(buf.x, random.data, x_floats * sizeof(float), cudaMemcpyDeviceToDevice, b.stream()));
    r.fp8_tflops = fp8_ceiling(b, buf.x, buf.y);
    bench_linears(b, o, buf, r);
    bench_experts(b, o, buf, r);
    bench_sampler(b, o, r);
    b.synchronize();
    return r;
}

}  // namespace dsv4
