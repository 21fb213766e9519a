// ModelOps: the ops the DeepSeek-V4 forward pass (src/model/deepseek_v4.cpp) is written against, once, for every
// device: step scratch memory, the step's metadata, and the math. The CPU backend (backend/cpu) is the numerical
// reference; the CUDA backend (backend/cuda) is the production path. Ops that read or write sequence state (the
// compressor, the indexer, attention, store_window) address it through the step's slots and block tables; the state
// itself is the StateStore role (backend/state_store.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>

#include "backend/sample_rows.h"
#include "backend/step.h"
#include "backend/tensor.h"
#include "backend/weights.h"
#include "config/model_config.h"

namespace dsv4 {

// What hc_post applies to the streams: a site's sub-layer output and its post / comb mixes.
struct HcPostInputs {
    Tensor y;     // [N, D]
    Tensor post;  // [N, hc]
    Tensor comb;  // [N, hc, hc]
};

// One output of ModelOps::linears.
struct LinearTarget {
    const WeightRef* w = nullptr;
    LinearKind kind = LinearKind::kQuantized;
    Tensor y;  // [M, w->rows]
};

// One input of ModelOps::norm_ropes.
struct NormRopeTarget {
    Tensor x;                          // [N, heads, dim], in place
    const VecRef* weight = nullptr;    // [dim] or null
    const RopeParams* rope = nullptr;  // null: the norm alone
    // >= 0: x holds the step's K=V rows of this state layer, which store_window(window_layer, x) stores after
    // attention. A backend may store them here already (its store_window then skips them) where nothing changes them
    // in between (kv_cache_sim does, in reference numerics) and no query of the step reads the ring slots they take.
    int window_layer = -1;
};

// One compressor of ModelOps::compressors: its role and weights, and its projections' outputs.
struct CompressTarget {
    CompressorRole role = CompressorRole::kMain;
    const CompressorWeights* w = nullptr;
    Tensor a, g;  // [N, width]: W_kv x and W_gate x
};

class ModelOps {
  public:
    virtual ~ModelOps() = default;

    // --- Step ---
    // Per-step scratch memory; everything allocated is released by begin_step().
    virtual Tensor alloc(DType dtype, std::initializer_list<int64_t> shape) = 0;
    // Scratch marks: everything allocated after scratch_mark() is released by scratch_release(mark) (the model
    // releases each layer's temporaries, so a step's scratch does not grow with depth).
    virtual size_t scratch_mark() { return 0; }
    virtual void scratch_release(size_t mark) { (void)mark; }
    virtual void begin_step(const StepBatch& batch) = 0;
    // Like begin_step (the ops read this batch's tokens, positions, slots and tables from now on) but keeps the
    // scratch and the results of the steps before it: drafters (src/spec) run their steps on the hidden states of the
    // target step they follow.
    virtual void begin_substep(const StepBatch& batch) = 0;
    // Copies a float32 tensor to the host (logits, tests).
    virtual void to_host(const Tensor& t, float* out) = 0;
    // Copies host bytes (numel x element size) into a backend tensor (tests, inputs).
    virtual void from_host(Tensor t, const void* data) = 0;
    virtual void synchronize() = 0;
    // dst = src (same dtype and element count): a device-to-device copy, capturable in graphs.
    virtual void copy(const Tensor& src, Tensor dst) = 0;

    // --- Ops. Shapes: N step tokens, D hidden, hc streams, H heads. Positions/tokens come from the step. ---
    virtual void embed(const WeightRef& table, Tensor x /*[N, hc, D]*/) = 0;
    virtual void hc_pre(const Tensor& x /*[N,hc,D]*/, const MhcWeights& w, int sinkhorn_iters, float hc_eps,
                        float norm_eps, Tensor u /*[N,D]*/, Tensor post /*[N,hc]*/, Tensor comb /*[N,hc,hc]*/) = 0;
    virtual void hc_post(Tensor x /*[N,hc,D] in/out*/, const Tensor& y /*[N,D]*/, const Tensor& post,
                         const Tensor& comb) = 0;
    // x[t, j] += y[t] for every stream j: hc_post with post = 1 and comb = identity (the MTP drafter's input, Z_j =
    // h_proj(..)_j + e). Optional: the default is that hc_post, with post and comb built on the host (so not
    // recordable in a graph); a backend may add directly with the same arithmetic (CUDA: one launch, recordable).
    virtual void add_to_streams(Tensor x /*[N,hc,D] in/out*/, const Tensor& y /*[N,D]*/);
    virtual void hc_head(const Tensor& x /*[N,hc,D]*/, const HcHeadWeights& w, float hc_eps, float norm_eps,
                         Tensor y /*[N,D]*/) = 0;
    // The boundary between two mHC sites: the previous site's hc_post (when `prev` is given), then this site's
    // hc_pre and its sub-layer's input RMSNorm (u = rms_norm(u) * norm). Optional: the default runs the three ops in
    // that order; a backend may fuse them (CUDA fast numerics: one launch).
    virtual void hc_post_pre(Tensor x /*[N,hc,D] in/out*/, const HcPostInputs* prev, const MhcWeights& w,
                             const VecRef& norm, int sinkhorn_iters, float hc_eps, float norm_eps, Tensor u /*[N,D]*/,
                             Tensor post /*[N,hc]*/, Tensor comb /*[N,hc,hc]*/);
    // y = x * rsqrt(mean(x^2) + eps) (* weight), over the last dim of a [rows, k] view.
    virtual void rms_norm(const Tensor& x, const VecRef* weight, float eps, Tensor y) = 0;
    virtual void linear(const Tensor& x /*[M,K]*/, const WeightRef& w, LinearKind kind, Tensor y /*[M,rows]*/) = 0;
    // Several linears of the same input, y_j = x W_j^T (outputs independent, each as linear() computes it).
    // Optional: the default runs them one by one; a backend may run them in one launch (CUDA: decode-sized GEMVs).
    virtual void linears(const Tensor& x, std::span<const LinearTarget> targets);
    // Grouped projection: x [N, G, K] with W [G * R, K] -> y [N, G * R] (group g uses rows g*R .. g*R+R-1).
    virtual void grouped_linear(const Tensor& x, const WeightRef& w, int groups, Tensor y) = 0;
    // Interleaved RoPE on the trailing rope_dim dims of every head: x [N, heads, head_dim], in place.
    virtual void rope(Tensor x, const RopeParams& rope, bool inverse) = 0;
    // rms_norm over each head of x [N, heads, head_dim] (weight [head_dim] or null), then rope (forward), in place.
    // Optional: the default runs the two ops.
    virtual void norm_rope(Tensor x, const VecRef* weight, float eps, const RopeParams& rope);
    // norm_rope (or rms_norm, without a rope) of each target, in order. Optional: the default runs them one by one;
    // a backend may do them in one launch.
    virtual void norm_ropes(std::span<const NormRopeTarget> targets, float eps);
    // Reference numerics: FP8-sim of the non-rope dims in blocks of 64 (K=V rows); no-op in exact numerics.
    virtual void kv_cache_sim(Tensor kv /*[N, head_dim]*/, int nope_dims) = 0;
    // Reference numerics: Hadamard rotation + FP4-sim of indexer queries; no-op in exact numerics.
    virtual void indexer_query_sim(Tensor q /*[N, heads, index_head_dim]*/) = 0;

    // Compressor: consumes the step's projections a = W_kv x, g = W_gate x ([N, width]); emits the entries of
    // every window completed in this step into the paged store (pool, norm, RoPE at the window start, and the
    // reference roundings), and keeps the per-token data needed by later steps.
    virtual void compress(int layer, CompressorRole role, const Tensor& a, const Tensor& g, const CompressorWeights& w,
                          const RopeParams& rope, float norm_eps) = 0;
    // A sub-layer's compressors from its input x [N, D]: every target's projections, then compress() of each in order.
    // What they write is read by attention and the indexer only, so a backend may run them beside the query path.
    // Optional: the default runs linears() and compress().
    virtual void compressors(int layer, const Tensor& x, std::span<const CompressTarget> targets,
                             const RopeParams& rope, float norm_eps);
    // Lightning indexer: for each step token, the top-min(k, eligible) entries by sum_h w_h relu(q_h . K_e) over the
    // entries e < floor((pos + 1) / ratio); unused picks are -1. q [N, Hi, d], weights [N, Hi] (already scaled).
    virtual void indexer_topk(int layer, const Tensor& q, const Tensor& weights, int ratio, Tensor topk /*[N,k]*/) = 0;
    // Whether no step token sees more than k entries at this ratio: its top-k would be every entry it sees, so the
    // model runs no indexer and gives attention no picks (every complete entry, in index order: the picks the top-k
    // would give, in the order it gives them). Optional: false by default (a top-k that orders its picks by score keeps
    // scoring).
    virtual bool indexer_picks_all(int ratio, int k) const;
    // A layer's lightning indexer from the sub-layer input x [N, D] and the query's low-rank residual (after
    // q_norm): head weights = weights_proj x scaled by (heads * head dim)^-1/2 (relu(q.k)'s two scales), q = wq_b
    // q_residual per head, RoPE, indexer_query_sim, indexer_topk. It reads only x, q_residual and the indexer keys,
    // and only attention reads topk, so a backend may run it beside the query path. Optional: the default runs
    // those ops.
    virtual void indexer_picks(int layer, const Tensor& x, const Tensor& q_residual, const IndexerWeights& w,
                               const RopeParams& rope, int ratio, int heads, Tensor topk /*[N,k]*/);
    // Sparse attention with sinks over the window rows (this step's kv + the ring) and compressed rows (all
    // complete HCA entries, or the CSA top-k picks; every complete entry where a CSA layer gets no topk:
    // indexer_picks_all). q [N, H, d], kv [N, d]; out [N, H, d].
    virtual void attention(int layer, const LayerConfig& lc, const Tensor& q, const Tensor& kv, const VecRef& sinks,
                           const Tensor* topk, float scale, Tensor out) = 0;
    // attention, then the inverse RoPE of out at each query's position (rope(out, lc.rope, true)): the output with
    // the keys' rotation that V carries undone. Optional: backends may fuse the two.
    virtual void attention_unrotated(int layer, const LayerConfig& lc, const Tensor& q, const Tensor& kv,
                                     const VecRef& sinks, const Tensor* topk, float scale, Tensor out);
    // norm_rope(q, no weight, norm_eps, lc.rope), then attention_unrotated: the query heads' RMSNorm and RoPE before
    // the attention reads them. q afterwards holds the normed queries or the ones given. Optional: the default runs
    // the two ops; a backend may norm and rotate the queries as its attention kernel loads them.
    virtual void normed_attention_unrotated(int layer, const LayerConfig& lc, Tensor q, const Tensor& kv,
                                            const VecRef& sinks, const Tensor* topk, float scale, float norm_eps,
                                            Tensor out);
    // normed_attention_unrotated into `out`, then the grouped output projection: grouped_linear(out viewed [N, groups,
    // H d / groups], wo_a, groups, z). Optional: a backend may hand the attention's outputs to the projection in the
    // form the projection reads them (CUDA: FP8 codes and scales), the same values, leaving `out` unwritten.
    virtual void normed_attention_projected(int layer, const LayerConfig& lc, Tensor q, const Tensor& kv,
                                            const VecRef& sinks, const Tensor* topk, float scale, float norm_eps,
                                            Tensor out, const WeightRef& wo_a, int groups, Tensor z);
    // DSpark's draft-block attention (model-spec 3.2): every query of a sequence attends to the ring rows of the
    // `sliding_window` positions before the sequence's first step token (start_pos - window .. start_pos - 1, those
    // >= 0: its context rows) and to all of the sequence's step rows (kv, bidirectional), plus the sink. Writes no
    // state. q [N, H, d], kv [N, d]; out [N, H, d].
    virtual void block_attention(int layer, const Tensor& q, const Tensor& kv, const VecRef& sinks, float scale,
                                 Tensor out) = 0;
    // Writes this step's K=V rows into each sequence's ring (after attention has read the old rows).
    virtual void store_window(int layer, const Tensor& kv /*[N, d]*/) = 0;

    // MoE routing: weights [N, k] and expert ids [N, k] (int32).
    virtual void route(const Tensor& h /*[N,D]*/, const MoeWeights& w, const ModelConfig& c, RoutingType routing,
                       Tensor weights /*[N,k] f32*/, Tensor ids /*[N,k] i32*/) = 0;
    // Routed experts plus the shared expert: y [N, D].
    virtual void moe(const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids, float limit,
                     Tensor y) = 0;
    // The parts of moe that expert parallelism (src/dist) runs on different ranks; moe itself stays one op so the
    // single-device path is unchanged. Pairs: p = t * k + j is token t's j-th routed expert.
    // routed [P, D]: expert ids[p] applied to row x_row(p) of h, times weights[p] (before W2 in reference numerics,
    // after W2 otherwise); x_row(p) = p / ids.size(1) for ids [N, k], so a dispatched batch passes ids [M, 1]. Every
    // pair is computed independently of the others (same bits in any batch).
    virtual void moe_routed(const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids, float limit,
                            Tensor routed) = 0;
    // The shared expert alone: y [N, D].
    virtual void moe_shared(const Tensor& h, const ExpertWeights& shared, float limit, Tensor y) = 0;
    // y[t] = sum_j routed[t * k + j] in order j = 0 .. k-1, then + shared[t] when given, stored as moe stores.
    virtual void moe_combine(const Tensor& routed /*[N*k, D]*/, int k, const Tensor* shared, Tensor y) = 0;
    // Expert tier, optional (the default fails): adds each of a MoE layer's routing ids to the layer's pair counters
    // (WeightStore::create_expert_pair_counters). Ids outside [0, experts) are not counted (and set the step's error
    // flag where the backend has one, as the MoE op does).
    virtual void count_expert_pairs(int layer, const Tensor& ids /*[N, k] i32*/);
    // x *= factor, element-wise.
    virtual void scale(Tensor x, float factor) = 0;
    // Gathers rows of x [N, D] into y [M, D].
    virtual void gather_rows(const Tensor& x, std::span<const int32_t> rows, Tensor y) = 0;
    // out[i] = the lowest index of row i's largest value, or kNoArgmax when the row holds NaN or +inf or only -inf (the
    // host sampler refuses such rows: the caller reads the row to report why): greedy choices without bringing whole
    // rows of logits to the host. Optional: the default goes through the host.
    virtual void argmax_rows(const Tensor& x /*[N, V] f32*/, Tensor out /*[N] i32*/);
    // out[d] = one token drawn from logits row args.draws[d].row as backend/sample_rows.h defines it (processors as
    // edits, temperature, min_p, top_k, top_p, the given uniform), or kNoSample: sampling without bringing whole rows
    // to the host. logprobs (null when no draw asks for them): row d holds draw d's DrawLogprobs where it asked and a
    // token was drawn. probes (null when no draw probes): row d holds draw d's ProbeMasses where it probes and a token
    // was drawn. Optional: the default reads the rows to the host and runs sample_row_reference.
    virtual void sample_rows(const Tensor& logits /*[N, V] f32*/, const SampleRowsArgs& args, Tensor out /*[D] i32*/,
                             const Tensor* logprobs /*[D, kDrawLogprobsWords] i32*/ = nullptr,
                             const Tensor* probes /*[D, kProbeMassWords] i32*/ = nullptr);
};

// argmax_rows' answer for a row with no greedy choice.
inline constexpr int32_t kNoArgmax = -1;
// argmax_rows' choice for one row (the host path and the reference of every backend's).
int32_t argmax_of_row(std::span<const float> row);
// Checks argmax_rows' arguments (x [N, V] f32 with N, V >= 1; out [N] i32) and returns V.
int64_t argmax_row_width(const Tensor& x, const Tensor& out);
// Checks sample_rows' arguments against logits [rows, vocab], out [draws] i32 and logprobs: rows, tokens, edits and
// masks in range, each token edited at most once per draw, temperatures, uniform, probabilities and logprob counts in
// range, a logprobs output of the right shape exactly when some draw asks for logprobs, a probes output of the right
// shape when some draw probes (probe tokens in range, never with greedy). Returns vocab.
int64_t check_sample_rows(const Tensor& logits, const SampleRowsArgs& args, const Tensor& out, const Tensor* logprobs,
                          const Tensor* probes = nullptr);

}  // namespace dsv4
