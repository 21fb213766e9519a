#include "dist/expert_parallel_moe.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "backend/tensor_reads.h"
#include "core/error.h"
#include "dist/dispatch_plan.h"

namespace dsv4::dist {

// One micro-batch's dispatch and combine: what was sent where, and what arrived.
struct ExpertParallelMoe::Exchange {
    int64_t begin = 0, end = 0;  // the micro-batch's token rows
    DispatchPlan plan;
    std::vector<int64_t> recv_counts;
    std::vector<int32_t> recv_experts;  // [M] (host): ids of the received pairs
    Tensor send_h, send_w, send_e;      // [P, D], [P, 1], [P]
    Tensor recv_h, recv_w, recv_e;      // [M, D], [M, 1], [M, 1]
    Tensor out;                         // [M, D]: the received pairs' expert outputs
    int64_t sent() const { return static_cast<int64_t>(plan.send_token.size()); }
    int64_t received() const { return std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0}); }
};

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<int64_t> scaled(const std::vector<int64_t>& counts, int64_t factor) {
    std::vector<int64_t> out(counts);
    for (auto& c : out) c *= factor;
    return out;
}

}  // namespace

ExpertParallelMoe::ExpertParallelMoe(Communicator& comm, ModelOps& ops, const ModelConfig& config,
                                     std::shared_ptr<const ExpertPlacement> placement, ExpertParallelOptions options)
    : comm_(comm),
      ops_(ops),
      hidden_(config.hidden_size),
      top_k_(config.n_experts_per_tok),
      placement_(std::move(placement)),
      options_(options),
      counters_(config.num_layers, config.n_routed_experts) {
    DSV4_CHECK(placement_ != nullptr, "expert parallelism: no expert placement");
    placement_->validate();
    DSV4_CHECK(placement_->ranks == comm.size() && placement_->experts == config.n_routed_experts &&
                   static_cast<int>(placement_->layers.size()) == config.num_layers,
               "expert parallelism: the placement is for {} ranks, {} experts, {} layers; the job has {} ranks and "
               "the model {} experts, {} layers",
               placement_->ranks, placement_->experts, placement_->layers.size(), comm.size(), config.n_routed_experts,
               config.num_layers);
}

void ExpertParallelMoe::set_placement(std::shared_ptr<const ExpertPlacement> placement) {
    DSV4_CHECK(placement != nullptr && placement->ranks == placement_->ranks &&
                   placement->experts == placement_->experts && placement->layers.size() == placement_->layers.size(),
               "expert parallelism: a new placement must keep the ranks, experts and layers");
    placement->validate();
    placement_ = std::move(placement);
}

std::vector<int32_t> ExpertParallelMoe::read_i32(const Tensor& t) {
    return ::dsv4::read_i32(ops_, t);
}

std::vector<int64_t> ExpertParallelMoe::gather_counts(const std::vector<int64_t>& mine) {
    const auto n = static_cast<int64_t>(mine.size());
    std::vector<int32_t> narrow(mine.begin(), mine.end());
    Tensor send = ops_.alloc(DType::kI32, {std::max<int64_t>(n, 1)});
    Tensor recv = ops_.alloc(DType::kI32, {std::max<int64_t>(n * comm_.size(), 1)});
    if (n > 0) ops_.from_host(send.view({n}), narrow.data());
    comm_.all_gather(send.data, n, recv.data, CommDtype::kI32);
    std::vector<int32_t> all = read_i32(recv.rows(0, n * comm_.size()));
    return {all.begin(), all.end()};
}

void ExpertParallelMoe::begin_step(int64_t local_tokens) {
    DSV4_CHECK(local_tokens >= 0 && local_tokens < (int64_t{1} << 30), "expert parallelism: {} step tokens",
               local_tokens);
    const std::vector<int64_t> tokens = gather_counts({local_tokens});
    const int64_t largest = *std::max_element(tokens.begin(), tokens.end());
    low_latency_ = options_.low_latency_max_tokens > 0 && largest <= options_.low_latency_max_tokens;
    capacity_ = largest;  // times top-k at the layer (pairs per peer at most: every pair of the largest rank)
    step_begun_ = true;
    ++stats_.steps;
}

void ExpertParallelMoe::dispatch(const LayerPlacement& layer, const Tensor& h, const Tensor& weights,
                                 const std::vector<int32_t>& ids, int64_t begin, int64_t end, int k, Exchange& ex) {
    ex.begin = begin;
    ex.end = end;
    ex.plan = plan_dispatch(std::span(ids).subspan(begin * k, (end - begin) * k), k, layer, comm_.rank(), comm_.size(),
                            begin);
    const int64_t p = ex.sent();
    ex.send_h = ops_.alloc(DType::kF32, {p, hidden_});
    ex.send_w = ops_.alloc(DType::kF32, {p, 1});
    ex.send_e = ops_.alloc(DType::kI32, {p});
    if (p > 0) {
        ops_.gather_rows(h, ex.plan.send_token, ex.send_h);
        ops_.gather_rows(weights.view({weights.numel(), 1}), ex.plan.send_pair, ex.send_w);
        ops_.from_host(ex.send_e, ex.plan.send_expert.data());
    }
    const auto t0 = Clock::now();
    if (low_latency_) {
        exchange_low_latency(ex);
    } else {
        exchange_normal(ex);
    }
    stats_.exchange_seconds += seconds_since(t0);
    const int64_t local = ex.plan.send_counts[comm_.rank()];
    stats_.pairs_local += local;
    stats_.pairs_sent += p - local;
    stats_.pairs_received += ex.received() - ex.recv_counts[comm_.rank()];
    stats_.bytes_sent += (p - local) * (hidden_ + 2) * 4;
}

void ExpertParallelMoe::exchange_normal(Exchange& ex) {
    const int ranks = comm_.size(), me = comm_.rank();
    const std::vector<int64_t> all = gather_counts(ex.plan.send_counts);  // [src * ranks + dst]
    ex.recv_counts.assign(ranks, 0);
    for (int s = 0; s < ranks; ++s) ex.recv_counts[s] = all[static_cast<size_t>(s) * ranks + me];
    const int64_t m = ex.received();
    ex.recv_h = ops_.alloc(DType::kF32, {m, hidden_});
    ex.recv_w = ops_.alloc(DType::kF32, {m, 1});
    ex.recv_e = ops_.alloc(DType::kI32, {m, 1});
    comm_.all_to_all_v(ex.send_h.data, scaled(ex.plan.send_counts, hidden_), ex.recv_h.data,
                       scaled(ex.recv_counts, hidden_), CommDtype::kF32);
    comm_.all_to_all_v(ex.send_w.data, ex.plan.send_counts, ex.recv_w.data, ex.recv_counts, CommDtype::kF32);
    comm_.all_to_all_v(ex.send_e.data, ex.plan.send_counts, ex.recv_e.data, ex.recv_counts, CommDtype::kI32);
    ex.recv_experts = read_i32(ex.recv_e);
}

void ExpertParallelMoe::exchange_low_latency(Exchange& ex) {
    const int ranks = comm_.size();
    // Slots per peer: the step's largest rank batch x top-k, the same on every rank (static sizes), and at least
    // every pair this rank can send one peer.
    const int64_t slots = std::max<int64_t>(capacity_ * top_k_, 1);
    Tensor pad_h = ops_.alloc(DType::kF32, {ranks * slots, hidden_});
    Tensor pad_w = ops_.alloc(DType::kF32, {ranks * slots, 1});
    Tensor header = ops_.alloc(DType::kI32, {ranks * (1 + slots)});
    std::vector<int32_t> head(static_cast<size_t>(ranks * (1 + slots)), -1);
    int64_t first = 0;
    for (int r = 0; r < ranks; ++r) {
        const int64_t count = ex.plan.send_counts[r];
        DSV4_CHECK(count <= slots, "expert parallelism: {} pairs for rank {} exceed the low-latency capacity {}", count,
                   r, slots);
        head[static_cast<size_t>(r * (1 + slots))] = static_cast<int32_t>(count);
        std::copy_n(ex.plan.send_expert.begin() + first, count, head.begin() + r * (1 + slots) + 1);
        if (count > 0) {
            ops_.copy(ex.send_h.rows(first, count), pad_h.rows(r * slots, count));
            ops_.copy(ex.send_w.rows(first, count), pad_w.rows(r * slots, count));
        }
        first += count;
    }
    ops_.from_host(header, head.data());
    Tensor recv_head = ops_.alloc(DType::kI32, {ranks * (1 + slots)});
    Tensor recv_pad_h = ops_.alloc(DType::kF32, {ranks * slots, hidden_});
    Tensor recv_pad_w = ops_.alloc(DType::kF32, {ranks * slots, 1});
    const std::vector<int64_t> head_counts(ranks, 1 + slots), w_counts(ranks, slots), h_counts(ranks, slots * hidden_);
    comm_.all_to_all_v(header.data, head_counts, recv_head.data, head_counts, CommDtype::kI32);
    comm_.all_to_all_v(pad_w.data, w_counts, recv_pad_w.data, w_counts, CommDtype::kF32);
    comm_.all_to_all_v(pad_h.data, h_counts, recv_pad_h.data, h_counts, CommDtype::kF32);
    const std::vector<int32_t> got = read_i32(recv_head);
    ex.recv_counts.assign(ranks, 0);
    std::vector<int32_t> valid;
    for (int s = 0; s < ranks; ++s) {
        const int32_t count = got[static_cast<size_t>(s * (1 + slots))];
        DSV4_CHECK(count >= 0 && count <= slots, "expert parallelism: rank {} announced {} pairs (capacity {})", s,
                   count, slots);
        ex.recv_counts[s] = count;
        for (int32_t i = 0; i < count; ++i) {
            valid.push_back(static_cast<int32_t>(s * slots + i));
            ex.recv_experts.push_back(got[static_cast<size_t>(s * (1 + slots) + 1 + i)]);
        }
    }
    const auto m = static_cast<int64_t>(valid.size());
    ex.recv_h = ops_.alloc(DType::kF32, {m, hidden_});
    ex.recv_w = ops_.alloc(DType::kF32, {m, 1});
    ex.recv_e = ops_.alloc(DType::kI32, {m, 1});
    if (m > 0) {
        ops_.gather_rows(recv_pad_h, valid, ex.recv_h);
        ops_.gather_rows(recv_pad_w, valid, ex.recv_w);
        ops_.from_host(ex.recv_e, ex.recv_experts.data());
    }
}

void ExpertParallelMoe::compute(const MoeWeights& w, float limit, Exchange& ex) {
    const int64_t m = ex.received();
    ex.out = ops_.alloc(DType::kF32, {m, hidden_});
    if (m == 0) return;
    const auto experts = static_cast<int32_t>(w.experts.size());
    for (int32_t e : ex.recv_experts) {
        DSV4_CHECK(e >= 0 && e < experts && w.experts[e].w1.valid(),
                   "expert parallelism: rank {} received a pair for expert {}, which it does not hold", comm_.rank(),
                   e);
    }
    ops_.moe_routed(ex.recv_h, w, ex.recv_w, ex.recv_e, limit, ex.out);
}

void ExpertParallelMoe::combine(Exchange& ex, Tensor routed, int k) {
    const int64_t p = ex.sent();
    Tensor back = ops_.alloc(DType::kF32, {p, hidden_});
    const auto t0 = Clock::now();
    comm_.all_to_all_v(ex.out.data, scaled(ex.recv_counts, hidden_), back.data, scaled(ex.plan.send_counts, hidden_),
                       CommDtype::kF32);
    stats_.exchange_seconds += seconds_since(t0);
    stats_.bytes_sent += (ex.received() - ex.recv_counts[comm_.rank()]) * hidden_ * 4;
    if (p > 0) ops_.gather_rows(back, ex.plan.slot_of_pair, routed.rows(ex.begin * k, (ex.end - ex.begin) * k));
}

void ExpertParallelMoe::moe(int layer, const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids,
                            float limit, Tensor y) {
    DSV4_CHECK(step_begun_, "expert parallelism: begin_step was not called before the step");
    DSV4_CHECK(layer >= 0 && layer < static_cast<int>(placement_->layers.size()),
               "expert parallelism: layer {} outside the placement", layer);
    const int64_t n = h.size(0);
    const int k = static_cast<int>(ids.size(1));
    DSV4_CHECK(h.size(1) == hidden_ && k == top_k_ && ids.numel() == n * k && weights.numel() == n * k,
               "expert parallelism: MoE input [{}, {}] with {} routing ids", n, h.size(1), ids.numel());
    const std::vector<int32_t> host_ids = read_i32(ids);
    counters_.add(layer, host_ids);
    ++stats_.moe_layers;
    if (low_latency_) ++stats_.low_latency_layers;
    const LayerPlacement& lp = placement_->layers[layer];
    const int parts = options_.dual_batch_overlap ? 2 : 1;
    std::vector<Exchange> ex(parts);
    for (int i = 0; i < parts; ++i) dispatch(lp, h, weights, host_ids, n * i / parts, n * (i + 1) / parts, k, ex[i]);
    Tensor shared = ops_.alloc(DType::kF32, {n, hidden_});
    if (w.shared && n > 0) ops_.moe_shared(h, *w.shared, limit, shared);  // local, while the dispatches fly
    Tensor routed = ops_.alloc(DType::kF32, {n * k, hidden_});
    for (int i = 0; i < parts; ++i) {
        compute(w, limit, ex[i]);
        combine(ex[i], routed, k);
    }
    if (n > 0) ops_.moe_combine(routed, k, w.shared ? &shared : nullptr, y);
}

}  // namespace dsv4::dist
