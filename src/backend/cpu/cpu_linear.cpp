// Linear layers on the CPU: y[m, r] = sum_k x[m, k] * W[r, k], with W decoded on the fly from its checkpoint form.
// Each weight row is decoded once per call and dotted with every activation row (dot_*_row_multi), so a prefill
// chunk reads the weights once. Rows are split across threads; every output element is computed by one thread in a
// fixed order, so results do not depend on the thread count or on the other rows of the batch. Reference numerics
// decode the row (exactly) and accumulate each dot in double (cpu_numerics.h).
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_numerics.h"
#include "backend/fp4_layout.h"
#include "core/block_dequant.h"
#include "core/parallel.h"

namespace dsv4 {
namespace {

// Where weight row r lives: its codes (values for F32 / BF16) and, for block-scaled formats, its UE8M0 scale row.
struct RowRef {
    const uint8_t* data;
    const uint8_t* scales;
};

// An FP4 row of `bytes` bytes in checkpoint order: the row itself, or for a sign-split weight (the CUDA backend's
// layout, backend/fp4_layout.h: an expert tier's host experts, whose host pairs this backend computes) its words
// converted into this thread's buffer, valid until the thread's next call. Sign-split rows are whole words
// (matmul_for_numerics checks).
const uint8_t* checkpoint_fp4_row(const WeightRef& w, const uint8_t* row, int64_t bytes) {
    if (w.fp4_layout == Fp4Layout::kCheckpoint) return row;
    thread_local std::vector<uint8_t> buffer;
    buffer.resize(static_cast<size_t>(bytes));
    fp4_words_to_checkpoint(row, buffer.data(), bytes / 4);
    return buffer.data();
}

RowRef row_ref(const WeightRef& w, int64_t r) {
    const auto* base = static_cast<const uint8_t*>(w.data);
    const int64_t k = w.cols;
    switch (w.format) {
        case WeightFormat::kF32:
            return {base + r * k * 4, nullptr};
        case WeightFormat::kBF16:
            return {base + r * k * 2, nullptr};
        case WeightFormat::kFp8Block:
            return {base + r * k, w.scales + (r / w.block_rows) * w.scale_cols};
        case WeightFormat::kFp4Row:
            return {checkpoint_fp4_row(w, base + r * (k / 2), k / 2), w.scales + r * w.scale_cols};
    }
    return {nullptr, nullptr};
}

// Dots weight row r with n_vec activation rows of x (stride k), writing out[v].
void row_dot(const WeightRef& w, int64_t r, const float* x, int64_t k, int n_vec, float* out) {
    const RowRef row = row_ref(w, r);
    switch (w.format) {
        case WeightFormat::kF32:
            dot_f32_multi(reinterpret_cast<const float*>(row.data), x, k, k, n_vec, out);
            return;
        case WeightFormat::kBF16:
            dot_bf16_row_multi(reinterpret_cast<const uint16_t*>(row.data), x, k, k, n_vec, out);
            return;
        case WeightFormat::kFp8Block:
            dot_fp8_row_multi(row.data, row.scales, w.block_cols, w.fp8_dialect, x, k, k, n_vec, out);
            return;
        case WeightFormat::kFp4Row:
            dot_fp4_row_multi(row.data, row.scales, w.block_cols, x, k, k, n_vec, out);
            return;
    }
}

// y[:, 0:count] = x W[row0 : row0 + count]^T for x [m, k] (contiguous); y has row stride y_stride.
void matmul(const WeightRef& w, int64_t row0, int64_t count, const float* x, int64_t m, float* y, int64_t y_stride) {
    const int64_t k = w.cols;
    constexpr int64_t kVecBlock = 64;  // activation rows per pass: keeps the x block in L2
    for (int64_t m0 = 0; m0 < m; m0 += kVecBlock) {
        const int n_vec = static_cast<int>(std::min(kVecBlock, m - m0));
#pragma omp parallel if (worth_parallel(count * k * n_vec))
        {
            std::vector<float> out(n_vec);
#pragma omp for schedule(static)
            for (int64_t r = 0; r < count; ++r) {
                row_dot(w, row0 + r, x + m0 * k, k, n_vec, out.data());
                for (int v = 0; v < n_vec; ++v) y[(m0 + v) * y_stride + r] = out[v];
            }
        }
    }
}

// Weight row r decoded to float32 (exact: the codes times their power-of-two scales).
void decode_row(const WeightRef& w, int64_t r, float* out) {
    const int64_t k = w.cols;
    const RowRef row = row_ref(w, r);
    switch (w.format) {
        case WeightFormat::kF32:
            std::memcpy(out, row.data, k * sizeof(float));
            return;
        case WeightFormat::kBF16:
            bf16_to_f32(reinterpret_cast<const uint16_t*>(row.data), out, static_cast<size_t>(k));
            return;
        case WeightFormat::kFp8Block:
            dequant_fp8_row(row.data, row.scales, k, w.block_cols, w.fp8_dialect, out);
            return;
        case WeightFormat::kFp4Row:
            dequant_fp4_row(row.data, row.scales, k, w.block_cols, out);
            return;
    }
}

// matmul with double accumulation (reference numerics): y = float(sum in double).
void matmul_f64(const WeightRef& w, int64_t row0, int64_t count, const float* x, int64_t m, float* y,
                int64_t y_stride) {
    const int64_t k = w.cols;
#pragma omp parallel if (worth_parallel(count * k * m))
    {
        std::vector<float> row(k);
#pragma omp for schedule(static)
        for (int64_t r = 0; r < count; ++r) {
            decode_row(w, row0 + r, row.data());
            for (int64_t v = 0; v < m; ++v) y[v * y_stride + r] = static_cast<float>(dot_f64(row.data(), x + v * k, k));
        }
    }
}

}  // namespace

void CpuBackend::matmul_for_numerics(const WeightRef& w, int64_t row0, int64_t count, const float* x, int64_t m,
                                     float* y, int64_t y_stride) const {
    DSV4_CHECK(w.format != WeightFormat::kFp4Row || w.fp4_layout == Fp4Layout::kCheckpoint || w.cols % 8 == 0,
               "sign-split FP4 weight [{}, {}]: rows must be whole 32-bit words", w.rows, w.cols);
    if (reference()) {
        matmul_f64(w, row0, count, x, m, y, y_stride);
    } else {
        matmul(w, row0, count, x, m, y, y_stride);
    }
}

void CpuBackend::linear(const Tensor& x, const WeightRef& w, LinearKind kind, Tensor y) {
    const int64_t m = x.numel() / w.cols;
    DSV4_CHECK(x.numel() == m * w.cols && y.numel() == m * w.rows, "linear: x has {} elements, y {}, weight [{}, {}]",
               x.numel(), y.numel(), w.rows, w.cols);
    const float* in = x.f32();
    std::vector<float> quantized;
    if (reference() && kind == LinearKind::kQuantized) {
        quantized.assign(in, in + x.numel());
#pragma omp parallel for if (worth_parallel(m * w.cols))
        for (int64_t r = 0; r < m; ++r) cpu::act_quant_sim(quantized.data() + r * w.cols, w.cols, fp8_.activations);
        in = quantized.data();
    }
    matmul_for_numerics(w, 0, w.rows, in, m, y.f32(), w.rows);
    if (reference() && kind != LinearKind::kF32Out) cpu::round_bf16(y.f32(), y.numel());
}

void CpuBackend::grouped_linear(const Tensor& x, const WeightRef& w, int groups, Tensor y) {
    const int64_t n = x.size(0);
    const int64_t k = w.cols;
    const int64_t r_per_group = w.rows / groups;
    DSV4_CHECK(x.numel() == n * groups * k && y.numel() == n * w.rows, "grouped_linear: shapes do not match");
    // Group g: the [n, k] slice of x (stride groups * k) times weight rows g*R .. g*R+R-1.
    std::vector<float> xg(n * k);
    for (int g = 0; g < groups; ++g) {
        for (int64_t t = 0; t < n; ++t) std::memcpy(&xg[t * k], x.f32() + (t * groups + g) * k, k * sizeof(float));
        matmul_for_numerics(w, g * r_per_group, r_per_group, xg.data(), n, y.f32() + g * r_per_group, w.rows);
    }
    if (reference()) cpu::round_bf16(y.f32(), y.numel());
}

}  // namespace dsv4
