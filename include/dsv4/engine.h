// The engine's public API: what the server and the CLI use to run requests. Boundary (design.md principle 5): plain
// C++ data only — no tensor, CUDA or JSON types cross this header. Token ids in, token ids (+ logprobs) out;
// text (tokenization, chat encoding, detokenization, stop strings, the reasoning / tool-call parser) is the
// server's business.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dsv4/sampling_params.h"

namespace dsv4 {

// Speculative decoding (vLLM's --speculative-config keys; docs/operations.md). method empty: off.
struct SpeculativeConfig {
    std::string method;              // "" | "mtp" (original V4-Flash's MTP stage) | "dspark" (-0731's DSpark stages)
    int num_speculative_tokens = 0;  // k drafts per step, [1, 15] (a verify step feeds k + 1 tokens per sequence)
    std::string draft_sample_method = "probabilistic";  // greedy | probabilistic (drafts drawn from the draft model)
    std::string rejection_sample_method = "standard";   // standard (token by token) | block (Sun et al.)
    int disable_by_batch_size = 0;      // no drafts in steps with more running sequences than this (0: never off)
    double confidence_threshold = 0.0;  // dspark: a request's drafts stop where the survival falls below (0: off)
    // Benchmark mode for drafters that accept nothing (synthetic weights): each draft is accepted with the probability
    // that makes a verify step emit this many tokens on average, whatever the logits say, so the outputs are the
    // drafts and not the model's continuation. In [1, k + 1]; 0: off (real verification).
    double oracle_acceptance_length = 0.0;

    bool enabled() const { return !method.empty(); }
};

struct EngineConfig {
    std::string model_dir;           // config.json + safetensors (original or HF names)
    std::string device = "cpu";      // "cpu" or "cuda"
    std::string numerics = "exact";  // exact | reference (cpu); fast | reference | exact (cuda)
    int threads = 0;                 // CPU backend threads (0 = all)
    // FP8 dialect of the weights in memory, the activation quantisation and the fp8 K=V / indexer-key caches:
    // ocp | fnuz; empty = the device's native one (OCP on cpu and cuda). fnuz runs AMD gfx942 (MI300X) numerics.
    std::string fp8_dialect;

    // Scheduling (vLLM spellings on the CLI: --max-num-seqs, --max-num-batched-tokens, ...).
    int max_num_seqs = 64;
    // Token budget per step and longest prefill chunk per request per step (0: no cap); 0 / -1: the device's
    // defaults (engine/step_budget.h: 8,192 and 8,192 on CUDA, 2,048 and 1,024 on the CPU or with the expert tier).
    int max_num_batched_tokens = 0;
    int long_prefill_token_threshold = -1;
    int max_model_len = 0;           // 0 = the model's max_position_embeddings
    int max_queued_requests = 1024;  // requests waiting beyond the free running slots before 429
    int64_t max_queued_tokens = 1 << 22;

    // Sequence state memory.
    int64_t kv_cache_bytes = 0;  // 0 = derive from gpu_memory_utilization / a CPU default
    double gpu_memory_utilization = 0.9;
    std::string kv_cache_dtype = "auto";  // auto | f32 | bf16 | fp8 (fp8_ds_mla); auto: f32 exact, else fp8
    int block_tokens = 256;               // positions per state block (multiple of every compression ratio)
    bool enable_prefix_caching = true;
    int rewind_capacity = 16;  // positions a sequence can be truncated without recompute (verify steps' rejections)
    int num_prefix_snapshots = -1;  // boundary snapshots kept for prefix caching (-1 = auto: 2 per slot)
    uint64_t seed = 0;              // seed of the engine's unseeded-request seeds (0 = random)

    // Host-memory tiers (docs/operations.md "Memory tiers").
    int gpu_experts = -1;            // routed experts per layer resident on the device (-1 = all)
    int expert_fetch_min_pairs = 1;  // a host expert with fewer pairs in a step is computed on the host CPU
    // Steps of at most this many tokens read host experts in place over PCIe (no host round trip per layer: decode
    // steps run as CUDA graphs) instead of fetching them or computing them on the host CPU (0 = never).
    int64_t expert_read_in_place_tokens = 0;
    int64_t host_kv_cache_bytes = 0;  // pinned host pool for prefix-cache blocks evicted from the device (0 = off)
    std::string disk_kv_cache_dir;    // disk tier below the host pool (empty = off)
    int64_t disk_kv_cache_bytes = 0;  // size cap of the disk tier (0 = 64 GiB)

    // Execution (vLLM spelling: --enforce-eager).
    bool enforce_eager = false;      // run every step eagerly: no CUDA graphs
    int64_t cuda_workspace_mib = 0;  // CUDA step scratch in MiB (0 = from the token budget: 6 GiB, 10 GiB at 8,192)
    // A sequence's logits do not depend on the other sequences of its steps on CUDA in fast and exact numerics too
    // (reference is batch invariant already): every step size takes the same kernels and splits
    // (CudaOptions::batch_invariant; docs/operations.md gives its cost).
    bool batch_invariant = false;

    // Benchmarks without a checkpoint: random weights made in device memory, in the checkpoint's formats, for a
    // built-in full-size configuration ("flash", "flash-0731", "flash-160": model/flash_preset.h) instead of
    // model_dir's config.json and safetensors. model_dir still provides the tokenizer and the chat template.
    std::string synthetic_preset;
    int synthetic_layers = 0;  // > 0: the preset truncated to this depth

    SpeculativeConfig speculative;
    // Synthetic routers' skew: expert popularity per layer follows a Zipf law of this exponent (model/
    // synthetic_routing.h): "S" for every layer or "S0,S1,..." one per layer; empty or "0" = even routing.
    std::string synthetic_routing_skew;
};

enum class FinishReason : uint8_t {
    kNone,    // still running
    kStop,    // EOS, a stop token id, or a stop string (reported by the server through finish())
    kLength,  // max_tokens or the context length
    kAbort,   // aborted by the client or at shutdown
    kError,   // the request failed; `error` says why
};

struct TokenLogprob {
    int32_t token = 0;
    float logprob = 0.0f;
};

struct GeneratedToken {
    int32_t token = 0;
    std::optional<float> logprob;   // when SamplingParams::logprobs is set
    std::vector<TokenLogprob> top;  // the top-N alternatives, best first
};

// One event on a request's stream. Tokens arrive in order; the last event has finished == true.
struct RequestOutput {
    int completion_index = 0;            // 0 .. n-1 for n > 1
    std::vector<GeneratedToken> tokens;  // new tokens since the previous event
    bool finished = false;
    FinishReason finish_reason = FinishReason::kNone;
    std::optional<int32_t> stop_token;  // the stop token id that ended it, if any
    std::string error;
    // Filled on the first event of each completion.
    int prompt_tokens = 0;
    int cached_prompt_tokens = 0;  // prompt tokens served from the prefix cache
    // When the engine first scheduled the request (it left the queue); unset when the engine does not say.
    std::optional<std::chrono::steady_clock::time_point> scheduled_at;
};

// A request's results. pop() blocks until an event arrives, the timeout passes (nullopt) or the stream ends.
class ResultStream {
  public:
    virtual ~ResultStream() = default;
    virtual std::optional<RequestOutput> pop(std::chrono::milliseconds timeout) = 0;
    // True once every completion has delivered its finished event and it has been popped.
    virtual bool done() const = 0;
};

struct GenerateRequest {
    std::string request_id;              // unique among live requests
    std::vector<int32_t> prompt_tokens;  // already tokenized (BOS included when wanted)
    SamplingParams params;
    int priority = 0;  // reserved; FCFS today
};

enum class AdmissionError : uint8_t {
    kNone,
    kInvalid,    // bad parameters or prompt (400): message says which
    kTooLong,    // prompt + max_tokens exceeds the context length (400)
    kQueueFull,  // max_queued_requests / max_queued_tokens reached (429)
    kDraining,   // shutting down (503)
};

struct SubmitResult {
    std::shared_ptr<ResultStream> stream;  // null when rejected
    AdmissionError error = AdmissionError::kNone;
    std::string message;
};

// Upper bounds of the tokens-per-step histogram (vLLM's vllm:iteration_tokens_total buckets).
inline constexpr std::array<int64_t, 13> kStepTokenBounds = {1,   8,    16,   32,   64,   128,  256,
                                                             512, 1024, 2048, 4096, 8192, 16384};

struct EngineStats {
    int running = 0;
    int waiting = 0;
    int64_t prompt_tokens_total = 0;
    int64_t generation_tokens_total = 0;
    int64_t prefix_cache_queries = 0;                    // prompt tokens looked up
    int64_t prefix_cache_hits = 0;                       // prompt tokens found
    std::array<int64_t, 3> prefix_cache_hits_by_tier{};  // of those, found on the device, in host memory, on disk
    // Bytes the host / disk KV tiers moved: device -> host (write-through), host -> device and disk -> device (hits),
    // host -> disk (evictions from the host pool, with headers), and disk entries found corrupt (recomputed).
    int64_t kv_offloaded_bytes = 0;
    int64_t kv_loaded_bytes = 0;
    int64_t kv_disk_loaded_bytes = 0;
    int64_t kv_disk_written_bytes = 0;
    int64_t kv_disk_corrupt = 0;
    // The expert tier (--gpu-experts): routed pairs, those whose expert was resident (the cache's hits), those
    // computed on the host CPU, and the bytes moved over PCIe (expert fetches; activation rows for host pairs).
    int64_t expert_pairs = 0;
    int64_t expert_hit_pairs = 0;
    int64_t expert_host_pairs = 0;
    int64_t expert_in_place_pairs = 0;  // read from host memory in place (--expert-read-in-place-tokens)
    int64_t expert_in_place_bytes = 0;  // expert bytes those pairs read (an upper bound of their PCIe bytes)
    int64_t expert_fetched_bytes = 0;
    int64_t expert_activation_bytes = 0;
    double kv_cache_usage = 0.0;  // fraction of state blocks in use
    int64_t preemptions_total = 0;
    int64_t steps_total = 0;
    int64_t spec_drafts_total = 0;        // verify steps of a sequence (draft proposals checked)
    int64_t spec_draft_tokens_total = 0;  // draft tokens checked
    int64_t spec_accepted_tokens_total = 0;
    std::vector<int64_t> spec_accepted_per_pos;  // [i]: proposals whose draft i was accepted
    int64_t requests_finished_total = 0;
    // Steps by tokens computed in the step: [i] counts steps with more than kStepTokenBounds[i - 1] and at most
    // kStepTokenBounds[i] tokens; the last entry counts the steps above the last bound.
    std::array<int64_t, kStepTokenBounds.size() + 1> steps_by_tokens{};
    int64_t step_tokens_total = 0;  // sum of the tokens of every step
    // Wall time of the engine's steps, and the part of it that is host work: the step minus its forward passes
    // (scheduling, building the batch, sampling, state updates, publishing the events).
    double step_seconds_total = 0.0;
    double step_host_seconds_total = 0.0;
    double step_sample_seconds_total = 0.0;  // the sampling part of the host work
    // The device's step scratch (--cuda-workspace-mib) and the most of it a step has used; 0 on the CPU.
    int64_t workspace_bytes = 0;
    int64_t workspace_high_water_bytes = 0;
};

// How the engine laid out its sequence state (reported by /metrics as vllm:cache_config_info).
struct CacheInfo {
    int block_size = 0;       // positions per state block
    std::string cache_dtype;  // storage of K=V rows: f32 | bf16 | fp8 (resolved, never "auto")
    int64_t num_blocks = 0;   // state blocks
    int num_slots = 0;        // sequence slots (at most max_num_seqs run at once)
    bool enable_prefix_caching = false;
    double gpu_memory_utilization = 0.0;
    int64_t state_bytes = 0;  // bytes of sequence state allocated
    std::string memory_plan;  // where the bytes went (engine/capacity_plan.h summary), for the startup log
};

struct ModelInfo {
    std::string name;  // served model name (directory name by default)
    int64_t vocab_size = 0;
    int max_model_len = 0;
    std::vector<int32_t> eos_token_ids;
    int32_t bos_token_id = 0;
    CacheInfo cache;
};

class Engine {
  public:
    // Loads the model and starts the engine thread. Throws dsv4::Error with a clear message when the model or the
    // configuration cannot be served (e.g. the state does not fit the memory budget).
    static std::unique_ptr<Engine> create(const EngineConfig& config);
    virtual ~Engine() = default;

    // Admission control happens here, synchronously: a rejected request never enters the queue.
    virtual SubmitResult submit(GenerateRequest request) = 0;
    // Aborts a request (any thread; takes effect before the next step). Unknown ids are ignored.
    virtual void abort(const std::string& request_id) = 0;
    // Ends one completion as kStop (the server matched a stop string); the stream gets its finished event.
    virtual void finish(const std::string& request_id, int completion_index) = 0;

    virtual const ModelInfo& model_info() const = 0;
    virtual EngineStats stats() const = 0;

    // Stops admitting (kDraining), lets running requests finish for up to `grace`, aborts the rest, stops the thread.
    virtual void shutdown(std::chrono::milliseconds grace) = 0;
};

}  // namespace dsv4
