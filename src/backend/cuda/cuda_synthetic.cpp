// Synthetic weights and contexts on the device, and the profiling regions (benchmarks).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace dsv4::cuda {
namespace {

// A fixed UE8M0 exponent per tensor: 4 standard deviations map to the format's largest value.
int scale_exponent(float stddev, float qmax) {
    return static_cast<int>(std::ceil(std::log2(4.0f * stddev / qmax)));
}

}  // namespace

// Fills a synthetic weight in memory from `alloc` (device memory: permanent, or step scratch for a host copy).
WeightRef CudaBackend::synthetic_weight(WeightFormat format, int64_t rows, int64_t cols, float stddev, uint64_t seed,
                                        const std::function<void*(size_t)>& alloc) {
    WeightRef w;
    w.format = format;
    w.rows = rows;
    w.cols = cols;
    switch (format) {
        case WeightFormat::kFp8Block: {
            const bool fnuz = fp8_.weights == Fp8Dialect::kFnuz;  // codes in the backend's dialect
            const int e = scale_exponent(stddev, fnuz ? 240.0f : 448.0f);
            auto* codes = static_cast<uint8_t*>(alloc(rows * cols));
            launch_fill_fp8(stream_, codes, rows * cols, std::ldexp(1.0f, -e), stddev, seed, fnuz);
            w.fp8_dialect = fp8_.weights;
            w.block_rows = w.block_cols = 128;
            w.scale_cols = (cols + 127) / 128;
            const int64_t n_scales = ((rows + 127) / 128) * w.scale_cols;
            auto* scales = static_cast<uint8_t*>(alloc(n_scales));
            launch_fill_bytes(stream_, scales, n_scales, static_cast<uint8_t>(e + 127));
            w.data = codes;
            w.scales = scales;
            break;
        }
        case WeightFormat::kFp4Row: {
            DSV4_CHECK(cols % 32 == 0, "synthetic FP4 weight: cols {} is not a multiple of 32", cols);
            const int e = scale_exponent(stddev, 6.0f);
            auto* packed = static_cast<uint32_t*>(alloc(rows * cols / 2));  // sign-split words (backend/fp4_layout.h)
            launch_fill_fp4(stream_, packed, rows * cols / 8, std::ldexp(1.0f, -e), stddev, seed);
            w.fp4_layout = Fp4Layout::kSignSplit;
            w.block_cols = 32;
            w.scale_cols = cols / 32;
            auto* scales = static_cast<uint8_t*>(alloc(rows * w.scale_cols));
            launch_fill_bytes(stream_, scales, rows * w.scale_cols, static_cast<uint8_t>(e + 127));
            w.data = packed;
            w.scales = scales;
            break;
        }
        case WeightFormat::kBF16: {
            auto* p = static_cast<uint16_t*>(alloc(rows * cols * 2));
            launch_fill_bf16(stream_, p, rows * cols, stddev, seed);
            w.data = p;
            break;
        }
        case WeightFormat::kF32: {
            auto* p = static_cast<float*>(alloc(rows * cols * 4));
            launch_fill_f32(stream_, p, rows * cols, 0.0f, stddev, seed);
            w.data = p;
            break;
        }
    }
    launched("synthetic_linear", 2);
    return w;
}

WeightRef CudaBackend::synthetic_linear(WeightFormat format, int64_t rows, int64_t cols, float stddev, uint64_t seed) {
    const WeightRef w =
        synthetic_weight(format, rows, cols, stddev, seed, [this](size_t n) { return device_copy(nullptr, n); });
    if (w.fp8_dialect == Fp8Dialect::kOcp) register_fp8_weight(w);  // FNUZ never takes the FP8 tensor-core paths
    return w;
}

VecRef CudaBackend::synthetic_vector(int64_t n, float mean, float stddev, uint64_t seed) {
    auto* p = static_cast<float*>(device_copy(nullptr, n * sizeof(float)));
    launch_fill_f32(stream_, p, n, mean, stddev, seed);
    launched("synthetic_vector");
    return {p, n};
}

TableRef CudaBackend::synthetic_table(int64_t rows, int64_t cols, int64_t max_value, uint64_t seed) {
    DSV4_CHECK(cols <= max_value, "synthetic table: {} distinct entries per row from {} values", cols, max_value);
    auto* p = static_cast<int32_t*>(device_copy(nullptr, rows * cols * sizeof(int32_t)));
    launch_fill_table(stream_, p, rows, static_cast<int>(cols), max_value, seed);
    launched("synthetic_table");
    return {p, rows, cols};
}

void CudaBackend::synthetic_context(int32_t slot, int64_t length, std::span<const int32_t> block_table, uint64_t seed) {
    DSV4_CHECK(slot >= 0 && slot < state_.max_slots, "synthetic_context: slot {} outside [0, {})", slot,
               state_.max_slots);
    DSV4_CHECK(static_cast<int64_t>(block_table.size()) * state_.block_tokens >= length,
               "synthetic_context: the "
               "block table covers fewer than {} positions",
               length);
    const int hd = model_.head_dim, ihd = model_.index_head_dim;
    // K=V rows and indexer keys: N(0, 1) float32 rows in a temporary buffer, encoded into the storage dtype.
    int64_t max_rows = ring_rows_;
    for (const LayerStateDev& ls : layers_) max_rows = std::max<int64_t>(max_rows, ls.per_block);
    float* values = nullptr;
    DSV4_CUDA(cudaMalloc(&values, static_cast<size_t>(max_rows * std::max(hd, ihd)) * sizeof(float)));
    auto fill_rows = [&](uint8_t* dst, int64_t rows, const RowFormatDev& f, uint64_t s) {
        launch_fill_f32(stream_, values, rows * f.dim, 0.0f, 1.0f, s);
        launch_encode_rows(stream_, values, rows, f, dst);
    };
    for (size_t l = 0; l < layers_.size(); ++l) {
        const LayerStateDev& ls = layers_[l];
        const uint64_t s = seed + 1000003ull * l;
        fill_rows(ls.ring + static_cast<int64_t>(slot) * ring_rows_ * kv_format_.bytes, ring_rows_, kv_format_, s);
        if (ls.per_block == 0) continue;
        const bool csa = ls.index_keys != nullptr;
        const int main_width = (csa ? 2 : 1) * hd;
        launch_fill_f32(stream_, ls.main_pending + static_cast<int64_t>(slot) * ls.main_rows * 2 * main_width,
                        int64_t{ls.main_rows} * 2 * main_width, 0.0f, 1.0f, s + 1);
        if (csa) {
            launch_fill_f32(stream_, ls.index_pending + static_cast<int64_t>(slot) * ls.index_rows * 4 * ihd,
                            int64_t{ls.index_rows} * 4 * ihd, 0.0f, 1.0f, s + 2);
        }
        const int ratio = state_.block_tokens / ls.per_block;
        const int64_t entries = length / ratio;
        for (int64_t b = 0; b * ls.per_block < entries; ++b) {
            const int64_t block = block_table[b];
            fill_rows(ls.entries + block * ls.per_block * kv_format_.bytes, ls.per_block, kv_format_, s + 3 + b);
            if (csa) {
                fill_rows(ls.index_keys + block * ls.per_block * key_format_.bytes, ls.per_block, key_format_,
                          s + 7 + b);
            }
        }
    }
    const cudaError_t launch_status = cudaGetLastError();
    const cudaError_t sync_status = cudaStreamSynchronize(stream_);
    cudaFree(values);
    DSV4_CUDA(launch_status);
    DSV4_CUDA(sync_status);
}

void CudaBackend::set_profiling(bool on) {
    // CudaOptions::profile_ops (DSV4_PROFILE_OPS): time every op instead of the model's regions.
    op_profiling_ = on && options_.profile_ops;
    profiling_ = on && !op_profiling_;
    marks_.clear();
    profile_ms_.clear();
    if (op_profiling_) record_mark("");
}

void CudaBackend::region(std::string_view name) {
    if (profiling_) record_mark(name);
}

void CudaBackend::record_mark(std::string_view name) {
    if (event_pool_.size() <= marks_.size()) {
        cudaEvent_t e;
        DSV4_CUDA(cudaEventCreate(&e));
        event_pool_.push_back(e);
    }
    cudaEvent_t e = event_pool_[marks_.size()];
    DSV4_CUDA(cudaEventRecord(e, stream_));
    marks_.emplace_back(std::string(name), e);
}

std::vector<std::pair<std::string, double>> CudaBackend::profile(bool reset) {
    if ((profiling_ || op_profiling_) && !marks_.empty()) {
        if (profiling_) record_mark("");  // closes the last region
        DSV4_CUDA(cudaStreamSynchronize(stream_));
        for (size_t i = 0; i + 1 < marks_.size(); ++i) {
            float ms = 0.0f;
            DSV4_CUDA(cudaEventElapsedTime(&ms, marks_[i].second, marks_[i + 1].second));
            // Regions: a mark starts its region. Ops: a mark ends its op.
            profile_ms_[profiling_ ? marks_[i].first : marks_[i + 1].first] += ms;
        }
        marks_.clear();
        if (op_profiling_) record_mark("");
    }
    std::vector<std::pair<std::string, double>> out(profile_ms_.begin(), profile_ms_.end());
    if (reset) profile_ms_.clear();
    return out;
}

}  // namespace dsv4::cuda
