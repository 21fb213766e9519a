#include "structured/automaton_builder.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace dsv4::structured {
namespace {

constexpr int kMaxExpressionDepth = 2000;  // nesting of IR nodes inside one rule body
// A rule's DFA may have at most max(kMinRuleStates, kStatesPerNfaState x its NFA states): determinization that
// grows faster than the expression is exponential blowup, refused early instead of running to the global limit.
constexpr size_t kMinRuleStates = 4096;
constexpr size_t kStatesPerNfaState = 4;

using ClassMask = ByteSet;  // a set of byte-class ids (there are at most 256 classes)

struct ByteSetHash {
    size_t operator()(const ByteSet& set) const {
        uint64_t h = 0x9e3779b97f4a7c15ULL;
        for (uint64_t w : set.words()) h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
        return static_cast<size_t>(h ^ (h >> 29));
    }
};

struct NfaEdge {
    int32_t target = -1;
    int32_t rule = -1;  // >= 0: a call of this rule
    int32_t mask = -1;  // >= 0: a byte edge over Nfa::masks[mask]; rule and mask both -1: epsilon
};

struct Nfa {
    std::vector<std::vector<NfaEdge>> edges;
    std::vector<ClassMask> masks;
    std::unordered_map<ByteSet, int32_t, ByteSetHash> mask_ids;
    int limit = 0;

    int32_t add_state() {
        if (static_cast<int>(edges.size()) >= limit) {
            grammar_fail("the grammar is too large to compile (more than {} automaton states in one rule)", limit);
        }
        edges.emplace_back();
        return static_cast<int32_t>(edges.size() - 1);
    }
    int32_t mask_id(const ClassMask& mask) {
        auto [it, inserted] = mask_ids.emplace(mask, static_cast<int32_t>(masks.size()));
        if (inserted) masks.push_back(mask);
        return it->second;
    }
    void eps(int32_t from, int32_t to) { edges[static_cast<size_t>(from)].push_back({to, -1, -1}); }
    void on_mask(int32_t from, int32_t to, const ClassMask& mask) {
        edges[static_cast<size_t>(from)].push_back({to, -1, mask_id(mask)});
    }
    void call(int32_t from, int32_t to, int32_t rule) { edges[static_cast<size_t>(from)].push_back({to, rule, -1}); }
};

struct VectorHash {
    size_t operator()(const std::vector<int32_t>& v) const {
        uint64_t h = 0x9e3779b97f4a7c15ULL ^ v.size();
        for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 0x100000001b3ULL;
        return static_cast<size_t>(h ^ (h >> 32));
    }
};

// The subset construction of one NFA. `budget` is shared by every DFA of the grammar.
class SubsetConstruction {
  public:
    SubsetConstruction(const Nfa& nfa, int num_classes, int& budget, int budget_limit)
        : nfa_(nfa),
          num_classes_(num_classes),
          budget_(budget),
          budget_limit_(budget_limit),
          local_limit_(std::max<size_t>(kMinRuleStates, kStatesPerNfaState * nfa.edges.size())),
          mark_(nfa.edges.size(), 0),
          by_class_(static_cast<size_t>(num_classes)) {}

    RuleDfa run(int32_t start, int32_t accept) {
        accept_ = accept;
        seeds_.assign(1, start);
        intern(closure());
        for (size_t d = 0; d < sets_.size(); ++d) expand(static_cast<int32_t>(d));
        return std::move(dfa_);
    }

  private:
    // The epsilon closure of seeds_, sorted.
    std::vector<int32_t> closure() {
        ++generation_;
        std::vector<int32_t> out;
        while (!seeds_.empty()) {
            const int32_t s = seeds_.back();
            seeds_.pop_back();
            if (mark_[static_cast<size_t>(s)] == generation_) continue;
            mark_[static_cast<size_t>(s)] = generation_;
            out.push_back(s);
            for (const NfaEdge& e : nfa_.edges[static_cast<size_t>(s)]) {
                if (e.rule < 0 && e.mask < 0) seeds_.push_back(e.target);
            }
        }
        std::sort(out.begin(), out.end());
        return out;
    }

    int32_t intern(std::vector<int32_t> set) {
        auto it = ids_.find(set);
        if (it != ids_.end()) return it->second;
        if (budget_ <= 0) {
            grammar_fail("the grammar is too complex (its automaton needs more than {} states)", budget_limit_);
        }
        if (sets_.size() >= local_limit_) {
            grammar_fail(
                "the grammar is too complex: a rule or pattern determinizes to more than {} states (an "
                "ambiguous repetition such as (a|b)*a(a|b){{20}})",
                local_limit_);
        }
        --budget_;
        const auto id = static_cast<int32_t>(sets_.size());
        RuleDfaState state;
        state.next.assign(static_cast<size_t>(num_classes_), -1);
        state.accepting = std::binary_search(set.begin(), set.end(), accept_);
        dfa_.states.push_back(std::move(state));
        ids_.emplace(set, id);
        sets_.push_back(std::move(set));
        return id;
    }

    void expand(int32_t d) {
        for (auto& targets : by_class_) targets.clear();
        std::map<int32_t, std::vector<int32_t>> by_rule;
        for (int32_t s : sets_[static_cast<size_t>(d)]) {
            for (const NfaEdge& e : nfa_.edges[static_cast<size_t>(s)]) {
                if (e.rule >= 0) {
                    by_rule[e.rule].push_back(e.target);
                } else if (e.mask >= 0) {
                    const ClassMask& mask = nfa_.masks[static_cast<size_t>(e.mask)];
                    for (int c = 0; c < num_classes_; ++c) {
                        if (mask.contains(static_cast<uint8_t>(c)))
                            by_class_[static_cast<size_t>(c)].push_back(e.target);
                    }
                }
            }
        }
        memo_.clear();  // equal target sets share one closure
        for (int c = 0; c < num_classes_; ++c) {
            std::vector<int32_t>& targets = by_class_[static_cast<size_t>(c)];
            if (targets.empty()) continue;
            std::sort(targets.begin(), targets.end());
            targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
            auto [it, inserted] = memo_.emplace(targets, -1);
            if (inserted) {
                seeds_ = targets;
                it->second = intern(closure());
            }
            dfa_.states[static_cast<size_t>(d)].next[static_cast<size_t>(c)] = it->second;
        }
        for (auto& [rule, targets] : by_rule) {
            seeds_ = targets;
            const int32_t next = intern(closure());
            dfa_.states[static_cast<size_t>(d)].calls.emplace_back(rule, next);
        }
    }

    const Nfa& nfa_;
    int num_classes_;
    int& budget_;
    int budget_limit_;
    size_t local_limit_;
    int32_t accept_ = -1;
    std::vector<uint32_t> mark_;
    uint32_t generation_ = 0;
    std::vector<int32_t> seeds_;
    std::vector<std::vector<int32_t>> by_class_;
    std::unordered_map<std::vector<int32_t>, int32_t, VectorHash> memo_;
    std::unordered_map<std::vector<int32_t>, int32_t, VectorHash> ids_;
    std::vector<std::vector<int32_t>> sets_;
    RuleDfa dfa_;
};

// The product of two call-free DFAs: strings both accept (intersection) or the first accepts and the second does not
// (difference).
RuleDfa product(const RuleDfa& a, const RuleDfa& b, bool difference, int num_classes, int limit) {
    RuleDfa out;
    std::map<std::pair<int32_t, int32_t>, int32_t> ids;
    std::vector<std::pair<int32_t, int32_t>> pairs;
    auto intern = [&](int32_t x, int32_t y) {
        auto [it, inserted] = ids.emplace(std::make_pair(x, y), static_cast<int32_t>(pairs.size()));
        if (!inserted) return it->second;
        if (static_cast<int>(pairs.size()) >= limit) {
            grammar_fail("the grammar is too complex (an intersection needs more than {} states)", limit);
        }
        pairs.emplace_back(x, y);
        RuleDfaState state;
        state.next.assign(static_cast<size_t>(num_classes), -1);
        const bool accept_a = a.states[static_cast<size_t>(x)].accepting;
        const bool accept_b = y >= 0 && b.states[static_cast<size_t>(y)].accepting;
        state.accepting = difference ? accept_a && !accept_b : accept_a && accept_b;
        out.states.push_back(std::move(state));
        return it->second;
    };
    intern(0, 0);
    for (size_t i = 0; i < pairs.size(); ++i) {
        const auto [x, y] = pairs[i];
        for (int c = 0; c < num_classes; ++c) {
            const int32_t nx = a.states[static_cast<size_t>(x)].next[static_cast<size_t>(c)];
            const int32_t ny = y >= 0 ? b.states[static_cast<size_t>(y)].next[static_cast<size_t>(c)] : -1;
            if (nx < 0 || (!difference && ny < 0)) continue;
            const int32_t target = intern(nx, ny);
            out.states[i].next[static_cast<size_t>(c)] = target;
        }
    }
    return out;
}

class NfaBuilder {
  public:
    NfaBuilder(const Grammar& grammar, const ByteClasses& classes) : grammar_(grammar), classes_(classes) {}

    // Adds edges from `from` to `to` that match node. regular_only: references are an error (product operands).
    void build(int32_t index, int32_t from, int32_t to, Nfa& nfa, bool regular_only, int depth) {
        if (depth > kMaxExpressionDepth) grammar_fail("the grammar nests expressions too deeply");
        const Node& node = grammar_.node(index);
        switch (node.kind) {
            case NodeKind::kEmpty:
                nfa.eps(from, to);
                return;
            case NodeKind::kBytes:
                if (!node.bytes.empty()) nfa.on_mask(from, to, class_mask(node.bytes));
                return;
            case NodeKind::kLiteral:
                build_literal(node.text, from, to, nfa);
                return;
            case NodeKind::kSeq:
                build_seq(node, from, to, nfa, regular_only, depth);
                return;
            case NodeKind::kAlt:
                for (int32_t child : node.children) build(child, from, to, nfa, regular_only, depth + 1);
                return;
            case NodeKind::kRepeat:
                build_repeat(node, from, to, nfa, regular_only, depth);
                return;
            case NodeKind::kRule:
                if (regular_only) {
                    grammar_fail(
                        "rule '{}' is referenced inside an intersection (only regular expressions can be "
                        "intersected)",
                        grammar_.rule(node.rule).name);
                }
                nfa.call(from, to, node.rule);
                return;
            case NodeKind::kIntersect:
            case NodeKind::kDifference:
                build_product(node, from, to, nfa, depth);
                return;
        }
    }

    // A standalone DFA of a reference-free expression.
    RuleDfa regular_dfa(int32_t index, int depth) {
        Nfa nfa;
        nfa.limit = grammar_.limits().max_nfa_states;
        const int32_t start = nfa.add_state();
        const int32_t accept = nfa.add_state();
        build(index, start, accept, nfa, true, depth + 1);
        int budget = grammar_.limits().max_regular_dfa_states;
        return SubsetConstruction(nfa, classes_.count, budget, budget).run(start, accept);
    }

  private:
    ClassMask class_mask(const ByteSet& bytes) const {
        ClassMask mask;
        for (int b = 0; b < 256; ++b) {
            if (bytes.contains(static_cast<uint8_t>(b))) mask.insert(classes_.of_byte[static_cast<size_t>(b)]);
        }
        return mask;
    }

    void build_literal(const std::string& text, int32_t from, int32_t to, Nfa& nfa) {
        int32_t cur = from;
        for (size_t i = 0; i < text.size(); ++i) {
            const int32_t next = i + 1 == text.size() ? to : nfa.add_state();
            nfa.on_mask(cur, next, class_mask(ByteSet::single(static_cast<uint8_t>(text[i]))));
            cur = next;
        }
    }

    void build_seq(const Node& node, int32_t from, int32_t to, Nfa& nfa, bool regular_only, int depth) {
        int32_t cur = from;
        for (size_t i = 0; i < node.children.size(); ++i) {
            const int32_t next = i + 1 == node.children.size() ? to : nfa.add_state();
            build(node.children[i], cur, next, nfa, regular_only, depth + 1);
            cur = next;
        }
    }

    void build_repeat(const Node& node, int32_t from, int32_t to, Nfa& nfa, bool regular_only, int depth) {
        const int32_t child = node.children[0];
        int32_t cur = from;
        for (int32_t i = 0; i < node.min; ++i) {
            const int32_t next = nfa.add_state();
            build(child, cur, next, nfa, regular_only, depth + 1);
            cur = next;
        }
        if (node.max < 0) {
            const int32_t loop = nfa.add_state();
            const int32_t body_start = nfa.add_state();
            const int32_t body_end = nfa.add_state();
            nfa.eps(cur, loop);
            nfa.eps(loop, body_start);
            build(child, body_start, body_end, nfa, regular_only, depth + 1);
            nfa.eps(body_end, loop);
            nfa.eps(loop, to);
            return;
        }
        for (int32_t i = node.min; i < node.max; ++i) {
            const int32_t next = nfa.add_state();
            nfa.eps(cur, to);
            build(child, cur, next, nfa, regular_only, depth + 1);
            cur = next;
        }
        nfa.eps(cur, to);
    }

    void build_product(const Node& node, int32_t from, int32_t to, Nfa& nfa, int depth) {
        const RuleDfa a = regular_dfa(node.children[0], depth);
        const RuleDfa b = regular_dfa(node.children[1], depth);
        const RuleDfa p =
            product(a, b, node.kind == NodeKind::kDifference, classes_.count, grammar_.limits().max_regular_dfa_states);
        if (p.states.empty()) return;  // the empty language: no path from `from` to `to`
        // The product's states become consecutive NFA states: product state s is NFA state first + s.
        const int32_t first = nfa.add_state();
        for (size_t s = 1; s < p.states.size(); ++s) nfa.add_state();
        nfa.eps(from, first);
        for (size_t s = 0; s < p.states.size(); ++s) {
            const int32_t id = first + static_cast<int32_t>(s);
            std::map<int32_t, ClassMask> by_target;
            for (int c = 0; c < classes_.count; ++c) {
                const int32_t t = p.states[s].next[static_cast<size_t>(c)];
                if (t >= 0) by_target[t].insert(static_cast<uint8_t>(c));
            }
            for (const auto& [t, mask] : by_target) nfa.on_mask(id, first + t, mask);
            if (p.states[s].accepting) nfa.eps(id, to);
        }
    }

    const Grammar& grammar_;
    const ByteClasses& classes_;
};

}  // namespace

ByteClasses compute_byte_classes(const Grammar& grammar) {
    std::unordered_map<ByteSet, int, ByteSetHash> distinct;
    ByteSet literal_bytes;
    for (int32_t i = 0; i < grammar.num_nodes(); ++i) {
        const Node& node = grammar.node(i);
        if (node.kind == NodeKind::kBytes) distinct.emplace(node.bytes, 0);
        if (node.kind == NodeKind::kLiteral) {
            for (char ch : node.text) literal_bytes.insert(static_cast<uint8_t>(ch));
        }
    }
    for (int b = 0; b < 256; ++b) {
        if (literal_bytes.contains(static_cast<uint8_t>(b)))
            distinct.emplace(ByteSet::single(static_cast<uint8_t>(b)), 0);
    }
    // Partition refinement: each set splits every class into its members inside and outside the set.
    std::array<int, 256> cls{};
    int count = 1;
    for (const auto& [set, unused] : distinct) {
        std::map<std::pair<int, bool>, int> renumber;
        for (int b = 0; b < 256; ++b) {
            const auto key = std::make_pair(cls[static_cast<size_t>(b)], set.contains(static_cast<uint8_t>(b)));
            auto [it, inserted] = renumber.emplace(key, static_cast<int>(renumber.size()));
            cls[static_cast<size_t>(b)] = it->second;
        }
        count = static_cast<int>(renumber.size());
    }
    ByteClasses out;
    out.count = count;
    for (int b = 0; b < 256; ++b)
        out.of_byte[static_cast<size_t>(b)] = static_cast<uint8_t>(cls[static_cast<size_t>(b)]);
    return out;
}

std::vector<RuleDfa> build_rule_dfas(const Grammar& grammar, const ByteClasses& classes) {
    grammar.check_complete();
    NfaBuilder builder(grammar, classes);
    int budget = grammar.limits().max_dfa_states;
    std::vector<RuleDfa> out;
    out.reserve(static_cast<size_t>(grammar.num_rules()));
    for (int32_t r = 0; r < grammar.num_rules(); ++r) {
        Nfa nfa;
        nfa.limit = grammar.limits().max_nfa_states;
        const int32_t start = nfa.add_state();
        const int32_t accept = nfa.add_state();
        builder.build(grammar.rule(r).body, start, accept, nfa, false, 0);
        out.push_back(
            SubsetConstruction(nfa, classes.count, budget, grammar.limits().max_dfa_states).run(start, accept));
    }
    return out;
}

}  // namespace dsv4::structured
