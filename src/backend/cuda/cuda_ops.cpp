// CudaBackend ops: argument checks and launches (the kernels are in kernels_*.cu). Ops enqueue on the backend's
// stream and return without synchronising; errors of a launch are reported at once, device-side index errors at the
// next synchronisation.
#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_bf16_gemm.h"
#include "backend/cuda/kernels_block_attention.h"
#include "backend/sample_rows_math.h"
#include "core/error.h"

namespace dsv4::cuda {
namespace {

int scoring_function(const std::string& name) {
    if (name == "sqrtsoftplus") return 0;
    if (name == "sigmoid") return 1;
    return 2;  // softmax
}

// linears' passes that share one transform of x (an FP8 quantization, a bf16 copy): the targets not yet done whose
// path (path_of(w, m)) is of a family (in_family) and that take all of x, as many rows as x has, run from one
// transform: make(m, k) for the first of them, run(path, w, y) for each; one of another width than the first is left
// for a later pass.
template <typename PathOf, typename InFamily, typename Make, typename Run>
void share_x_transform(const Tensor& x, std::span<const LinearTarget> targets, std::vector<bool>& done, PathOf path_of,
                       InFamily in_family, Make make, Run run) {
    int64_t k = 0;
    for (size_t i = 0; i < targets.size(); ++i) {
        const WeightRef& w = *targets[i].w;
        const int64_t m = x.numel() / std::max<int64_t>(w.cols, 1);
        if (done[i] || x.numel() != m * w.cols || targets[i].y.numel() != m * w.rows || m != x.size(0) ||
            (k != 0 && w.cols != k)) {
            continue;
        }
        const LinearPath path = path_of(w, m);
        if (!in_family(path)) continue;
        if (k == 0) {
            make(m, w.cols);
            k = w.cols;
        }
        run(path, w, targets[i].y.f32());
        done[i] = true;
    }
}

}  // namespace

void CudaBackend::launched(const char* op, int kernels) {
    check(cudaGetLastError(), op);
    launches_ += kernels;
    if (op_profiling_) record_mark(op);  // per-op timing: the interval ending here belongs to this op
}

void CudaBackend::embed(const WeightRef& table, Tensor x) {
    launch_embed(stream_, meta_, static_cast<const uint16_t*>(table.data), x.size(2), static_cast<int>(x.size(1)),
                 x.f32());
    launched("embed");
}

void CudaBackend::rms_norm(const Tensor& x, const VecRef* weight, float eps, Tensor y) {
    const int64_t k = x.size(-1);
    launch_rms_norm(stream_, x.f32(), weight != nullptr ? weight->data : nullptr, x.numel() / k, k, eps, reference(),
                    y.f32());
    launched("rms_norm");
}

void CudaBackend::rope(Tensor x, const RopeParams& rope, bool inverse) {
    launch_rope(stream_, meta_, x.f32(), static_cast<int>(x.size(1)), static_cast<int>(x.size(2)), rope.rope_dim,
                inv_freq(rope), inverse, reference());
    launched("rope");
}

void CudaBackend::norm_rope(Tensor x, const VecRef* weight, float eps, const RopeParams& rope) {
    DSV4_CHECK(x.rank == 3, "norm_rope: x must be [N, heads, head_dim], not of rank {}", x.rank);
    const int64_t dim = x.size(2);
    DSV4_CHECK(rope.rope_dim % 2 == 0 && rope.rope_dim <= dim && (weight == nullptr || weight->n == dim),
               "norm_rope: x [N, heads, {}] with rope dims {} and a weight of {}", dim, rope.rope_dim,
               weight != nullptr ? weight->n : 0);
    launch_norm_rope(stream_, meta_, x.f32(), weight != nullptr ? weight->data : nullptr, static_cast<int>(x.size(1)),
                     static_cast<int>(dim), rope.rope_dim, eps, inv_freq(rope), reference());
    launched("norm_rope");
}

void CudaBackend::norm_ropes(std::span<const NormRopeTarget> targets, float eps) {
    DSV4_CHECK(targets.size() <= static_cast<size_t>(kMaxNormRopeTargets), "norm_ropes: {} targets, at most {}",
               targets.size(), kMaxNormRopeTargets);
    NormRopesParams p;
    p.eps = eps;
    for (const NormRopeTarget& t : targets) {
        DSV4_CHECK(t.x.rank == 3 && t.x.size(0) == meta_.n_tokens, "norm_ropes: x must be [{} tokens, heads, dim]",
                   meta_.n_tokens);
        const int64_t dim = t.x.size(2);
        const int rope_dim = t.rope != nullptr ? t.rope->rope_dim : 0;
        DSV4_CHECK(rope_dim % 2 == 0 && rope_dim <= dim && (t.weight == nullptr || t.weight->n == dim),
                   "norm_ropes: x [N, heads, {}] with rope dims {} and a weight of {}", dim, rope_dim,
                   t.weight != nullptr ? t.weight->n : 0);
        NormRopeRows& rows = p.targets[p.n++];
        rows.x = t.x.f32();
        rows.weight = t.weight != nullptr ? t.weight->data : nullptr;
        rows.heads = static_cast<int>(t.x.size(1));
        rows.dim = static_cast<int>(dim);
        rows.rope_dim = rope_dim;
        rows.inv_freq = t.rope != nullptr ? inv_freq(*t.rope) : nullptr;
        if (t.window_layer >= 0 && window_rows_early(t.x, t.window_layer)) {
            rows.ring = layers_[t.window_layer].ring;
            rows.ring_format = kv_format_;
            rows.ring_rows = ring_rows_;
            ring_written_layer_ = t.window_layer;
        }
    }
    launch_norm_ropes(stream_, meta_, p, reference());
    launched("norm_rope");
}

bool CudaBackend::one_token_per_sequence_window() const {
    return meta_.n_tokens == meta_.n_seqs && model_.sliding_window <= ring_rows_;
}

// Whether norm_ropes stores a step's K=V rows x [N, 1, dim] of `layer` into the ring itself: encoded rows (float32
// rows are attention's own input), one token a sequence (its slot held the position a window back, which no query of
// the step reads) and not reference numerics (kv_cache_sim rounds the rows after the norm).
bool CudaBackend::window_rows_early(const Tensor& x, int layer) const {
    return kv_format_.dtype != kRowF32 && !reference() && one_token_per_sequence_window() && x.size(1) == 1 &&
           x.size(2) == kv_format_.dim && layer >= 0 && layer < static_cast<int>(layers_.size());
}

void CudaBackend::scale(Tensor x, float factor) {
    launch_scale(stream_, x.f32(), x.numel(), factor);
    launched("scale");
}

void CudaBackend::round_bf16(Tensor x) {
    launch_round_bf16(stream_, x.f32(), x.numel());
    launched("round_bf16");
}

void CudaBackend::gather_rows(const Tensor& x, std::span<const int32_t> rows, Tensor y) {
    for (int32_t r : rows) DSV4_CHECK(r >= 0 && r < x.size(0), "gather_rows: row {} outside [0, {})", r, x.size(0));
    if (rows.empty()) return;
    // The step's logit rows and source rows were uploaded with its metadata; other rows are uploaded here.
    const int32_t* dev_rows = nullptr;
    if (std::equal(rows.begin(), rows.end(), host_logit_rows_.begin(), host_logit_rows_.end())) {
        dev_rows = logit_rows_dev_;
    } else if (std::equal(rows.begin(), rows.end(), host_source_rows_.begin(), host_source_rows_.end())) {
        dev_rows = source_rows_dev_;
    } else {
        DSV4_CHECK(!capturing_,
                   "gather_rows: rows other than the step's logit or source rows cannot be recorded in a graph");
        auto* copy = static_cast<int32_t*>(arena_.take(rows.size() * sizeof(int32_t)));
        DSV4_CUDA(cudaMemcpyAsync(copy, rows.data(), rows.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
        dev_rows = copy;
    }
    launch_gather_rows(stream_, x.f32(), dev_rows, static_cast<int64_t>(rows.size()), x.numel() / x.size(0), y.f32());
    launched("gather_rows");
}

static_assert(kArgmaxNoChoice == kNoArgmax);

void CudaBackend::argmax_rows(const Tensor& x, Tensor out) {
    launch_argmax_rows(stream_, x.f32(), x.size(0), argmax_row_width(x, out), out.i32());
    launched("argmax_rows");
}

// A copy of host values in step scratch (null for none).
template <typename T>
const T* CudaBackend::upload_scratch(std::span<const T> values) {
    if (values.empty()) return nullptr;
    auto* copy = static_cast<T*>(arena_.take(values.size_bytes()));
    DSV4_CUDA(cudaMemcpyAsync(copy, values.data(), values.size_bytes(), cudaMemcpyHostToDevice, stream_));
    return copy;
}

void CudaBackend::sample_rows(const Tensor& logits, const SampleRowsArgs& args, Tensor out, const Tensor* logprobs,
                              const Tensor* probes) {
    const int64_t vocab = check_sample_rows(logits, args, out, logprobs, probes);
    if (args.draws.empty()) return;
    DSV4_CHECK(!capturing_, "sample_rows: draws are chosen per step and cannot be recorded in a graph");
    cuda::SampleRowsDev p;
    p.logits = logits.f32();
    p.vocab = vocab;
    p.draws = upload_scratch(args.draws);
    p.draw_count = static_cast<int64_t>(args.draws.size());
    p.edits = upload_scratch(args.edits);
    p.masks = upload_scratch(args.masks);
    const bool processed = std::any_of(args.draws.begin(), args.draws.end(), draw_processes_row);
    if (processed) p.processed = scratch(static_cast<size_t>(p.draw_count * vocab));
    p.out = out.i32();
    if (logprobs != nullptr) p.logprobs = static_cast<DrawLogprobs*>(logprobs->data);
    if (probes != nullptr) p.probes = static_cast<ProbeMasses*>(probes->data);
    launch_sample_rows(stream_, p);
    launched("sample_rows");
}

void CudaBackend::kv_cache_sim(Tensor kv, int nope_dims) {
    if (!reference()) return;
    const int64_t dim = kv.size(-1);
    launch_kv_cache_sim(stream_, kv.f32(), kv.numel() / dim, static_cast<int>(dim), nope_dims,
                        fp8_quant_dev(fp8_.kv_rows));
    launched("kv_cache_sim");
}

void CudaBackend::indexer_query_sim(Tensor q) {
    if (!reference()) return;
    const int64_t dim = q.size(-1);
    DSV4_CHECK(dim > 0 && (dim & (dim - 1)) == 0, "indexer_query_sim: index head dim {} is not a power of two", dim);
    launch_indexer_query_sim(stream_, q.f32(), q.numel() / dim, static_cast<int>(dim));
    launched("indexer_query_sim");
}

void CudaBackend::hc_pre(const Tensor& x, const MhcWeights& w, int sinkhorn_iters, float hc_eps, float norm_eps,
                         Tensor u, Tensor post, Tensor comb) {
    const int64_t hc = x.size(1);
    DSV4_CHECK(hc <= kMaxHcStreams, "hc_mult {} exceeds the CUDA kernels' limit {}", hc, kMaxHcStreams);
    const int64_t n = x.size(0), d = x.size(2), n_mix = (2 + hc) * hc;
    float* raw = mhc_mixes(x, w.fn, n_mix);
    launch_hc_pre(stream_, x.f32(), raw, n, static_cast<int>(hc), d, w, sinkhorn_iters, hc_eps, norm_eps, reference(),
                  u.f32(), post.f32(), comb.f32());
    launched("hc_pre");
}

void CudaBackend::add_to_streams(Tensor x, const Tensor& y) {
    DSV4_CHECK(x.dtype == DType::kF32 && y.dtype == DType::kF32 && x.numel() == y.numel() * x.size(1),
               "add_to_streams: x [{}] and y [{}] do not match", x.numel(), y.numel());
    launch_add_to_streams(stream_, x.f32(), y.f32(), x.size(0), static_cast<int>(x.size(1)), x.size(2), reference());
    launched("add_to_streams");
}

void CudaBackend::hc_post(Tensor x, const Tensor& y, const Tensor& post, const Tensor& comb) {
    launch_hc_post(stream_, x.f32(), y.f32(), post.f32(), comb.f32(), x.size(0), static_cast<int>(x.size(1)), x.size(2),
                   reference());
    launched("hc_post");
}

void CudaBackend::hc_head(const Tensor& x, const HcHeadWeights& w, float hc_eps, float norm_eps, Tensor y) {
    const int64_t hc = x.size(1);
    DSV4_CHECK(hc <= kMaxHcStreams, "hc_mult {} exceeds the CUDA kernels' limit {}", hc, kMaxHcStreams);
    float* raw = mhc_mixes(x, w.fn, hc);
    launch_hc_head(stream_, x.f32(), raw, x.size(0), static_cast<int>(hc), x.size(2), w, hc_eps, norm_eps, reference(),
                   y.f32());
    launched("hc_head");
}

void CudaBackend::hc_post_pre(Tensor x, const HcPostInputs* prev, const MhcWeights& w, const VecRef& norm,
                              int sinkhorn_iters, float hc_eps, float norm_eps, Tensor u, Tensor post, Tensor comb) {
    const int64_t n = x.size(0), hc = x.size(1), d = x.size(2);
    if (!fast() || n > kHcBoundaryTokens) {  // exact and reference numerics keep the ops' own arithmetic
        ModelOps::hc_post_pre(x, prev, w, norm, sinkhorn_iters, hc_eps, norm_eps, u, post, comb);
        return;
    }
    DSV4_CHECK(hc <= kMaxHcStreams, "hc_mult {} exceeds the CUDA kernels' limit {}", hc, kMaxHcStreams);
    DSV4_CHECK(norm.n == d && w.fn.n == (2 + hc) * hc * hc * d, "hc_post_pre: norm [{}] or fn [{}] do not fit D = {}",
               norm.n, w.fn.n, d);
    HcBoundaryParams p;
    p.x = x.f32();
    p.n = n;
    p.hc = static_cast<int>(hc);
    p.d = d;
    if (prev != nullptr) {
        p.prev_y = prev->y.f32();
        p.prev_post = prev->post.f32();
        p.prev_comb = prev->comb.f32();
    }
    p.w = w;
    p.norm_weight = norm.data;
    p.iters = sinkhorn_iters;
    p.hc_eps = hc_eps;
    p.norm_eps = norm_eps;
    p.partial = scratch(static_cast<size_t>(hc_boundary_partials(n, p.hc, d)));
    p.arrivals = hc_arrivals_;
    p.u = u.f32();
    p.post = post.f32();
    p.comb = comb.f32();
    launch_hc_boundary(stream_, p);
    launched("hc_post_pre");
}

float* CudaBackend::mhc_mixes(const Tensor& x, const VecRef& fn, int64_t n_mix) {
    // raw mixes = fn . flattened streams: split over the width (many blocks at any token count); odd widths take a
    // GEMV over the float32 fn rows; reference numerics the double-accumulating linear kernel.
    const int64_t n = x.size(0), width = x.numel() / n;
    float* raw = scratch(static_cast<size_t>(n * n_mix));
    if (hc_mixes_supported(width) && !reference()) {
        float* partial = scratch(static_cast<size_t>(hc_mixes_partials(n, width, static_cast<int>(n_mix))));
        launch_hc_mixes(stream_, x.f32(), n, width, fn.data, static_cast<int>(n_mix), partial, raw);
        launched("hc mixes", 2);
        return raw;
    }
    WeightRef w;
    w.format = WeightFormat::kF32;
    w.rows = n_mix;
    w.cols = width;
    w.data = fn.data;
    if (n <= kMaxGemvRows && gemv_supported(w.format, width, n) && !reference()) {
        launch_gemv(stream_, w, x.f32(), width, n, raw, n_mix, false, 1, 0, stream_linears_);
    } else {
        launch_linear(stream_, w, 0, n_mix, 1, x.f32(), width, 0, n, raw, n_mix, false, reference());
    }
    launched("hc mixes");
    return raw;
}

const float* CudaBackend::quantized_activations(const Tensor& x, int64_t k) {
    float* out = scratch(static_cast<size_t>(x.numel()));
    launch_act_quant(stream_, x.f32(), out, x.numel() / k, k, fp8_quant_dev(fp8_.activations));
    launched("act_quant");
    return out;
}

void CudaBackend::linear(const Tensor& x, const WeightRef& w, LinearKind kind, Tensor y) {
    const int64_t m = x.numel() / w.cols;
    DSV4_CHECK(x.numel() == m * w.cols && y.numel() == m * w.rows, "linear: x has {} elements, y {}, weight [{}, {}]",
               x.numel(), y.numel(), w.rows, w.cols);
    const LinearPath path = choose_linear_path({numerics_, w, m, w.cols}, tuning_, tuning_.forced_linear);
    if (path == LinearPath::kFp8Lt || path == LinearPath::kFp8Wgmma) {  // FP8 tensor cores
        linear_fp8(path, quantize_fp8(x.f32(), w.cols, m, w.cols), 0, w, y.f32(), w.rows);
        return;
    }
    if (path == LinearPath::kFp8Gemv) {  // decode sizes, FP8 tensor cores
        const Fp8GemvTarget target{w, x.f32(), y.f32(), w.rows};
        fp8_gemv({&target, 1}, m, w.cols, x.f32(), w.cols, w.cols);
        return;
    }
    if (path == LinearPath::kBf16Lt) {  // prefill sizes, bf16 weights
        linear_bf16_lt(bf16_rows(x.f32(), m, w.cols), x.f32(), m, w, y.f32());
        return;
    }
    if (path == LinearPath::kBf16Gemv) {  // decode sizes, bf16 tensor cores
        const Bf16GemvTarget target{w, y.f32(), w.rows};
        bf16_gemv({&target, 1}, m, w.cols, x.f32(), w.cols);
        return;
    }
    const float* in = x.f32();
    if (reference() && kind == LinearKind::kQuantized) in = quantized_activations(x, w.cols);
    const bool round_out = reference() && kind != LinearKind::kF32Out;
    if (path == LinearPath::kGemmBf16) {  // tensor cores; K split where the grid is small
        const int splits = options_.gemm_split_k ? gemm_bf16_splits(w.rows, m, w.cols) : 1;
        float* partial = splits > 1 ? scratch(static_cast<size_t>(splits * m * w.rows)) : nullptr;
        launch_gemm_bf16(stream_, w, in, w.cols, m, y.f32(), w.rows, round_out, splits, partial);
    } else if (path == LinearPath::kGemv) {
        launch_gemv(stream_, w, in, w.cols, m, y.f32(), w.rows, round_out, 1, 0, stream_linears_);  // decode sizes
    } else {  // reference numerics always: double accumulation
        launch_linear(stream_, w, 0, w.rows, 1, in, w.cols, 0, m, y.f32(), w.rows, round_out, reference());
    }
    launched("linear");
}

void CudaBackend::linears(const Tensor& x, std::span<const LinearTarget> targets) {
    // The targets on the FP8 GEMV that share a width go out in one launch, and so do those on the bf16 GEMV (the same
    // per-row arithmetic as one launch each). One vector: the targets whose float32 GEMVs share a format, dialect and
    // width go out in one streamed launch; any other target, or a list the streamed GEMV refuses, one by one.
    std::vector<bool> done(targets.size(), false);
    // The targets not yet done whose path is `path` and whose width is the first such target's: marked done and
    // handed to `take`; returns that width (0: none).
    auto take_same_width = [&](LinearPath path, auto&& take) {
        int64_t k = 0;
        for (size_t i = 0; i < targets.size(); ++i) {
            const WeightRef& w = *targets[i].w;
            const int64_t m = x.numel() / std::max<int64_t>(w.cols, 1);
            if (done[i] || x.numel() != m * w.cols || targets[i].y.numel() != m * w.rows || (k != 0 && w.cols != k) ||
                choose_linear_path({numerics_, w, m, w.cols}, tuning_, tuning_.forced_linear) != path) {
                continue;
            }
            take(w, targets[i].y.f32());
            k = w.cols;
            done[i] = true;
        }
        return k;
    };
    std::vector<Fp8GemvTarget> fp8;
    const int64_t fp8_k = take_same_width(LinearPath::kFp8Gemv, [&](const WeightRef& w, float* y) {
        fp8.push_back({w, x.f32(), y, w.rows});
    });
    if (fp8_k > 0) fp8_gemv(fp8, x.numel() / fp8_k, fp8_k, x.f32(), fp8_k, fp8_k);  // fp8 not empty
    std::vector<Bf16GemvTarget> bf16;                                               // the same for the bf16 GEMV
    const int64_t bf16_k = take_same_width(LinearPath::kBf16Gemv, [&](const WeightRef& w, float* y) {
        bf16.push_back({w, y, w.rows});
    });
    if (bf16_k > 0) bf16_gemv(bf16, x.numel() / bf16_k, bf16_k, x.f32(), bf16_k);
    // The targets on FP8 tensor cores (prefill sizes) that take all of x share one quantization of it, and those on
    // cuBLASLt's bf16 GEMM one bf16 copy of it (what linear() would make for each of them).
    auto path_of = [&](const WeightRef& w, int64_t m) {
        return choose_linear_path({numerics_, w, m, w.cols}, tuning_, tuning_.forced_linear);
    };
    Fp8Act quantized;
    share_x_transform(
        x, targets, done, path_of, [](LinearPath p) { return p == LinearPath::kFp8Lt || p == LinearPath::kFp8Wgmma; },
        [&](int64_t m, int64_t k) { quantized = quantize_fp8(x.f32(), k, m, k); },
        [&](LinearPath p, const WeightRef& w, float* y) { linear_fp8(p, quantized, 0, w, y, w.rows); });
    const uint16_t* x_bf16 = nullptr;
    share_x_transform(
        x, targets, done, path_of, [](LinearPath p) { return p == LinearPath::kBf16Lt; },
        [&](int64_t m, int64_t k) { x_bf16 = bf16_rows(x.f32(), m, k); },
        [&](LinearPath, const WeightRef& w, float* y) { linear_bf16_lt(x_bf16, x.f32(), x.size(0), w, y); });
    // The multi-weight launch streams its weights (kernels_gemv_stream.cu) whether or not single linears do.
    GemvStreamConfig merged = stream_linears_;
    merged.enabled = stream_linears_.enabled || options_.gemv_merge_linears;
    if (merged.enabled && !reference()) {
        for (size_t i = 0; i < targets.size(); ++i) {
            if (done[i]) continue;
            GemvStreamParams p;
            std::vector<size_t> members;
            for (size_t j = i; j < targets.size() && p.n_multi < kMaxStreamWeights; ++j) {
                const WeightRef& w = *targets[j].w;
                const WeightRef& first = *targets[i].w;
                if (done[j] || x.numel() != w.cols || w.format != first.format || w.fp8_dialect != first.fp8_dialect ||
                    targets[j].y.numel() != w.rows ||
                    choose_linear_path({numerics_, w, 1, w.cols}, tuning_, tuning_.forced_linear) !=
                        LinearPath::kGemv) {
                    continue;
                }
                p.multi[p.n_multi] = w;
                p.multi_y[p.n_multi] = targets[j].y.f32();
                ++p.n_multi;
                members.push_back(j);
            }
            if (members.size() < 2) continue;
            p.x = x.f32();
            if (!launch_gemv_stream(stream_, merged, p)) continue;
            launched("linears");
            for (size_t j : members) done[j] = true;
        }
    }
    for (size_t i = 0; i < targets.size(); ++i) {
        if (!done[i]) linear(x, *targets[i].w, targets[i].kind, targets[i].y);
    }
}

void CudaBackend::bf16_gemv(std::span<const Bf16GemvTarget> targets, int64_t m, int64_t k, const float* x,
                            int64_t x_stride) {
    DSV4_CHECK(bf16_gemv_supported(m, k, x_stride) && reinterpret_cast<uintptr_t>(x) % 16 == 0,
               "bf16_gemv: {} rows of {} inputs, {} floats apart (at most {} rows, k a multiple of {}, x 16-byte "
               "aligned)",
               m, k, x_stride, kMaxBf16GemvRows, kBf16GemvBlock);
    for (size_t first = 0; first < targets.size(); first += kMaxBf16GemvTargets) {
        Bf16GemvParams p;
        p.x = x;
        p.x_stride = x_stride;
        p.m = static_cast<int>(m);
        p.k = k;
        for (size_t i = first; i < std::min(targets.size(), first + kMaxBf16GemvTargets); ++i) {
            const Bf16GemvTarget& t = targets[i];
            DSV4_CHECK(
                t.w.format == WeightFormat::kBF16 && t.w.cols == k && reinterpret_cast<uintptr_t>(t.w.data) % 16 == 0,
                "bf16_gemv: weight [{}, {}] against {} inputs, or not a 16-byte aligned bf16 weight", t.w.rows,
                t.w.cols, k);
            p.targets[p.n++] = t;
        }
        launch_bf16_gemv(stream_, p);
        launched("bf16 gemv");
    }
}

const uint16_t* CudaBackend::bf16_rows(const float* x, int64_t rows, int64_t cols) {
    auto* out = reinterpret_cast<uint16_t*>(scratch(static_cast<size_t>((rows * cols + 1) / 2)));
    launch_to_bf16_rows(stream_, x, cols, rows, cols, out);
    launched("bf16 act round");
    return out;
}

void CudaBackend::linear_bf16_lt(const uint16_t* x, const float* x_f32, int64_t m, const WeightRef& w, float* y) {
    Bf16LtGemm g;
    g.x = x;
    g.x_stride = w.cols;
    g.m = m;
    g.w = w;
    g.y = y;
    g.y_stride = w.rows;
    if (bf16_lt_->run(stream_, g, side_.active ? 1 : 0)) {
        launched("bf16 linear (cuBLASLt)");
        return;
    }
    launch_gemm_bf16(stream_, w, x_f32, w.cols, m, y, w.rows, false);  // no algorithm: the same roundings on ours
    launched("linear");
}

void CudaBackend::grouped_linear(const Tensor& x, const WeightRef& w, int groups, Tensor y) {
    const int64_t n = x.size(0), k = w.cols, per_group = w.rows / groups;
    DSV4_CHECK(x.numel() == n * groups * k && y.numel() == n * w.rows, "grouped_linear: shapes do not match");
    // Token t's group g input is x[(t * groups + g) * k ...]; its output rows g * R .. of y[t].
    const LinearPath path = grouped_linear_path(w, groups, n);
    if (path == LinearPath::kFp8Lt || path == LinearPath::kFp8Wgmma) {  // one quantization for all groups
        grouped_linear_fp8(path, quantize_fp8(x.f32(), groups * k, n, groups * k), w, groups, y.f32());
        return;
    }
    if (path == LinearPath::kFp8Gemv) {  // decode sizes: every group in one launch
        std::vector<Fp8GemvTarget> parts;
        for (int g = 0; g < groups; ++g) {
            parts.push_back(
                {weight_rows(w, g * per_group, per_group), x.f32() + g * k, y.f32() + g * per_group, w.rows});
        }
        fp8_gemv(parts, n, k, x.f32(), groups * k, groups * k);
        return;
    }
    if (path == LinearPath::kGemmBf16) {  // tensor cores (prefill, large batches)
        for (int g = 0; g < groups; ++g) {
            launch_gemm_bf16(stream_, weight_rows(w, g * per_group, per_group), x.f32() + g * k, groups * k, n,
                             y.f32() + g * per_group, w.rows, false);
        }
        launched("grouped_linear", groups);
        return;
    }
    if (path == LinearPath::kGemv) {
        // All groups in one launch: a group's GEMV alone is a few blocks (latency-bound at decode sizes).
        launch_gemv(stream_, w, x.f32(), groups * k, n, y.f32(), w.rows, false, groups, k, stream_linears_);
        launched("grouped_linear");
        return;
    }
    launch_linear(stream_, w, 0, per_group, groups, x.f32(), groups * k, k, n, y.f32(), w.rows, reference(),
                  reference());
    launched("grouped_linear");
}

LinearPath CudaBackend::grouped_linear_path(const WeightRef& w, int groups, int64_t n) const {
    const int64_t per_group = w.rows / groups;
    const bool aligned = w.format != WeightFormat::kFp8Block || per_group % w.block_rows == 0;  // group's scale rows
    LinearProblem problem{numerics_, w, n, w.cols, true, aligned};
    problem.w.rows = per_group;
    return choose_linear_path(problem, tuning_, tuning_.forced_linear);
}

void CudaBackend::grouped_linear_fp8(LinearPath path, const Fp8Act& x, const WeightRef& w, int groups, float* y) {
    DSV4_CHECK(x.k == groups * w.cols, "grouped_linear: {} FP8 activations a row for {} groups of {}", x.k, groups,
               w.cols);
    const int64_t per_group = w.rows / groups;
    for (int g = 0; g < groups; ++g) {
        linear_fp8(path, x, g * w.cols, weight_rows(w, g * per_group, per_group), y + g * per_group, w.rows);
    }
}

WeightRef CudaBackend::weight_rows(const WeightRef& w, int64_t row0, int64_t count) {
    WeightRef part = w;
    part.rows = count;
    const auto* base = static_cast<const uint8_t*>(w.data);
    switch (w.format) {
        case WeightFormat::kF32:
            part.data = base + row0 * w.cols * 4;
            break;
        case WeightFormat::kBF16:
            part.data = base + row0 * w.cols * 2;
            break;
        case WeightFormat::kFp8Block:
            DSV4_CHECK(row0 % w.block_rows == 0, "weight_rows: row {} is not on a scale block boundary", row0);
            part.data = base + row0 * w.cols;
            part.scales = w.scales + (row0 / w.block_rows) * w.scale_cols;
            break;
        case WeightFormat::kFp4Row:
            part.data = base + row0 * (w.cols / 2);
            part.scales = w.scales + row0 * w.scale_cols;
            break;
    }
    return part;
}

void CudaBackend::compress(int layer, CompressorRole role, const Tensor& a, const Tensor& g, const CompressorWeights& w,
                           const RopeParams& rope, float norm_eps) {
    DSV4_CHECK(w.head_dim <= kMaxCompressHeadDim && (w.overlap ? 2 : 1) * w.ratio <= kMaxCompressSlots,
               "compress: head_dim {} or ratio {} exceeds the kernel limits", w.head_dim, w.ratio);
    const LayerStateDev& ls = layers_[layer];
    const bool indexer = role == CompressorRole::kIndexer;
    CompressArgs c;
    c.a = a.f32();
    c.g = g.f32();
    c.ape = w.ape.data;
    c.norm = w.norm.data;
    c.pending = indexer ? ls.index_pending : ls.main_pending;
    c.store = indexer ? ls.index_keys : ls.entries;
    c.format = indexer ? key_format_ : kv_format_;
    c.inv_freq = inv_freq(rope);
    c.rows = indexer ? ls.index_rows : ls.main_rows;
    c.width = w.overlap ? 2 * w.head_dim : w.head_dim;
    c.head_dim = w.head_dim;
    c.ratio = w.ratio;
    c.per_block = ls.per_block;
    c.rope_dim = rope.rope_dim;
    c.overlap = w.overlap;
    c.indexer = indexer;
    c.reference = reference();
    c.norm_eps = norm_eps;
    launch_compress(stream_, meta_, c);
    launched("compress", 2);
}

void CudaBackend::compressors(int layer, const Tensor& x, std::span<const CompressTarget> targets,
                              const RopeParams& rope, float norm_eps) {
    const bool beside = std::all_of(targets.begin(), targets.end(), [&](const CompressTarget& t) {
        return side_stream_takes(x.size(0), {&t.w->wkv, &t.w->wgate});
    });
    if (!beside) return ModelOps::compressors(layer, x, targets, rope, norm_eps);
    on_side_stream([&] { ModelOps::compressors(layer, x, targets, rope, norm_eps); });  // x is ready
}

// Decode-sized steps: where every linear is a GEMV (measured: the side branch of the decode graph). Larger steps:
// with CudaOptions::side_stream_prefill, whatever their linears run on.
bool CudaBackend::side_stream_takes(int64_t tokens, std::initializer_list<const WeightRef*> weights) const {
    if (side_.stream == nullptr || op_profiling_) return false;
    if (tokens > kBesideTokens) return options_.side_stream_prefill;
    return std::all_of(weights.begin(), weights.end(), [&](const WeightRef* w) { return on_gemv(*w, tokens, false); });
}

void CudaBackend::store_window(int layer, const Tensor& kv) {
    if (ring_written_layer_ == layer) {  // norm_ropes or attention wrote this step's rows already
        ring_written_layer_ = -1;
        return;
    }
    launch_store_window(stream_, meta_, kv.f32(), kv_format_, ring_rows_, layers_[layer].ring);
    launched("store_window");
}

void CudaBackend::attention(int layer, const LayerConfig& lc, const Tensor& q, const Tensor& kv, const VecRef& sinks,
                            const Tensor* topk, float scale, Tensor out) {
    attention_impl(layer, lc, q, kv, sinks, topk, scale, out, false);
}

void CudaBackend::attention_unrotated(int layer, const LayerConfig& lc, const Tensor& q, const Tensor& kv,
                                      const VecRef& sinks, const Tensor* topk, float scale, Tensor out) {
    attention_impl(layer, lc, q, kv, sinks, topk, scale, out, true);
}

// Fast numerics with the wide kernel at one key split a token (prefill sizes) and CudaOptions::fused_query_norm: the
// queries normed and rotated as the kernel stages them (the rows kernel's bits: norm_rope_row.cuh), with no norm_rope
// pass over q. With several splits (batched decode) each split's block would norm the same rows again: norm_rope.
void CudaBackend::normed_attention_unrotated(int layer, const LayerConfig& lc, Tensor q, const Tensor& kv,
                                             const VecRef& sinks, const Tensor* topk, float scale, float norm_eps,
                                             Tensor out) {
    if (!query_norm_applies(lc, q, topk)) {
        return ModelOps::normed_attention_unrotated(layer, lc, q, kv, sinks, topk, scale, norm_eps, out);
    }
    const QueryNorm norm{norm_eps, &lc.rope};
    attention_impl(layer, lc, q, kv, sinks, topk, scale, out, true, &norm);
}

bool CudaBackend::query_norm_applies(const LayerConfig& lc, const Tensor& q, const Tensor* topk) const {
    const int64_t dim = q.size(2);
    return options_.fused_query_norm && wide_attention(q) &&
           mqa_wide_splits(q.size(0), attention_max_keys(lc, topk)) == 1 && dim % 32 == 0 && dim <= kMaxNormRowDim &&
           lc.rope.rope_dim % 2 == 0 && lc.rope.rope_dim <= std::min<int64_t>(dim, kMaxQueryNormRopeDims);
}

// The mma.sync wide kernel only (the wgmma one, where chosen, keeps its float outputs: another summation order).
bool CudaBackend::attention_fp8_out_applies(const LayerConfig& lc, const Tensor& q, const Tensor* topk,
                                            LinearPath path) const {
    return options_.attention_fp8_out && !options_.mqa_wgmma &&
           (path == LinearPath::kFp8Lt || path == LinearPath::kFp8Wgmma) && query_norm_applies(lc, q, topk) &&
           mqa_wide_fp8_out_supported(kv_format_, static_cast<int>(q.size(2)), static_cast<int>(q.size(1)));
}

// Where the wide kernel norms the queries and wo_a runs on FP8 tensor cores (CudaOptions::attention_fp8_out): the
// kernel writes its outputs as wo_a's FP8 activations, so no float outputs are written and read back by a
// quantization pass; `out` is left as it was. Otherwise the two ops.
void CudaBackend::normed_attention_projected(int layer, const LayerConfig& lc, Tensor q, const Tensor& kv,
                                             const VecRef& sinks, const Tensor* topk, float scale, float norm_eps,
                                             Tensor out, const WeightRef& wo_a, int groups, Tensor z) {
    const int64_t n = q.size(0), k = q.size(1) * q.size(2);
    const LinearPath path = grouped_linear_path(wo_a, groups, n);
    if (k != groups * wo_a.cols || z.numel() != n * wo_a.rows || !attention_fp8_out_applies(lc, q, topk, path)) {
        return ModelOps::normed_attention_projected(layer, lc, q, kv, sinks, topk, scale, norm_eps, out, wo_a, groups,
                                                    z);
    }
    const Fp8Act x = alloc_fp8_zero_padded(n, k);
    const QueryNorm norm{norm_eps, &lc.rope};
    attention_impl(layer, lc, q, kv, sinks, topk, scale, out, true, &norm, &x);
    grouped_linear_fp8(path, x, wo_a, groups, z.f32());
}

// Key bound of a step's queries: window + (CSA picks | HCA entries, bucketed like the indexer).
int CudaBackend::attention_max_keys(const LayerConfig& lc, const Tensor* topk) const {
    int max_keys = model_.sliding_window;
    if (lc.compress_ratio == 0) return max_keys;
    const bool csa = lc.attention == AttentionType::kCsa && topk != nullptr;
    return max_keys +
           (csa ? static_cast<int>(topk->size(1)) : static_cast<int>(indexer_entry_bucket(lc.compress_ratio)));
}

bool CudaBackend::wide_attention(const Tensor& q) const {
    const int dim = static_cast<int>(q.size(2)), heads = static_cast<int>(q.size(1));
    return fast() && mqa_attention_supported(kv_format_, dim) && options_.mqa_wide && q.size(0) >= kMqaWideMinTokens &&
           mqa_wide_supported(kv_format_, dim, heads);
}

void CudaBackend::attention_impl(int layer, const LayerConfig& lc, const Tensor& q, const Tensor& kv,
                                 const VecRef& sinks, const Tensor* topk, float scale, Tensor out, bool unrotate,
                                 const QueryNorm* norm, const Fp8Act* fp8_out) {
    join_side_stream();  // the compressors' entries and the indexer's picks, where run beside
    const int64_t dim = q.size(2);
    DSV4_CHECK(dim <= kMaxAttentionDim, "attention: head_dim {} exceeds the kernel limit {}", dim, kMaxAttentionDim);
    DSV4_CHECK(dim == kv_format_.dim, "attention: head_dim {} differs from the state's {}", dim, kv_format_.dim);
    AttentionArgs a;
    a.q = q.f32();
    int kernels = 1;  // launched here: the attention kernel, an encode or ring write, then the split merge
    // This step's rows as the ring stores them, so a query reads the same values whether its keys were fed in this
    // step or an earlier one (float32: the kv tensor itself).
    if (kv_format_.dtype == kRowF32) {
        a.kv = reinterpret_cast<const uint8_t*>(kv.f32());
    } else if (ring_written_layer_ == layer) {  // norm_ropes stored the rows
        a.kv = nullptr;
    } else if (one_token_per_sequence_window()) {
        // One token a sequence (decode): its row goes to the ring now, store_window's write done early (the slot it
        // takes held the position one window back, which no query of this step reads), and attention reads it there:
        // one launch instead of an encode here and the ring write after. The same encoded bytes either way.
        launch_store_window(stream_, meta_, kv.f32(), kv_format_, ring_rows_, layers_[layer].ring);
        ring_written_layer_ = layer;
        a.kv = nullptr;
        ++kernels;
    } else {
        auto* encoded = static_cast<uint8_t*>(arena_.take(static_cast<size_t>(kv.size(0)) * kv_format_.bytes));
        launch_encode_rows(stream_, kv.f32(), kv.size(0), kv_format_, encoded);
        a.kv = encoded;
        ++kernels;
    }
    a.format = kv_format_;
    a.ring = layers_[layer].ring;
    a.store = layers_[layer].entries;
    a.sinks = sinks.data;
    a.topk = topk != nullptr ? topk->i32() : nullptr;
    a.out = out.f32();
    a.heads = static_cast<int>(q.size(1));
    a.dim = static_cast<int>(dim);
    a.window = model_.sliding_window;
    a.ring_rows = ring_rows_;
    a.per_block = layers_[layer].per_block;
    a.ratio = lc.compress_ratio;
    a.topk_k = topk != nullptr ? static_cast<int>(topk->size(1)) : 0;
    a.csa = lc.attention == AttentionType::kCsa && topk != nullptr;  // none: every complete entry (picks_all)
    a.scale = scale;
    a.reference = reference();
    if (reference()) {
        launch_attention(stream_, meta_, a);  // the reference's two passes (global max, bf16 probabilities)
        launched("attention", kv_format_.dtype == kRowF32 ? 1 : 2);
        if (unrotate) rope(out, lc.rope, true);
        return;
    }
    if (unrotate) {  // in the split merge
        DSV4_CHECK(lc.rope.rope_dim % 2 == 0 && lc.rope.rope_dim <= a.dim, "attention: {} rope dims of a {}-dim head",
                   lc.rope.rope_dim, a.dim);
        a.unrotate_inv_freq = inv_freq(lc.rope);
        a.unrotate_dims = lc.rope.rope_dim;
    }
    const int max_keys = attention_max_keys(lc, topk);
    const bool mqa = fast() && mqa_attention_supported(kv_format_, a.dim);  // tensor cores
    DSV4_CHECK(norm == nullptr || wide_attention(q), "attention: queries normed in a kernel that does not norm them");
    if (wide_attention(q)) {  // every head in one block; one split: its own merge
        if (norm != nullptr) {
            a.norm_queries = true;
            a.query_eps = norm->eps;
            a.query_inv_freq = inv_freq(*norm->rope);
            a.query_rope_dims = norm->rope->rope_dim;
        }
        MqaWideLaunch w;
        w.segment_keys = options_.mqa_wide_segment;
        w.wgmma = options_.mqa_wgmma;
        w.splits = mqa_wide_splits(q.size(0), max_keys);
        w.keys_per_split = mqa_wide_keys_per_split(q.size(0), max_keys);
        if (fp8_out != nullptr) {
            DSV4_CHECK(w.splits == 1 && !w.wgmma && unrotate && norm != nullptr &&
                           mqa_wide_fp8_out_supported(kv_format_, a.dim, a.heads),
                       "attention: FP8 outputs from a kernel that does not write them");
            w.out_codes = fp8_out->codes;
            w.out_scales = fp8_out->scales;
            w.out_rows_pad = fp8_out->rows_pad;
        }
        if (w.splits > 1) {
            const int64_t parts = q.size(0) * a.heads * w.splits;
            w.part_acc = scratch(static_cast<size_t>(parts * dim));
            w.part_ml = scratch(static_cast<size_t>(parts * 2));
        }
        launch_attention_mqa_wide(stream_, meta_, a, w);
        launched("attention", kernels + (w.splits > 1 ? 1 : 0));
        return;
    }
    a.fixed_keys_per_split = options_.attention_keys_per_split;
    const int splits = mqa ? mqa_attention_splits(q.size(0), a.heads, max_keys, a.fixed_keys_per_split)
                           : attention_splits(q.size(0), a.heads, max_keys, a.fixed_keys_per_split);
    const int64_t parts = q.size(0) * a.heads * splits;
    float* part_acc = scratch(static_cast<size_t>(parts * dim));
    float* part_ml = scratch(static_cast<size_t>(parts * 2));
    if (mqa) {
        launch_attention_mqa(stream_, meta_, a, max_keys, part_acc, part_ml);
    } else {
        launch_attention_split(stream_, meta_, a, max_keys, part_acc, part_ml);
    }
    launched("attention", kernels + 1);  // and the split merge
}

void CudaBackend::block_attention(int layer, const Tensor& q, const Tensor& kv, const VecRef& sinks, float scale,
                                  Tensor out) {
    const int64_t dim = q.size(2);
    DSV4_CHECK(dim <= kMaxAttentionDim, "block_attention: head_dim {} exceeds the kernel limit {}", dim,
               kMaxAttentionDim);
    DSV4_CHECK(dim == kv_format_.dim, "block_attention: head_dim {} differs from the state's {}", dim, kv_format_.dim);
    DSV4_CHECK(layer >= 0 && layer < static_cast<int>(layers_.size()),
               "block_attention: state layer {} outside [0, {})", layer, layers_.size());
    DSV4_CHECK(model_.sliding_window <= ring_rows_, "block_attention: window {} exceeds the ring's {} rows",
               model_.sliding_window, ring_rows_);
    AttentionArgs a;
    a.q = q.f32();
    if (kv_format_.dtype == kRowF32) {
        a.kv = reinterpret_cast<const uint8_t*>(kv.f32());
    } else {  // the block rows as the ring would store them, like the step rows of attention()
        auto* encoded = static_cast<uint8_t*>(arena_.take(static_cast<size_t>(kv.size(0)) * kv_format_.bytes));
        launch_encode_rows(stream_, kv.f32(), kv.size(0), kv_format_, encoded);
        a.kv = encoded;
    }
    a.format = kv_format_;
    a.ring = layers_[layer].ring;
    a.sinks = sinks.data;
    a.out = out.f32();
    a.heads = static_cast<int>(q.size(1));
    a.dim = static_cast<int>(dim);
    a.window = model_.sliding_window;
    a.ring_rows = ring_rows_;
    a.scale = scale;
    a.reference = reference();
    launch_block_attention(stream_, meta_, a);
    launched("block_attention", kv_format_.dtype == kRowF32 ? 1 : 2);
}

void CudaBackend::indexer_topk(int layer, const Tensor& q, const Tensor& weights, int ratio, Tensor topk) {
    const int64_t n = q.size(0);
    if (n == 0) return;
    join_side_stream();  // the indexer keys, where the compressors ran beside
    // Entries any query of this step can see, rounded up to a power-of-two bucket (graph shapes); the kernels
    // skip the entries past each query's own count.
    const int64_t max_entries = indexer_entry_bucket(ratio);
    float* scores = scratch(static_cast<size_t>(n * max_entries));
    DSV4_CHECK(q.size(2) == key_format_.dim, "indexer_topk: query dim {} differs from the key dim {}", q.size(2),
               key_format_.dim);
    IndexScoresArgs a;
    a.q = q.f32();
    a.weights = weights.f32();
    a.keys = layers_[layer].index_keys;
    a.key_format = key_format_;
    a.heads = static_cast<int>(q.size(1));
    a.ratio = ratio;
    a.per_block = layers_[layer].per_block;
    a.max_entries = max_entries;
    a.scores = scores;
    a.token_tile = options_.index_token_tile;
    launch_index_scores(stream_, meta_, a, fast(), reference());
    launched("index scores");
    launch_topk(stream_, meta_, scores, max_entries, ratio, static_cast<int>(topk.size(1)), topk.i32());
    launched("indexer topk");
}

// The step's entry bucket bounds every token's eligible entries (and is part of the graph key).
bool CudaBackend::indexer_picks_all(int ratio, int k) const {
    return options_.indexer_all_entries && indexer_entry_bucket(ratio) <= k;
}

void CudaBackend::indexer_picks(int layer, const Tensor& x, const Tensor& q_residual, const IndexerWeights& w,
                                const RopeParams& rope, int ratio, int heads, Tensor topk) {
    if (!side_stream_takes(q_residual.size(0), {&w.wq_b, &w.weights_proj})) {
        return ModelOps::indexer_picks(layer, x, q_residual, w, rope, ratio, heads, topk);
    }
    // After the compressors' side work (the indexer keys), beside the query's up projection; attention joins it.
    on_side_stream([&] { ModelOps::indexer_picks(layer, x, q_residual, w, rope, ratio, heads, topk); });
}

const WeightRef* CudaBackend::expert_table(const MoeWeights& w, int which) {
    const auto key = std::make_pair(static_cast<const void*>(w.experts.data()), which);
    auto it = expert_tables_.find(key);
    if (it != expert_tables_.end()) return it->second;
    std::vector<WeightRef> host;
    for (const ExpertWeights& e : w.experts) host.push_back(which == 0 ? e.w1 : which == 1 ? e.w2 : e.w3);
    auto* dev = static_cast<const WeightRef*>(device_copy(host.data(), host.size() * sizeof(WeightRef)));
    expert_tables_.emplace(key, dev);
    return dev;
}

CudaBackend::ExpertGroups CudaBackend::group_pairs(const Tensor& ids, int64_t pairs, int n_experts) {
    // All on the device (count, plan, scatter), so that a decode graph can record it.
    ExpertGroups g;
    const int rows_per_tile = gemm_tile_rows();
    // Every expert's last tile may be partial: at most pairs / rows_per_tile full tiles plus one per expert.
    const int64_t max_tiles = pairs / rows_per_tile + std::min<int64_t>(pairs, n_experts);
    DSV4_CHECK(max_tiles <= kMaxGemvPairs, "moe: {} expert tiles exceed the grid limit {} (a smaller step is needed)",
               max_tiles, kMaxGemvPairs);
    g.max_tiles = static_cast<int>(max_tiles);
    auto ints = [&](int64_t n) {
        return reinterpret_cast<int32_t*>(scratch(static_cast<size_t>(std::max<int64_t>(n, 1))));
    };
    int32_t* counts = ints(n_experts);
    int32_t* cursor = ints(n_experts);
    int32_t* tile_expert = ints(g.max_tiles);
    int32_t* tile_row0 = ints(g.max_tiles);
    int32_t* tile_rows = ints(g.max_tiles);
    int32_t* tile_count = ints(1);
    launch_count_experts(stream_, meta_, ids.i32(), pairs, n_experts, counts);
    launch_plan_tiles(stream_, counts, n_experts, rows_per_tile, g.max_tiles, cursor, tile_expert, tile_row0, tile_rows,
                      tile_count);
    g.row_ids = ints(pairs);
    launch_scatter_pairs(stream_, ids.i32(), pairs, n_experts, cursor, g.row_ids);
    g.tile_count = tile_count;
    g.tile_expert = tile_expert;
    g.tile_row0 = tile_row0;
    g.tile_rows = tile_rows;
    launched("moe grouping", 3);
    return g;
}

void CudaBackend::route(const Tensor& h, const MoeWeights& w, const ModelConfig& c, RoutingType routing, Tensor weights,
                        Tensor ids) {
    const int64_t n = h.size(0), experts = c.n_routed_experts, k = c.n_experts_per_tok;
    DSV4_CHECK(experts <= kMaxRoutedExperts && k <= kMaxExpertsPerToken,
               "route: {} experts / top-{} exceed the kernel limits", experts, k);
    if (n == 0) return;
    Tensor logits = alloc(DType::kF32, {n, experts});
    linear(h, w.gate, LinearKind::kF32Out, logits);
    const bool hash = routing == RoutingType::kHash;
    launch_route(stream_, meta_, logits.f32(), static_cast<int>(experts), static_cast<int>(k),
                 scoring_function(c.scoring_func), !hash && w.bias.valid() ? w.bias.data : nullptr,
                 hash ? w.tid2eid.data : nullptr, hash, c.norm_topk_prob, static_cast<float>(c.routed_scaling_factor),
                 reference(), weights.f32(), ids.i32());
    launched("route");
}

void CudaBackend::moe(const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids, float limit,
                      Tensor y) {
    const int64_t n = h.size(0), d = h.size(1), k = ids.size(1), pairs = n * k;
    if (n == 0) return;
    const MoePath path = moe_path(h, w, pairs);
    if (path == MoePath::kGroupedFp8) return moe_grouped_fp8(h, w, weights, ids, limit, y);
    if (path == MoePath::kFusedGemv) return moe_fused_decode(h, w, weights, ids, limit, y);
    if (path == MoePath::kPerPairMma) {  // the combine in the down projection's last blocks (weight after W2)
        const MoeCombine combine{weights.f32(), shared_output_beside(h, w, limit), y.f32()};
        moe_pairs_mma(h, w, ids, limit, nullptr, &combine);
        return;
    }
    const bool ref = reference();
    float* routed = scratch(pairs * d);
    moe_pairs(h, w, weights, ids, limit, path, routed);
    const float* shared = shared_output(h, nullptr, w, limit);
    launch_combine(stream_, routed, weights.f32(), shared, n, static_cast<int>(k), d, !ref, ref, y.f32());
    launched("moe combine");
}

const ExpertWeights& CudaBackend::first_resident_expert(const MoeWeights& w) {
    const auto first =
        std::find_if(w.experts.begin(), w.experts.end(), [](const ExpertWeights& e) { return e.w1.valid(); });
    DSV4_CHECK(first != w.experts.end(), "moe: no routed expert is resident on this device");
    return *first;
}

const float* CudaBackend::shared_output(const Tensor& h, const Fp8Act* x, const MoeWeights& w, float limit) {
    if (!w.shared) return nullptr;
    Tensor ys = alloc(DType::kF32, {h.size(0), h.size(1)});
    shared_expert(h, x, *w.shared, limit, ys);
    return ys.f32();
}

// The side stream takes the shared expert when all its linears are FP8 GEMVs: kernels with no state but the split
// counters, which it has its own of (measured so at decode sizes). Not while ops are timed one by one.
bool CudaBackend::shared_expert_on_gemvs(const Tensor& h, const ExpertWeights& s) const {
    const int64_t n = h.size(0);
    return on_gemv(s.w1, n, true) && on_gemv(s.w3, n, true) && on_gemv(s.w2, n, true);
}

bool CudaBackend::on_gemv(const WeightRef& w, int64_t rows, bool fp8_only) const {
    const LinearPath path = choose_linear_path({numerics_, w, rows, w.cols}, tuning_, tuning_.forced_linear);
    return path == LinearPath::kFp8Gemv || (!fp8_only && (path == LinearPath::kGemv || path == LinearPath::kBf16Gemv));
}

const float* CudaBackend::shared_output_beside(const Tensor& h, const MoeWeights& w, float limit) {
    if (!w.shared || side_.stream == nullptr || op_profiling_ || !shared_expert_on_gemvs(h, *w.shared)) {
        return shared_output(h, nullptr, w, limit);
    }
    Tensor ys = alloc(DType::kF32, {h.size(0), h.size(1)});
    on_side_stream([&] { shared_expert(h, nullptr, *w.shared, limit, ys); });  // h is ready
    return ys.f32();
}

void CudaBackend::on_side_stream(const std::function<void()>& launch) {
    DSV4_CUDA(cudaEventRecord(side_.fork, stream_));
    DSV4_CUDA(cudaStreamWaitEvent(side_.stream, side_.fork));
    // Every launch goes to the side stream with its counters; swapped back however launch() ends.
    struct Swap {
        CudaBackend& b;
        explicit Swap(CudaBackend& backend) : b(backend) { swap(); }
        ~Swap() { swap(); }
        void swap() {
            std::swap(b.stream_, b.side_.stream);
            std::swap(b.split_arrivals_, b.side_.split_arrivals);
            b.side_.active = !b.side_.active;
        }
    };
    {
        const Swap on_side(*this);
        launch();
    }
    DSV4_CUDA(cudaEventRecord(side_.join, side_.stream));
    side_.pending = true;
}

void CudaBackend::join_side_stream() {
    if (!side_.pending) return;
    side_.pending = false;
    DSV4_CUDA(cudaStreamWaitEvent(stream_, side_.join));
}

MoePath CudaBackend::moe_path(const Tensor& h, const MoeWeights& w, int64_t pairs) const {
    const ExpertWeights& first = first_resident_expert(w);
    // Decode-sized steps use the GEMV per (token, expert) pair; in fast numerics larger steps group the
    // pairs by expert for tensor-core GEMMs that read each expert's weights once (grouping on the device: graphs too).
    return choose_moe_path({numerics_, first.w1.format, pairs, h.size(1), first.w1.rows, fp8_.activations.dialect},
                           tuning_.moe, tuning_.forced_moe);
}

void CudaBackend::moe_fused_decode(const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids,
                                   float limit, Tensor y) {
    const int64_t n = h.size(0), d = h.size(1), k = ids.size(1), pairs = ids.numel();
    const ExpertWeights& first = first_resident_expert(w);
    const int64_t inter = first.w1.rows;
    const auto n_experts = static_cast<int>(w.experts.size());
    float* act = scratch(pairs * inter);
    MoeUpDecodeParams up;
    up.format = first.w1.format;
    up.w1 = expert_table(w, 0);
    up.w3 = expert_table(w, 2);
    up.n_experts = n_experts;
    up.ids = ids.i32();
    up.pairs = pairs;
    up.k = static_cast<int>(k);
    up.x = h.f32();
    up.d = d;
    up.inter = inter;
    up.limit = limit;
    up.act = act;
    launch_moe_up_decode(stream_, meta_, up);
    const float* shared = shared_output(h, nullptr, w, limit);
    MoeDownDecodeParams down;
    down.format = up.format;
    down.w2 = expert_table(w, 1);
    down.n_experts = n_experts;
    down.ids = ids.i32();
    down.weights = weights.f32();
    down.tokens = n;
    down.k = static_cast<int>(k);
    down.act = act;
    down.inter = inter;
    down.d = d;
    down.shared = shared;
    down.y = y.f32();
    launch_moe_down_decode(stream_, meta_, down);
    launched("moe fused decode", 2);
}

void CudaBackend::moe_pairs(const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids, float limit,
                            MoePath path, float* routed) {
    if (path == MoePath::kPerPairMma) return moe_pairs_mma(h, w, ids, limit, routed, nullptr);
    const int64_t d = h.size(1), k = ids.size(1), pairs = ids.numel();
    const ExpertWeights& first = first_resident_expert(w);
    const int64_t inter = first.w1.rows;
    const auto n_experts = static_cast<int>(w.experts.size());
    const WeightFormat format = first.w1.format;
    const bool ref = reference();
    const float* x = ref ? quantized_activations(h, d) : h.f32();
    float* g = scratch(pairs * inter);
    float* u = scratch(pairs * inter);
    float* act = scratch(pairs * inter);
    const bool grouped = path == MoePath::kGroupedBf16;
    const bool gemv = path == MoePath::kPerPairGemv || path == MoePath::kFusedGemv;
    const ExpertGroups groups = grouped ? group_pairs(ids, pairs, n_experts) : ExpertGroups{};
    auto expert_linear = [&](int which, int x_div, const float* in, int64_t k_in, int64_t rows, float* out) {
        if (grouped) {
            launch_expert_gemm_bf16(stream_, format, expert_table(w, which), rows, groups.max_tiles, groups.tile_count,
                                    groups.tile_expert, groups.tile_row0, groups.tile_rows, groups.row_ids, x_div, in,
                                    k_in, out, rows, ref);
        } else if (gemv) {
            launch_expert_gemv(stream_, meta_, format, first.w1.fp8_dialect, expert_table(w, which), n_experts,
                               ids.i32(), pairs, x_div, in, k_in, rows, ref, out, stream_experts_);
        } else {
            launch_expert_linear(stream_, meta_, expert_table(w, which), n_experts, ids.i32(), pairs, x_div, in, k_in,
                                 rows, ref, ref, out);  // reference numerics always: double accumulation
        }
    };
    expert_linear(0, static_cast<int>(k), x, d, inter, g);
    expert_linear(2, static_cast<int>(k), x, d, inter, u);
    // Reference multiplies the routing weight in before W2 (DeepSeek); exact applies it after (HF).
    launch_swiglu(stream_, g, u, pairs, inter, limit, ref ? weights.f32() : nullptr, ref, act);
    const float* act_in = ref ? quantized_activations(Tensor(act, DType::kF32, {pairs, inter}), inter) : act;
    expert_linear(1, 1, act_in, inter, d, routed);
    launched("moe experts", 4);
}

void CudaBackend::split_sums(ExpertGemvFp4Params& p) {
    const int64_t arrivals = expert_gemv_fp4_arrivals(p.pairs, p.n_weights, p.rows);
    DSV4_CHECK(arrivals <= kSplitArrivals, "moe: {} expert row groups exceed the {} split counters (a smaller step)",
               arrivals, kSplitArrivals);
    p.partials = scratch(static_cast<size_t>(expert_gemv_fp4_partials(p.pairs, p.n_weights, p.rows)));
    p.arrivals = split_arrivals_;
}

void CudaBackend::moe_pairs_mma(const Tensor& h, const MoeWeights& w, const Tensor& ids, float limit, float* routed,
                                const MoeCombine* combine) {
    const int64_t d = h.size(1), k = ids.size(1), pairs = ids.numel();
    const int64_t inter = first_resident_expert(w).w1.rows;
    float* g = scratch(pairs * inter);
    float* u = scratch(pairs * inter);
    ExpertGemvFp4Params up{.tables = {expert_table(w, 0), expert_table(w, 2)},
                           .y = {g, u},
                           .n_weights = 2,
                           .n_experts = static_cast<int>(w.experts.size()),
                           .ids = ids.i32(),
                           .pairs = pairs,
                           .x_div = static_cast<int>(k),
                           .x = h.f32(),
                           .k = d,
                           .rows = inter,
                           .meta = meta_};
    split_sums(up);
    launch_expert_gemv_fp4(stream_, up);
    ExpertGemvFp4Params down = up;  // W2 alone, over SwiGLU(g, u) of each pair, taken as it stages its input
    down.tables[0] = expert_table(w, 1);
    down.tables[1] = nullptr;
    down.y[0] = routed;
    down.y[1] = nullptr;
    down.n_weights = 1;
    down.x_div = 1;
    down.x = g;
    down.swiglu_up = u;
    down.limit = limit;  // the routing weight: in the combine
    down.k = inter;
    down.rows = d;
    if (combine != nullptr) {
        down.combine_y = combine->y;
        down.combine_weights = combine->weights;
        down.combine_shared = combine->shared;
        down.combine_k = static_cast<int>(k);
    }
    split_sums(down);
    join_side_stream();  // the shared expert's output, added in the down projection's combine
    launch_expert_gemv_fp4(stream_, down);
    launched("moe experts (mma)", 2);
}

void CudaBackend::moe_routed(const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids,
                             float limit, Tensor routed) {
    const int64_t d = h.size(1), pairs = ids.numel();
    DSV4_CHECK(routed.numel() == pairs * d && weights.numel() == pairs,
               "moe_routed: {} pairs do not fit routed [{}] / weights [{}]", pairs, routed.numel(), weights.numel());
    if (pairs == 0) return;
    const MoePath path = moe_path(h, w, pairs);
    if (path == MoePath::kGroupedFp8) {  // the routing weight enters before W2 (fused into the up projection)
        const Fp8Act x = quantize_fp8(h.f32(), d, h.size(0), d);
        grouped_fp8_pairs(w, weights, ids, limit, x, routed.f32());
        return;
    }
    moe_pairs(h, w, weights, ids, limit, path, routed.f32());
    if (!reference()) {  // the weight after W2, as moe's combine applies it (one pair per "token")
        launch_combine(stream_, routed.f32(), weights.f32(), nullptr, pairs, 1, d, true, false, routed.f32());
        launched("moe pair weights");
    }
}

void CudaBackend::moe_shared(const Tensor& h, const ExpertWeights& shared, float limit, Tensor y) {
    const int64_t n = h.size(0), d = h.size(1);
    if (n == 0) return;
    const LinearPath p1 = choose_linear_path({numerics_, shared.w1, n, d}, tuning_, tuning_.forced_linear);
    const bool fp8 = p1 == LinearPath::kFp8Lt || p1 == LinearPath::kFp8Wgmma;
    if (fp8) {
        const Fp8Act x = quantize_fp8(h.f32(), d, n, d);
        return shared_expert(h, &x, shared, limit, y);
    }
    shared_expert(h, nullptr, shared, limit, y);
}

void CudaBackend::moe_combine(const Tensor& routed, int k, const Tensor* shared, Tensor y) {
    const int64_t d = y.size(-1), n = y.numel() / std::max<int64_t>(d, 1);
    DSV4_CHECK(routed.numel() == n * k * d && (shared == nullptr || shared->numel() == n * d),
               "moe_combine: routed has {} elements for {} rows of top-{}", routed.numel(), n, k);
    if (n == 0) return;
    const bool ref = reference();
    launch_combine(stream_, routed.f32(), nullptr, shared != nullptr ? shared->f32() : nullptr, n, k, d, false, ref,
                   y.f32());
    launched("moe combine");
}

}  // namespace dsv4::cuda
