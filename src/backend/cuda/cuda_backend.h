// CudaBackend (host side, compiled by the host compiler; kernels are in kernels_*.cu behind kernels.h): every op of
// backend.h on an NVIDIA GPU (built for sm_90a). Weights are uploaded in checkpoint form
// (FP8 + UE8M0 block scales, FP4 + per-32 scales, BF16; FP4 codes re-packed exactly into sign-split words,
// backend/fp4_layout.h) and decoded inside the kernels; no dequantized copies are resident. Activations are float32 in
// exact and reference numerics; the sequence state stores K=V rows and indexer keys in the StateConfig's kv_dtype
// (backend/state_format.h; device codec in state_codec.cuh) and compressor records in float32. Every runtime index the
// kernels read (block tables, indexer picks, expert ids) is bounds-checked on the device; violations set an error
// flag that the host turns into a dsv4::Error at the next synchronisation.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_factory.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_expert_tma.h"
#include "backend/cuda/kernels_fp8.h"
#include "backend/cuda/linear_plan.h"
#include "state/state_layout.h"

namespace dsv4::cuda {

class Bf16LtGemms;
class Fp8LtGemms;
class LtContext;

// Throws dsv4::Error naming the failed call when status is not cudaSuccess.
void check(cudaError_t status, const char* what);
#define DSV4_CUDA(call) ::dsv4::cuda::check((call), #call)

// A bump allocator over one device buffer, reset every step (the same sequence of allocations gets the same
// addresses, which CUDA graph replay relies on).
class DeviceArena {
  public:
    void reserve(size_t bytes);
    void* take(size_t bytes);
    void reset() { used_ = 0; }
    size_t used() const { return used_; }
    void release_to(size_t mark) { used_ = mark < used_ ? mark : used_; }
    // After a graph replay: the replayed step's scratch (its results among it) is in use up to `mark`.
    void advance_to(size_t mark) { used_ = mark > used_ ? mark : used_; }
    size_t capacity() const { return capacity_; }
    size_t high_water() const { return high_water_; }
    void reset_high_water() { high_water_ = used_; }
    ~DeviceArena();

  private:
    char* base_ = nullptr;
    size_t capacity_ = 0;
    size_t used_ = 0;
    size_t high_water_ = 0;
};

class CudaBackend final : public Backend, public GraphRecorder {
  public:
    CudaBackend(Numerics numerics, const CudaOptions& options);
    ~CudaBackend() override;

    std::string name() const override { return "cuda"; }
    Numerics numerics() const override { return numerics_; }
    Fp8Dialect fp8_dialect() const override { return fp8_.weights; }

    WeightRef upload_linear(const TensorView& weight, const TensorView* scale, WeightFormat format, int64_t rows,
                            int64_t cols, int block_rows, int block_cols) override;
    VecRef upload_vector(const TensorView& values) override;
    TableRef upload_table(const TensorView& values, int64_t max_value) override;

    void create_state(const ModelConfig& config, const StateConfig& state) override;
    const StateConfig& state_config() const override { return state_; }
    StateBytes allocated_state_bytes() const override { return state_bytes_; }
    void reset_slot(int32_t slot) override;
    void save_snapshot(int32_t slot, int32_t snapshot, int64_t boundary) override;
    void restore_snapshot(int32_t slot, int32_t snapshot, int64_t boundary) override;
    void copy_slot(int32_t src, int32_t dst) override;
    void copy_block(int32_t src, int32_t dst) override;
    // Tier role (cuda_tiers.cpp): copies on a copy stream, ordered with the compute stream by events.
    void offload_block(int32_t block, std::span<std::byte> host) override;
    void load_block(std::span<const std::byte> host, int32_t block) override;
    void offload_snapshot(int32_t snapshot, std::span<std::byte> host) override;
    void load_snapshot(std::span<const std::byte> host, int32_t snapshot) override;
    void wait_tier_copies() override;
    HostBuffer allocate_host_buffer(int64_t bytes) override;

    Tensor alloc(DType dtype, std::initializer_list<int64_t> shape) override;
    size_t scratch_mark() override { return arena_.used(); }
    void scratch_release(size_t mark) override;
    void begin_step(const StepBatch& batch) override;
    void begin_substep(const StepBatch& batch) override;
    void to_host(const Tensor& t, float* out) override;
    void from_host(Tensor t, const void* data) override;
    void synchronize() override;
    void copy(const Tensor& src, Tensor dst) override;

    void embed(const WeightRef& table, Tensor x) override;
    void hc_pre(const Tensor& x, const MhcWeights& w, int sinkhorn_iters, float hc_eps, float norm_eps, Tensor u,
                Tensor post, Tensor comb) override;
    void hc_post(Tensor x, const Tensor& y, const Tensor& post, const Tensor& comb) override;
    void add_to_streams(Tensor x, const Tensor& y) override;
    void hc_head(const Tensor& x, const HcHeadWeights& w, float hc_eps, float norm_eps, Tensor y) override;
    void hc_post_pre(Tensor x, const HcPostInputs* prev, const MhcWeights& w, const VecRef& norm, int sinkhorn_iters,
                     float hc_eps, float norm_eps, Tensor u, Tensor post, Tensor comb) override;
    void rms_norm(const Tensor& x, const VecRef* weight, float eps, Tensor y) override;
    void linear(const Tensor& x, const WeightRef& w, LinearKind kind, Tensor y) override;
    void grouped_linear(const Tensor& x, const WeightRef& w, int groups, Tensor y) override;
    void linears(const Tensor& x, std::span<const LinearTarget> targets) override;
    void rope(Tensor x, const RopeParams& rope, bool inverse) override;
    void norm_rope(Tensor x, const VecRef* weight, float eps, const RopeParams& rope) override;
    void norm_ropes(std::span<const NormRopeTarget> targets, float eps) override;
    void kv_cache_sim(Tensor kv, int nope_dims) override;
    void indexer_query_sim(Tensor q) override;
    void compress(int layer, CompressorRole role, const Tensor& a, const Tensor& g, const CompressorWeights& w,
                  const RopeParams& rope, float norm_eps) override;
    void compressors(int layer, const Tensor& x, std::span<const CompressTarget> targets, const RopeParams& rope,
                     float norm_eps) override;
    void indexer_topk(int layer, const Tensor& q, const Tensor& weights, int ratio, Tensor topk) override;
    bool indexer_picks_all(int ratio, int k) const override;
    void indexer_picks(int layer, const Tensor& x, const Tensor& q_residual, const IndexerWeights& w,
                       const RopeParams& rope, int ratio, int heads, Tensor topk) override;
    void attention(int layer, const LayerConfig& lc, const Tensor& q, const Tensor& kv, const VecRef& sinks,
                   const Tensor* topk, float scale, Tensor out) override;
    void attention_unrotated(int layer, const LayerConfig& lc, const Tensor& q, const Tensor& kv, const VecRef& sinks,
                             const Tensor* topk, float scale, Tensor out) override;
    void normed_attention_unrotated(int layer, const LayerConfig& lc, Tensor q, const Tensor& kv, const VecRef& sinks,
                                    const Tensor* topk, float scale, float norm_eps, Tensor out) override;
    void normed_attention_projected(int layer, const LayerConfig& lc, Tensor q, const Tensor& kv, const VecRef& sinks,
                                    const Tensor* topk, float scale, float norm_eps, Tensor out, const WeightRef& wo_a,
                                    int groups, Tensor z) override;
    void block_attention(int layer, const Tensor& q, const Tensor& kv, const VecRef& sinks, float scale,
                         Tensor out) override;
    void store_window(int layer, const Tensor& kv) override;
    void route(const Tensor& h, const MoeWeights& w, const ModelConfig& c, RoutingType routing, Tensor weights,
               Tensor ids) override;
    void moe(const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids, float limit,
             Tensor y) override;
    void moe_routed(const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids, float limit,
                    Tensor routed) override;
    void moe_shared(const Tensor& h, const ExpertWeights& shared, float limit, Tensor y) override;
    void moe_combine(const Tensor& routed, int k, const Tensor* shared, Tensor y) override;
    void count_expert_pairs(int layer, const Tensor& ids) override;
    void scale(Tensor x, float factor) override;
    void gather_rows(const Tensor& x, std::span<const int32_t> rows, Tensor y) override;
    void argmax_rows(const Tensor& x, Tensor out) override;
    void sample_rows(const Tensor& logits, const SampleRowsArgs& args, Tensor out, const Tensor* logprobs,
                     const Tensor* probes) override;

    WeightRef synthetic_linear(WeightFormat format, int64_t rows, int64_t cols, float stddev, uint64_t seed) override;
    VecRef synthetic_vector(int64_t n, float mean, float stddev, uint64_t seed) override;
    TableRef synthetic_table(int64_t rows, int64_t cols, int64_t max_value, uint64_t seed) override;
    // Expert tier (cuda_expert_cache.cpp).
    WeightRef upload_host_linear(const TensorView& weight, const TensorView* scale, WeightFormat format, int64_t rows,
                                 int64_t cols, int block_rows, int block_cols) override;
    WeightRef synthetic_host_linear(WeightFormat format, int64_t rows, int64_t cols, float stddev,
                                    uint64_t seed) override;
    void create_expert_cache(int layers, int slots, const ExpertWeights& expert) override;
    ExpertWeights fetch_expert(int layer, int slot, const ExpertWeights& host) override;
    void store_expert(int layer, int slot, const ExpertWeights& host) override;
    void release_host_expert(const ExpertWeights& host) override;
    void update_expert_handles(const MoeWeights& w) override;
    void create_expert_pair_counters(int layers, int experts) override;
    std::vector<int64_t> take_expert_pair_counts() override;
    void expert_set_changed() override { expert_tables_.clear(); }  // the old tables stay allocated until teardown
    void synthetic_context(int32_t slot, int64_t length, std::span<const int32_t> block_table, uint64_t seed) override;
    // GraphRecorder
    GraphRecorder* graph_recorder() override { return this; }
    bool graphs_available() const override { return !profiling_ && !op_profiling_; }
    bool replay(uint64_t key) override;
    void begin_capture() override;
    void end_capture(uint64_t key) override;
    uint64_t shape_key(const StepBatch& batch) const override;
    void set_profiling(bool on) override;
    void region(std::string_view name) override;
    std::vector<std::pair<std::string, double>> profile(bool reset) override;
    int64_t launches() const override { return launches_; }
    int64_t graph_nodes_replayed() const override { return graph_nodes_replayed_; }
    // Device bytes held by weights and state (for the memory report).
    size_t resident_bytes() const { return resident_bytes_; }
    std::string memory_report() const override;
    int64_t workspace_bytes() const override { return static_cast<int64_t>(arena_.capacity()); }
    int64_t workspace_high_water_bytes() const override { return static_cast<int64_t>(arena_.high_water()); }
    void reset_workspace_high_water() override { arena_.reset_high_water(); }

    // For the kernels' launchers.
    bool reference() const { return numerics_ == Numerics::kReference; }
    bool fast() const { return numerics_ == Numerics::kFast; }
    cudaStream_t stream() const { return stream_; }
    const StepMeta& meta() const { return meta_; }
    int ring_rows() const { return ring_rows_; }
    const float* inv_freq(const RopeParams& rope);
    // Compressed entries the indexer scores per token this step: a power-of-two bucket of the largest position's
    // count (a graph replayed within the bucket keeps its launch shapes).
    int64_t indexer_entry_bucket(int ratio) const;
    // Rounds a float32 tensor to bf16 values in place (reference numerics).
    void round_bf16(Tensor x);
    // Reference numerics: the per-128 FP8 activation quantization of x's rows of length k, in scratch memory.
    const float* quantized_activations(const Tensor& x, int64_t k);
    // Raw mHC mixes fn . x of every token (scratch [N, n_mix]).
    float* mhc_mixes(const Tensor& x, const VecRef& fn, int64_t n_mix);
    // Rows [row0, row0 + count) of a weight as a weight of their own (FP8: row0 on a 128-row scale boundary).
    static WeightRef weight_rows(const WeightRef& w, int64_t row0, int64_t count);
    float* scratch(size_t floats) { return static_cast<float*>(arena_.take(floats * sizeof(float))); }
    template <typename T>
    const T* upload_scratch(std::span<const T> values);
    // (token, expert) pairs grouped by expert for the tensor-core expert GEMMs (device arrays in scratch).
    struct ExpertGroups {
        int max_tiles = 0;  // grid bound; the real count is device-side
        const int32_t* tile_count = nullptr;
        const int32_t* tile_expert = nullptr;
        const int32_t* tile_row0 = nullptr;
        const int32_t* tile_rows = nullptr;
        int32_t* row_ids = nullptr;
    };
    ExpertGroups group_pairs(const Tensor& ids, int64_t pairs, int n_experts);
    // Device array of the experts' w1 (0), w2 (1) or w3 (2) handles, built once per MoE layer.
    const WeightRef* expert_table(const MoeWeights& w, int which);

    // FP8 tensor-core paths of fast numerics (cuda_fp8_ops.cpp): activations quantized per 1x128 into scratch, a
    // linear on cuBLASLt or our wgmma kernel, the routed experts grouped on FP8 wgmma.
    Fp8Act alloc_fp8(int64_t rows, int64_t k);
    // alloc_fp8 for activations that a kernel other than the quantization pass writes (rows [0, rows) only): the
    // padded rows cuBLASLt reads get zero codes and scales here, as the pass writes them.
    Fp8Act alloc_fp8_zero_padded(int64_t rows, int64_t k);
    // Linears on cuBLASLt's bf16 GEMM (LinearPath::kBf16Lt, cuda_ops.cpp): `rows` x `cols` floats (packed rows) as
    // bf16 into scratch, and y[m][w.rows] = x . W^T from such a copy (x_f32: the floats it came from, for the
    // mma.sync GEMM where cuBLASLt has no algorithm).
    const uint16_t* bf16_rows(const float* x, int64_t rows, int64_t cols);
    void linear_bf16_lt(const uint16_t* x, const float* x_f32, int64_t m, const WeightRef& w, float* y);
    Fp8Act quantize_fp8(const float* x, int64_t x_stride, int64_t rows, int64_t k);
    void linear_fp8(LinearPath path, const Fp8Act& x, int64_t x_col0, const WeightRef& w, float* y, int64_t y_stride);
    // Linears on the FP8 GEMV (LinearPath::kFp8Gemv): m tokens of k inputs each for every target, whose inputs lie
    // in the rows of x ([m] rows of x_cols floats, x_stride apart); up to kMaxFp8GemvTargets a launch. From
    // kFp8GemvQuantizeRows tokens x is quantized once, by its own launch. With `swiglu_up` (below
    // kFp8GemvQuantizeRows tokens, one target) the input is SwiGLU(x, swiglu_up) with the clamp `limit`, taken as the
    // kernel stages it (no SwiGLU launch).
    void fp8_gemv(std::span<const Fp8GemvTarget> targets, int64_t m, int64_t k, const float* x, int64_t x_cols,
                  int64_t x_stride, const float* swiglu_up = nullptr, float limit = 0.0f);
    // Linears on the bf16 GEMV (LinearPath::kBf16Gemv): m tokens of k inputs (x_stride floats apart) for every
    // target; up to kMaxBf16GemvTargets a launch.
    void bf16_gemv(std::span<const Bf16GemvTarget> targets, int64_t m, int64_t k, const float* x, int64_t x_stride);
    void moe_grouped_fp8(const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids, float limit,
                         Tensor y);
    // The routed pairs on the grouped FP8 path into routed [pairs, d] (weights applied before W2), from x quantized.
    void grouped_fp8_pairs(const MoeWeights& w, const Tensor& weights, const Tensor& ids, float limit, const Fp8Act& x,
                           float* routed);
    // The e4m3 copies of every expert's W1 + W3 (SwiGLU tiles) and W2 for the TMA expert GEMMs
    // (CudaOptions::expert_tma), allocated at the first call; false (and the staged kernel runs) where the memory is
    // not there or a graph is being recorded before it is.
    bool expert_copies(int experts, int64_t d, int64_t inter, ExpertFp8Copy& up, ExpertFp8Copy& down);
    // Decode-sized MoE in fused launches (MoePath::kFusedGemv): gate/up + SwiGLU, the shared expert, down + combine.
    void moe_fused_decode(const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids, float limit,
                          Tensor y);
    // The MoE path for a number of pairs (the first resident expert's format and shape).
    MoePath moe_path(const Tensor& h, const MoeWeights& w, int64_t pairs) const;
    // The routed pairs on the per-pair / bf16-grouped paths (weights applied before W2 in reference numerics only).
    void moe_pairs(const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids, float limit,
                   MoePath path, float* routed);
    // attention / attention_unrotated (the output's inverse RoPE in the split merge).
    // One token a sequence and the whole window in the ring: a step's K=V rows may go to the ring before attention.
    bool one_token_per_sequence_window() const;
    bool window_rows_early(const Tensor& x, int layer) const;
    // The queries' norm and RoPE that the wide kernel applies as it stages them (normed_attention_unrotated).
    struct QueryNorm {
        float eps;
        const RopeParams* rope;
    };
    // fp8_out: the outputs as these FP8 activations instead of floats in `out` (the wide kernel's write_output_codes;
    // only where attention_fp8_out_applies).
    void attention_impl(int layer, const LayerConfig& lc, const Tensor& q, const Tensor& kv, const VecRef& sinks,
                        const Tensor* topk, float scale, Tensor out, bool unrotate, const QueryNorm* norm = nullptr,
                        const Fp8Act* fp8_out = nullptr);
    // Whether the wide kernel norms these queries as it stages them (normed_attention_unrotated) ...
    bool query_norm_applies(const LayerConfig& lc, const Tensor& q, const Tensor* topk) const;
    // ... and can also write its outputs as the FP8 activations of an FP8 output projection on `path`.
    bool attention_fp8_out_applies(const LayerConfig& lc, const Tensor& q, const Tensor* topk, LinearPath path) const;
    // The path of a grouped projection (grouped_linear) of n tokens, and its FP8 form from activations already
    // quantized (every group's input a column range of x).
    LinearPath grouped_linear_path(const WeightRef& w, int groups, int64_t n) const;
    void grouped_linear_fp8(LinearPath path, const Fp8Act& x, const WeightRef& w, int groups, float* y);
    // Whether attention of these queries runs on the wide kernel (all heads of a token in one block).
    bool wide_attention(const Tensor& q) const;
    int attention_max_keys(const LayerConfig& lc, const Tensor* topk) const;
    // The routed experts' weighted sum plus the shared expert's output, into y (fused into the down projection).
    struct MoeCombine {
        const float* weights;
        const float* shared;  // null: none
        float* y;
    };
    // The routed pairs on the per-pair W4A8 GEMVs (MoePath::kPerPairMma): into routed [pairs, d], weights not applied,
    // or, with `combine` (routed then unused), combined into combine->y.
    void moe_pairs_mma(const Tensor& h, const MoeWeights& w, const Tensor& ids, float limit, float* routed,
                       const MoeCombine* combine);
    void split_sums(ExpertGemvFp4Params& p);  // the partials and counters of a launch's K splits
    // The shared expert into ys [N, D]; x: h quantized for FP8 linears (reused when both linears are FP8), or null.
    void shared_expert(const Tensor& h, const Fp8Act* x, const ExpertWeights& s, float limit, Tensor ys);
    // The shared expert's output [N, D] (scratch), or null when the layer has none.
    const float* shared_output(const Tensor& h, const Fp8Act* x, const MoeWeights& w, float limit);
    // The same, launched on the side stream where it can run there (join_side_stream() before it is read).
    const float* shared_output_beside(const Tensor& h, const MoeWeights& w, float limit);
    bool shared_expert_on_gemvs(const Tensor& h, const ExpertWeights& s) const;
    // Whether a linear of `rows` activation rows over w runs on one of the GEMV kernels (the FP8 one only, or also the
    // float32 one): kernels with no state but the split counters, which the side stream has its own of (cuBLASLt's
    // workspace is one per backend).
    bool on_gemv(const WeightRef& w, int64_t rows, bool fp8_only) const;
    // Makes stream_ wait for the side stream's pending work, if any.
    void join_side_stream();
    // Issues launch() on the side stream after all that stream_ has issued (a fork), with the side's split counters;
    // stream_ waits for it at join_side_stream().
    void on_side_stream(const std::function<void()>& launch);
    // Whether compressors() and indexer_picks() run on the side stream, beside the query path (joined by the attention
    // and the indexer's scores, which read what they write): a side stream, a decode-sized step, ops not timed one by
    // one, projections on the GEMV kernels.
    bool side_stream_takes(int64_t tokens, std::initializer_list<const WeightRef*> weights) const;
    // The first routed expert resident on this device (its format and shape stand for all); fails when none is.
    static const ExpertWeights& first_resident_expert(const MoeWeights& w);
    const LinearTuning& linear_tuning() const { return tuning_; }
    // Forces the linear / MoE kernel (names of linear_plan.h; empty: choose by shape), as DSV4_LINEAR_PATH /
    // DSV4_MOE_PATH do (benchmarks).
    void force_paths(const std::string& linear, const std::string& moe) {
        tuning_.forced_linear = linear;
        tuning_.forced_moe = moe;
    }
    int32_t* fp8_clamp_counter() const { return clamp_count_; }

  private:
    void* device_copy(const void* host, size_t bytes);                   // owned until the backend is destroyed
    void copy_to_device_now(void* dst, const void* host, size_t bytes);  // ordered before later kernels, complete
    void launched(const char* op, int kernels = 1);
    void create_snapshot_state();
    void transfer_snapshot(int32_t slot, int32_t snapshot, int64_t boundary, bool to_snapshot);
    // Fails with a clear message (sizes, free memory) before allocating a state that cannot fit.
    void check_state_fits(const StateConfig& state, const StateBytes& bytes) const;
    void record_mark(std::string_view name);
    void check_error_flag();
    void register_fp8_weight(const WeightRef& w);
    // Tier copies (cuda_tiers.cpp).
    void ensure_copy_stream();
    void copy_after_compute();
    void copy_pieces(const std::vector<std::pair<uint8_t*, int64_t>>& pieces, std::byte* host, size_t size,
                     bool to_host);
    std::vector<std::pair<uint8_t*, int64_t>> block_pieces(int32_t block) const;
    std::vector<std::pair<uint8_t*, int64_t>> snapshot_pieces(int32_t snapshot) const;
    void wait_for_loads();
    void wait_before_write(bool block, int32_t id);
    void order_step_after_tier_copies(const StepBatch& batch);
    // A synthetic weight in memory from `alloc` (cuda_synthetic.cpp); pinned host memory (cuda_expert_cache.cpp).
    WeightRef synthetic_weight(WeightFormat format, int64_t rows, int64_t cols, float stddev, uint64_t seed,
                               const std::function<void*(size_t)>& alloc);
    std::byte* pinned(size_t bytes);
    // The device address of an expert-cache slot, checked against the cache and the expert's size.
    uint8_t* expert_slot(int layer, int slot, const ExpertWeights& expert) const;
    void copy_expert_async(const ExpertWeights& from, const ExpertWeights& to, cudaMemcpyKind kind);
    // A linear weight's handle with its bytes (and scales) copied by `copy` (to the device, or to pinned memory).
    // copy(bytes, n, fp4_codes): fp4_codes says the bytes are FP4 codes, which the copy holds in the sign-split layout
    // (backend/fp4_layout.h).
    WeightRef copy_linear(const TensorView& weight, const TensorView* scale, WeightFormat format, int64_t rows,
                          int64_t cols, int block_rows, int block_cols,
                          const std::function<const void*(const void*, size_t, bool)>& copy);

    // --- Device and options ---
    Numerics numerics_;
    int device_;
    CudaOptions options_;
    Fp8Sites fp8_;  // every FP8 site's dialect and maximum (fp8_sites(options_.fp8_dialect))
    cudaStream_t stream_ = nullptr;
    int32_t* error_flag_ = nullptr;  // set by kernels on an out-of-range index (check_error_flag)
    // Fast numerics: per-token arrival counters of the fused mHC site boundary (hc_post_pre), zero between launches;
    // steps of more tokens take the unfused ops.
    static constexpr int64_t kHcBoundaryTokens = int64_t{1} << 16;
    unsigned* hc_arrivals_ = nullptr;
    // The side stream (CudaOptions::side_stream: the shared expert, the compressors, the indexer at decode sizes): the
    // fork event recorded on stream_, the join event on the side, and split counters of its own (its GEMVs run beside
    // the main stream's).
    struct SideStream {
        cudaStream_t stream = nullptr;
        cudaEvent_t fork = nullptr, join = nullptr;
        int32_t* split_arrivals = nullptr;
        bool pending = false;  // work launched there that stream_ has not waited for
        bool active = false;   // on_side_stream() is launching: stream_ is the side stream
    };
    SideStream side_;
    static constexpr int64_t kBesideTokens = 64;  // side_stream_takes(): decode-sized steps (larger: an option)
    // Fast numerics: arrival counters of the GEMVs whose K splits span thread blocks (kernels_fp8.h, Fp8GemvParams),
    // zero between launches; one per (target, 128-row group) of a launch, every launch on stream_ in turn.
    static constexpr int64_t kSplitArrivals = int64_t{1} << 16;
    int32_t* split_arrivals_ = nullptr;
    // The layer whose step rows norm_ropes() or attention() already wrote to the ring (one token a sequence): its
    // store_window is done.
    int ring_written_layer_ = -1;

    // --- Weight store: everything device_copy'd (weights, vectors, tables, state), per-layer expert handle tables ---
    std::vector<void*> allocations_;
    size_t resident_bytes_ = 0;
    std::map<std::pair<const void*, int>, const WeightRef*> expert_tables_;
    std::map<std::tuple<double, int, bool>, float*> inv_freq_;  // RoPE frequencies per (theta, dims, yarn)

    // --- State store ---
    ModelConfig model_;
    StateConfig state_;
    int ring_rows_ = 0;
    RowFormatDev kv_format_;   // stored K=V rows
    RowFormatDev key_format_;  // stored indexer keys
    StateBytes state_bytes_;
    std::vector<LayerStateDev> layers_;
    std::vector<LayerStateShape> shapes_;  // per layer: rows per slot / block / snapshot (state/state_layout.h)
    struct SnapshotDev {
        uint8_t* ring = nullptr;  // [snapshots][window] stored K=V rows
        float* main = nullptr;    // CSA: [snapshots][ratio][main record floats]
        float* index = nullptr;   // CSA: [snapshots][ratio][index record floats]
    };
    std::vector<SnapshotDev> snapshots_;
    // Tier copies: their stream, events, and what the offloads in flight read.
    cudaStream_t copy_stream_ = nullptr;
    cudaEvent_t compute_mark_ = nullptr;   // the compute work an offload / load waits for
    cudaEvent_t offloads_done_ = nullptr;  // after the latest offload
    cudaEvent_t loads_done_ = nullptr;     // after the latest load
    bool loads_pending_ = false;
    std::unordered_set<int32_t> offloading_blocks_;
    std::unordered_set<int32_t> offloading_snapshots_;
    // Expert tier: pinned host copies of experts, and the device cache [layers][slots] of expert-sized slots.
    std::vector<void*> host_allocations_;
    std::multimap<size_t, void*> free_pinned_;  // released pieces of host experts, by size, for the next ones
    uint8_t* expert_cache_ = nullptr;
    int expert_cache_layers_ = 0;
    int expert_cache_slots_ = 0;
    int64_t expert_slot_bytes_ = 0;
    int32_t* expert_pairs_ = nullptr;  // [layers][experts] pairs counted on the device since the last take
    int counted_layers_ = 0;
    int counted_experts_ = 0;

    // --- The step: scratch arena and metadata (one device buffer at a fixed address; begin_step re-uploads it) ---
    DeviceArena arena_;
    std::vector<int32_t> meta_host_;
    int32_t* meta_dev_ = nullptr;
    size_t meta_capacity_ = 0;
    StepMeta meta_;
    std::vector<int32_t> host_logit_rows_, host_source_rows_;
    const int32_t* logit_rows_dev_ = nullptr;   // the step's logit rows inside the metadata buffer
    const int32_t* source_rows_dev_ = nullptr;  // and its source rows (StepBatch::source_rows)
    int64_t max_position_ = 0;                  // decides the indexer / HCA key buckets (part of the graph key)

    // --- Graph recorder ---
    bool capturing_ = false;
    LinearTuning tuning_;                   // kernel thresholds and forced paths (CudaOptions)
    GemvStreamConfig stream_experts_;       // the streamed single-vector GEMV for routed experts (CudaOptions)
    GemvStreamConfig stream_linears_;       // ... and for the other linears
    std::unique_ptr<LtContext> lt_;         // fast numerics: the cuBLASLt handle and workspaces
    std::unique_ptr<Fp8LtGemms> fp8_lt_;    // fast numerics
    std::unique_ptr<Bf16LtGemms> bf16_lt_;  // fast numerics
    int32_t* clamp_count_ = nullptr;        // W4A8 conversions below the exponent window (device counter)
    void* expert_copies_ = nullptr;         // expert_copies(): codes and scales of both projections
    size_t expert_copies_bytes_ = 0;
    bool expert_copies_failed_ = false;  // the allocation failed once: not retried
    std::map<uint64_t, cudaGraphExec_t> graphs_;
    std::map<uint64_t, size_t> graph_arena_end_;  // scratch a recorded step uses (drafters allocate after it)
    std::map<uint64_t, int64_t> graph_nodes_;     // nodes of each recorded graph
    int64_t graph_nodes_replayed_ = 0;

    // --- Profiler ---
    int64_t launches_ = 0;
    bool profiling_ = false;
    bool op_profiling_ = false;
    std::vector<std::pair<std::string, cudaEvent_t>> marks_;  // region starts of the current profile window
    std::vector<cudaEvent_t> event_pool_;
    std::map<std::string, double> profile_ms_;
};

}  // namespace dsv4::cuda
