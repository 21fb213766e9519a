// Entry points of the CUDA backend for host code that is compiled without nvcc (CLI, engine, tests).
// Available when the build has DSV4_WITH_CUDA (cmake -DDSV4_CUDA=ON); guard calls with #ifdef DSV4_WITH_CUDA.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace dsv4 {

// How a CUDA backend is set up. Filled from EngineConfig (or a CLI's flags); the environment may override the tuning
// knobs, read in one place: cuda_options_from_env().
struct CudaOptions {
    int device = 0;
    // Step scratch: 6 GiB covers an 8K-token prefill chunk of one sequence at the Flash shapes; a step of 8K tokens
    // over 64 sequences (serving at an 8,192-token budget) asked for more (2026-12-06).
    int64_t workspace_mib = 6144;
    // Fast numerics: activation rows from which linears run on tensor cores, and (token, expert) pairs from which the
    // routed experts are grouped by expert for tensor-core GEMMs (H200, 4-layer Flash: at 16 tokens the GEMVs are
    // faster, at 32 the GEMMs; docs/performance-log.md).
    int64_t min_gemm_rows = 32;
    int64_t min_grouped_pairs = 128;  // bf16-tile grouping (where W4A8 cannot run)
    // W4A8 grouping (FP8 wgmma) from 64 pairs (11 tokens): below it the per-pair W4A8 GEMVs on mma.sync are faster on
    // the Flash shapes (4 tokens 201 vs 282 us, 8 tokens 373 vs 507 us; batch-8 decode 194 -> 216 tok/s; H200,
    // performance-log.md 2026-12-03 fifth session). With fp8_gemv off the float32 per-pair GEMVs lose from 24 pairs
    // (305 vs 285 us at 4 tokens): set DSV4_MIN_GROUPED_FP8_PAIRS=24 with DSV4_FP8_GEMV=0.
    int64_t min_grouped_fp8_pairs = 64;
    // FP8 weights run on FP8 tensor cores from min_fp8_rows activation rows: cuBLASLt's block-scaled GEMM from
    // min_fp8_lt_rows, our FP8 wgmma GEMM below (cuBLASLt measured faster at every row count, H200 2026-12-01). From
    // 2 rows: at 8 rows cuBLASLt beat the multi-vector GEMV on every FP8 shape of Flash (wq_b 21 vs 110 us, wo_b 21
    // vs 128 us; bench kernels, H200 2026-12-02). With fp8_gemv (below) 1 to 8 rows take the FP8 GEMV first.
    int64_t min_fp8_rows = 2;
    int64_t min_fp8_lt_rows = 1;
    // Fast numerics: bf16 weights (the compressors' projections, the indexer's head weights, the router's gate) on
    // cuBLASLt's bf16 GEMM from min_bf16_lt_rows activation rows (cuda_bf16_gemm.h; the same roundings as the mma.sync
    // GEMM below, another summation order) (DSV4_MIN_BF16_LT_ROWS). Narrow weights (the router's gate, weights_proj)
    // are slower there at 256 rows in the kernel bench, yet a 2,048-row threshold for them made decode B=256 slower
    // (compressor region 1.09 -> 1.37 ms, H100, performance-log.md 2026-12-08): one threshold for all.
    int64_t min_bf16_lt_rows = 256;
    // Fast numerics: bf16 weights at min_bf16_gemv_rows to 8 activation rows on the bf16 GEMV (kernels_gemv_bf16.cu:
    // mma.sync over bf16-rounded activations, the roundings of the rows above) instead of the float32 GEMV, which reads
    // an L2-resident weight once a row (DSV4_MIN_BF16_GEMV_ROWS; 9 or more: off). Off until it has run on a GPU
    // (written without one, 2026-12-08: predicted decode B=8 +8-12%); 2 is the setting to measure.
    int64_t min_bf16_gemv_rows = 9;
    // FP8 weights at 1 to 8 activation rows on the FP8 GEMV (kernels_gemv_fp8.cu: mma.sync over per-128 quantized
    // activations, the roundings of the rows above) instead of the float32 GEMV (1 row) or cuBLASLt.
    bool fp8_gemv = true;
    // Kernel paths forced by name (backend/cuda/linear_plan.h; empty: chosen by shape); a forced path the shapes
    // cannot take is an error naming the requirement.
    std::string linear_path;
    std::string moe_path;
    bool profile_ops = false;  // profiling times every op instead of the model's regions
    // Single-vector GEMVs stream their weights into shared memory by bulk copies (kernels_gemv_stream.cu; same bits
    // as the register GEMV), for the routed experts' per-pair GEMVs and for the other linears (then the projections
    // of one input share a launch, ModelOps::linears). Experts only by default: the batch-1 decode graph measured
    // experts+shared 5.56 -> 4.82 ms a token streamed, but the attention region 6.54 -> 7.32 ms with the linears
    // streamed as well (H200, flash-160, performance-log.md 2026-12-03 fourth session). Then the target tile bytes
    // and the tiles in flight per warp.
    bool gemv_stream_experts = true;
    bool gemv_stream_linears = false;
    // The float32-path linears of one input (the compressors', the indexer's projections) in one streamed launch even
    // when the other linears stay on the register GEMV (DSV4_MERGE_LINEARS; same bits either way): batch 1 85.3 ->
    // 87.5 tok/s, 28.5 -> 26.0 graph nodes a layer (H200, flash-160, performance-log.md 2026-12-03 sixth session).
    bool gemv_merge_linears = true;
    // Fast numerics, decode-sized steps: a second stream (branches of the decode graph) takes the shared expert while
    // the routed experts' up projection runs (joined before the down projection that adds it), and the compressors
    // and the lightning indexer while the query path runs (joined by the attention) (DSV4_SIDE_STREAM, formerly
    // DSV4_SHARED_STREAM; the same kernels and bits either way).
    bool side_stream = true;
    // Fast numerics, steps of more than 64 tokens (prefill chunks): the side stream takes the compressors and the
    // lightning indexer too, on whatever kernels their linears choose (cuBLASLt has a workspace for each stream)
    // (DSV4_SIDE_STREAM_PREFILL; the same kernels and bits either way: CompressorsBesideEqualOneStream). Prefill 2K
    // +0.6%, 8K +0.3% on the H100 (performance-log 2026-12-07, ninth session); off until golden and the speculative
    // suites (verify steps of more than 64 tokens in graphs) have run with it on a GPU.
    bool side_stream_prefill = false;
    // Steps whose tokens see at most index_topk compressed entries attend to every entry without the lightning indexer
    // (ModelOps::indexer_picks_all: the picks its top-k would give) (DSV4_INDEXER_ALL_ENTRIES; 0: always score).
    bool indexer_all_entries = true;
    // Fast numerics, steps of 32 tokens or more: one block per token (and key split) and all its heads; with one
    // split (prefill) the sink merge in the same kernel (kernels_attention_wide.cu) (DSV4_MQA_WIDE; 0: the 32-head
    // split kernel and its merge).
    bool mqa_wide = true;
    // Fast numerics, steps on the wide attention kernel with one key split a token (prefill sizes, from 133 tokens):
    // the query heads' RMSNorm and RoPE applied as the kernel stages them instead of a norm_rope pass over q
    // (ModelOps::normed_attention_unrotated; the same bits: CudaState.NormedQueriesInTheWideKernel)
    // (DSV4_FUSED_QUERY_NORM; 0: off). On: prefill 2K / 8K +0.7% (norm_rope 19.5 -> 2.3 ms, the attention kernel 105.7
    // -> 119.2 ms at 8K; H100, 24 layers, performance-log.md 2026-12-07 tenth session).
    bool fused_query_norm = true;
    // Fast numerics, steps whose queries are normed in the wide kernel (fused_query_norm) with V4's 512-dim fp8_ds_mla
    // rows: the kernel writes its outputs as the grouped output projection's FP8 activations (codes and per-128
    // scales; ModelOps::normed_attention_projected), not as floats that a quantization pass reads back (the same bits:
    // CudaState.AttentionOutputsAsFp8Activations) (DSV4_ATTENTION_FP8_OUT; 0: off). On: prefill 2K +1.5%, 8K +1.2%,
    // decode B=64 / 256 unchanged (H100, 24 layers, performance-log.md 2026-12-08 fifteenth session).
    bool attention_fp8_out = true;
    // Fast numerics, steps on the wide attention kernel with 512-dim heads: its work on wgmma (kernels_attention_
    // wgmma.cu: each operand tile read from shared memory once a warpgroup; the same numerics in other summation
    // orders) (DSV4_MQA_WGMMA; 0: the mma.sync kernel). Off: slower, the attention kernel 119 -> 176 ms at an 8K
    // prefill, prefill 8K -9% (H100, 24 layers, performance-log.md 2026-12-07 eleventh session).
    bool mqa_wgmma = false;
    // Fast numerics: the bf16 tensor-core GEMM splits K where its grid has few blocks (the router's gate at decode
    // batch sizes), the splits' sums added in order (DSV4_GEMM_SPLIT_K; 0: one block a tile over all of K).
    bool gemm_split_k = true;
    // Fast numerics: the routed FP4 experts' grouped GEMMs on the warp-specialized kernel (two producer warpgroups
    // copy and expand, two consumers run wgmma; kernels_expert_ws.cu; the same bits) (DSV4_EXPERT_WS; 0: the
    // two-warpgroup kernel). Off: with one producer warpgroup 12-19% slower, with two 1-3% slower in the experts at
    // 64-8192 tokens (H100, 2026-12-06).
    bool expert_ws = false;
    // Fast numerics: the L2 prefetch-size hint (bytes: 0, 128, 256) of the grouped W4A8 kernel's FP4 weight loads in
    // its decode tiles (DSV4_EXPERT_L2_PREFETCH; the same bits for any value). 256: the experts 7% faster at 64 and
    // 256 tokens, decode B=64 / B=256 +4% (H100, 2026-12-06).
    int expert_l2_prefetch = 256;
    // Fast numerics: the routed FP4 experts' down projection at prefill sizes on 48-token tiles, two blocks an SM,
    // instead of 128-token tiles one block an SM (the same bits) (DSV4_EXPERT_HALF_WIDE; 0: 128-token tiles). On:
    // prefill 2K / 8K +1.7-1.9%, the down projection -20% at 8K (H100, 24 layers, 2026-12-06; a 2,048-token chunk
    // gives an expert ~77 tokens: two 48-token tiles waste less than one of 128).
    bool expert_half_wide = true;
    // Fast numerics: the routed FP4 experts' 16-token (decode) tiles on the register-weights kernel: each thread
    // expands its weight rows into wgmma's register operand, no weight staging in shared memory and no barrier a K
    // block (kernels_expert_rs.cu; the last bits differ from the staged kernel's) (DSV4_EXPERT_RS; 0: the staged
    // kernel). On: decode B=64 / B=256 +16-17% (H200, 2026-12-06).
    bool expert_register_weights = true;
    // Fast numerics, FP4 experts at prefill sizes (the wide tiles): the experts with tokens expanded to e4m3 copies
    // once a step (one layer's three projections of every expert: 4.2 GB at Flash's shapes with 160 experts, 6.7 GB
    // with 256; allocated at the first such step, and without the memory the staged kernel runs), the activations
    // gathered in slot order, and the grouped GEMMs on TMA-fed warp-specialized wgmma with no expansion in their loop
    // (kernels_expert_tma.cu; the staged kernel's bits) (DSV4_EXPERT_TMA; 0: the staged kernel).
    bool expert_tma = false;
    // Fast numerics: warps the FP8 GEMV (kernels_gemv_fp8.cu) aims for before it stops splitting K; 0: its default
    // (1,056: one wave of 8 warps an SM on the H200). A tuning knob: other splits, other summation orders
    // (DSV4_FP8_GEMV_WARPS).
    int fp8_gemv_warps = 0;
    // Fast numerics, steps of 64 tokens or more: consecutive tokens scored by one block of the lightning indexer's MMA
    // kernel (1 or 4; each chunk of keys looked up and decoded once for the four; the same bits either way:
    // CudaIndexScores.TokenTilesGiveOneTokenBlocksBits) (DSV4_INDEX_TOKEN_TILE). 4: the 8K prefill's index scores
    // 43.9 -> 20.1 ms, prefill 8K +4.1% (H100, 24 layers, performance-log.md 2026-12-07 tenth session).
    int index_token_tile = 4;
    // The wide attention's key rows resolved this many at a time (whole chunks of 64, at most 1024; the same bits for
    // any value: tests use 64 to cross segment boundaries at short contexts).
    int mqa_wide_segment = 1024;
    // Fast numerics: LinearPath::kFp8Wgmma (our FP8 GEMM: the forced path, cuBLASLt's fallback, --batch-invariant's
    // FP8 linears) on the TMA-fed warp-specialized kernel (kernels_fp8_gemm_tma.cu) instead of the staged kernel's
    // dense mode (DSV4_FP8_TMA; validated on the H100, off while cuBLASLt is faster: performance-log.md).
    bool fp8_tma = false;
    // Fast numerics keep a sequence's logits independent of the rest of its steps (DSV4_BATCH_INVARIANT; the engine's
    // --batch-invariant): cuda_options_from_env then sets every size-dependent choice to one that does not depend on
    // the step's size: FP8 linears on our wgmma GEMM at every row count (a token is one column of its tile, K blocks
    // promoted in order, on either kernel of kFp8Wgmma), float linears on the bf16 tensor-core GEMM with no K split,
    // the routed experts grouped on the staged kernel's tiles (16-token tiles from the shared memory too), attention
    // keys split in fixed chunks of attention_keys_per_split (the merge skips a token's empty splits exactly) and not
    // on the wide kernel.
    bool batch_invariant = false;
    // Keys per attention split under batch_invariant (a multiple of the kernels' 64-key chunks).
    static constexpr int kInvariantKeysPerSplit = 256;
    int attention_keys_per_split = 0;  // > 0: attention keys split in chunks of this many at every step (0: by size)
    // Kernels captured into graphs launch programmatically dependent on their predecessor (backend/cuda/pdl.cuh):
    // process-wide, the last backend constructed sets it.
    bool pdl = true;
    int gemv_stream_tile = 4096;
    int gemv_stream_stages = 3;
    // FP8 dialect of weights in memory, activation quantisation and fp8 caches (core/fp8_dialect.h). OCP is native;
    // FNUZ (MI300X numerics) decodes its codes in software and keeps FP8 off the OCP tensor-core paths.
    Fp8Dialect fp8_dialect = Fp8Dialect::kOcp;
};

// `base` with the environment's overrides (documented in docs/operations.md): DSV4_CUDA_WORKSPACE_MB,
// DSV4_MIN_GROUPED_PAIRS, DSV4_MIN_GROUPED_FP8_PAIRS, DSV4_MIN_GEMM_ROWS, DSV4_MIN_FP8_ROWS, DSV4_MIN_FP8_LT_ROWS,
// DSV4_LINEAR_PATH, DSV4_MOE_PATH, DSV4_PROFILE_OPS (set: per-op profiling), DSV4_GEMV_STREAM (off, experts,
// all), DSV4_GEMV_STREAM_TILE, DSV4_GEMV_STREAM_STAGES, DSV4_PDL (0: off), DSV4_FP8_GEMV (0: off), DSV4_SIDE_STREAM
// (0: off; DSV4_SHARED_STREAM, its former name, still read), DSV4_INDEXER_ALL_ENTRIES (0: off), DSV4_MQA_WIDE (0:
// off), DSV4_GEMM_SPLIT_K (0: off), DSV4_EXPERT_WS (1: on), DSV4_FP8_GEMV_WARPS, DSV4_INDEX_TOKEN_TILE (1, 4),
// DSV4_FUSED_QUERY_NORM (1: on), DSV4_ATTENTION_FP8_OUT (1: on), DSV4_MQA_WGMMA (1: on), DSV4_MIN_BF16_LT_ROWS. A value
// that is not a positive integer (0 or 1 for the switch) is a dsv4::Error naming the variable.
CudaOptions cuda_options_from_env(CudaOptions base);

std::unique_ptr<Backend> make_cuda_backend(Numerics numerics, const CudaOptions& options);
// The backend with default options and the environment's overrides.
std::unique_ptr<Backend> make_cuda_backend(Numerics numerics);
// Whether a CUDA device can be used here; when not, `why` (if given) says why (no driver, no device, ...).
bool cuda_available(std::string* why = nullptr);

// The two device ceilings every benchmark reports next to its numbers (measured in the same run, METHOD.md):
// device-to-device copy bandwidth (bytes read + written) and a large bf16 GEMM through cuBLAS.
struct DeviceCeilings {
    std::string device_name;
    double copy_tb_per_s = 0.0;
    double bf16_gemm_tflops = 0.0;
    size_t free_bytes = 0;
    size_t total_bytes = 0;
};
DeviceCeilings measure_device_ceilings();
// Host -> device over PCIe, the expert tier's two ways to use a host expert: a copy-engine copy of pinned memory
// (a fetch), and kernels reading mapped pinned memory in place (--expert-read-in-place-tokens). GB/s, medians.
struct PcieCeilings {
    double copy_gb_per_s = 0.0;
    double read_in_place_gb_per_s = 0.0;
};
PcieCeilings measure_pcie_ceilings();

// `dsv4 bench kernels` (cuda_kernel_bench.cpp): every GEMM shape of DeepSeek-V4-Flash and the grouped routed experts
// on each kernel path that can run them, timed on synthetic weights (rotated over copies larger than the L2), with
// the FP8 ceiling (cuBLASLt block-scaled 8192^3) and the copy bandwidth measured in the same run.
struct KernelBenchOptions {
    std::vector<int64_t> rows{1, 8, 64, 256, 2048, 8192};        // activation rows of the linears
    std::vector<int64_t> expert_tokens{8, 64, 256, 2048, 8192};  // tokens routed (6 experts each)
    int experts = 160;
    std::string filter;  // only ops whose name contains this
};
struct KernelBenchRow {
    std::string op;    // e.g. "wq_b", "experts"
    std::string path;  // linear_plan.h name; "auto:" prefix when it is the path the backend chooses
    int64_t m = 0, n = 0, k = 0;
    double us = 0.0;
    double tflops = 0.0;
    double gb_per_s = 0.0;  // weight + activation bytes / time
    double fp8_fraction = 0.0;
    double copy_fraction = 0.0;
};
struct KernelBenchResult {
    DeviceCeilings ceilings;
    double fp8_tflops = 0.0;  // cuBLASLt FP8 block-scaled, 8192^3, GEMM alone
    std::vector<KernelBenchRow> rows;
};
KernelBenchResult run_kernel_bench(const KernelBenchOptions& o);

}  // namespace dsv4
