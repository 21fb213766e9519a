// FP8 tensor-core paths of fast numerics: activation quantization per 1x128 into scratch, linears on cuBLASLt's
// block-scaled FP8 GEMM or our wgmma kernel (linear_plan.h chooses), and the routed experts grouped by expert on the
// W4A8 wgmma kernel with the SwiGLU (clamp, routing weight) and the per-128 re-quantization fused into the up
// projection's epilogue (kernels_fp8.h). Numerics: every FP8 / FP4 GEMM input is rounded to bf16 and then to e4m3
// per 128 elements with a power-of-two scale, as in reference numerics; sums are float32 with the partial sums of
// each 128-wide K block promoted (scaled) in float32.
#include <algorithm>
#include <cstdio>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_fp8_gemm.h"
#include "backend/cuda/kernels_fp8_tma.h"
#include "core/error.h"

namespace dsv4::cuda {

void CudaBackend::register_fp8_weight(const WeightRef& w) {
    if (fp8_lt_ != nullptr && w.format == WeightFormat::kFp8Block && w.block_rows == 128 && w.block_cols == 128) {
        fp8_lt_->register_weight(stream_, w);
    }
}

Fp8Act CudaBackend::alloc_fp8(int64_t rows, int64_t k) {
    DSV4_CHECK(k % kFp8ActBlock == 0, "FP8 activations: row length {} is not a multiple of {}", k, kFp8ActBlock);
    Fp8Act a;
    a.rows = rows;
    a.rows_pad = fp8_rows_pad(rows);
    a.k = k;
    a.codes = static_cast<uint8_t*>(arena_.take(static_cast<size_t>(std::max<int64_t>(a.rows_pad * k, 16))));
    a.scales = scratch(static_cast<size_t>(std::max<int64_t>(a.rows_pad * (k / kFp8ActBlock), 4)));
    return a;
}

Fp8Act CudaBackend::alloc_fp8_zero_padded(int64_t rows, int64_t k) {
    const Fp8Act a = alloc_fp8(rows, k);
    if (a.rows_pad > rows) {
        DSV4_CUDA(cudaMemsetAsync(a.codes + rows * k, 0, static_cast<size_t>((a.rows_pad - rows) * k), stream_));
        DSV4_CUDA(cudaMemset2DAsync(a.scales + rows, static_cast<size_t>(a.rows_pad) * sizeof(float), 0,
                                    static_cast<size_t>(a.rows_pad - rows) * sizeof(float),
                                    static_cast<size_t>(k / kFp8ActBlock), stream_));
        launched("fp8 pad rows", 2);
    }
    return a;
}

Fp8Act CudaBackend::quantize_fp8(const float* x, int64_t x_stride, int64_t rows, int64_t k) {
    DSV4_CHECK(x_stride % 4 == 0, "quantize_fp8: row stride {} is not a multiple of 4 floats", x_stride);
    const Fp8Act a = alloc_fp8(rows, k);
    launch_quant_fp8(stream_, {x, x_stride, a});
    launched("fp8 act quant");
    return a;
}

void CudaBackend::linear_fp8(LinearPath path, const Fp8Act& x, int64_t x_col0, const WeightRef& w, float* y,
                             int64_t y_stride) {
    if (path == LinearPath::kFp8Lt) {
        Fp8LtGemm g;
        g.x = &x;
        g.x_col0 = x_col0;
        g.w = w;
        g.y = y;
        g.y_stride = y_stride;
        if (x.rows % 4 != 0) g.scratch = scratch(static_cast<size_t>(x.rows_pad * w.rows));
        if (fp8_lt_->run(stream_, g, side_.active ? 1 : 0)) {
            launched("fp8 linear (cuBLASLt)", x.rows % 4 != 0 ? 2 : 1);
            return;
        }
        path = LinearPath::kFp8Wgmma;  // no cuBLASLt algorithm for this shape: same roundings on our kernel
    }
    DSV4_CHECK(path == LinearPath::kFp8Wgmma, "linear_fp8: path {} is not an FP8 path", linear_path_name(path));
    if (options_.fp8_tma) {
        Fp8TmaGemmParams p;
        p.w_codes = static_cast<const uint8_t*>(w.data);
        p.w_scales = w.scales;
        p.w_scale_cols = w.scale_cols;
        p.rows = w.rows;
        p.k = w.cols;
        p.x = x;
        p.x_col0 = x_col0;
        p.y = y;
        p.y_stride = y_stride;
        if (fp8_tma_gemm_unmet(p).empty()) {
            launch_fp8_tma_gemm(stream_, p);
            launched("fp8 linear (wgmma, TMA)");
            return;
        }
    }
    ExpertGemmArgs a;  // the staged kernel: without CudaOptions::fp8_tma, or operands the TMA kernel cannot take
    a.format = WeightFormat::kFp8Block;
    a.dense = w;
    a.rows = w.rows;
    a.k = w.cols;
    a.x_codes = x.codes + x_col0;
    a.x_stride = x.k;
    a.x_scales = x.scales + (x_col0 / kFp8ActBlock) * x.rows_pad;
    a.x_rows_pad = x.rows_pad;
    a.dense_m = x.rows;
    a.tile_n = x.rows <= 16 ? expert_gemm_small_tile(a.format, false) : expert_gemm_large_tile(a.format, false);
    a.y = y;
    a.y_stride = y_stride;
    launch_expert_gemm_fp8(stream_, a);
    launched("fp8 linear (wgmma)");
}

void CudaBackend::fp8_gemv(std::span<const Fp8GemvTarget> targets, int64_t m, int64_t k, const float* x, int64_t x_cols,
                           int64_t x_stride, const float* swiglu_up, float limit) {
    DSV4_CHECK(x_stride % 4 == 0 && fp8_gemv_supported(m, k), "fp8_gemv: {} rows of {} inputs ({} floats apart)", m, k,
               x_stride);
    DSV4_CHECK(swiglu_up == nullptr || (m < kFp8GemvQuantizeRows && targets.size() == 1),
               "fp8_gemv: the SwiGLU input is staged for one target below {} rows ({} targets, {} rows)",
               kFp8GemvQuantizeRows, targets.size(), m);
    // One token's quantization in every block costs less than a launch; eight tokens' (up to 8 x 8192 floats a block)
    // cost more: wo_b at 8 rows took 61 us quantizing in its blocks (bench kernels, H200, 2026-12-03).
    const Fp8Act quantized = m >= kFp8GemvQuantizeRows ? quantize_fp8(x, x_stride, m, x_cols) : Fp8Act{};
    for (size_t first = 0; first < targets.size(); first += kMaxFp8GemvTargets) {
        Fp8GemvParams p;
        p.m = static_cast<int>(m);
        p.k = k;
        p.x_stride = x_stride;
        p.quantized = quantized;
        p.swiglu_up = swiglu_up;
        p.limit = limit;
        p.target_warps = options_.fp8_gemv_warps;
        for (size_t i = first; i < std::min(targets.size(), first + kMaxFp8GemvTargets); ++i) {
            Fp8GemvTarget t = targets[i];
            t.col0 = t.x - x;
            DSV4_CHECK(t.w.cols == k && reinterpret_cast<uintptr_t>(t.x) % 16 == 0 &&
                           reinterpret_cast<uintptr_t>(t.w.data) % 16 == 0,
                       "fp8_gemv: weight [{}, {}] against {} inputs, or an input / weight not 16-byte aligned",
                       t.w.rows, t.w.cols, k);
            DSV4_CHECK(t.col0 >= 0 && t.col0 + k <= x_cols && t.col0 % kFp8ActBlock == 0,
                       "fp8_gemv: a target's inputs start at column {} of {}-wide rows", t.col0, x_cols);
            p.targets[p.n++] = t;
        }
        p.partials = scratch(static_cast<size_t>(fp8_gemv_partials(p)));
        DSV4_CHECK(fp8_gemv_arrivals(p) <= kSplitArrivals, "fp8_gemv: {} row groups exceed the {} split counters",
                   fp8_gemv_arrivals(p), kSplitArrivals);
        p.arrivals = split_arrivals_;
        launch_fp8_gemv(stream_, p);
        launched("fp8 gemv");
    }
}

namespace {

// Device-side tile plan of one token-tile width over pairs already grouped by expert.
struct TilePlan {
    int max_tiles = 0;
    int32_t *count = nullptr, *expert = nullptr, *row0 = nullptr, *rows = nullptr;
};

}  // namespace

bool CudaBackend::expert_copies(int experts, int64_t d, int64_t inter, ExpertFp8Copy& up, ExpertFp8Copy& down) {
    up = ExpertFp8Copy{nullptr, nullptr, inter, d, 256};
    down = ExpertFp8Copy{nullptr, nullptr, d, inter, 128};
    auto round = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
    const size_t up_codes = round(up.code_bytes(experts)), up_scales = round(up.scale_bytes(experts));
    const size_t down_codes = round(down.code_bytes(experts)), down_scales = round(down.scale_bytes(experts));
    const size_t bytes = up_codes + up_scales + down_codes + down_scales;
    if (expert_copies_bytes_ < bytes) {
        cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
        const bool recording =
            cudaStreamIsCapturing(stream_, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone;
        if (expert_copies_failed_ || recording) return false;
        if (expert_copies_ != nullptr) {
            DSV4_CUDA(cudaStreamSynchronize(stream_));
            cudaFree(expert_copies_);
            expert_copies_ = nullptr;
            expert_copies_bytes_ = 0;
        }
        if (cudaMalloc(&expert_copies_, bytes) != cudaSuccess) {
            cudaGetLastError();  // the failed allocation is not an error of the next launch
            expert_copies_ = nullptr;
            expert_copies_failed_ = true;
            std::fprintf(stderr,
                         "fast numerics: no %zu MiB for the experts' e4m3 copies (DSV4_EXPERT_TMA); the staged kernel "
                         "runs\n",
                         bytes >> 20);
            return false;
        }
        expert_copies_bytes_ = bytes;
    }
    auto* base = static_cast<uint8_t*>(expert_copies_);
    up.codes = base;
    up.scales = reinterpret_cast<float*>(base + up_codes);
    down.codes = base + up_codes + up_scales;
    down.scales = reinterpret_cast<float*>(down.codes + down_codes);
    return true;
}

void CudaBackend::grouped_fp8_pairs(const MoeWeights& w, const Tensor& weights, const Tensor& ids, float limit,
                                    const Fp8Act& x, float* routed) {
    const int64_t d = x.k, k = ids.size(1), pairs = ids.numel();
    const int64_t inter = first_resident_expert(w).w1.rows;
    const auto n_experts = static_cast<int>(w.experts.size());
    // Tile widths: a small tile when the average expert gets few tokens (decode batches), else the large ones.
    const int64_t per_expert = pairs / std::max<int64_t>(1, std::min<int64_t>(pairs, n_experts));
    const bool small = per_expert <= 24;
    const int up_tile = small ? expert_gemm_small_tile(WeightFormat::kFp4Row, true)
                              : expert_gemm_large_tile(WeightFormat::kFp4Row, true);
    ExpertFp8Copy copy_up, copy_down;  // the TMA GEMMs' weights (prefill tiles, CudaOptions::expert_tma)
    const bool tma = !small && options_.expert_tma && up_tile == kExpertTmaUpTile &&
                     expert_copies(n_experts, d, inter, copy_up, copy_down);
    const int down_tile = small ? expert_gemm_small_tile(WeightFormat::kFp4Row, false)
                          : tma ? kExpertTmaDownTile
                                : expert_gemm_large_tile(WeightFormat::kFp4Row, false, options_.expert_half_wide);
    auto ints = [&](int64_t count) {
        return reinterpret_cast<int32_t*>(scratch(static_cast<size_t>(std::max<int64_t>(count, 1))));
    };
    int32_t* counts = ints(n_experts);
    int32_t* cursor = ints(n_experts);
    int32_t* row_ids = ints(pairs);
    auto plan = [&](int tile) {
        TilePlan p;
        const int64_t max_tiles = pairs / tile + std::min<int64_t>(pairs, n_experts);
        DSV4_CHECK(max_tiles <= kMaxGemvPairs, "moe: {} expert tiles exceed the grid limit {}", max_tiles,
                   kMaxGemvPairs);
        p.max_tiles = static_cast<int>(max_tiles);
        p.count = ints(1);
        p.expert = ints(max_tiles);
        p.row0 = ints(max_tiles);
        p.rows = ints(max_tiles);
        launch_plan_tiles(stream_, counts, n_experts, tile, p.max_tiles, cursor, p.expert, p.row0, p.rows, p.count);
        return p;
    };
    launch_count_experts(stream_, meta_, ids.i32(), pairs, n_experts, counts);
    const TilePlan down = plan(down_tile);  // also writes the offsets the scatter starts from
    launch_scatter_pairs(stream_, ids.i32(), pairs, n_experts, cursor, row_ids);
    const TilePlan up = up_tile == down_tile ? down : plan(up_tile);
    launched("moe grouping", up_tile == down_tile ? 3 : 4);

    const Fp8Act act = alloc_fp8(pairs, inter);
    ExpertGemmArgs g;
    g.format = WeightFormat::kFp4Row;
    g.table = expert_table(w, 0);
    g.table_up = expert_table(w, 2);
    g.rows = inter;
    g.k = d;
    g.x_codes = x.codes;
    g.x_stride = d;
    g.x_scales = x.scales;
    g.x_rows_pad = x.rows_pad;
    g.x_div = static_cast<int>(k);
    g.max_tiles = up.max_tiles;
    g.tile_count = up.count;
    g.tile_expert = up.expert;
    g.tile_row0 = up.row0;
    g.tile_rows = up.rows;
    g.row_ids = row_ids;
    g.tile_n = up_tile;
    g.act = act;
    g.route_weights = weights.f32();  // DeepSeek's order: the routing weight scales the activation before W2
    g.limit = limit;
    g.clamp_count = clamp_count_;
    g.warp_specialized = options_.expert_ws;
    g.l2_prefetch = options_.expert_l2_prefetch;
    g.register_weights = options_.expert_register_weights;
    if (tma) {
        launch_expert_expand(stream_, {g.table, g.table_up, counts, n_experts, copy_up, clamp_count_});
        launch_expert_expand(stream_, {expert_table(w, 1), nullptr, counts, n_experts, copy_down, clamp_count_});
        const Fp8Act x_sorted = alloc_fp8(pairs, d);
        launch_gather_fp8_rows(stream_, {x, row_ids, g.x_div, x_sorted});
        launched("moe expand + gather (TMA)", 3);
        launch_expert_gemm_tma(stream_, {g, copy_up, n_experts, x_sorted});
        launched("moe up (fp8, TMA)");
    } else {
        launch_expert_gemm_fp8(stream_, g);
        launched("moe up (fp8)");
    }

    ExpertGemmArgs dn = g;
    dn.table = expert_table(w, 1);
    dn.table_up = nullptr;
    dn.rows = d;
    dn.k = inter;
    dn.x_codes = act.codes;
    dn.x_stride = inter;
    dn.x_scales = act.scales;
    dn.x_rows_pad = act.rows_pad;
    dn.x_div = 1;
    dn.max_tiles = down.max_tiles;
    dn.tile_count = down.count;
    dn.tile_expert = down.expert;
    dn.tile_row0 = down.row0;
    dn.tile_rows = down.rows;
    dn.tile_n = down_tile;
    dn.act = Fp8Act{};
    dn.route_weights = nullptr;
    dn.y = routed;
    dn.y_stride = d;
    if (tma) {
        const Fp8Act act_sorted = alloc_fp8(pairs, inter);
        launch_gather_fp8_rows(stream_, {act, row_ids, 1, act_sorted});
        launched("moe gather (TMA)");
        launch_expert_gemm_tma(stream_, {dn, copy_down, n_experts, act_sorted});
        launched("moe down (fp8, TMA)");
        return;
    }
    launch_expert_gemm_fp8(stream_, dn);
    launched("moe down (fp8)");
}

void CudaBackend::moe_grouped_fp8(const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids,
                                  float limit, Tensor y) {
    const int64_t n = h.size(0), d = h.size(1), k = ids.size(1), pairs = n * k;
    const Fp8Act x = quantize_fp8(h.f32(), d, n, d);
    float* routed = scratch(static_cast<size_t>(pairs * d));
    grouped_fp8_pairs(w, weights, ids, limit, x, routed);
    const float* shared = shared_output(h, &x, w, limit);
    launch_combine(stream_, routed, weights.f32(), shared, n, static_cast<int>(k), d, false, false, y.f32());
    launched("moe combine");
}

void CudaBackend::shared_expert(const Tensor& h, const Fp8Act* x, const ExpertWeights& s, float limit, Tensor ys) {
    const int64_t n = h.size(0), d = h.size(1), si = s.w1.rows;
    const bool ref = reference();
    Tensor gs = alloc(DType::kF32, {n, si}), us = alloc(DType::kF32, {n, si});
    if (x != nullptr) {  // the routed experts' quantized input, reused when the shared expert's linears are FP8 too
        const LinearPath p1 = choose_linear_path({numerics_, s.w1, n, d}, tuning_, tuning_.forced_linear);
        const LinearPath p2 = choose_linear_path({numerics_, s.w2, n, si}, tuning_, tuning_.forced_linear);
        const bool fp8_up = p1 == LinearPath::kFp8Lt || p1 == LinearPath::kFp8Wgmma;
        const bool fp8_down = p2 == LinearPath::kFp8Lt || p2 == LinearPath::kFp8Wgmma;
        if (fp8_up && fp8_down && s.w3.format == s.w1.format) {
            linear_fp8(p1, *x, 0, s.w1, gs.f32(), si);
            linear_fp8(p1, *x, 0, s.w3, us.f32(), si);
            const Fp8Act act_s = alloc_fp8(n, si);
            launch_swiglu_quant_fp8(stream_, {gs.f32(), us.f32(), nullptr, limit, act_s});
            launched("shared swiglu quant");
            linear_fp8(p2, act_s, 0, s.w2, ys.f32(), d);
            return;
        }
    }
    const LinearTarget up[] = {{&s.w1, LinearKind::kQuantized, gs}, {&s.w3, LinearKind::kQuantized, us}};
    linears(h, up);
    const LinearPath p2 = choose_linear_path({numerics_, s.w2, n, si}, tuning_, tuning_.forced_linear);
    if (p2 == LinearPath::kFp8Gemv && n < kFp8GemvQuantizeRows) {  // the GEMV takes the SwiGLU as it stages its input
        const Fp8GemvTarget target{s.w2, gs.f32(), ys.f32(), d};
        fp8_gemv({&target, 1}, n, si, gs.f32(), si, si, us.f32(), limit);
        return;
    }
    Tensor as = alloc(DType::kF32, {n, si});
    launch_swiglu(stream_, gs.f32(), us.f32(), n, si, limit, nullptr, ref, as.f32());
    linear(as, s.w2, LinearKind::kQuantized, ys);
}

}  // namespace dsv4::cuda
