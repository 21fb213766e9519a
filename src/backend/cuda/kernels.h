// Kernel launchers of the CUDA backend. Host code (cuda_*.cpp, compiled by the host compiler) validates arguments
// and calls these; the .cu files hold only kernels and these thin launchers (no fmt, no exceptions in nvcc code).
// Every launcher enqueues on `stream` and returns; the caller checks cudaGetLastError().
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/sample_rows.h"
#include "backend/weights.h"

namespace dsv4::cuda {

// How K=V rows or indexer keys are stored (backend/state_format.h; dtype values are StateDtype's).
enum RowDtype : int { kRowF32 = 0, kRowBf16 = 1, kRowFp8 = 2 };
constexpr int kRowFp8Block = 64;  // nope dims per UE8M0 scale byte of an fp8_ds_mla record
struct RowFormatDev {
    int dtype = kRowF32;
    int dim = 0;
    int rope_dim = 0;  // K=V rows: trailing dims kept as bf16 in fp8
    bool index_key = false;
    int bytes = 0;    // of one stored row
    Fp8QuantDev fp8;  // dialect and maximum of the e4m3 codes (fp8), and of the K=V rows' reference FP8-sim
};

// Device-side state of one layer for all slots and blocks. Stored rows: RowFormatDev bytes each.
struct LayerStateDev {
    uint8_t* ring = nullptr;         // [slots][ring_rows] K=V rows
    float* main_pending = nullptr;   // [slots][main_rows][2 * main_width]  (float32 in every dtype)
    float* index_pending = nullptr;  // [slots][index_rows][2 * index_width]
    uint8_t* entries = nullptr;      // [blocks][per_block] K=V rows
    uint8_t* index_keys = nullptr;   // [blocks][per_block] indexer keys
    int per_block = 0;
    int main_rows = 0;
    int index_rows = 0;
};

// kernels_basic.cu
void launch_embed(cudaStream_t s, const StepMeta& m, const uint16_t* table, int64_t d, int hc, float* x);
// reference (here and in the mHC, compressor and attention launches): reference numerics, i.e. bf16 outputs and
// double arithmetic (cuda_common.cuh).
void launch_rms_norm(cudaStream_t s, const float* x, const float* weight, int64_t rows, int64_t k, float eps,
                     bool reference, float* y);
void launch_rope(cudaStream_t s, const StepMeta& m, float* x, int heads, int dim, int rope_dim, const float* inv_freq,
                 bool inverse, bool reference);
// launch_rms_norm over each (token, head) row of x [n_tokens, heads, dim], then launch_rope (forward) on it, in one
// launch with the same arithmetic.
void launch_norm_rope(cudaStream_t s, const StepMeta& m, float* x, const float* weight, int heads, int dim,
                      int rope_dim, float eps, const float* inv_freq, bool reference);
// Several norm_rope / rms_norm inputs in one launch (ModelOps::norm_ropes): a block per (token, head) row of each
// target in turn, norm_rope_kernel's arithmetic.
constexpr int kMaxNormRopeTargets = 4;
struct NormRopeRows {
    float* x = nullptr;
    const float* weight = nullptr;
    int heads = 0, dim = 0, rope_dim = 0;  // rope_dim 0: the norm alone
    const float* inv_freq = nullptr;
    // Non-null: the rows (one head, one token a sequence) are also the step's sliding-window K=V rows, written to the
    // ring after the norm and RoPE as store_window writes them.
    uint8_t* ring = nullptr;
    RowFormatDev ring_format;
    int ring_rows = 0;
};
struct NormRopesParams {
    int n = 0;
    NormRopeRows targets[kMaxNormRopeTargets];
    int block_end[kMaxNormRopeTargets] = {};  // set by the launcher
    float eps = 0.0f;
};
void launch_norm_ropes(cudaStream_t s, const StepMeta& m, NormRopesParams p, bool reference);
void launch_scale(cudaStream_t s, float* x, int64_t n, float factor);
// Reads `bytes` (a multiple of 16, 16-byte aligned) with `blocks` blocks of 256 threads and discards them (sink: a
// word it never writes in practice): the bandwidth probe of memory the GPU reads in place (mapped pinned host memory).
void launch_read_words(cudaStream_t s, const void* p, int64_t bytes, int blocks, uint32_t* sink);
void launch_round_bf16(cudaStream_t s, float* x, int64_t n);
// out[r][c] = bf16(x[r * x_stride + c]) (round to nearest even; bf16 bits, rows packed) for r < rows, c < cols; cols
// and x_stride multiples of 4, x 16-byte aligned (the bf16 cuBLASLt linears' activations, cuda_bf16_gemm.h).
void launch_to_bf16_rows(cudaStream_t s, const float* x, int64_t x_stride, int64_t rows, int64_t cols, uint16_t* out);
void launch_gather_rows(cudaStream_t s, const float* x, const int32_t* rows, int64_t n_rows, int64_t width, float* y);
// out[r] = argmax_of_row(x[r]) (backend/model_ops.h; -1 where a row has no choice) for each of `rows` rows of `cols`
// floats.
inline constexpr int32_t kArgmaxNoChoice = -1;
void launch_argmax_rows(cudaStream_t s, const float* x, int64_t rows, int64_t cols, int32_t* out);

// kernels_sample.cu: ModelOps::sample_rows, one block per draw (backend/sample_rows.h defines the result).
struct SampleRowsDev {
    const float* logits = nullptr;  // [rows, vocab]
    int64_t vocab = 0;
    const RowDraw* draws = nullptr;  // [draw_count], device copies
    int64_t draw_count = 0;
    const LogitEdit* edits = nullptr;
    const uint64_t* masks = nullptr;   // sample_mask_words(vocab) words a mask
    float* processed = nullptr;        // [draw_count, vocab] scratch; null when no draw has edits or a mask
    int32_t* out = nullptr;            // [draw_count]
    DrawLogprobs* logprobs = nullptr;  // [draw_count]; null when no draw asks for logprobs
    ProbeMasses* probes = nullptr;     // [draw_count]; null when no draw probes
};
void launch_sample_rows(cudaStream_t s, const SampleRowsDev& p);
void launch_kv_cache_sim(cudaStream_t s, float* kv, int64_t rows, int dim, int nope, Fp8QuantDev quant);
void launch_indexer_query_sim(cudaStream_t s, float* q, int64_t rows, int dim);

// kernels_mhc.cu (hc <= kMaxHcStreams)
constexpr int kMaxHcStreams = 8;
// raw_mixes [n, (2 + hc) * hc] = fn . x (computed by the caller with a GEMV): the kernel applies the rms, the
// sigmoids, Sinkhorn and the collapse.
void launch_hc_pre(cudaStream_t s, const float* x, const float* raw_mixes, int64_t n, int hc, int64_t d,
                   const MhcWeights& w, int iters, float hc_eps, float norm_eps, bool reference, float* u, float* post,
                   float* comb);
void launch_hc_post(cudaStream_t s, float* x, const float* y, const float* post, const float* comb, int64_t n, int hc,
                    int64_t d, bool reference);
// x[t, j] += y[t] for every stream j, with hc_post's arithmetic at post = 1, comb = identity.
void launch_add_to_streams(cudaStream_t s, float* x, const float* y, int64_t n, int hc, int64_t d, bool reference);
void launch_hc_head(cudaStream_t s, const float* x, const float* raw_mixes, int64_t n, int hc, int64_t d,
                    const HcHeadWeights& w, float hc_eps, float norm_eps, bool reference, float* y);

// kernels_mhc_boundary.cu: ModelOps::hc_post_pre in one launch (fast numerics). x [n, hc, d] in place; prev_* the
// previous site's hc_post inputs (all null: none); partial holds hc_boundary_partials(n, hc, d) floats; arrivals n
// counters that are zero before the launch and are left zero.
struct HcBoundaryParams {
    float* x = nullptr;
    int64_t n = 0;
    int hc = 0;
    int64_t d = 0;
    const float* prev_y = nullptr;       // [n, d]
    const float* prev_post = nullptr;    // [n, hc]
    const float* prev_comb = nullptr;    // [n, hc, hc]
    MhcWeights w;                        // fn [(2 + hc) * hc, hc * d], base, scale
    const float* norm_weight = nullptr;  // [d]
    int iters = 0;
    float hc_eps = 0.0f, norm_eps = 0.0f;
    float* partial = nullptr;
    unsigned* arrivals = nullptr;
    float* u = nullptr;     // [n, d]
    float* post = nullptr;  // [n, hc]
    float* comb = nullptr;  // [n, hc, hc]
};
int64_t hc_boundary_partials(int64_t n, int hc, int64_t d);
void launch_hc_boundary(cudaStream_t s, const HcBoundaryParams& p);

// kernels_mhc_mixes.cu: raw[t][r] = fn[r] . x[t] (fn [n_mix, width] float32, width % 4 == 0, 16-byte aligned rows),
// split over the width in fixed chunks; partial holds hc_mixes_partials(n, width, n_mix) floats.
bool hc_mixes_supported(int64_t width);
int64_t hc_mixes_partials(int64_t n, int64_t width, int n_mix);
void launch_hc_mixes(cudaStream_t s, const float* x, int64_t n, int64_t width, const float* fn, int n_mix,
                     float* partial, float* raw);

// pdl.cu: whether kernels launch programmatically dependent on their predecessor (pdl.cuh; CudaOptions::pdl).
// Process-wide: the launchers are free functions of a stream.
void set_programmatic_launch(bool enabled);
bool programmatic_launch();

// kernels_gemv.cu: decode GEMV, weights decoded in registers (m <= kMaxGemvVectors activation rows; see
// gemv_supported). A single vector takes the streamed GEMV (kernels_gemv_stream.cu, same bits) where `stream` allows.
struct GemvStreamConfig {
    bool enabled = false;
    int tile_bytes = 4096;  // target bytes of a tile of whole rows (one bulk copy)
    int stages = 3;         // tiles in flight per warp
};
constexpr int kMaxGemvVectors = 8;
constexpr int64_t kMaxGemvPairs = 65535;  // grid.y limit of the expert GEMV
bool gemv_supported(WeightFormat format, int64_t cols, int64_t m);
// y[v * y_stride + r] = W[r] . x[v * x_stride]: passes of kMaxGemvVectors rows (x_stride, y_stride multiples of 4).
// groups > 1 (the grouped output projection, one launch for all groups): rows g * (rows / groups) .. of group g read
// x + g * group_x.
void launch_gemv(cudaStream_t s, const WeightRef& w, const float* x, int64_t x_stride, int64_t m, float* y,
                 int64_t y_stride, bool round_out, int groups = 1, int64_t group_x = 0,
                 const GemvStreamConfig& stream = {});
// Largest activation row count sent to the GEMV passes (above: the generic kernel, i.e. prefill).
constexpr int64_t kMaxGemvRows = 256;
// (The row and pair counts from which fast numerics switch to tensor cores are CudaOptions::min_gemm_rows and
// min_grouped_fp8_pairs / min_grouped_pairs, backend/cuda/cuda_factory.h.)
// Routed experts: out[p][r] = W_{ids[p]}[r] . x[p / x_div] (experts of `format`, FP8 codes of `dialect`).
void launch_expert_gemv(cudaStream_t s, const StepMeta& m, WeightFormat format, Fp8Dialect dialect,
                        const WeightRef* table, int n_experts, const int32_t* ids, int64_t pairs, int x_div,
                        const float* x, int64_t k, int64_t rows, bool round_out, float* out,
                        const GemvStreamConfig& stream = {});
// Streaming multiprocessors of the current device (a host-side query, legal during graph capture).
int device_sms();

// The routed experts' per-pair GEMVs on FP8 tensor cores (kernels_expert_gemv_fp4.cu), FP4 e2m1 weights with per-32
// UE8M0 scales (W4A8): pair p's rows of weight `which` (blockIdx.z) of expert ids[p] against x[p / x_div], quantized
// per 128 like every FP8-path input, into y[which] + p * rows. Each mma.sync step covers one 32-wide scale group, so
// every group's scale multiplies its exact partial sum (no exponent window, nothing clamped); block sums are float32.
// An expert id outside [0, n_experts) is skipped and raises kErrorExpertId.
struct ExpertGemvFp4Params {
    const WeightRef* tables[2] = {};  // device arrays [n_experts]: W1 and W3, or W2 alone
    float* y[2] = {};
    int n_weights = 1;
    int n_experts = 0;
    const int32_t* ids = nullptr;
    int64_t pairs = 0;
    int x_div = 1;
    const float* x = nullptr;  // pair p's k inputs at x + (p / x_div) * k (16-byte aligned)
    // Set: the inputs are SwiGLU(x, swiglu_up) with the clamp `limit` (the down projection reading the up projection's
    // two outputs; no SwiGLU launch between).
    const float* swiglu_up = nullptr;
    float limit = 0.0f;
    int64_t k = 0;
    int64_t rows = 0;  // of every expert's weight
    StepMeta meta;
    // K split across thread blocks: expert_gemv_fp4_partials(...) floats, and expert_gemv_fp4_arrivals(...) counters
    // that are zero before the launch (and are again after it).
    float* partials = nullptr;
    int32_t* arrivals = nullptr;
    // Set (W2 alone, pair p = token p / combine_k's pair p % combine_k): combine_y[t] = the token's pairs' rows times
    // their routing weights, summed in pair order, plus combine_shared[t] (optional): launch_combine's weight-after
    // arithmetic, done by the last of a token's blocks to finish each 128-row group (no combine launch; y unused).
    float* combine_y = nullptr;
    const float* combine_weights = nullptr;
    const float* combine_shared = nullptr;
    int combine_k = 0;
    int splits = 1;  // set by the launcher
};
// Whether the kernel takes FP4 experts of k inputs (a multiple of 128, staged in shared memory).
bool expert_gemv_fp4_supported(int64_t k);
int64_t expert_gemv_fp4_partials(int64_t pairs, int n_weights, int64_t rows);
int64_t expert_gemv_fp4_arrivals(int64_t pairs, int n_weights, int64_t rows);
void launch_expert_gemv_fp4(cudaStream_t stream, ExpertGemvFp4Params p);

// kernels_gemv_stream.cu: the single-vector GEMV with the weights streamed into shared memory by bulk copies (a few
// tiles of whole rows in flight per warp), bit for bit the GEMV above. Instance i (blockIdx.y; a group of rows with
// its own vector, or a (token, expert) pair) multiplies rows i * count .. of w (or all of table[ids[i]]) with
// x + (i / x_div) * x_stride into y + i * y_stride. Returns false, launching nothing, for a shape or a plain weight
// it cannot stream (the caller runs the GEMV above).
constexpr int kMaxStreamWeights = 8;
struct GemvStreamParams {
    WeightRef w;  // the weight; in expert mode its format, dialect and shape only
    const WeightRef* table = nullptr;
    const int32_t* ids = nullptr;
    int n_experts = 0;
    int64_t instances = 1;
    int64_t count = 0;  // rows per instance (plain mode)
    const float* x = nullptr;
    int64_t x_stride = 0;
    int x_div = 1;
    float* y = nullptr;
    int64_t y_stride = 0;
    bool round_out = false;
    StepMeta meta;
    // Several weights of one format, dialect and width against the same vector x (instances = 1): weight j is
    // multi[j] into multi_y[j], its tiles after weight j - 1's in one launch. n_multi = 0: the single weight w.
    int n_multi = 0;
    WeightRef multi[kMaxStreamWeights];
    float* multi_y[kMaxStreamWeights] = {};
    int64_t multi_tile_end[kMaxStreamWeights] = {};  // set by the launcher
};
bool launch_gemv_stream(cudaStream_t s, const GemvStreamConfig& c, GemvStreamParams p);

// kernels_gemv_bf16.cu: decode-sized linears over bf16 weights on bf16 tensor cores (fast numerics): y[t][r] = sum_j
// W[r][j] * bf16(x[t][j]) in float32 on mma.sync, 1..kMaxBf16GemvRows tokens (batch invariant over that range), K a
// multiple of kBf16GemvBlock, x 16-byte aligned with x_stride a multiple of 4. Several weights of one input in one
// launch (the compressors' wkv and wgate).
constexpr int kMaxBf16GemvRows = 8;
constexpr int kMaxBf16GemvTargets = 8;
constexpr int64_t kBf16GemvBlock = 64;  // K elements of a warp's 128-byte load step
struct Bf16GemvTarget {
    WeightRef w;         // bf16, w.cols == k
    float* y = nullptr;  // token t's w.rows outputs at y + t * y_stride
    int64_t y_stride = 0;
};
struct Bf16GemvParams {
    int n = 0;
    Bf16GemvTarget targets[kMaxBf16GemvTargets];
    const float* x = nullptr;  // token t's k inputs at x + t * x_stride
    int64_t x_stride = 0;
    int m = 0;
    int64_t k = 0;
    // Set by the launcher: warps a 16-row tile's K is split over, the cumulative thread blocks per target.
    int splits = 1;
    int block_end[kMaxBf16GemvTargets] = {};
};
bool bf16_gemv_supported(int64_t m, int64_t k, int64_t x_stride);
void launch_bf16_gemv(cudaStream_t stream, Bf16GemvParams p);

// kernels_gemm.cu: tensor-core GEMM (fast numerics): bf16 activations x bf16-decoded weights, float32 accumulation.
// Grids of few blocks (skinny weights at decode-sized batches: the router's 160-row gate makes two) split K:
// gemm_bf16_splits(rows, m, cols) splits, and with more than one `partial` holds splits * m * rows floats (scratch)
// and a second launch adds the splits' sums in order.
int gemm_bf16_splits(int64_t rows, int64_t m, int64_t cols);
void launch_gemm_bf16(cudaStream_t s, const WeightRef& w, const float* x, int64_t x_stride, int64_t m, float* y,
                      int64_t y_stride, bool round_out, int splits = 1, float* partial = nullptr);
// Routed experts over pairs grouped by expert: tile t covers rows [tile_row0[t], + tile_rows[t]) of row_ids, all of
// expert tile_expert[t]; x row of pair p is x[(p / x_div) * x_stride], output row y[p * y_stride]. The grid covers
// max_tiles tiles; those at or past tile_count[0] (device) do nothing.
void launch_expert_gemm_bf16(cudaStream_t s, WeightFormat format, const WeightRef* table, int64_t rows_out,
                             int max_tiles, const int32_t* tile_count, const int32_t* tile_expert,
                             const int32_t* tile_row0, const int32_t* tile_rows, const int32_t* row_ids, int x_div,
                             const float* x, int64_t x_stride, float* y, int64_t y_stride, bool round_out);
int gemm_tile_rows();
// The tensor-core GEMM reads whole 64-wide reduction slices of 16-element groups with vector loads: the reduction dim
// must be a multiple of 64 (and activation rows 16-byte aligned).
bool gemm_supported(int64_t cols);

// kernels_linear.cu: y[v * y_stride + g * count + r] = sum_j W[row0 + g * count + r, j] * x[g * group_x + v * x_stride
// + j]
// f64: double accumulation (reference numerics).
void launch_linear(cudaStream_t s, const WeightRef& w, int64_t row0, int64_t count, int groups, const float* x,
                   int64_t x_stride, int64_t group_x, int64_t m, float* y, int64_t y_stride, bool round_out, bool f64);
// Reference numerics: bf16 input then per-128-block FP8 quantize-dequantize of each row of length k.
void launch_act_quant(cudaStream_t s, const float* x, float* out, int64_t rows, int64_t k, Fp8QuantDev quant);

// kernels_state.cu
struct CompressArgs {
    const float* a = nullptr;     // [N, width] this step's kv projections
    const float* g = nullptr;     // [N, width] this step's gate projections (without ape)
    const float* ape = nullptr;   // [ratio, width]
    const float* norm = nullptr;  // [head_dim]
    float* pending = nullptr;     // [slots][rows][2 * width]
    uint8_t* store = nullptr;     // [blocks][per_block] stored rows of `format`
    RowFormatDev format;
    const float* inv_freq = nullptr;
    int rows = 0;
    int width = 0;
    int head_dim = 0;
    int ratio = 0;
    int per_block = 0;
    int rope_dim = 0;
    bool overlap = false;
    bool indexer = false;  // reference numerics: Hadamard + FP4-sim (indexer keys) instead of FP8-sim
    bool reference = false;
    float norm_eps = 1e-6f;
};
constexpr int kMaxCompressSlots = 256;  // 2 * ratio (CSA) or ratio (HCA)
constexpr int kMaxCompressHeadDim = 1024;
void launch_compress(cudaStream_t s, const StepMeta& m, const CompressArgs& c);
void launch_store_window(cudaStream_t s, const StepMeta& m, const float* kv, const RowFormatDev& f, int ring_rows,
                         uint8_t* ring);
// Encodes rows src[i * f.dim ..] into dst + i * f.bytes (i < n_rows): this step's rows for attention, synthetic state.
void launch_encode_rows(cudaStream_t s, const float* src, int64_t n_rows, const RowFormatDev& f, uint8_t* dst);

// kernels_attention.cu
struct AttentionArgs {
    const float* q = nullptr;        // [N, H, d]
    const uint8_t* kv = nullptr;     // [N] this step's rows, stored like the ring (float32: the kv tensor itself)
    const uint8_t* ring = nullptr;   // [slots][ring_rows] stored rows
    const uint8_t* store = nullptr;  // [blocks][per_block] stored rows
    RowFormatDev format;             // of kv, ring and store
    const float* sinks = nullptr;    // [H]
    const int32_t* topk = nullptr;   // [N, k] or null
    float* out = nullptr;            // [N, H, d]
    int heads = 0;
    int dim = 0;
    int window = 0;
    int ring_rows = 0;
    int per_block = 0;
    int ratio = 0;  // 0 for sliding layers
    int topk_k = 0;
    bool csa = false;
    float scale = 1.0f;
    bool reference = false;
    // Set: the split merge also applies the inverse RoPE (rope_pair) to the trailing unrotate_dims dims of each output
    // row at its query's position (ModelOps::attention_unrotated; the rope kernel's arithmetic, in the same launch).
    const float* unrotate_inv_freq = nullptr;
    int unrotate_dims = 0;
    // > 0: the split kernels' keys per split whatever the step's size (CudaOptions::attention_keys_per_split; a
    // multiple of 64): a token's splits then depend on its own keys only.
    int fixed_keys_per_split = 0;
    // Set (the wide kernel only): each query row is RMS-normed (no weight) and its trailing query_rope_dims dims
    // rotated as the kernel stages it (norm_rope_row.cuh: norm_rope's bits; q itself is left as it was).
    const float* query_inv_freq = nullptr;
    int query_rope_dims = 0;
    float query_eps = 0.0f;
    bool norm_queries = false;
};
constexpr int kMaxAttentionDim = 1024;
constexpr int kMaxNormRowDim = 512;         // rows a warp norms and rotates (norm_rope_row.cuh; dims a multiple of 32)
constexpr int kMaxQueryNormRopeDims = 128;  // rope dims of queries the wide kernel norms as it stages them
void launch_attention(cudaStream_t s, const StepMeta& m, const AttentionArgs& a);
// Exact / fast numerics: key splits with online softmax, merged with the sink. max_keys bounds every query's key
// count; part_acc [N * H * splits * dim] and part_ml [N * H * splits * 2] are scratch.
int attention_splits(int64_t n_tokens, int heads, int max_keys, int fixed_keys_per_split = 0);
void launch_attention_split(cudaStream_t s, const StepMeta& m, const AttentionArgs& a, int max_keys, float* part_acc,
                            float* part_ml);
// Merges the splits' partials with the sinks into a.out (then a.unrotate_*).
void launch_attention_combine(cudaStream_t s, const StepMeta& m, const AttentionArgs& a, int64_t rows, int splits,
                              const float* part_acc, const float* part_ml);
// kernels_attention_mqa.cu: fast numerics on tensor cores (bf16 q, keys and probabilities; float32 accumulation),
// same partials and combine as the split kernel.
constexpr int kMaxMqaDim = 512;
bool mqa_attention_supported(const RowFormatDev& f, int dim);
int mqa_attention_splits(int64_t n_tokens, int heads, int max_keys, int fixed_keys_per_split = 0);
void launch_attention_mqa(cudaStream_t s, const StepMeta& m, const AttentionArgs& a, int max_keys, float* part_acc,
                          float* part_ml);
// kernels_attention_wide.cu: the same numerics with a block per (token, key split) and all the token's heads (33 to
// 64); fp8_ds_mla rows only. With one split (prefill sizes) the kernel applies the sink merge and inverse RoPE and
// writes a.out (no partials); with several it writes the split kernel's partials (part_acc [N * H * splits * dim],
// part_ml [N * H * splits * 2]) and the launcher adds the merge. A token's key rows are resolved segment_keys at a
// time (rounded to whole chunks of 64, at most 1024; the same bits for any value).
struct MqaWideLaunch {
    int segment_keys = 1024;
    int splits = 1;          // mqa_wide_splits
    int keys_per_split = 0;  // mqa_wide_keys_per_split (with splits > 1)
    float* part_acc = nullptr;
    float* part_ml = nullptr;
    // The kernel on wgmma where mqa_wgmma_supported (kernels_attention_wgmma.cu: 512-dim heads; the same numerics,
    // not the same bits: other summation orders) (CudaOptions::mqa_wgmma).
    bool wgmma = false;
    // Set (one split, mqa_wide_fp8_out_supported): the outputs, closed and unrotated as they would go to a.out, go
    // instead as the FP8 activations of the output projection: e4m3 codes [rows_pad][heads * dim] and their scales
    // [heads * dim / 128][rows_pad] (Fp8Act's layout, kernels_fp8.h), launch_quant_fp8's quantization of a.out's
    // rows (fp8_act_quant.cuh). a.out is not written; rows past the step's tokens are the caller's to fill.
    uint8_t* out_codes = nullptr;
    float* out_scales = nullptr;
    int64_t out_rows_pad = 0;
};
constexpr int64_t kMqaWideMinTokens = 32;  // fewer tokens take the 32-head split kernel (decode latency)
bool mqa_wide_supported(const RowFormatDev& f, int dim, int heads);
// The mma.sync kernel can write its outputs as FP8 activations (MqaWideLaunch::out_codes): V4's 512-dim fp8_ds_mla
// rows, whose warp columns hold whole 128-dim scale blocks.
bool mqa_wide_fp8_out_supported(const RowFormatDev& f, int dim, int heads);
int mqa_wide_segment_keys(int64_t keys);
int mqa_wide_keys_per_split(int64_t n_tokens, int max_keys);
int mqa_wide_splits(int64_t n_tokens, int max_keys);
void launch_attention_mqa_wide(cudaStream_t s, const StepMeta& m, const AttentionArgs& a, const MqaWideLaunch& w);
// kernels_attention_wgmma.cu: the wide kernel's work on wgmma for kMqaWgmmaDim-dim heads (launched by
// launch_attention_mqa_wide when w.wgmma; w.segment_keys already rounded by mqa_wide_segment_keys).
constexpr int kMqaWgmmaDim = 512;
bool mqa_wgmma_supported(const RowFormatDev& f, int dim, int heads);
void launch_attention_mqa_wgmma(cudaStream_t s, const StepMeta& m, const AttentionArgs& a, const MqaWideLaunch& w);
// scores [N, max_entries] of sum_h w_h relu(q_h . K_e) for each token's eligible entries (the rest is not written;
// tensor_cores: the MMA kernel where supported; launch_topk picks from them).
// keys: the stored indexer keys ([blocks][per_block] of key_format; key_format.dim <= kMaxIndexDim).
constexpr int kMaxIndexDim = 256;
struct IndexScoresArgs {
    const float* q = nullptr;        // [N, heads, dim]
    const float* weights = nullptr;  // [N, heads]
    const uint8_t* keys = nullptr;
    RowFormatDev key_format;
    int heads = 0, ratio = 0, per_block = 0;
    int64_t max_entries = 0;
    float* scores = nullptr;  // [N, max_entries]
    // MMA kernel, steps of kIndexTileMinTokens tokens or more and 128-dim keys: consecutive tokens a block (1 or 4),
    // which look up and decode each chunk of keys once for all of them (the same bits either way).
    int token_tile = 1;
};
constexpr int kIndexTileMinTokens = 64;
void launch_index_scores(cudaStream_t s, const StepMeta& m, const IndexScoresArgs& a, bool tensor_cores, bool f64);
// Top-k of scores [N, max_entries] over each token's (position + 1) / ratio eligible entries: the picks in index
// order, exact ties at the k-th score lowest index first, -1 padded (one block per token; reads m.positions).
void launch_topk(cudaStream_t s, const StepMeta& m, const float* scores, int64_t max_entries, int ratio, int k,
                 int32_t* topk);
// kernels_indexer_mma.cu: the scores on tensor cores (fast numerics; fp8 index keys or bf16 keys, <= 64 heads).
bool index_scores_mma_supported(const RowFormatDev& f, int heads);
void launch_index_scores_mma(cudaStream_t s, const StepMeta& m, const IndexScoresArgs& a);

// kernels_moe.cu
constexpr int kMaxRoutedExperts = 1024;
constexpr int kMaxExpertsPerToken = 16;
void launch_route(cudaStream_t s, const StepMeta& m, const float* logits, int experts, int k, int func,
                  const float* bias, const int32_t* tid2eid, bool hash, bool normalize, float route_scale, bool f64,
                  float* weights, int32_t* ids);
// out[p][r] = W_{ids[p]}[r] . x[p / x_div] (table: device array of the experts' WeightRef). f64 (here and in
// launch_route, launch_index_scores): double arithmetic, the reference numerics' (cuda_common.cuh).
void launch_expert_linear(cudaStream_t s, const StepMeta& m, const WeightRef* table, int n_experts, const int32_t* ids,
                          int64_t pairs, int x_div, const float* x, int64_t k, int64_t rows, bool round_out, bool f64,
                          float* out);
// Grouping (token, expert) pairs by expert for the tensor-core expert GEMMs (prefill): counts per expert, then
// row_ids[offset[e] ..] = the pairs of expert e (cursor starts as a copy of the offsets). Ids outside
// [0, n_experts) belong to no group and set the step's error flag (kErrorExpertId).
void launch_count_experts(cudaStream_t s, const StepMeta& m, const int32_t* ids, int64_t pairs, int n_experts,
                          int32_t* counts);
// The same counts added to `counts` (not zeroed first): the expert tier's pair counters of in-place steps.
void launch_add_expert_counts(cudaStream_t s, const StepMeta& m, const int32_t* ids, int64_t pairs, int n_experts,
                              int32_t* counts);
void launch_scatter_pairs(cudaStream_t s, const int32_t* ids, int64_t pairs, int n_experts, int32_t* cursor,
                          int32_t* row_ids);
// Offsets and tiles of rows_per_tile rows per expert from the counts (at most max_tiles; tile_count[0] = tiles made).
void launch_plan_tiles(cudaStream_t s, const int32_t* counts, int n_experts, int rows_per_tile, int max_tiles,
                       int32_t* cursor, int32_t* tile_expert, int32_t* tile_row0, int32_t* tile_rows,
                       int32_t* tile_count);
// reference: bf16 outputs and double arithmetic (reference numerics).
void launch_swiglu(cudaStream_t s, const float* g, const float* u, int64_t rows, int64_t width, float limit,
                   const float* row_weights, bool reference, float* act);
void launch_combine(cudaStream_t s, const float* routed, const float* weights, const float* shared, int64_t n, int k,
                    int64_t d, bool weight_after, bool reference, float* y);

// kernels_moe_decode.cu: the routed experts of a decode-sized step (the per-pair GEMV's sizes, exact or fast
// numerics) fused into two launches: gate/up projections with the SwiGLU, then down projections with the combine.
constexpr int64_t kMaxFusedMoeHidden = 12288;  // the up launch stages a token's activations in 48 KB of shared memory
struct MoeUpDecodeParams {
    WeightFormat format = WeightFormat::kFp4Row;  // of every routed expert
    const WeightRef* w1 = nullptr;                // device tables, one entry per expert
    const WeightRef* w3 = nullptr;
    int n_experts = 0;
    const int32_t* ids = nullptr;  // [pairs]; an id outside [0, n_experts) sets the error flag
    int64_t pairs = 0;
    int k = 1;                 // pairs per token: pair p reads token p / k
    const float* x = nullptr;  // [tokens, d]
    int64_t d = 0;             // hidden size (W1 / W3 columns)
    int64_t inter = 0;         // intermediate size (W1 / W3 rows)
    float limit = 0.0f;        // SwiGLU clamp (0: none)
    float* act = nullptr;      // [pairs, inter]
};
void launch_moe_up_decode(cudaStream_t s, const StepMeta& m, const MoeUpDecodeParams& p);

struct MoeDownDecodeParams {
    WeightFormat format = WeightFormat::kFp4Row;
    const WeightRef* w2 = nullptr;  // device table
    int n_experts = 0;
    const int32_t* ids = nullptr;    // [tokens, k]
    const float* weights = nullptr;  // [tokens, k] routing weights, applied after W2
    int64_t tokens = 0;
    int k = 1;
    const float* act = nullptr;  // [tokens * k, inter]
    int64_t inter = 0;
    int64_t d = 0;                  // W2 rows
    const float* shared = nullptr;  // [tokens, d] the shared expert's output, or null
    float* y = nullptr;             // [tokens, d]
};
void launch_moe_down_decode(cudaStream_t s, const StepMeta& m, const MoeDownDecodeParams& p);

// kernels_fp4_layout.cu: n_words checkpoint-order FP4 words rewritten in place into the sign-split layout
// (backend/fp4_layout.h).
void launch_fp4_to_sign_split(cudaStream_t s, uint32_t* words, int64_t n_words);

// kernels_synthetic.cu: random weights / state in the checkpoint formats (values = N(0, stddev), codes of
// value * inv_scale; the caller writes the matching UE8M0 scale bytes).
// fnuz: FNUZ e4m3 codes (max 240) instead of OCP (max 448).
void launch_fill_fp8(cudaStream_t s, uint8_t* codes, int64_t n, float inv_scale, float stddev, uint64_t seed,
                     bool fnuz);
// FP4: n_words sign-split words (backend/fp4_layout.h), element e's code that of value e.
void launch_fill_fp4(cudaStream_t s, uint32_t* words, int64_t n_words, float inv_scale, float stddev, uint64_t seed);
void launch_fill_bytes(cudaStream_t s, uint8_t* p, int64_t n, uint8_t value);
void launch_fill_bf16(cudaStream_t s, uint16_t* p, int64_t n, float stddev, uint64_t seed);
void launch_fill_f32(cudaStream_t s, float* p, int64_t n, float mean, float stddev, uint64_t seed);
void launch_fill_table(cudaStream_t s, int32_t* p, int64_t rows, int cols, int64_t max_value, uint64_t seed);

}  // namespace dsv4::cuda
