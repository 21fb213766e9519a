// WeightStore: the model's weights as a backend holds them, uploaded once in checkpoint form (FP8 + UE8M0 128x128
// block scales, FP4 e2m1 + per-32 scales, BF16: backend/weights.h) and decoded inside the kernels. The checkpoint's
// host views stay valid while the model lives. Later roles on this seam: residency (host-resident experts), offload
// and per-GPU expert placement.
#pragma once

#include <cstdint>

#include "backend/weights.h"
#include "loader/tensor_view.h"

namespace dsv4 {

class WeightStore {
  public:
    virtual ~WeightStore() = default;

    // A linear weight [rows, cols] with its scales (null for BF16/F32); block_rows x block_cols values share a scale.
    // FP8 codes arrive in the backend's dialect (Backend::fp8_dialect(): the loader converts them exactly first).
    virtual WeightRef upload_linear(const TensorView& weight, const TensorView* scale, WeightFormat format,
                                    int64_t rows, int64_t cols, int block_rows, int block_cols) = 0;
    // A BF16/F32 vector, stored as float32.
    virtual VecRef upload_vector(const TensorView& values) = 0;
    // An I64/I32 table, stored as int32; every entry checked to lie in [0, max_value).
    virtual TableRef upload_table(const TensorView& values, int64_t max_value) = 0;

    // The set of resident routed experts of some layer changed (expert placement, between steps): drop anything
    // cached from the old set (the CUDA backend's per-layer expert handle tables).
    virtual void expert_set_changed() {}

    // Optional (benchmarks and synthetic models, made on the device with no checkpoint file). The defaults fail,
    // naming the backend.
    // A random weight in checkpoint form: N(0, stddev) values quantized with valid scales (FP8 block / FP4 row) or
    // stored as BF16 / F32. Deterministic from the seed.
    virtual WeightRef synthetic_linear(WeightFormat format, int64_t rows, int64_t cols, float stddev, uint64_t seed);
    // A float32 vector of N(mean, stddev) values.
    virtual VecRef synthetic_vector(int64_t n, float mean, float stddev, uint64_t seed);
    // A [rows, cols] table of int32 in [0, max_value), each row's entries distinct (hash routing), spread uniformly.
    virtual TableRef synthetic_table(int64_t rows, int64_t cols, int64_t max_value, uint64_t seed);
};

}  // namespace dsv4
