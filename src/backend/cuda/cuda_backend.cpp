// CudaBackend: construction, memory (weights, state, the step arena), step metadata and host transfers.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "backend/cuda/cuda_bf16_gemm.h"
#include "backend/cuda/cuda_factory.h"
#include "backend/cuda/cuda_fp8_gemm.h"
#include "config/rope.h"
#include "core/error.h"
#include "state/state_format.h"
#include "state/state_layout.h"

namespace dsv4 {

bool cuda_available(std::string* why) {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess || count == 0) {
        if (why != nullptr) *why = status != cudaSuccess ? cudaGetErrorString(status) : "no CUDA device";
        cudaGetLastError();  // clear the sticky error of a missing driver
        return false;
    }
    return true;
}

namespace {

int64_t positive_env(const char* name, int64_t fallback) {
    const char* env = std::getenv(name);
    if (env == nullptr) return fallback;
    char* end = nullptr;
    const long long v = std::strtoll(env, &end, 10);
    DSV4_CHECK(end != env && *end == '\0' && v > 0, "environment variable {}='{}' is not a positive integer", name,
               env);
    return v;
}

bool switch_env(const char* name, bool fallback) {
    const char* env = std::getenv(name);
    if (env == nullptr) return fallback;
    const std::string v = env;
    DSV4_CHECK(v == "0" || v == "1", "environment variable {}='{}' is not 0 or 1", name, v);
    return v == "1";
}

}  // namespace

CudaOptions cuda_options_from_env(CudaOptions o) {
    o.workspace_mib = positive_env("DSV4_CUDA_WORKSPACE_MB", o.workspace_mib);
    o.min_grouped_pairs = positive_env("DSV4_MIN_GROUPED_PAIRS", o.min_grouped_pairs);
    o.min_grouped_fp8_pairs = positive_env("DSV4_MIN_GROUPED_FP8_PAIRS", o.min_grouped_fp8_pairs);
    o.min_gemm_rows = positive_env("DSV4_MIN_GEMM_ROWS", o.min_gemm_rows);
    o.min_fp8_rows = positive_env("DSV4_MIN_FP8_ROWS", o.min_fp8_rows);
    o.min_fp8_lt_rows = positive_env("DSV4_MIN_FP8_LT_ROWS", o.min_fp8_lt_rows);
    o.min_bf16_lt_rows = positive_env("DSV4_MIN_BF16_LT_ROWS", o.min_bf16_lt_rows);
    o.min_bf16_gemv_rows = positive_env("DSV4_MIN_BF16_GEMV_ROWS", o.min_bf16_gemv_rows);
    if (const char* v = std::getenv("DSV4_LINEAR_PATH")) o.linear_path = v;
    if (const char* v = std::getenv("DSV4_MOE_PATH")) o.moe_path = v;
    if (std::getenv("DSV4_PROFILE_OPS") != nullptr) o.profile_ops = true;
    if (const char* v = std::getenv("DSV4_GEMV_STREAM")) {
        const std::string mode = v;
        DSV4_CHECK(mode == "off" || mode == "experts" || mode == "all",
                   "environment variable DSV4_GEMV_STREAM='{}' is not off, experts or all", mode);
        o.gemv_stream_experts = mode != "off";
        o.gemv_stream_linears = mode == "all";
    }
    o.gemv_merge_linears = switch_env("DSV4_MERGE_LINEARS", o.gemv_merge_linears);
    o.side_stream = switch_env("DSV4_SIDE_STREAM", switch_env("DSV4_SHARED_STREAM", o.side_stream));
    o.side_stream_prefill = switch_env("DSV4_SIDE_STREAM_PREFILL", o.side_stream_prefill);
    o.indexer_all_entries = switch_env("DSV4_INDEXER_ALL_ENTRIES", o.indexer_all_entries);
    o.mqa_wide = switch_env("DSV4_MQA_WIDE", o.mqa_wide);
    o.fused_query_norm = switch_env("DSV4_FUSED_QUERY_NORM", o.fused_query_norm);
    o.attention_fp8_out = switch_env("DSV4_ATTENTION_FP8_OUT", o.attention_fp8_out);
    o.mqa_wgmma = switch_env("DSV4_MQA_WGMMA", o.mqa_wgmma);
    o.gemm_split_k = switch_env("DSV4_GEMM_SPLIT_K", o.gemm_split_k);
    o.expert_ws = switch_env("DSV4_EXPERT_WS", o.expert_ws);
    o.expert_register_weights = switch_env("DSV4_EXPERT_RS", o.expert_register_weights);
    o.expert_half_wide = switch_env("DSV4_EXPERT_HALF_WIDE", o.expert_half_wide);
    o.expert_tma = switch_env("DSV4_EXPERT_TMA", o.expert_tma);
    if (const char* v = std::getenv("DSV4_EXPERT_L2_PREFETCH")) {
        const std::string bytes = v;
        DSV4_CHECK(bytes == "0" || bytes == "128" || bytes == "256",
                   "environment variable DSV4_EXPERT_L2_PREFETCH='{}' is not 0, 128 or 256", bytes);
        o.expert_l2_prefetch = std::stoi(bytes);
    }
    if (std::getenv("DSV4_FP8_GEMV_WARPS") != nullptr) {
        o.fp8_gemv_warps = static_cast<int>(positive_env("DSV4_FP8_GEMV_WARPS", 0));
    }
    if (std::getenv("DSV4_INDEX_TOKEN_TILE") != nullptr) {
        o.index_token_tile = static_cast<int>(positive_env("DSV4_INDEX_TOKEN_TILE", 1));
    }
    DSV4_CHECK(o.index_token_tile == 1 || o.index_token_tile == 4,
               "the indexer's token tile is {}: 1 or 4 (DSV4_INDEX_TOKEN_TILE)", o.index_token_tile);
    o.pdl = switch_env("DSV4_PDL", o.pdl);
    o.fp8_gemv = switch_env("DSV4_FP8_GEMV", o.fp8_gemv);
    o.gemv_stream_tile = static_cast<int>(positive_env("DSV4_GEMV_STREAM_TILE", o.gemv_stream_tile));
    o.gemv_stream_stages = static_cast<int>(positive_env("DSV4_GEMV_STREAM_STAGES", o.gemv_stream_stages));
    o.fp8_tma = switch_env("DSV4_FP8_TMA", o.fp8_tma);
    o.batch_invariant = switch_env("DSV4_BATCH_INVARIANT", o.batch_invariant);
    if (o.batch_invariant) {  // CudaOptions::batch_invariant: one kernel and one split rule at every step size
        o.fp8_gemv = false;
        o.min_fp8_rows = 1;
        o.min_fp8_lt_rows = std::numeric_limits<int64_t>::max();   // the TMA wgmma GEMM, never cuBLASLt
        o.min_bf16_lt_rows = std::numeric_limits<int64_t>::max();  // the mma.sync GEMM
        o.min_bf16_gemv_rows = std::numeric_limits<int64_t>::max();
        o.min_gemm_rows = 1;
        o.gemm_split_k = false;
        o.min_grouped_fp8_pairs = 1;
        o.min_grouped_pairs = 1;
        o.expert_register_weights = false;
        o.mqa_wide = false;
        if (o.attention_keys_per_split <= 0) o.attention_keys_per_split = CudaOptions::kInvariantKeysPerSplit;
    }
    return o;
}

std::unique_ptr<Backend> make_cuda_backend(Numerics numerics, const CudaOptions& options) {
    return std::make_unique<cuda::CudaBackend>(numerics, options);
}

std::unique_ptr<Backend> make_cuda_backend(Numerics numerics) {
    return make_cuda_backend(numerics, cuda_options_from_env({}));
}

namespace cuda {

void check(cudaError_t status, const char* what) {
    if (status != cudaSuccess) fail("CUDA error {} in {}", cudaGetErrorString(status), what);
}

void DeviceArena::reserve(size_t bytes) {
    if (bytes <= capacity_) return;
    DSV4_CHECK(used_ == 0, "arena: cannot grow while allocations are live");
    if (base_ != nullptr) DSV4_CUDA(cudaFree(base_));
    DSV4_CUDA(cudaMalloc(&base_, bytes));
    capacity_ = bytes;
}

void* DeviceArena::take(size_t bytes) {
    const size_t aligned = (bytes + 255) & ~size_t{255};
    DSV4_CHECK(used_ + aligned <= capacity_,
               "device scratch arena exhausted ({} of {} bytes in use, {} more asked): raise the CUDA workspace "
               "(dsv4 serve --cuda-workspace-mib, or DSV4_CUDA_WORKSPACE_MB) or lower the step's token budget "
               "(--max-num-batched-tokens)",
               used_, capacity_, aligned);
    void* p = base_ + used_;
    used_ += aligned;
    high_water_ = std::max(high_water_, used_);
    return p;
}

DeviceArena::~DeviceArena() {
    if (base_ != nullptr) cudaFree(base_);
}

CudaBackend::CudaBackend(Numerics numerics, const CudaOptions& options)
    : numerics_(numerics), device_(options.device), options_(options), fp8_(fp8_sites(options.fp8_dialect)) {
    std::string why;
    DSV4_CHECK(cuda_available(&why), "CUDA backend: {}", why);
    DSV4_CUDA(cudaSetDevice(device_));
    DSV4_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    DSV4_CUDA(cudaMalloc(&error_flag_, sizeof(int32_t)));
    DSV4_CUDA(cudaMemset(error_flag_, 0, sizeof(int32_t)));
    arena_.reserve(static_cast<size_t>(options_.workspace_mib) << 20);
    // One metadata buffer at a fixed address for the backend's life (recorded graphs point into it).
    meta_capacity_ = size_t{1} << 22;
    DSV4_CUDA(cudaMalloc(&meta_dev_, meta_capacity_ * sizeof(int32_t)));
    tuning_ = LinearTuning::from(options_);
    stream_experts_ = {options_.gemv_stream_experts, options_.gemv_stream_tile, options_.gemv_stream_stages};
    stream_linears_ = {options_.gemv_stream_linears, options_.gemv_stream_tile, options_.gemv_stream_stages};
    set_programmatic_launch(options_.pdl);
    if (fast()) {
        lt_ = std::make_unique<LtContext>();
        fp8_lt_ = std::make_unique<Fp8LtGemms>(*lt_);
        bf16_lt_ = std::make_unique<Bf16LtGemms>(*lt_);
        DSV4_CUDA(cudaMalloc(&clamp_count_, sizeof(int32_t)));
        DSV4_CUDA(cudaMemset(clamp_count_, 0, sizeof(int32_t)));
        DSV4_CUDA(cudaMalloc(&hc_arrivals_, kHcBoundaryTokens * sizeof(unsigned)));
        DSV4_CUDA(cudaMemset(hc_arrivals_, 0, kHcBoundaryTokens * sizeof(unsigned)));
        DSV4_CUDA(cudaMalloc(&split_arrivals_, kSplitArrivals * sizeof(int32_t)));
        DSV4_CUDA(cudaMemset(split_arrivals_, 0, kSplitArrivals * sizeof(int32_t)));
        if (options_.side_stream) {
            DSV4_CUDA(cudaStreamCreateWithFlags(&side_.stream, cudaStreamNonBlocking));
            DSV4_CUDA(cudaEventCreateWithFlags(&side_.fork, cudaEventDisableTiming));
            DSV4_CUDA(cudaEventCreateWithFlags(&side_.join, cudaEventDisableTiming));
            DSV4_CUDA(cudaMalloc(&side_.split_arrivals, kSplitArrivals * sizeof(int32_t)));
            DSV4_CUDA(cudaMemset(side_.split_arrivals, 0, kSplitArrivals * sizeof(int32_t)));
        }
    }
}

CudaBackend::~CudaBackend() {
    cudaStreamSynchronize(stream_);
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
    for (void* p : allocations_) cudaFree(p);
    for (void* p : host_allocations_) cudaFreeHost(p);
    for (auto& [key, p] : inv_freq_) cudaFree(p);
    fp8_lt_.reset();
    bf16_lt_.reset();
    lt_.reset();
    if (clamp_count_ != nullptr) cudaFree(clamp_count_);
    if (expert_copies_ != nullptr) cudaFree(expert_copies_);
    if (hc_arrivals_ != nullptr) cudaFree(hc_arrivals_);
    if (split_arrivals_ != nullptr) cudaFree(split_arrivals_);
    if (side_.stream != nullptr) {
        cudaStreamSynchronize(side_.stream);
        cudaEventDestroy(side_.fork);
        cudaEventDestroy(side_.join);
        cudaFree(side_.split_arrivals);
        cudaStreamDestroy(side_.stream);
    }
    if (meta_dev_ != nullptr) cudaFree(meta_dev_);
    if (error_flag_ != nullptr) cudaFree(error_flag_);
    if (copy_stream_ != nullptr) {
        cudaStreamSynchronize(copy_stream_);
        for (cudaEvent_t e : {compute_mark_, offloads_done_, loads_done_}) cudaEventDestroy(e);
        cudaStreamDestroy(copy_stream_);
    }
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void CudaBackend::copy_to_device_now(void* dst, const void* host, size_t bytes) {
    // On the compute stream, finished before returning. A plain cudaMemcpy from pageable memory runs on the legacy
    // stream, which our non-blocking stream does not wait for, and may return before its DMA lands: a kernel launched
    // right after read a just-uploaded weight early (H200, the streamed-GEMV test, 2026-12-03).
    DSV4_CUDA(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_));
    DSV4_CUDA(cudaStreamSynchronize(stream_));
}

void* CudaBackend::device_copy(const void* host, size_t bytes) {
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, std::max<size_t>(bytes, 16));
    if (status == cudaErrorMemoryAllocation) {
        cudaGetLastError();  // clear it
        size_t free_bytes = 0, total_bytes = 0;
        cudaMemGetInfo(&free_bytes, &total_bytes);
        const double gib = 1024.0 * 1024.0 * 1024.0;
        fail(
            "out of GPU memory: {:.2f} GiB more were needed with {:.2f} GiB already held by this backend (weights and "
            "state) and {:.2f} GiB free of {:.2f} GiB; the engine's capacity plan (docs/operations.md \"Memory "
            "tiers\") says which flags make a model fit (--gpu-experts, --gpu-memory-utilization, --max-model-len)",
            bytes / gib, resident_bytes_ / gib, free_bytes / gib, total_bytes / gib);
    }
    check(status, "cudaMalloc(...)");
    if (host != nullptr) copy_to_device_now(p, host, bytes);
    allocations_.push_back(p);
    resident_bytes_ += bytes;
    return p;
}

WeightRef CudaBackend::copy_linear(const TensorView& weight, const TensorView* scale, WeightFormat format, int64_t rows,
                                   int64_t cols, int block_rows, int block_cols,
                                   const std::function<const void*(const void*, size_t, bool)>& copy) {
    const bool fp4 = format == WeightFormat::kFp4Row;
    DSV4_CHECK(!fp4 || (cols % 8 == 0 && static_cast<int64_t>(weight.nbytes) == rows * cols / 2),
               "FP4 weight [{}, {}] of {} bytes: this backend holds FP4 rows as whole 32-bit words of 8 codes (cols a "
               "multiple of 8, backend/fp4_layout.h)",
               rows, cols, weight.nbytes);
    WeightRef w;
    w.format = format;
    w.rows = rows;
    w.cols = cols;
    w.block_rows = block_rows;
    w.block_cols = block_cols;
    w.fp8_dialect = fp8_.weights;  // the loader hands FP8 weights over in the backend's dialect (weight_store.h)
    // Checkpoint form byte for byte, FP4 codes in the sign-split layout.
    w.data = copy(weight.data, weight.nbytes, fp4);
    if (fp4) w.fp4_layout = Fp4Layout::kSignSplit;
    if (scale != nullptr) {
        w.scales = static_cast<const uint8_t*>(copy(scale->data, scale->nbytes, false));
        w.scale_cols = scale->shape.back();
    }
    return w;
}

WeightRef CudaBackend::upload_linear(const TensorView& weight, const TensorView* scale, WeightFormat format,
                                     int64_t rows, int64_t cols, int block_rows, int block_cols) {
    const WeightRef w = copy_linear(
        weight, scale, format, rows, cols, block_rows, block_cols, [this](const void* p, size_t n, bool fp4) {
            void* d = device_copy(p, n);
            if (fp4) {  // in place on the device, once (the stream orders it before every kernel that reads it)
                launch_fp4_to_sign_split(stream_, static_cast<uint32_t*>(d), static_cast<int64_t>(n / 4));
                check(cudaGetLastError(), "FP4 sign-split layout");
            }
            return static_cast<const void*>(d);
        });
    if (w.fp8_dialect == Fp8Dialect::kOcp) register_fp8_weight(w);  // FNUZ never takes the FP8 tensor-core paths
    return w;
}

VecRef CudaBackend::upload_vector(const TensorView& values) {
    std::vector<float> host(values.numel());
    if (values.dtype == DType::kF32) {
        std::memcpy(host.data(), values.data, host.size() * sizeof(float));
    } else if (values.dtype == DType::kBF16) {
        for (size_t i = 0; i < host.size(); ++i) {
            uint16_t bits;
            std::memcpy(&bits, values.data + 2 * i, 2);
            const uint32_t wide = static_cast<uint32_t>(bits) << 16;
            std::memcpy(&host[i], &wide, 4);
        }
    } else {
        fail("upload_vector: dtype {} is not BF16 or F32", dtype_name(values.dtype));
    }
    return {static_cast<const float*>(device_copy(host.data(), host.size() * sizeof(float))),
            static_cast<int64_t>(host.size())};
}

TableRef CudaBackend::upload_table(const TensorView& values, int64_t max_value) {
    DSV4_CHECK(values.shape.size() == 2, "upload_table: expected a 2-D table");
    std::vector<int32_t> host(values.numel());
    for (size_t i = 0; i < host.size(); ++i) {
        int64_t v = 0;
        if (values.dtype == DType::kI64) {
            std::memcpy(&v, values.data + 8 * i, 8);
        } else {
            int32_t v32 = 0;
            std::memcpy(&v32, values.data + 4 * i, 4);
            v = v32;
        }
        DSV4_CHECK(v >= 0 && v < max_value, "table entry {} = {} is outside [0, {})", i, v, max_value);
        host[i] = static_cast<int32_t>(v);
    }
    return {static_cast<const int32_t*>(device_copy(host.data(), host.size() * sizeof(int32_t))), values.shape[0],
            values.shape[1]};
}

namespace {

RowFormatDev device_format(const StateRowFormat& f) {
    static_assert(static_cast<int>(StateDtype::kF32) == kRowF32 && static_cast<int>(StateDtype::kBf16) == kRowBf16 &&
                  static_cast<int>(StateDtype::kFp8) == kRowFp8 && kRowFp8Block == kFp8KvBlock);
    RowFormatDev d;
    d.dtype = static_cast<int>(f.dtype);
    d.dim = f.dim;
    d.rope_dim = f.rope_dim;
    d.index_key = f.index_key;
    d.bytes = static_cast<int>(f.bytes());
    d.fp8 = fp8_quant_dev(f.fp8);
    return d;
}

}  // namespace

void CudaBackend::create_state(const ModelConfig& config, const StateConfig& state) {
    DSV4_CHECK(state.max_slots > 0 && state.num_blocks > 0 && state.block_tokens > 0 && state.rewind_capacity >= 0,
               "state: slots, blocks and block size must be positive");
    // Throws when the dims do not fit the dtype.
    kv_format_ = device_format(kv_row_format(state.kv_dtype, config, fp8_.kv_rows));
    key_format_ = device_format(index_key_format(state.kv_dtype, config, fp8_.index_keys));
    DSV4_CHECK(config.index_head_dim <= kMaxIndexDim, "state: index_head_dim {} exceeds the indexer kernel limit {}",
               config.index_head_dim, kMaxIndexDim);
    model_ = config;
    state_ = state;
    const StateBytes bytes =
        compute_state_layout(config, state.block_tokens, state.rewind_capacity, state.kv_dtype).bytes();
    check_state_fits(state, bytes);
    layers_.assign(config.num_layers, {});
    shapes_.assign(config.num_layers, {});
    auto poisoned = [&](size_t n_bytes) -> void* {
        if (n_bytes == 0) return nullptr;
        void* p = device_copy(nullptr, n_bytes);
        DSV4_CUDA(cudaMemset(p, 0xff, n_bytes));  // NaN in every dtype: unwritten rows show up in tests
        return p;
    };
    const auto slots = static_cast<size_t>(state.max_slots), blocks = static_cast<size_t>(state.num_blocks);
    for (int l = 0; l < config.num_layers; ++l) {
        const LayerStateShape& shape = shapes_[l] =
            layer_state_shape(config, l, state.block_tokens, state.rewind_capacity);
        ring_rows_ = static_cast<int>(shape.ring_rows);
        LayerStateDev& ls = layers_[l];
        ls.per_block = static_cast<int>(shape.entries_per_block);
        ls.main_rows = static_cast<int>(shape.main.rows);
        ls.index_rows = static_cast<int>(shape.index.rows);
        ls.ring = static_cast<uint8_t*>(poisoned(slots * shape.ring_rows * kv_format_.bytes));
        ls.main_pending = static_cast<float*>(poisoned(slots * shape.main.slot_floats() * sizeof(float)));
        ls.index_pending = static_cast<float*>(poisoned(slots * shape.index.slot_floats() * sizeof(float)));
        ls.entries = static_cast<uint8_t*>(poisoned(blocks * shape.entries_per_block * kv_format_.bytes));
        if (shape.has_index_keys())
            ls.index_keys = static_cast<uint8_t*>(poisoned(blocks * shape.entries_per_block * key_format_.bytes));
    }
    create_snapshot_state();
    state_bytes_ = bytes;
}

void CudaBackend::check_state_fits(const StateConfig& state, const StateBytes& bytes) const {
    size_t free_bytes = 0, total_bytes = 0;
    DSV4_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    const auto need = static_cast<size_t>(state.max_slots * bytes.slot + state.num_blocks * bytes.block +
                                          int64_t{state.num_snapshots} * bytes.snapshot);
    const double gib = 1024.0 * 1024.0 * 1024.0;
    // Keep 1 GiB for weights uploaded after the state, kernels' runtime allocations and graphs.
    const size_t headroom = size_t{1} << 30;
    DSV4_CHECK(need + headroom <= free_bytes,
               "the sequence state ({} slots, {} blocks of {} tokens, {} snapshots, {} rows) needs {:.2f} GiB but "
               "{:.2f} GiB of device memory are free ({:.2f} GiB already held by this backend's weights and state, "
               "{:.2f} GiB workspace); lower --max-num-seqs or the state budget",
               state.max_slots, state.num_blocks, state.block_tokens, state.num_snapshots,
               state_dtype_name(state.kv_dtype), need / gib, free_bytes / gib, resident_bytes_ / gib,
               arena_.capacity() / gib);
}

std::string CudaBackend::memory_report() const {
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    const double gib = 1024.0 * 1024.0 * 1024.0;
    const double state =
        static_cast<double>(state_.max_slots * state_bytes_.slot + state_.num_blocks * state_bytes_.block +
                            int64_t{state_.num_snapshots} * state_bytes_.snapshot);
    return fmt::format(
        "device memory: {:.2f} GiB held (weights + state; state {:.2f} GiB with {} rows), {:.2f} GiB "
        "workspace, {:.2f} GiB free of {:.2f} GiB",
        resident_bytes_ / gib, state / gib, state_dtype_name(state_.kv_dtype), arena_.capacity() / gib,
        free_bytes / gib, total_bytes / gib);
}

void CudaBackend::reset_slot(int32_t slot) {
    DSV4_CHECK(slot >= 0 && slot < state_.max_slots, "reset_slot: slot {} is outside [0, {})", slot, state_.max_slots);
    // Nothing to clear: a sequence only reads positions it wrote (the rings are indexed by absolute position).
}

Tensor CudaBackend::alloc(DType dtype, std::initializer_list<int64_t> shape) {
    Tensor t(nullptr, dtype, shape);
    t.data = arena_.take(static_cast<size_t>(t.numel()) * dtype_bits(dtype) / 8);
    return t;
}

void CudaBackend::scratch_release(size_t mark) {
    join_side_stream();  // work on the side stream may still use what is released
    arena_.release_to(mark);
}

void CudaBackend::begin_step(const StepBatch& batch) {
    join_side_stream();  // the previous step's side work (joined by its readers already; this covers ops called alone)
    check_error_flag();
    if (!capturing_) order_step_after_tier_copies(batch);
    arena_.reset();
    begin_substep(batch);
}

void CudaBackend::begin_substep(const StepBatch& batch) {
    DSV4_CHECK(!capturing_, "begin_substep: a step's metadata cannot change inside a graph capture");
    const auto n = static_cast<int32_t>(batch.tokens.size());
    const auto s = static_cast<int32_t>(batch.seqs.size());
    for (int32_t token : batch.tokens) {
        DSV4_CHECK(token >= 0 && token < model_.vocab_size, "token id {} is outside the vocabulary [0, {})", token,
                   model_.vocab_size);
    }
    // One int32 buffer: tokens | positions | seq_of_token | logit rows | source rows | slot | begin | count | start |
    // offset | len | tables. Every offset depends only on the token, logit-row, source-row and sequence counts (a
    // graph's key).
    meta_host_.clear();
    meta_host_.insert(meta_host_.end(), batch.tokens.begin(), batch.tokens.end());
    meta_host_.insert(meta_host_.end(), batch.positions.begin(), batch.positions.end());
    meta_host_.insert(meta_host_.end(), batch.seq_index.begin(), batch.seq_index.end());
    meta_host_.insert(meta_host_.end(), batch.logit_rows.begin(), batch.logit_rows.end());
    meta_host_.insert(meta_host_.end(), batch.source_rows.begin(), batch.source_rows.end());
    // Per sequence, one array per field (the kernels read them as StepMeta::seq_*).
    struct SeqColumns {
        std::vector<int32_t> slot, token_begin, n_tokens, start, table_offset, table_len;
    } cols;
    std::vector<int32_t> tables;
    for (const auto& seq : batch.seqs) {
        DSV4_CHECK(seq.slot >= 0 && seq.slot < state_.max_slots, "step: slot {} is outside [0, {})", seq.slot,
                   state_.max_slots);
        const int64_t end = seq.start_pos + seq.n_tokens;
        DSV4_CHECK(static_cast<int64_t>(seq.block_table.size()) * state_.block_tokens >= end,
                   "step: block table of slot {} covers {} positions, {} needed", seq.slot,
                   seq.block_table.size() * state_.block_tokens, end);
        cols.slot.push_back(seq.slot);
        cols.token_begin.push_back(seq.token_begin);
        cols.n_tokens.push_back(seq.n_tokens);
        cols.start.push_back(static_cast<int32_t>(seq.start_pos));
        cols.table_offset.push_back(static_cast<int32_t>(tables.size()));
        cols.table_len.push_back(static_cast<int32_t>(seq.block_table.size()));
        for (int32_t b : seq.block_table) {
            DSV4_CHECK(b >= 0 && b < state_.num_blocks, "step: block id {} is outside [0, {})", b, state_.num_blocks);
            tables.push_back(b);
        }
    }
    for (const std::vector<int32_t>* f :
         {&cols.slot, &cols.token_begin, &cols.n_tokens, &cols.start, &cols.table_offset, &cols.table_len})
        meta_host_.insert(meta_host_.end(), f->begin(), f->end());
    meta_host_.insert(meta_host_.end(), tables.begin(), tables.end());
    DSV4_CHECK(meta_host_.size() <= meta_capacity_,
               "step metadata of {} entries exceeds the buffer ({}); too many "
               "tokens or blocks in one step",
               meta_host_.size(), meta_capacity_);
    DSV4_CUDA(cudaMemcpyAsync(meta_dev_, meta_host_.data(), meta_host_.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                              stream_));
    const int32_t* p = meta_dev_;
    meta_ = StepMeta{};
    meta_.tokens = p;
    meta_.positions = p + n;
    meta_.seq_of_token = p + 2 * n;
    const auto m = static_cast<int32_t>(batch.logit_rows.size());
    logit_rows_dev_ = p + 3 * n;
    source_rows_dev_ = logit_rows_dev_ + m;
    const int32_t* per_seq = source_rows_dev_ + batch.source_rows.size();
    meta_.seq_slot = per_seq;
    meta_.seq_token_begin = per_seq + s;
    meta_.seq_n_tokens = per_seq + 2 * s;
    meta_.seq_start = per_seq + 3 * s;
    meta_.seq_table_offset = per_seq + 4 * s;
    meta_.seq_table_len = per_seq + 5 * s;
    meta_.block_tables = per_seq + 6 * s;
    meta_.n_tokens = n;
    meta_.n_seqs = s;
    meta_.num_blocks = state_.num_blocks;
    meta_.error_flag = error_flag_;
    host_logit_rows_ = batch.logit_rows;
    host_source_rows_ = batch.source_rows;
    ring_written_layer_ = -1;
    max_position_ = 0;
    for (int32_t pos : batch.positions) max_position_ = std::max<int64_t>(max_position_, pos);
}

void CudaBackend::check_error_flag() {
    int32_t flag = 0;
    DSV4_CUDA(cudaMemcpyAsync(&flag, error_flag_, sizeof(flag), cudaMemcpyDeviceToHost, stream_));
    DSV4_CUDA(cudaStreamSynchronize(stream_));
    if (flag == 0) return;
    DSV4_CUDA(cudaMemset(error_flag_, 0, sizeof(int32_t)));
    fail("CUDA kernels met out-of-range indices (flags {:#x}: 1 block table, 2 expert id, 4 indexer pick)", flag);
}

void CudaBackend::synchronize() {
    join_side_stream();
    DSV4_CUDA(cudaStreamSynchronize(stream_));
    check_error_flag();
}

void CudaBackend::to_host(const Tensor& t, float* out) {
    DSV4_CHECK(t.dtype == DType::kF32, "to_host: float32 tensors only");
    join_side_stream();
    DSV4_CUDA(cudaMemcpyAsync(out, t.data, t.numel() * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    synchronize();
}

void CudaBackend::copy(const Tensor& src, Tensor dst) {
    DSV4_CHECK(src.dtype == dst.dtype && src.numel() == dst.numel(), "copy: {} {} elements into {} {} elements",
               dtype_name(src.dtype), src.numel(), dtype_name(dst.dtype), dst.numel());
    DSV4_CUDA(cudaMemcpyAsync(dst.data, src.data, src.numel() * dtype_bits(src.dtype) / 8, cudaMemcpyDeviceToDevice,
                              stream_));
}

void CudaBackend::from_host(Tensor t, const void* data) {
    DSV4_CUDA(cudaMemcpyAsync(t.data, data, t.numel() * dtype_bits(t.dtype) / 8, cudaMemcpyHostToDevice, stream_));
    DSV4_CUDA(cudaStreamSynchronize(stream_));
}

int64_t CudaBackend::indexer_entry_bucket(int ratio) const {
    const int64_t entries = std::max<int64_t>(1, (max_position_ + 1) / ratio);
    int64_t bucket = 64;
    while (bucket < entries) bucket *= 2;
    return bucket;
}

uint64_t CudaBackend::shape_key(const StepBatch& batch) const {
    (void)batch;  // begin_step has seen it: the largest position decides the indexer's bucket
    uint64_t key = 0;
    for (const LayerConfig& l : model_.layers) {  // the indexer's and the HCA attention's launch shapes
        if (l.compress_ratio > 0) key = key * 31 + static_cast<uint64_t>(indexer_entry_bucket(l.compress_ratio));
    }
    return key;
}

bool CudaBackend::replay(uint64_t key) {
    auto it = graphs_.find(key);
    if (it == graphs_.end()) return false;
    DSV4_CUDA(cudaGraphLaunch(it->second, stream_));
    graph_nodes_replayed_ += graph_nodes_[key];
    arena_.advance_to(graph_arena_end_[key]);  // later substeps (drafters) allocate past the step's results
    return true;
}

void CudaBackend::begin_capture() {
    DSV4_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
    capturing_ = true;
}

void CudaBackend::end_capture(uint64_t key) {
    cudaGraph_t graph = nullptr;
    capturing_ = false;
    join_side_stream();  // a capture must end with every branch joined (moe() joins its own already)
    DSV4_CUDA(cudaStreamEndCapture(stream_, &graph));
    size_t nodes = 0;
    DSV4_CUDA(cudaGraphGetNodes(graph, nullptr, &nodes));
    graph_nodes_[key] = static_cast<int64_t>(nodes);
    cudaGraphExec_t exec = nullptr;
    DSV4_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    DSV4_CUDA(cudaGraphDestroy(graph));
    if (auto it = graphs_.find(key); it != graphs_.end()) cudaGraphExecDestroy(it->second);  // re-recorded
    graphs_[key] = exec;
    graph_arena_end_[key] = arena_.used();
}

const float* CudaBackend::inv_freq(const RopeParams& rope) {
    auto key = std::make_tuple(rope.theta, rope.rope_dim, rope.yarn.has_value());
    auto it = inv_freq_.find(key);
    if (it != inv_freq_.end()) return it->second;
    std::vector<float> host = rope_inv_freq(rope);
    float* dev = nullptr;
    DSV4_CUDA(cudaMalloc(&dev, host.size() * sizeof(float)));
    copy_to_device_now(dev, host.data(), host.size() * sizeof(float));
    inv_freq_.emplace(key, dev);
    return dev;
}

}  // namespace cuda
}  // namespace dsv4
