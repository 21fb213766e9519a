#include "engine/capacity_plan.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/error.h"
#include "model/tensor_spec.h"
#include "state/state_layout.h"

namespace dsv4 {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double gib(int64_t bytes) {
    return static_cast<double>(bytes) / kGiB;
}

int64_t numel(const TensorSpec& s) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    return n;
}

// A tensor's bytes as a device holds it (weight_store.h): 1-D BF16 vectors widened to float32, I64 tables narrowed to
// int32, FP8 block scales joined in fast numerics by a float32 copy (the FP8 GEMMs' operand).
int64_t device_bytes(const TensorSpec& s, Numerics numerics) {
    const int64_t n = numel(s);
    int64_t bytes = n * dtype_bits(s.dtype) / 8;
    if (s.dtype == DType::kBF16 && s.shape.size() == 1) bytes = n * 4;
    if (s.dtype == DType::kI64) bytes = n * 4;
    if (numerics == Numerics::kFast && s.is_scale && s.shape.size() == 2 && s.component != Component::kRoutedExperts) {
        bytes += n * 4;
    }
    return bytes;
}

// What the state needs at the least: the slots, the snapshots asked for explicitly, and the blocks of one sequence
// of `min_tokens` positions.
int64_t minimal_state_bytes(const StateLayout& layout, const CapacityRequest& r, int slots, int64_t min_tokens) {
    const int64_t blocks = std::max<int64_t>(1, (min_tokens + r.block_tokens - 1) / r.block_tokens);
    const int64_t snapshots = std::max(0, r.num_snapshots);
    return slots * layout.slot_bytes + snapshots * layout.snapshot_bytes + blocks * layout.block_bytes;
}

// The bytes of one placement of the state and the experts, for the fit check and for each suggested flag.
struct Footprint {
    int64_t weights = 0;  // device weights (0 when the device reads them from the mapped checkpoint)
    int64_t state = 0;    // the state's minimum, or kv_cache_bytes when given
    int64_t fixed = 0;    // workspace + reserve
    int64_t total() const { return weights + state + fixed; }
};

class Planner {
  public:
    Planner(const ModelConfig& model, const CapacityRequest& r)
        : model_(model),
          r_(r),
          weights_(weight_footprint(model, r.numerics)),
          layout_(compute_state_layout(model, r.block_tokens, r.rewind_capacity, r.state_dtype)),
          fp8_layout_(compute_state_layout(model, r.block_tokens, r.rewind_capacity, StateDtype::kFp8)) {
        const MemoryFigures& d = r.device;
        DSV4_CHECK(d.total_bytes > 0 && d.free_bytes >= 0, "capacity plan: the {} reports {} bytes in total", d.name,
                   d.total_bytes);
        DSV4_CHECK(r.gpu_experts >= -1 && r.gpu_experts <= weights_.experts_per_layer,
                   "--gpu-experts {} is outside [0, {}] (the model's routed experts per layer; -1 = all)",
                   r.gpu_experts, weights_.experts_per_layer);
        budget_ = available(d.utilization);
        min_tokens_ = r.max_model_len > 0 ? r.max_model_len : r.block_tokens;
    }

    // Bytes this engine may use: its share of the device, never more than is free, minus nothing else.
    int64_t available(double utilization) const {
        const auto share = static_cast<int64_t>(utilization * static_cast<double>(r_.device.total_bytes));
        return std::min(share, r_.device.free_bytes);
    }

    int resident_experts() const { return r_.gpu_experts < 0 ? weights_.experts_per_layer : r_.gpu_experts; }

    Footprint footprint(int resident, int slots, int64_t min_tokens, const StateLayout& layout) const {
        Footprint f;
        if (r_.device.holds_weights) {
            f.weights = weights_.non_expert_bytes + weights_.expert_bytes * weights_.moe_layers * resident;
        }
        f.state = r_.kv_cache_bytes > 0 ? r_.kv_cache_bytes : minimal_state_bytes(layout, r_, slots, min_tokens);
        f.fixed = r_.device.workspace_bytes + r_.device.reserve_bytes;
        return f;
    }
    bool fits(const Footprint& f) const { return f.total() <= budget_; }

    CapacityPlan plan() const;

  private:
    // Pinned host memory of the expert tier: with fewer experts resident than the model has, the routed experts not
    // on the device are kept in host memory in checkpoint form, plus one expert's worth that an eviction writes back
    // to (the device's slots are a cache that moves toward the popular experts, dist/expert_tier_moe.h); none without
    // the tier or on the CPU (where the "device" is host memory too).
    int64_t host_expert_bytes(int resident) const {
        if (!r_.device.holds_weights || resident >= weights_.experts_per_layer) return 0;
        return weights_.expert_bytes * (int64_t{weights_.moe_layers} * (weights_.experts_per_layer - resident) + 1);
    }
    bool host_holds(int resident) const {
        return r_.host_available_bytes <= 0 ||
               host_expert_bytes(resident) + r_.host_kv_cache_bytes <= r_.host_available_bytes;
    }
    [[noreturn]] void fail_device(const Footprint& need) const;
    [[noreturn]] void fail_host(int resident) const;
    std::vector<std::string> fixes() const;
    int64_t state_budget(const Footprint& f) const;
    int snapshots_for(int64_t budget) const;

    const ModelConfig& model_;
    const CapacityRequest& r_;
    WeightFootprint weights_;
    StateLayout layout_;      // the state in the requested dtype
    StateLayout fp8_layout_;  // and in fp8 (the --kv-cache-dtype fp8 suggestion)
    int64_t budget_ = 0;
    int64_t min_tokens_ = 0;
};

// Every single flag change that makes the model fit, with the value that does.
std::vector<std::string> Planner::fixes() const {
    std::vector<std::string> out;
    const int resident = resident_experts();
    const int slots = r_.max_num_seqs;
    for (int e = resident - 1; e >= 0 && r_.device.holds_weights; --e) {  // the most experts that fit
        if (!fits(footprint(e, slots, min_tokens_, layout_))) continue;
        if (!host_holds(e)) break;
        out.push_back(
            fmt::format("--gpu-experts {} (the other {} routed experts of each layer are fetched from host memory: "
                        "{:.1f} GiB pinned)",
                        e, weights_.experts_per_layer - e, gib(host_expert_bytes(e))));
        break;
    }
    const Footprint now = footprint(resident, slots, min_tokens_, layout_);
    const double needed = static_cast<double>(now.total()) / static_cast<double>(r_.device.total_bytes);
    const double u = std::ceil(needed * 100.0) / 100.0;
    if (u > r_.device.utilization && u <= 1.0 && available(u) >= now.total()) {
        out.push_back(fmt::format("--gpu-memory-utilization {:.2f}", u));
    }
    if (r_.kv_cache_bytes == 0 && r_.max_model_len > r_.block_tokens) {
        for (int64_t len = (r_.max_model_len - 1) / r_.block_tokens * r_.block_tokens; len >= r_.block_tokens;
             len -= r_.block_tokens) {
            if (!fits(footprint(resident, slots, len, layout_))) continue;
            out.push_back(fmt::format("--max-model-len {}", len));
            break;
        }
    }
    for (int s = slots - 1; s >= 1 && r_.kv_cache_bytes == 0; --s) {
        if (!fits(footprint(resident, s, min_tokens_, layout_))) continue;
        out.push_back(fmt::format("--max-num-seqs {}", s));
        break;
    }
    if (r_.state_dtype != StateDtype::kFp8 && r_.kv_cache_bytes == 0 &&
        fits(footprint(resident, slots, min_tokens_, fp8_layout_))) {
        out.push_back("--kv-cache-dtype fp8");
    }
    if (r_.kv_cache_bytes > 0) {
        CapacityRequest automatic = r_;
        automatic.kv_cache_bytes = 0;
        const Planner p(model_, automatic);
        const Footprint least = p.footprint(resident, slots, min_tokens_, layout_);
        if (p.fits(least)) {
            out.push_back(
                fmt::format("--kv-cache-memory-bytes {} (or 0: what is left)", budget_ - least.weights - least.fixed));
        }
    }
    return out;
}

void Planner::fail_device(const Footprint& need) const {
    const MemoryFigures& d = r_.device;
    const int resident = resident_experts();
    std::string experts = fmt::format("routed experts {:.2f} GiB ({} of {} per layer x {} layers)",
                                      gib(weights_.expert_bytes * weights_.moe_layers * resident), resident,
                                      weights_.experts_per_layer, weights_.moe_layers);
    if (!d.holds_weights) experts = "weights read in place from the checkpoint";
    std::string message = fmt::format(
        "the model does not fit the {}: it needs {:.2f} GiB ({} bytes: non-expert weights {:.2f} GiB, {}, "
        "workspace {:.2f} GiB, reserve {:.2f} GiB, sequence state {:.2f} GiB for {} slots and one {}-token "
        "sequence) and {:.2f} GiB ({} bytes) are available ({:.2f} x {:.2f} GiB total, {:.2f} GiB free)",
        d.name, gib(need.total()), need.total(), d.holds_weights ? gib(weights_.non_expert_bytes) : 0.0, experts,
        gib(d.workspace_bytes), gib(d.reserve_bytes), gib(need.state), r_.max_num_seqs, min_tokens_, gib(budget_),
        budget_, d.utilization, gib(d.total_bytes), gib(d.free_bytes));
    const std::vector<std::string> options = fixes();
    if (options.empty()) {
        message +=
            "; no single flag makes it fit (fewer --gpu-experts, a shorter --max-model-len, fewer "
            "--max-num-seqs and --kv-cache-dtype fp8 together, or more devices)";
    } else {
        message += "; it would fit with any one of: ";
        for (size_t i = 0; i < options.size(); ++i) message += (i == 0 ? "" : "; ") + options[i];
    }
    throw Error(message);
}

void Planner::fail_host(int resident) const {
    fail(
        "the host tiers do not fit host memory: the expert tier ({} of {} routed experts per layer on the device) "
        "keeps the others in pinned host memory ({:.2f} GiB), and with the host KV cache ({:.2f} GiB, "
        "--host-kv-cache-gib) that needs {:.2f} GiB; {:.2f} GiB are available: keep more experts on the device "
        "(--gpu-experts, more GPUs: expert parallelism) or lower --host-kv-cache-gib",
        resident, weights_.experts_per_layer, gib(host_expert_bytes(resident)), gib(r_.host_kv_cache_bytes),
        gib(host_expert_bytes(resident) + r_.host_kv_cache_bytes), gib(r_.host_available_bytes));
}

// The automatic state budget: all that is left (capped on the CPU), or kv_cache_bytes.
int64_t Planner::state_budget(const Footprint& f) const {
    if (r_.kv_cache_bytes > 0) return r_.kv_cache_bytes;
    const int64_t left = budget_ - f.weights - f.fixed;
    const int64_t cap = r_.device.auto_state_cap_bytes;
    if (cap <= 0) return left;
    // The CPU: the slots plus up to `cap`, within half of what is left (the state is touched up front), but never
    // less than the slots plus a sixteenth of `cap` when that fits at all.
    const int64_t slots = int64_t{r_.max_num_seqs} * layout_.slot_bytes;
    return std::max(f.state, std::min(left, std::min(slots + cap, std::max(slots + cap / 16, left / 2))));
}

// Automatic snapshots as plan_state chooses them (2 per slot, at most a fifth of what the slots leave), but never so
// many that the blocks of one max_model_len sequence no longer fit (the fit check counted none).
int Planner::snapshots_for(int64_t budget) const {
    if (r_.num_snapshots >= 0 || layout_.snapshot_bytes <= 0) return r_.num_snapshots;
    const int64_t left = budget - int64_t{r_.max_num_seqs} * layout_.slot_bytes;
    const int64_t blocks = std::max<int64_t>(1, (min_tokens_ + r_.block_tokens - 1) / r_.block_tokens);
    const int64_t spare = left - blocks * std::max<int64_t>(1, layout_.block_bytes);
    const int64_t automatic = std::min<int64_t>(2 * int64_t{r_.max_num_seqs}, left / 5 / layout_.snapshot_bytes);
    return static_cast<int>(std::max<int64_t>(0, std::min(automatic, spare / layout_.snapshot_bytes)));
}

CapacityPlan Planner::plan() const {
    const int resident = resident_experts();
    const Footprint need = footprint(resident, r_.max_num_seqs, min_tokens_, layout_);
    if (!fits(need)) fail_device(need);
    if (!host_holds(resident)) fail_host(resident);
    CapacityPlan p;
    p.weights = weights_;
    p.resident_experts = resident;
    p.host_experts = weights_.experts_per_layer - resident;
    p.device_weight_bytes = need.weights;
    p.resident_expert_bytes = weights_.expert_bytes * weights_.moe_layers * resident;
    p.host_expert_bytes = host_expert_bytes(resident);
    p.workspace_bytes = r_.device.workspace_bytes;
    p.reserve_bytes = r_.device.reserve_bytes;
    p.device_budget_bytes = budget_;
    p.host_kv_cache_bytes = r_.host_kv_cache_bytes;
    p.device_name = r_.device.name;
    StatePlanRequest s;
    s.budget_bytes = state_budget(need);
    s.max_slots = r_.max_num_seqs;
    s.block_tokens = r_.block_tokens;
    s.rewind_capacity = r_.rewind_capacity;
    s.num_snapshots = snapshots_for(s.budget_bytes);
    s.min_tokens = min_tokens_;
    p.state = plan_state(model_, s, r_.state_dtype);
    p.max_model_len = r_.max_model_len > 0 ? r_.max_model_len
                                           : std::min<int64_t>(model_.max_position_embeddings, p.state.token_capacity);
    return p;
}

}  // namespace

namespace {

// Non-expert and routed-expert bytes of every tensor of `config`.
std::pair<int64_t, int64_t> tensor_bytes(const ModelConfig& config, Numerics numerics) {
    int64_t non_expert = 0, experts = 0;
    for (const TensorSpec& s : expected_tensors(config)) {
        (s.component == Component::kRoutedExperts ? experts : non_expert) += device_bytes(s, numerics);
    }
    return {non_expert, experts};
}

}  // namespace

// Counted on two copies of the model with k and k + 1 routed experts (k = top-k) instead of all of them: every byte
// is linear in the expert count (one more expert adds its three matrices and a router row), and listing the tensors
// of 11,008 experts takes a while in a sanitizer build.
WeightFootprint weight_footprint(const ModelConfig& config, Numerics numerics) {
    WeightFootprint w;
    w.experts_per_layer = config.n_routed_experts;
    w.moe_layers = config.num_layers;
    const int small = std::min(config.n_experts_per_tok, config.n_routed_experts);
    if (w.moe_layers == 0 || small == config.n_routed_experts) {
        const auto [non_expert, experts] = tensor_bytes(config, numerics);
        w.non_expert_bytes = non_expert;
        w.expert_bytes = w.moe_layers * w.experts_per_layer > 0 ? experts / (w.moe_layers * w.experts_per_layer) : 0;
        return w;
    }
    ModelConfig c = config;
    c.n_routed_experts = small;
    const auto [ne0, e0] = tensor_bytes(c, numerics);
    c.n_routed_experts = small + 1;
    const auto [ne1, e1] = tensor_bytes(c, numerics);
    w.expert_bytes = (e1 - e0) / w.moe_layers;
    w.non_expert_bytes = ne0 + (config.n_routed_experts - small) * (ne1 - ne0);
    return w;
}

std::string CapacityPlan::summary() const {
    const StateConfig& s = state.state;
    return fmt::format(
        "capacity plan ({}): non-expert weights {:.2f} GiB; routed experts {:.2f} GiB on the device ({} per layer), "
        "{:.2f} GiB in host memory ({} per layer not on the device); workspace {:.2f} GiB; reserve {:.2f} GiB; "
        "sequence state {:.2f} GiB "
        "({} slots, {} snapshots, {} blocks of {} tokens = {} tokens); host KV cache {:.2f} GiB; {:.2f} of {:.2f} GiB "
        "used",
        device_name, gib(weights.non_expert_bytes), gib(resident_expert_bytes), resident_experts,
        gib(host_expert_bytes), host_experts, gib(workspace_bytes), gib(reserve_bytes), gib(state.total_bytes),
        s.max_slots, s.num_snapshots, s.num_blocks, s.block_tokens, state.token_capacity, gib(host_kv_cache_bytes),
        gib(device_bytes()), gib(device_budget_bytes));
}

CapacityPlan plan_capacity(const ModelConfig& model, const CapacityRequest& request) {
    return Planner(model, request).plan();
}

}  // namespace dsv4
