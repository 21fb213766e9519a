// ExpertCache: the expert tier's policy, plain code with no backend (the dispatcher that carries it out is
// dist/expert_tier_moe.h). The routed experts of each MoE layer live in host memory in checkpoint form; `slots` of
// them per layer are resident in the device's expert cache (--gpu-experts). This class decides which:
//
// - Placement from routing counters (place): each layer's `slots` most-routed experts (RoutingCounters::per_layer,
//   as EPLB reads them; ties by id) are resident at start.
// - A step (plan_step, per layer, from the layer's routing ids): pairs whose expert is resident are hits; a missing
//   expert is either fetched into a slot (over PCIe, evicting the resident expert this step does not use with the
//   lowest popularity, least recently used among equals) or computed on the host CPU. The choice per expert is the
//   FetchPolicy's: fetch from `min_pairs_to_fetch` pairs (a fetch costs the expert's bytes over PCIe whatever the
//   batch; host compute grows with its pairs), and never more fetches than the slots this step leaves evictable.
//   The thresholds are to be measured on the GPU (docs/gpu-validation.md); min_pairs_to_fetch = 1 always fetches,
//   a huge one is llama.cpp's --cpu-moe. A step never fails for lack of slots: the rest is computed on the host.
// - Steps that read missing experts in place (the dispatcher's small steps, read_in_place_max_tokens) are not
//   planned: their pairs are counted on the device and handed over between steps (observe), as hits or in-place
//   pairs, and only rebalancing moves experts.
// - Popularity is a decayed count per expert; every `rebalance_interval` steps (end_step) the resident set moves
//   toward the most popular experts, at most `max_moves` fetches per layer at a time, between steps (serving never
//   stops: the dispatcher swaps the slot's handles before the next step reads it). EPLB's planner (eplb.h) balances
//   load across ranks; a cache wants the heaviest experts instead, so only its input (the counters) is shared.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dsv4::dist {

struct ExpertCacheConfig {
    int layers = 0;                   // MoE layers
    int experts = 0;                  // routed experts per layer
    int slots = 0;                    // resident experts per layer (0: every pair is computed on the host)
    int64_t min_pairs_to_fetch = 1;   // a missing expert with fewer pairs in a step is computed on the host
    double decay = 0.5;               // popularity kept per rebalance interval
    int64_t rebalance_interval = 64;  // steps (0: never)
    int max_moves = 8;                // fetches per layer per rebalance
    // Steps of at most this many tokens read missing experts where they are, in host memory (mapped pinned memory,
    // over PCIe on a GPU), instead of fetching them or computing them on the host: no host round trip per layer, so
    // a decode step can run as one CUDA graph. 0: never (every step is planned).
    int64_t read_in_place_max_tokens = 0;
};

struct ExpertFetch {
    int expert = 0;
    int slot = 0;
    int evicted = -1;  // the expert the slot held (-1: empty)
    bool operator==(const ExpertFetch&) const = default;
};

// What one layer's step needs.
struct LayerStepPlan {
    std::vector<int> resident;         // experts used this step that were resident before it
    std::vector<ExpertFetch> fetches;  // missing experts to fetch before the layer computes
    std::vector<int> host;             // missing experts computed on the host this step
};

struct ExpertCacheStats {
    int64_t pairs = 0;           // (token, expert) pairs routed
    int64_t hit_pairs = 0;       // of those, to experts resident when the step began
    int64_t fetched_pairs = 0;   // to experts fetched for the step
    int64_t host_pairs = 0;      // computed on the host
    int64_t in_place_pairs = 0;  // read from host memory in place (steps of read_in_place_max_tokens or fewer)
    int64_t fetches = 0;         // experts fetched (steps and rebalances)
    int64_t rebalance_fetches = 0;

    double hit_rate() const { return pairs > 0 ? static_cast<double>(hit_pairs) / static_cast<double>(pairs) : 0.0; }
};

class ExpertCache {
  public:
    explicit ExpertCache(const ExpertCacheConfig& config);

    const ExpertCacheConfig& config() const { return config_; }
    const ExpertCacheStats& stats() const { return stats_; }
    // The slot holding `expert` of `layer` (-1: in host memory only), and the expert a slot holds (-1: empty).
    int slot_of(int layer, int expert) const;
    int expert_in(int layer, int slot) const;
    double popularity(int layer, int expert) const { return score_[index(layer, expert)]; }

    // Resets residency to the `slots` most counted experts of each layer (counts[layer][expert]; empty or zero
    // counts: the lowest ids). Returns the fetches that fill the slots, per layer.
    std::vector<std::vector<ExpertFetch>> place(std::span<const std::vector<int64_t>> counts);
    // Resets one layer's residency to its `slots` most popular experts (popularity[expert], e.g. a synthetic router's
    // expected shares; ties by id), which also become the layer's popularity scores. Returns the fetches; the
    // replaced placement's are taken back from the stats (it is meant for placements not yet carried out).
    std::vector<ExpertFetch> place_layer(int layer, std::span<const double> popularity);
    // Pairs counted on the device (counts[layer * experts + expert]) for steps that read missing experts in place:
    // resident experts' pairs are hits, the others in-place pairs; popularity and recency as a planned step's.
    void observe(std::span<const int64_t> counts);
    // One layer's step from its routing ids (each in [0, experts), else dsv4::Error). Updates popularity and the
    // residency (the caller carries the fetches out before the layer computes).
    LayerStepPlan plan_step(int layer, std::span<const int32_t> ids);
    // Between steps. Every rebalance_interval steps: fetches (per layer) that move residency toward the most popular
    // experts; empty otherwise.
    std::vector<std::vector<ExpertFetch>> end_step();

  private:
    size_t index(int layer, int expert) const { return static_cast<size_t>(layer) * config_.experts + expert; }
    // The slot to reuse for a new expert: empty, else the resident expert with the lowest popularity (then the least
    // recently used) that `keep` does not protect; -1 when every slot is protected.
    int victim(int layer, const std::vector<bool>& keep) const;
    ExpertFetch install(int layer, int expert, int slot);
    std::vector<ExpertFetch> rebalance_layer(int layer);

    ExpertCacheConfig config_;
    std::vector<int> slot_expert_;    // [layer][slot] -> expert or -1
    std::vector<int> expert_slot_;    // [layer][expert] -> slot or -1
    std::vector<double> score_;       // [layer][expert] decayed pair counts
    std::vector<int64_t> last_used_;  // [layer][slot] step of the last use
    int64_t step_ = 0;
    ExpertCacheStats stats_;
};

}  // namespace dsv4::dist
