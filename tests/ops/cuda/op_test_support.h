// Support for the CUDA op tests: random checkpoint-form weights, tensors mirrored on the CPU and CUDA backends, and
// comparisons that fail on NaN and on elements the GPU never wrote (outputs are poisoned with NaN first).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_factory.h"
#include "core/float_formats.h"
#include "core/parallel.h"
#include "core/quant_sim.h"
#include "require_gpu.h"

namespace dsv4::ops_test {

inline std::mt19937& rng() {
    static std::mt19937 gen(std::random_device{}());
    return gen;
}

inline std::vector<float> random_floats(int64_t n, float stddev = 1.0f) {
    std::normal_distribution<float> dist(0.0f, stddev);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng());
    return v;
}

// A weight in checkpoint form held on the host, with TensorViews for upload.
struct HostWeight {
    WeightFormat format = WeightFormat::kF32;
    int64_t rows = 0, cols = 0;
    int block_rows = 1, block_cols = 1;
    std::vector<uint8_t> data, scales;
    std::vector<int64_t> shape, scale_shape;
    DType dtype = DType::kF32;

    TensorView view() const { return {data.data(), dtype, shape, data.size()}; }
    TensorView scale_view() const { return {scales.data(), DType::kF8E8M0, scale_shape, scales.size()}; }
};

// Random normal weights (std cols^-1/2) quantized to `format` exactly as the checkpoint stores them.
inline HostWeight make_weight(WeightFormat format, int64_t rows, int64_t cols) {
    HostWeight w;
    w.format = format;
    w.rows = rows;
    w.cols = cols;
    std::vector<float> v = random_floats(rows * cols, 1.0f / std::sqrt(static_cast<float>(cols)));
    switch (format) {
        case WeightFormat::kF32:
            w.dtype = DType::kF32;
            w.shape = {rows, cols};
            w.data.resize(v.size() * 4);
            std::memcpy(w.data.data(), v.data(), w.data.size());
            break;
        case WeightFormat::kBF16: {
            w.dtype = DType::kBF16;
            w.shape = {rows, cols};
            w.data.resize(v.size() * 2);
            for (size_t i = 0; i < v.size(); ++i) {
                const uint16_t b = encode_bf16(v[i]);
                std::memcpy(&w.data[2 * i], &b, 2);
            }
            break;
        }
        case WeightFormat::kFp8Block: {
            w.dtype = DType::kF8E4M3;
            w.block_rows = w.block_cols = 128;
            w.shape = {rows, cols};
            const int64_t br = (rows + 127) / 128, bc = (cols + 127) / 128;
            w.scale_shape = {br, bc};
            w.scales.resize(br * bc);
            w.data.resize(rows * cols);
            for (int64_t bi = 0; bi < br; ++bi) {
                for (int64_t bj = 0; bj < bc; ++bj) {
                    float amax = 0.0f;
                    for (int64_t r = bi * 128; r < std::min(rows, bi * 128 + 128); ++r) {
                        for (int64_t c = bj * 128; c < std::min(cols, bj * 128 + 128); ++c) {
                            amax = std::max(amax, std::fabs(v[r * cols + c]));
                        }
                    }
                    const int e = pow2_scale_exponent(amax, 1e-30f, 448.0f);
                    w.scales[bi * bc + bj] = static_cast<uint8_t>(e + 127);
                    for (int64_t r = bi * 128; r < std::min(rows, bi * 128 + 128); ++r) {
                        for (int64_t c = bj * 128; c < std::min(cols, bj * 128 + 128); ++c) {
                            w.data[r * cols + c] = encode_e4m3(std::ldexp(v[r * cols + c], -e));
                        }
                    }
                }
            }
            break;
        }
        case WeightFormat::kFp4Row: {
            w.dtype = DType::kI8;
            w.block_cols = 32;
            w.shape = {rows, cols / 2};
            w.scale_shape = {rows, cols / 32};
            w.scales.resize(rows * (cols / 32));
            w.data.assign(rows * (cols / 2), 0);
            for (int64_t r = 0; r < rows; ++r) {
                for (int64_t b = 0; b < cols / 32; ++b) {
                    float amax = 0.0f;
                    for (int64_t c = b * 32; c < b * 32 + 32; ++c) amax = std::max(amax, std::fabs(v[r * cols + c]));
                    const int e = pow2_scale_exponent(amax, 6.0f * 0x1p-126f, 6.0f);
                    w.scales[r * (cols / 32) + b] = static_cast<uint8_t>(e + 127);
                    for (int64_t c = b * 32; c < b * 32 + 32; ++c) {
                        const uint8_t code = encode_e2m1(std::ldexp(v[r * cols + c], -e));
                        w.data[r * (cols / 2) + c / 2] |= static_cast<uint8_t>(c % 2 == 0 ? code : code << 4);
                    }
                }
            }
            break;
        }
    }
    return w;
}

// y[i][r] = sum_j x[i][j] * W[r][j] in double.
inline std::vector<float> host_linear(const std::vector<float>& x, const std::vector<float>& w, int64_t m, int64_t n,
                                      int64_t k) {
    std::vector<float> y(m * n);
    parallel_for(m, [&](int64_t i) {
        for (int64_t r = 0; r < n; ++r) {
            double acc = 0.0;
            for (int64_t j = 0; j < k; ++j) acc += static_cast<double>(x[i * k + j]) * w[r * k + j];
            y[i * n + r] = static_cast<float>(acc);
        }
    });
    return y;
}

inline WeightRef upload(Backend& b, const HostWeight& w) {
    TensorView scale = w.scale_view();
    return b.upload_linear(w.view(), w.scales.empty() ? nullptr : &scale, w.format, w.rows, w.cols, w.block_rows,
                           w.block_cols);
}

inline VecRef upload_vec(Backend& b, const std::vector<float>& v, std::vector<int64_t>& shape_storage) {
    shape_storage = {static_cast<int64_t>(v.size())};
    return b.upload_vector({reinterpret_cast<const uint8_t*>(v.data()), DType::kF32, shape_storage, v.size() * 4});
}

// A compressor's pooling weights on a backend (compress() takes the projected rows, so no projections), each vector's
// shape kept in `shapes`.
inline CompressorWeights upload_compressor(Backend& b, int ratio, int head_dim, bool overlap,
                                           const std::vector<float>& ape, const std::vector<float>& norm,
                                           std::deque<std::vector<int64_t>>& shapes) {
    CompressorWeights w;
    w.ratio = ratio;
    w.head_dim = head_dim;
    w.overlap = overlap;
    w.ape = upload_vec(b, ape, shapes.emplace_back());
    w.norm = upload_vec(b, norm, shapes.emplace_back());
    return w;
}

// A float32 tensor on a backend filled from host values (or NaN-poisoned when values is empty).
inline Tensor make_tensor(Backend& b, std::initializer_list<int64_t> shape, const std::vector<float>& values = {}) {
    Tensor t = b.alloc(DType::kF32, shape);
    std::vector<float> host = values.empty() ? std::vector<float>(t.numel(), NAN) : values;
    b.from_host(t, host.data());
    return t;
}

inline std::vector<float> read(Backend& b, const Tensor& t) {
    std::vector<float> v(t.numel());
    b.to_host(t, v.data());
    return v;
}

// Relative L2 error ||got - want|| / ||want||; infinite when any value is NaN/inf (unwritten outputs stay NaN).
inline double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
        if (!std::isfinite(got[i]) || !std::isfinite(want[i])) return INFINITY;
        const double d = static_cast<double>(got[i]) - want[i];
        num += d * d;
        den += static_cast<double>(want[i]) * want[i];
    }
    return std::sqrt(num / std::max(den, 1e-300));
}

// Tolerances (relative L2). Exact numerics: float32 with another summation order. Reference numerics: both backends
// compute in double between the same roundings (backend/cpu/cpu_numerics.h, backend/cuda/cuda_common.cuh), so they
// store the same floats, up to a rare one-ulp difference where a double sum sits on a float rounding boundary.
inline constexpr double kExactTol = 2e-5;
inline constexpr double kReferenceTol = 1e-6;
// Exact numerics over bf16 / fp8 stored state: float32 sums one bit apart may straddle the rounding boundary of a
// stored code (one e4m3 step is 2^-4 relative on one element of one key).
inline constexpr double kRoundedStateTol = 6e-3;
// Fast numerics round activations to bf16 into tensor-core GEMMs (2^-9 relative per element).
inline constexpr double kFastTol = 1e-2;

inline double tolerance(Numerics n) {
    return n == Numerics::kExact ? kExactTol : n == Numerics::kReference ? kReferenceTol : kFastTol;
}

// A 3-layer config with the Flash attention dims: sliding, CSA (ratio 4) and HCA (ratio 128) layers.
inline ModelConfig op_config(int64_t d = 4096) {
    ModelConfig c;
    c.model_type = "deepseek_v4";
    c.vocab_size = 1000;
    c.hidden_size = d;
    c.num_layers = 3;
    c.num_heads = 8;
    c.head_dim = 512;
    c.rope_head_dim = 64;
    c.q_lora_rank = 1024;
    c.o_groups = 8;
    c.o_lora_rank = 1024;
    c.sliding_window = 128;
    c.index_n_heads = 64;
    c.index_head_dim = 128;
    c.index_topk = 32;
    c.n_routed_experts = 16;
    c.n_experts_per_tok = 6;
    c.moe_intermediate_size = 2048;
    c.hc_mult = 4;
    c.hc_sinkhorn_iters = 20;
    c.routed_scaling_factor = 1.5;
    c.swiglu_limit = 10.0;
    YarnParams yarn;
    c.yarn = yarn;
    c.layers.resize(3);
    const AttentionType types[3] = {AttentionType::kSliding, AttentionType::kCsa, AttentionType::kHca};
    for (int l = 0; l < 3; ++l) {
        c.layers[l].attention = types[l];
        c.layers[l].compress_ratio = l == 0 ? 0 : l == 1 ? 4 : 128;
        c.layers[l].rope.rope_dim = 64;
        c.layers[l].rope.theta = l == 0 ? 10000.0 : 160000.0;
        if (l > 0) c.layers[l].rope.yarn = yarn;
    }
    return c;
}

// The CPU and CUDA backends with the same state (K=V rows and indexer keys stored as kv_dtype on both) and the same
// FP8 dialect.
struct Pair {
    std::unique_ptr<Backend> cpu, gpu;
    // Fast numerics (GPU only) are compared with the CPU's exact numerics.
    explicit Pair(Numerics n, const ModelConfig& c = op_config(), int slots = 2, int blocks = 16,
                  StateDtype kv_dtype = StateDtype::kF32, int snapshots = 0, Fp8Dialect dialect = Fp8Dialect::kOcp) {
        cpu = make_cpu_backend(n == Numerics::kFast ? Numerics::kExact : n, 0, dialect);
        CudaOptions options = cuda_options_from_env({});
        options.fp8_dialect = dialect;
        gpu = make_cuda_backend(n, options);
        StateConfig s;
        s.max_slots = slots;
        s.num_blocks = blocks;
        s.block_tokens = 256;
        s.rewind_capacity = 8;
        s.kv_dtype = kv_dtype;
        s.num_snapshots = snapshots;
        cpu->create_state(c, s);
        gpu->create_state(c, s);
    }
    void step(const StepBatch& b) {
        cpu->begin_step(b);
        gpu->begin_step(b);
    }
};

// Sets an environment variable for the life of the object (the CUDA backend reads its knobs when constructed).
class ScopedEnv {
  public:
    ScopedEnv(const char* name, const std::string& value) : name_(name) { setenv(name, value.c_str(), 1); }
    ~ScopedEnv() { unsetenv(name_); }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

  private:
    const char* name_;
};

inline StepBatch simple_batch(int64_t n, int64_t start = 0) {
    StepBatch b;
    std::vector<int32_t> tokens(n);
    for (int64_t i = 0; i < n; ++i) tokens[i] = static_cast<int32_t>(i % 997);
    b.add_sequence(0, start, tokens, std::vector<int32_t>(8, 0));
    for (int i = 0; i < 8; ++i) b.seqs[0].block_table[i] = i;
    return b;
}

}  // namespace dsv4::ops_test
