// Backend: the op interface the DeepSeek-V4 forward pass (src/model/deepseek_v4.cpp) is written against, once, for
// every device. The CPU backend (backend/cpu) is the numerical reference; the CUDA backend (backend/cuda) is the
// production path. Boundary: no request, scheduler or JSON types cross this interface; a step is described by a
// StepBatch (tokens, positions, and per sequence its state slot and block table).
//
// Sequence state lives in the backend (it is device memory on GPUs). Per sequence *slot* a backend keeps fixed-size
// state: for every layer a ring of the last `window + rewind_capacity` K=V rows, and for every compressor the
// per-token pre-pooling data (kv and gate+ape) of the last `(overlap ? 2 : 1) * ratio + rewind_capacity` positions.
// Compressed rows and indexer keys are paged: entry w of a layer with ratio r lives in logical block
// (w * r) / block_tokens of the sequence's block table. A sequence can be truncated to any position at most
// rewind_capacity tokens back (speculative decoding); deeper rewinds are re-prefilled by the caller.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/tensor.h"
#include "backend/weights.h"
#include "loader/tensor_view.h"
#include "model/model_config.h"

namespace dsv4 {

enum class Numerics : uint8_t {
    kExact,      // float32 arithmetic on dequantized weights; the golden reference
    kReference,  // DeepSeek's inference roundings (bf16 activations, FP8 activation quant, FP8/FP4 cache sims)
    kFast,       // the production GPU path
};

std::string_view numerics_name(Numerics n);
Numerics parse_numerics(std::string_view name);

// Which roundings a linear applies in reference numerics (no effect in exact numerics).
enum class LinearKind : uint8_t {
    kQuantized,  // FP8/FP4 weight: per-128 FP8 activation quantization, bf16 output
    kBf16Out,    // plain GEMM of bf16 activations, bf16 output (wo_a)
    kF32Out,     // plain GEMM, float32 output (compressor projections, router, indexer weights, lm head)
};

// One sequence's part of a step.
struct SequenceSlice {
    int32_t slot = 0;         // fixed-state slot (ring, compressor pending data)
    int32_t token_begin = 0;  // index of its first token in the step
    int32_t n_tokens = 0;
    int64_t start_pos = 0;             // absolute position of its first token (= tokens already in its state)
    std::vector<int32_t> block_table;  // physical block ids covering positions [0, start_pos + n_tokens)
};

// Everything a backend needs to run one forward step over several sequences.
struct StepBatch {
    std::vector<int32_t> tokens;     // [N]
    std::vector<int32_t> positions;  // [N] absolute positions
    std::vector<int32_t> seq_index;  // [N] index into seqs
    std::vector<SequenceSlice> seqs;
    std::vector<int32_t> logit_rows;  // step rows whose logits are wanted, in output order

    int64_t n_tokens() const { return static_cast<int64_t>(tokens.size()); }
    // Appends a sequence's tokens (positions start_pos, start_pos+1, ...).
    void add_sequence(int32_t slot, int64_t start_pos, std::span<const int32_t> token_ids,
                      std::vector<int32_t> block_table);
};

// How a backend stores K=V rows (ring rows, compressed entries, snapshot ring rows) and indexer keys; compressor
// pending records are float32 in every mode. Byte layouts in backend/state_format.h.
enum class StateDtype : uint8_t {
    kF32,   // float32
    kBf16,  // bf16 (round to nearest even)
    kFp8,   // fp8_ds_mla K=V rows (model-spec 5.2) and FP8 indexer keys with one power-of-two scale (5.3)
};

std::string_view state_dtype_name(StateDtype dtype);
// "f32" | "bf16" | "fp8"; anything else is a dsv4::Error naming the accepted values.
StateDtype parse_state_dtype(std::string_view name);

// Sizes of the state a backend allocates (derived from the model config and the engine's memory plan).
struct StateConfig {
    int max_slots = 1;         // sequences that can run at once
    int num_blocks = 0;        // paged blocks for compressed rows / indexer keys
    int block_tokens = 256;    // token positions covered by one block
    int rewind_capacity = 16;  // deepest truncation without recomputation
    int num_snapshots = 0;     // prefix-cache boundary snapshots (save_snapshot / restore_snapshot); engine addition
    StateDtype kv_dtype = StateDtype::kF32;  // storage of K=V rows and indexer keys
};

// Bytes of sequence state a backend allocated per slot, per paged block and per snapshot (kv/state_layout.h
// computes the same numbers for planning; tests hold the two equal).
struct StateBytes {
    int64_t slot = 0;
    int64_t block = 0;
    int64_t snapshot = 0;
};

// Which compressor of a layer an op addresses.
enum class CompressorRole : uint8_t { kMain, kIndexer };

class Backend {
  public:
    virtual ~Backend() = default;

    virtual std::string name() const = 0;
    virtual Numerics numerics() const = 0;

    // --- Weights (uploaded once; the checkpoint's host views stay valid while the model lives) ---
    virtual WeightRef upload_linear(const TensorView& weight, const TensorView* scale, WeightFormat format,
                                    int64_t rows, int64_t cols, int block_rows, int block_cols) = 0;
    virtual VecRef upload_vector(const TensorView& values) = 0;                      // BF16/F32 -> float32
    virtual TableRef upload_table(const TensorView& values, int64_t max_value) = 0;  // I64/I32 -> int32, checked

    // --- State ---
    virtual void create_state(const ModelConfig& config, const StateConfig& state) = 0;
    virtual const StateConfig& state_config() const = 0;
    // What create_state allocated (zeros before it, or for a backend that does not report).
    virtual StateBytes allocated_state_bytes() const { return {}; }
    virtual void reset_slot(int32_t slot) = 0;  // a new sequence starts in this slot

    // --- Prefix caching and forks (added for the serving engine: src/kv/kv_cache_manager.h) ---
    // A boundary snapshot holds what a slot needs to resume a sequence at `boundary` (a positive multiple of
    // block_tokens) on top of the paged blocks covering [0, boundary): every layer's K=V ring rows of positions
    // [boundary - sliding_window, boundary) (those >= 0), and for every CSA layer the main and indexer compressor
    // records (kv | gate + ape) of positions [boundary - ratio, boundary), the window the next entry overlaps. HCA
    // layers need nothing: block_tokens is a multiple of their ratio, so no window is open at a boundary.
    // save_snapshot copies them out of `slot`, whose sequence has computed up to some end with
    // boundary <= end <= boundary + rewind_capacity (so its ring still holds those rows); the caller guarantees it.
    virtual void save_snapshot(int32_t slot, int32_t snapshot, int64_t boundary) = 0;
    // Writes a snapshot into `slot` (after reset_slot); the sequence then continues at position `boundary`. It
    // cannot be truncated below `boundary` afterwards.
    virtual void restore_snapshot(int32_t slot, int32_t snapshot, int64_t boundary) = 0;
    // Copies slot src's whole fixed state (rings, compressor records) into slot dst: n > 1 completions fork there.
    virtual void copy_slot(int32_t src, int32_t dst) = 0;
    // Copies paged block src (every layer's compressed rows and indexer keys) into block dst: copy-on-write of the
    // partial last block a forked completion would otherwise share.
    virtual void copy_block(int32_t src, int32_t dst) = 0;

    // --- Step ---
    // Per-step scratch memory; everything allocated is released by begin_step().
    virtual Tensor alloc(DType dtype, std::initializer_list<int64_t> shape) = 0;
    // Scratch marks: everything allocated after scratch_mark() is released by scratch_release(mark) (the model
    // releases each layer's temporaries, so a step's scratch does not grow with depth).
    virtual size_t scratch_mark() { return 0; }
    virtual void scratch_release(size_t mark) { (void)mark; }
    virtual void begin_step(const StepBatch& batch) = 0;
    // Copies a float32 tensor to the host (logits, tests).
    virtual void to_host(const Tensor& t, float* out) = 0;
    // Copies host bytes (numel x element size) into a backend tensor (tests, inputs).
    virtual void from_host(Tensor t, const void* data) = 0;
    virtual void synchronize() = 0;

    // --- Ops. Shapes: N step tokens, D hidden, hc streams, H heads. Positions/tokens come from the step. ---
    virtual void embed(const WeightRef& table, Tensor x /*[N, hc, D]*/) = 0;
    virtual void hc_pre(const Tensor& x /*[N,hc,D]*/, const MhcWeights& w, int sinkhorn_iters, float hc_eps,
                        float norm_eps, Tensor u /*[N,D]*/, Tensor post /*[N,hc]*/, Tensor comb /*[N,hc,hc]*/) = 0;
    virtual void hc_post(Tensor x /*[N,hc,D] in/out*/, const Tensor& y /*[N,D]*/, const Tensor& post,
                         const Tensor& comb) = 0;
    virtual void hc_head(const Tensor& x /*[N,hc,D]*/, const HcHeadWeights& w, float hc_eps, float norm_eps,
                         Tensor y /*[N,D]*/) = 0;
    // y = x * rsqrt(mean(x^2) + eps) (* weight), over the last dim of a [rows, k] view.
    virtual void rms_norm(const Tensor& x, const VecRef* weight, float eps, Tensor y) = 0;
    virtual void linear(const Tensor& x /*[M,K]*/, const WeightRef& w, LinearKind kind, Tensor y /*[M,rows]*/) = 0;
    // Grouped projection: x [N, G, K] with W [G * R, K] -> y [N, G * R] (group g uses rows g*R .. g*R+R-1).
    virtual void grouped_linear(const Tensor& x, const WeightRef& w, int groups, Tensor y) = 0;
    // Interleaved RoPE on the trailing rope_dim dims of every head: x [N, heads, head_dim], in place.
    virtual void rope(Tensor x, const RopeParams& rope, bool inverse) = 0;
    // Reference numerics: FP8-sim of the non-rope dims in blocks of 64 (K=V rows); no-op in exact numerics.
    virtual void kv_cache_sim(Tensor kv /*[N, head_dim]*/, int nope_dims) = 0;
    // Reference numerics: Hadamard rotation + FP4-sim of indexer queries; no-op in exact numerics.
    virtual void indexer_query_sim(Tensor q /*[N, heads, index_head_dim]*/) = 0;

    // Compressor: consumes the step's projections a = W_kv x, g = W_gate x ([N, width]); emits the entries of
    // every window completed in this step into the paged store (pool, norm, RoPE at the window start, and the
    // reference roundings), and keeps the per-token data needed by later steps.
    virtual void compress(int layer, CompressorRole role, const Tensor& a, const Tensor& g, const CompressorWeights& w,
                          const RopeParams& rope, float norm_eps) = 0;
    // Lightning indexer: for each step token, the top-min(k, eligible) entries by sum_h w_h relu(q_h . K_e) over the
    // entries e < floor((pos + 1) / ratio); unused picks are -1. q [N, Hi, d], weights [N, Hi] (already scaled).
    virtual void indexer_topk(int layer, const Tensor& q, const Tensor& weights, int ratio, Tensor topk /*[N,k]*/) = 0;
    // Sparse attention with sinks over the window rows (this step's kv + the ring) and compressed rows (all
    // complete HCA entries, or the CSA top-k picks). q [N, H, d], kv [N, d]; out [N, H, d].
    virtual void attention(int layer, const LayerConfig& lc, const Tensor& q, const Tensor& kv, const VecRef& sinks,
                           const Tensor* topk, float scale, Tensor out) = 0;
    // Writes this step's K=V rows into each sequence's ring (after attention has read the old rows).
    virtual void store_window(int layer, const Tensor& kv /*[N, d]*/) = 0;

    // MoE routing: weights [N, k] and expert ids [N, k] (int32).
    virtual void route(const Tensor& h /*[N,D]*/, const MoeWeights& w, const ModelConfig& c, RoutingType routing,
                       Tensor weights /*[N,k] f32*/, Tensor ids /*[N,k] i32*/) = 0;
    // Routed experts plus the shared expert: y [N, D].
    virtual void moe(const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids, float limit,
                     Tensor y) = 0;
    // x *= factor, element-wise.
    virtual void scale(Tensor x, float factor) = 0;
    // Gathers rows of x [N, D] into y [M, D].
    virtual void gather_rows(const Tensor& x, std::span<const int32_t> rows, Tensor y) = 0;

    // --- Benchmarks and synthetic models (weights made on the device, no checkpoint file) ---
    // A random weight in checkpoint form: N(0, stddev) values quantized with valid scales (FP8 block / FP4 row) or
    // stored as BF16 / F32. Deterministic from the seed.
    virtual WeightRef synthetic_linear(WeightFormat format, int64_t rows, int64_t cols, float stddev, uint64_t seed);
    // A float32 vector of N(mean, stddev) values.
    virtual VecRef synthetic_vector(int64_t n, float mean, float stddev, uint64_t seed);
    // A [rows, cols] table of int32 in [0, max_value), each row's entries distinct (hash routing), spread uniformly.
    virtual TableRef synthetic_table(int64_t rows, int64_t cols, int64_t max_value, uint64_t seed);
    // Fills a slot's state as if `length` tokens had been processed (random rows): decode benchmarks at long
    // contexts without running the prefill. The block table must cover `length` positions.
    virtual void synthetic_context(int32_t slot, int64_t length, std::span<const int32_t> block_table, uint64_t seed);

    // --- Graphs (decode): the backend records the kernels of one forward pass and replays them for later steps with
    // the same key. Device metadata is re-uploaded by begin_step; the captured launches may depend only on the key.
    virtual bool graphs_supported() const { return false; }
    // Launches the graph recorded under `key`, if any (after begin_step).
    virtual bool graph_replay(uint64_t key) {
        (void)key;
        return false;
    }
    virtual void graph_capture_begin() {}
    virtual void graph_capture_end(uint64_t key) { (void)key; }
    // What the backend's launch shapes depend on besides the step's token, sequence and logit-row counts.
    virtual uint64_t graph_shape_key(const StepBatch& batch) const {
        (void)batch;
        return 0;
    }

    // Named timing regions of the forward pass (per-component breakdown); no-ops unless profiling is on.
    virtual void set_profiling(bool on) { (void)on; }
    virtual void region(std::string_view name) { (void)name; }
    // Accumulated milliseconds per region since the last reset, and kernel launches counted.
    virtual std::vector<std::pair<std::string, double>> profile(bool reset) {
        (void)reset;
        return {};
    }
    virtual int64_t launches() const { return 0; }
    // One line on the memory the backend holds and what is free (logged at startup).
    virtual std::string memory_report() const { return {}; }
};

std::unique_ptr<Backend> make_cpu_backend(Numerics numerics, int threads = 0);

}  // namespace dsv4
