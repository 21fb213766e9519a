#include "backend/cpu/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_numerics.h"
#include "config/rope.h"
#include "core/block_dequant.h"
#include "core/float_formats.h"
#include "core/parallel.h"

namespace dsv4 {
namespace {

// safetensors data is not aligned: copy element bytes out instead of dereferencing typed pointers.
template <typename T>
T load_unaligned(const uint8_t* p) {
    T value;
    std::memcpy(&value, p, sizeof(T));
    return value;
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(Numerics numerics, int threads, Fp8Dialect fp8_dialect) {
    DSV4_CHECK(numerics != Numerics::kFast,
               "the CPU backend implements exact and reference numerics; fast "
               "numerics are the GPU path");
    return std::make_unique<CpuBackend>(numerics, threads, fp8_sites(fp8_dialect));
}

CpuBackend::CpuBackend(Numerics numerics, int threads, const Fp8Sites& fp8)
    : numerics_(numerics), threads_(threads > 0 ? threads : omp_get_max_threads()), fp8_(fp8) {
    omp_set_num_threads(threads_);
}

WeightRef CpuBackend::upload_linear(const TensorView& weight, const TensorView* scale, WeightFormat format,
                                    int64_t rows, int64_t cols, int block_rows, int block_cols) {
    WeightRef w;
    w.format = format;
    w.rows = rows;
    w.cols = cols;
    w.data = weight.data;  // zero copy: the checkpoint stays mapped while the model lives
    w.block_rows = block_rows;
    w.block_cols = block_cols;
    w.fp8_dialect = fp8_.weights;  // the loader hands FP8 weights over in the backend's dialect (weight_store.h)
    if (scale != nullptr) {
        w.scales = scale->data;
        w.scale_cols = scale->shape.back();
    }
    return w;
}

VecRef CpuBackend::upload_vector(const TensorView& values) {
    std::vector<float> out(values.numel());
    if (values.dtype == DType::kF32) {
        std::memcpy(out.data(), values.data, out.size() * sizeof(float));
    } else if (values.dtype == DType::kBF16) {
        for (size_t i = 0; i < out.size(); ++i) out[i] = decode_bf16(load_unaligned<uint16_t>(values.data + 2 * i));
    } else {
        fail("upload_vector: dtype {} is not BF16 or F32", dtype_name(values.dtype));
    }
    vectors_.push_back(std::move(out));
    return {vectors_.back().data(), static_cast<int64_t>(vectors_.back().size())};
}

TableRef CpuBackend::upload_table(const TensorView& values, int64_t max_value) {
    DSV4_CHECK(values.shape.size() == 2, "upload_table: expected a 2-D table");
    std::vector<int32_t> out(values.numel());
    for (size_t i = 0; i < out.size(); ++i) {
        int64_t v = values.dtype == DType::kI64 ? load_unaligned<int64_t>(values.data + 8 * i)
                                                : load_unaligned<int32_t>(values.data + 4 * i);
        DSV4_CHECK(v >= 0 && v < max_value, "table entry {} = {} is outside [0, {})", i, v, max_value);
        out[i] = static_cast<int32_t>(v);
    }
    tables_.push_back(std::move(out));
    return {tables_.back().data(), values.shape[0], values.shape[1]};
}

Tensor CpuBackend::alloc(DType dtype, std::initializer_list<int64_t> shape) {
    Tensor t(nullptr, dtype, shape);
    const int64_t bytes = t.numel() * dtype_bits(dtype) / 8;
    arena_.emplace_back(static_cast<size_t>((bytes + 3) / 4 + 1));
    t.data = arena_.back().data();
    return t;
}

void CpuBackend::begin_step(const StepBatch& batch) {
    arena_.clear();
    begin_substep(batch);
}

void CpuBackend::begin_substep(const StepBatch& batch) {
    // The OpenMP thread count is per calling thread: the engine runs steps on its own thread (engine addition).
    omp_set_num_threads(threads_);
    for (const auto& s : batch.seqs) {
        DSV4_CHECK(s.slot >= 0 && s.slot < state_.max_slots, "step: slot {} is outside [0, {})", s.slot,
                   state_.max_slots);
        const int64_t end = s.start_pos + s.n_tokens;
        const int64_t blocks_needed = (end + state_.block_tokens - 1) / state_.block_tokens;
        DSV4_CHECK(static_cast<int64_t>(s.block_table.size()) >= blocks_needed,
                   "step: block table of slot {} has "
                   "{} blocks, positions up to {} need {}",
                   s.slot, s.block_table.size(), end, blocks_needed);
        for (int32_t b : s.block_table) {
            DSV4_CHECK(b >= 0 && b < state_.num_blocks, "step: block id {} is outside [0, {})", b, state_.num_blocks);
        }
    }
    for (int32_t token : batch.tokens) {
        DSV4_CHECK(token >= 0 && token < model_.vocab_size, "token id {} is outside the vocabulary [0, {})", token,
                   model_.vocab_size);
    }
    step_ = batch;
}

void CpuBackend::to_host(const Tensor& t, float* out) {
    DSV4_CHECK(t.dtype == DType::kF32, "to_host: float32 tensors only");
    std::memcpy(out, t.data, t.numel() * sizeof(float));
}

void CpuBackend::copy(const Tensor& src, Tensor dst) {
    DSV4_CHECK(src.dtype == dst.dtype && src.numel() == dst.numel(), "copy: {} {} elements into {} {} elements",
               dtype_name(src.dtype), src.numel(), dtype_name(dst.dtype), dst.numel());
    std::memcpy(dst.data, src.data, src.numel() * dtype_bits(src.dtype) / 8);
}

void CpuBackend::from_host(Tensor t, const void* data) {
    std::memcpy(t.data, data, t.numel() * dtype_bits(t.dtype) / 8);
}

void CpuBackend::embed(const WeightRef& table, Tensor x) {
    const int64_t n = x.size(0), hc = x.size(1), d = x.size(2);
    const auto* base = static_cast<const uint8_t*>(table.data);
#pragma omp parallel for if (worth_parallel(n * hc * d))
    for (int64_t t = 0; t < n; ++t) {
        const uint8_t* row = base + static_cast<int64_t>(step_.tokens[t]) * d * 2;
        float* out = x.f32() + t * hc * d;
        for (int64_t i = 0; i < d; ++i) out[i] = decode_bf16(load_unaligned<uint16_t>(row + 2 * i));
        for (int64_t s = 1; s < hc; ++s) std::memcpy(out + s * d, out, d * sizeof(float));
    }
}

void CpuBackend::rms_norm(const Tensor& x, const VecRef* weight, float eps, Tensor y) {
    const int64_t k = x.size(-1);
    const int64_t rows = x.numel() / k;
    const float* w = weight != nullptr ? weight->data : nullptr;
    const bool ref = reference();
#pragma omp parallel for if (worth_parallel(rows * k))
    for (int64_t r = 0; r < rows; ++r) {
        cpu::with_acc(
            ref, [&](auto acc) { cpu::rms_norm_row<decltype(acc)>(x.f32() + r * k, w, k, eps, ref, y.f32() + r * k); });
    }
}

const std::vector<float>& CpuBackend::inv_freq(const RopeParams& rope) {
    auto key = std::make_tuple(rope.theta, rope.rope_dim, rope.yarn.has_value());
    auto it = inv_freq_cache_.find(key);
    if (it == inv_freq_cache_.end()) it = inv_freq_cache_.emplace(key, rope_inv_freq(rope)).first;
    return it->second;
}

void CpuBackend::rope(Tensor x, const RopeParams& rope, bool inverse) {
    const int64_t n = x.size(0), heads = x.size(1), dim = x.size(2);
    const int pairs = rope.rope_dim / 2;
    const auto& freqs = inv_freq(rope);
    const bool ref = reference();
#pragma omp parallel for if (worth_parallel(n * heads * rope.rope_dim))
    for (int64_t t = 0; t < n; ++t) {
        std::vector<float> c(pairs), s(pairs);
        rope_cos_sin(freqs, step_.positions[t], c.data(), s.data());
        if (inverse) {
            for (float& v : s) v = -v;
        }
        for (int64_t h = 0; h < heads; ++h) {
            float* v = x.f32() + (t * heads + h) * dim + (dim - rope.rope_dim);
            cpu::with_acc(ref, [&](auto acc) { cpu::rotate_pairs<decltype(acc)>(v, c.data(), s.data(), pairs, ref); });
        }
    }
}

void CpuBackend::scale(Tensor x, float factor) {
    float* p = x.f32();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) p[i] *= factor;
}

void CpuBackend::gather_rows(const Tensor& x, std::span<const int32_t> rows, Tensor y) {
    const int64_t width = x.numel() / x.size(0);
    for (size_t i = 0; i < rows.size(); ++i) {
        DSV4_CHECK(rows[i] >= 0 && rows[i] < x.size(0), "gather_rows: row {} outside [0, {})", rows[i], x.size(0));
        std::memcpy(y.f32() + i * width, x.f32() + rows[i] * width, width * sizeof(float));
    }
}

}  // namespace dsv4
