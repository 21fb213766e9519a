#include "structured/stack_step.h"

#include <algorithm>

namespace dsv4::structured {
namespace {

uint64_t mix(uint32_t parent, int32_t state) {
    uint64_t h = (static_cast<uint64_t>(parent) << 32) ^ static_cast<uint32_t>(state);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

}  // namespace

StackArena::StackArena() : table_(1024, 0) {}

void StackArena::clear() {
    state_.clear();
    parent_.clear();
    depth_.clear();
    std::fill(table_.begin(), table_.end(), 0);
}

void StackArena::grow_table() {
    std::vector<uint32_t> bigger(table_.size() * 2, 0);
    const size_t mask = bigger.size() - 1;
    for (uint32_t node = 0; node < state_.size(); ++node) {
        size_t slot = mix(parent_[node], state_[node]) & mask;
        while (bigger[slot] != 0) slot = (slot + 1) & mask;
        bigger[slot] = node + 1;
    }
    table_ = std::move(bigger);
}

uint32_t StackArena::intern(uint32_t parent, int32_t state) {
    if ((state_.size() + 1) * 2 > table_.size()) grow_table();
    const size_t mask = table_.size() - 1;
    size_t slot = mix(parent, state) & mask;
    while (table_[slot] != 0) {
        const uint32_t node = table_[slot] - 1;
        if (parent_[node] == parent && state_[node] == state) return node;
        slot = (slot + 1) & mask;
    }
    const auto node = static_cast<uint32_t>(state_.size());
    state_.push_back(state);
    parent_.push_back(parent);
    depth_.push_back(depth(parent) + 1);
    table_[slot] = node + 1;
    return node;
}

void step_head(const CompiledGrammar& grammar, StackArena& arena, Head head, int c, std::vector<Head>& out) {
    if (grammar.is_simple(head.top)) {
        const int32_t t = grammar.next(head.top, c);
        if (t >= 0) add_head(out, {head.below, t});
        return;
    }
    uint32_t below = head.below;
    int32_t top = head.top;
    while (true) {
        for (int32_t u : grammar.closure(top)) {
            const int32_t t = grammar.next(u, c);
            if (t >= 0) add_head(out, {below, t});
            for (const CompiledGrammar::Outcome& outcome : grammar.push_outcomes(u, c)) {
                if (arena.depth(below) + outcome.push_count > kMaxStackDepth) continue;
                uint32_t node = below;
                for (uint32_t frame : grammar.pushes(outcome)) node = arena.intern(node, static_cast<int32_t>(frame));
                add_head(out, {node, outcome.top});
            }
        }
        if (below == StackArena::kNone || !grammar.completes(top)) break;
        top = arena.state(below);  // the finished rule pops: its caller continues at its return state
        below = arena.parent(below);
    }
}

void StepMemo::clear() {
    results_.clear();
    used_ = 0;
    if (++generation_ == 0) {  // after 2^32 walks: no slot may claim the new generation
        std::fill(table_.begin(), table_.end(), Slot{});
        generation_ = 1;
    }
}

size_t StepMemo::find(Head head, int c) const {
    const size_t mask = table_.size() - 1;
    size_t slot = mix(head.below ^ (static_cast<uint32_t>(c) << 24), head.top) & mask;
    while (table_[slot].generation == generation_) {
        const Slot& s = table_[slot];
        if (s.head == head && s.c == c) break;
        slot = (slot + 1) & mask;
    }
    return slot;
}

void StepMemo::grow() {
    std::vector<Slot> old = std::move(table_);
    table_.assign(std::max<size_t>(256, old.size() * 2), Slot{});
    for (const Slot& s : old) {
        if (s.generation == generation_) table_[find(s.head, s.c)] = s;
    }
}

void StepMemo::step(const CompiledGrammar& grammar, StackArena& arena, Head head, int c, std::vector<Head>& out) {
    if ((used_ + 1) * 2 > table_.size()) grow();
    Slot& s = table_[find(head, c)];
    if (s.generation != generation_) {
        scratch_.clear();
        step_head(grammar, arena, head, c, scratch_);
        s = {head, c, generation_, static_cast<uint32_t>(results_.size()), static_cast<uint32_t>(scratch_.size())};
        results_.insert(results_.end(), scratch_.begin(), scratch_.end());
        ++used_;
    }
    for (uint32_t i = s.begin; i < s.begin + s.count; ++i) add_head(out, results_[i]);
}

void step_heads(const CompiledGrammar& grammar, StackArena& arena, std::span<const Head> in, uint8_t byte,
                std::vector<Head>& out) {
    out.clear();
    const int c = grammar.byte_class(byte);
    for (const Head& head : in) step_head(grammar, arena, head, c, out);
}

bool can_end(const CompiledGrammar& grammar, const StackArena& arena, std::span<const Head> heads) {
    for (const Head& head : heads) {
        bool ok = grammar.completes(head.top);
        for (uint32_t node = head.below; ok && node != StackArena::kNone; node = arena.parent(node)) {
            ok = grammar.completes(arena.state(node));
        }
        if (ok) return true;
    }
    return false;
}

void serialize_heads(const StackArena& arena, std::span<const Head> heads, std::vector<int32_t>& out) {
    out.clear();
    std::vector<std::vector<int32_t>> stacks(heads.size());
    for (size_t i = 0; i < heads.size(); ++i) {
        std::vector<int32_t>& frames = stacks[i];
        frames.push_back(heads[i].top);
        for (uint32_t node = heads[i].below; node != StackArena::kNone; node = arena.parent(node))
            frames.push_back(arena.state(node));
        std::reverse(frames.begin(), frames.end());
    }
    std::sort(stacks.begin(), stacks.end());  // the same configuration gives the same key in any order
    for (const std::vector<int32_t>& frames : stacks) {
        out.insert(out.end(), frames.begin(), frames.end());
        out.push_back(-1);
    }
}

void copy_heads(const StackArena& from, std::span<const Head> heads, StackArena& to, std::vector<Head>& out) {
    out.clear();
    std::vector<int32_t> frames;
    for (const Head& head : heads) {
        frames.clear();
        for (uint32_t node = head.below; node != StackArena::kNone; node = from.parent(node))
            frames.push_back(from.state(node));
        uint32_t below = StackArena::kNone;
        for (auto it = frames.rbegin(); it != frames.rend(); ++it) below = to.intern(below, *it);
        out.push_back({below, head.top});
    }
}

}  // namespace dsv4::structured
