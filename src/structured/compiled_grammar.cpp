#include "structured/compiled_grammar.h"

#include <algorithm>

namespace dsv4::structured {
namespace {

constexpr size_t kMaxClosureEntries = size_t{1} << 22;
constexpr size_t kMaxOutcomes = size_t{1} << 22;

// Calls indexed backwards: by return state and by called rule.
struct CallIndex {
    std::vector<std::vector<std::pair<int32_t, int32_t>>> by_return;  // t -> (caller state, rule)
    std::vector<std::vector<std::pair<int32_t, int32_t>>> by_rule;    // r -> (caller state, return state)
};

}  // namespace

CompiledGrammar::CompiledGrammar(const Grammar& grammar) {
    classes_ = compute_byte_classes(grammar);
    const std::vector<RuleDfa> dfas = build_rule_dfas(grammar, classes_);
    root_ = grammar.root();
    for (int32_t r = 0; r < grammar.num_rules(); ++r) rule_names_.push_back(grammar.rule(r).name);
    flatten(dfas);
    trim(dfas);
    compute_completion();
    compute_closures();
    check_left_recursion();
    compute_push_outcomes();
}

void CompiledGrammar::flatten(const std::vector<RuleDfa>& dfas) {
    const auto classes = static_cast<size_t>(classes_.count);
    std::vector<int32_t> offset;
    int32_t total = 0;
    for (const RuleDfa& dfa : dfas) {
        offset.push_back(total);
        rule_start_.push_back(total);
        total += static_cast<int32_t>(dfa.states.size());
    }
    next_.assign(static_cast<size_t>(total) * classes, -1);
    accepting_.assign(static_cast<size_t>(total), 0);
    rule_of_.assign(static_cast<size_t>(total), 0);
    call_offsets_.assign(static_cast<size_t>(total) + 1, 0);
    for (size_t r = 0; r < dfas.size(); ++r) {
        for (size_t local = 0; local < dfas[r].states.size(); ++local) {
            const RuleDfaState& state = dfas[r].states[local];
            const size_t s = static_cast<size_t>(offset[r]) + local;
            rule_of_[s] = static_cast<int32_t>(r);
            accepting_[s] = state.accepting ? 1 : 0;
            for (size_t c = 0; c < classes; ++c) {
                if (state.next[c] >= 0) next_[s * classes + c] = offset[r] + state.next[c];
            }
            for (const auto& [rule, target] : state.calls) calls_.emplace_back(rule, offset[r] + target);
            call_offsets_[s + 1] = static_cast<uint32_t>(calls_.size());
        }
    }
}

namespace {

CallIndex index_calls(const std::vector<uint32_t>& offsets, const std::vector<std::pair<int32_t, int32_t>>& calls,
                      size_t num_states, size_t num_rules) {
    CallIndex index;
    index.by_return.resize(num_states);
    index.by_rule.resize(num_rules);
    for (size_t s = 0; s < num_states; ++s) {
        for (uint32_t i = offsets[s]; i < offsets[s + 1]; ++i) {
            const auto [rule, ret] = calls[i];
            index.by_return[static_cast<size_t>(ret)].emplace_back(static_cast<int32_t>(s), rule);
            index.by_rule[static_cast<size_t>(rule)].emplace_back(static_cast<int32_t>(s), ret);
        }
    }
    return index;
}

}  // namespace

// Keeps only states that can still finish their rule, and calls of rules that can finish at all.
void CompiledGrammar::trim(const std::vector<RuleDfa>& dfas) {
    const size_t num_states = accepting_.size();
    const auto classes = static_cast<size_t>(classes_.count);
    std::vector<std::vector<int32_t>> reverse(num_states);
    for (size_t s = 0; s < num_states; ++s) {
        for (size_t c = 0; c < classes; ++c) {
            const int32_t t = next_[s * classes + c];
            if (t >= 0 && (reverse[static_cast<size_t>(t)].empty() ||
                           reverse[static_cast<size_t>(t)].back() != static_cast<int32_t>(s))) {
                reverse[static_cast<size_t>(t)].push_back(static_cast<int32_t>(s));
            }
        }
    }
    const CallIndex calls = index_calls(call_offsets_, calls_, num_states, dfas.size());
    std::vector<uint8_t> live(num_states, 0), productive(dfas.size(), 0);
    std::vector<int32_t> work;
    auto mark = [&](int32_t s) {
        if (live[static_cast<size_t>(s)]) return;
        live[static_cast<size_t>(s)] = 1;
        work.push_back(s);
    };
    for (size_t s = 0; s < num_states; ++s) {
        if (accepting_[s]) mark(static_cast<int32_t>(s));
    }
    while (!work.empty()) {
        const int32_t t = work.back();
        work.pop_back();
        for (int32_t s : reverse[static_cast<size_t>(t)]) mark(s);
        for (const auto& [s, rule] : calls.by_return[static_cast<size_t>(t)]) {
            if (productive[static_cast<size_t>(rule)]) mark(s);
        }
        const int32_t r = rule_of_[static_cast<size_t>(t)];
        if (rule_start_[static_cast<size_t>(r)] == t && !productive[static_cast<size_t>(r)]) {
            productive[static_cast<size_t>(r)] = 1;
            for (const auto& [s, ret] : calls.by_rule[static_cast<size_t>(r)]) {
                if (live[static_cast<size_t>(ret)]) mark(s);
            }
        }
    }
    if (!productive[static_cast<size_t>(root_)]) {
        grammar_fail("the grammar matches nothing (rule '{}' can never be completed)",
                     rule_names_[static_cast<size_t>(root_)]);
    }
    for (int32_t& t : next_) {
        if (t >= 0 && !live[static_cast<size_t>(t)]) t = -1;
    }
    std::vector<std::pair<int32_t, int32_t>> kept;
    std::vector<uint32_t> offsets(num_states + 1, 0);
    for (size_t s = 0; s < num_states; ++s) {
        for (uint32_t i = call_offsets_[s]; i < call_offsets_[s + 1]; ++i) {
            const auto [rule, ret] = calls_[i];
            if (productive[static_cast<size_t>(rule)] && live[static_cast<size_t>(ret)]) kept.push_back(calls_[i]);
        }
        offsets[s + 1] = static_cast<uint32_t>(kept.size());
    }
    calls_ = std::move(kept);
    call_offsets_ = std::move(offsets);
}

// completes(s): accepting, or a call of a nullable rule leads to a completing state.
void CompiledGrammar::compute_completion() {
    const size_t num_states = accepting_.size();
    const CallIndex calls = index_calls(call_offsets_, calls_, num_states, rule_start_.size());
    completes_ = accepting_;
    std::vector<uint8_t> nullable(rule_start_.size(), 0);
    std::vector<int32_t> work;
    for (size_t s = 0; s < num_states; ++s) {
        if (completes_[s]) work.push_back(static_cast<int32_t>(s));
    }
    auto mark = [&](int32_t s) {
        if (completes_[static_cast<size_t>(s)]) return;
        completes_[static_cast<size_t>(s)] = 1;
        work.push_back(s);
    };
    while (!work.empty()) {
        const int32_t t = work.back();
        work.pop_back();
        for (const auto& [s, rule] : calls.by_return[static_cast<size_t>(t)]) {
            if (nullable[static_cast<size_t>(rule)]) mark(s);
        }
        const int32_t r = rule_of_[static_cast<size_t>(t)];
        if (rule_start_[static_cast<size_t>(r)] == t && !nullable[static_cast<size_t>(r)]) {
            nullable[static_cast<size_t>(r)] = 1;
            for (const auto& [s, ret] : calls.by_rule[static_cast<size_t>(r)]) {
                if (completes_[static_cast<size_t>(ret)]) mark(s);
            }
        }
    }
    // closure() follows calls of nullable rules: record which rules those are through their start states.
    tail_.assign(num_states, 0);
    for (size_t s = 0; s < num_states; ++s) {
        bool moves = call_offsets_[s + 1] != call_offsets_[s];
        for (int c = 0; c < classes_.count && !moves; ++c) moves = next(static_cast<int32_t>(s), c) >= 0;
        tail_[s] = accepting_[s] && !moves ? 1 : 0;
    }
}

void CompiledGrammar::compute_closures() {
    const size_t num_states = accepting_.size();
    closure_offsets_.assign(num_states + 1, 0);
    std::vector<uint32_t> seen(num_states, 0);
    std::vector<int32_t> stack;
    for (size_t s = 0; s < num_states; ++s) {
        const auto generation = static_cast<uint32_t>(s + 1);
        stack.assign(1, static_cast<int32_t>(s));
        seen[s] = generation;
        while (!stack.empty()) {
            const int32_t u = stack.back();
            stack.pop_back();
            closure_.push_back(u);
            for (uint32_t i = call_offsets_[static_cast<size_t>(u)]; i < call_offsets_[static_cast<size_t>(u) + 1];
                 ++i) {
                const auto [rule, ret] = calls_[i];
                if (!completes_[static_cast<size_t>(rule_start_[static_cast<size_t>(rule)])]) continue;
                if (seen[static_cast<size_t>(ret)] == generation) continue;
                seen[static_cast<size_t>(ret)] = generation;
                stack.push_back(ret);
            }
        }
        if (closure_.size() > kMaxClosureEntries) grammar_fail("the grammar is too large (too many optional rules)");
        closure_offsets_[s + 1] = static_cast<uint32_t>(closure_.size());
    }
    simple_.assign(num_states, 0);
    for (size_t s = 0; s < num_states; ++s) {
        const bool trivial_closure = closure_offsets_[s + 1] - closure_offsets_[s] == 1;
        const bool local = trivial_closure && call_offsets_[s] == call_offsets_[s + 1];
        simple_[s] = local ? (completes_[s] ? kLocal : kSimple) : 0;
    }
}

// A rule that can reach its own start without consuming a byte would make a step push frames forever.
void CompiledGrammar::check_left_recursion() const {
    const size_t num_rules = rule_start_.size();
    std::vector<std::vector<int32_t>> first_calls(num_rules);
    for (size_t r = 0; r < num_rules; ++r) {
        for (int32_t u : closure(rule_start_[r])) {
            for (uint32_t i = call_offsets_[static_cast<size_t>(u)]; i < call_offsets_[static_cast<size_t>(u) + 1]; ++i)
                first_calls[r].push_back(calls_[i].first);
        }
    }
    std::vector<uint8_t> color(num_rules, 0);  // 0 new, 1 on the DFS path, 2 done
    for (size_t root = 0; root < num_rules; ++root) {
        if (color[root] != 0) continue;
        std::vector<std::pair<int32_t, size_t>> path{{static_cast<int32_t>(root), 0}};
        color[root] = 1;
        while (!path.empty()) {
            auto& [r, i] = path.back();
            if (i == first_calls[static_cast<size_t>(r)].size()) {
                color[static_cast<size_t>(r)] = 2;
                path.pop_back();
                continue;
            }
            const int32_t callee = first_calls[static_cast<size_t>(r)][i++];
            if (color[static_cast<size_t>(callee)] == 1) {
                grammar_fail("rule '{}' is left-recursive (it can reach itself without consuming input)",
                             rule_names_[static_cast<size_t>(callee)]);
            }
            if (color[static_cast<size_t>(callee)] == 0) {
                color[static_cast<size_t>(callee)] = 1;
                path.emplace_back(callee, 0);
            }
        }
    }
}

void CompiledGrammar::compute_push_outcomes() {
    const size_t num_states = accepting_.size();
    call_slot_.assign(num_states, -1);
    outcome_offsets_.assign(1, 0);
    std::vector<uint32_t> prefix;
    int32_t slots = 0;
    for (size_t s = 0; s < num_states; ++s) {
        if (call_offsets_[s] == call_offsets_[s + 1]) continue;
        call_slot_[s] = slots++;
        for (int c = 0; c < classes_.count; ++c) {
            scratch_outcomes_.clear();
            append_outcomes(static_cast<int32_t>(s), c, prefix, 0);
            outcomes_.insert(outcomes_.end(), scratch_outcomes_.begin(), scratch_outcomes_.end());
            if (outcomes_.size() > kMaxOutcomes) grammar_fail("the grammar is too ambiguous to compile");
            outcome_offsets_.push_back(static_cast<uint32_t>(outcomes_.size()));
        }
    }
    scratch_outcomes_.clear();
    scratch_outcomes_.shrink_to_fit();
    for (const Outcome& outcome : outcomes_) max_push_count_ = std::max(max_push_count_, outcome.push_count);
}

void CompiledGrammar::append_outcomes(int32_t state, int c, std::vector<uint32_t>& prefix, int depth) {
    if (depth > static_cast<int>(rule_start_.size())) grammar_fail("the grammar is left-recursive");
    for (uint32_t i = call_offsets_[static_cast<size_t>(state)]; i < call_offsets_[static_cast<size_t>(state) + 1];
         ++i) {
        const auto [rule, ret] = calls_[i];
        const bool push = !tail_[static_cast<size_t>(ret)];
        if (push) prefix.push_back(static_cast<uint32_t>(ret));
        for (int32_t u : closure(rule_start_[static_cast<size_t>(rule)])) {
            const int32_t t = next(u, c);
            if (t >= 0) {
                Outcome outcome{static_cast<uint32_t>(pushes_.size()), static_cast<uint32_t>(prefix.size()), t};
                const bool duplicate =
                    std::any_of(scratch_outcomes_.begin(), scratch_outcomes_.end(), [&](const Outcome& o) {
                        return o.top == t && o.push_count == prefix.size() &&
                               std::equal(prefix.begin(), prefix.end(), pushes_.begin() + o.push_begin);
                    });
                if (!duplicate) {
                    pushes_.insert(pushes_.end(), prefix.begin(), prefix.end());
                    scratch_outcomes_.push_back(outcome);
                }
            }
            if (call_offsets_[static_cast<size_t>(u)] != call_offsets_[static_cast<size_t>(u) + 1])
                append_outcomes(u, c, prefix, depth + 1);
        }
        if (push) prefix.pop_back();
    }
}

std::span<const CompiledGrammar::Outcome> CompiledGrammar::push_outcomes(int32_t state, int c) const {
    const int32_t slot = call_slot_[static_cast<size_t>(state)];
    if (slot < 0) return {};
    const size_t row = static_cast<size_t>(slot) * static_cast<size_t>(classes_.count) + static_cast<size_t>(c);
    return {outcomes_.data() + outcome_offsets_[row], outcome_offsets_[row + 1] - outcome_offsets_[row]};
}

std::string CompiledGrammar::rule_name_of(int32_t state) const {
    return rule_names_[static_cast<size_t>(rule_of_[static_cast<size_t>(state)])];
}

size_t CompiledGrammar::memory_bytes() const {
    return next_.size() * sizeof(int32_t) + calls_.size() * sizeof(calls_[0]) + closure_.size() * sizeof(int32_t) +
           outcomes_.size() * sizeof(Outcome) + pushes_.size() * sizeof(uint32_t) + 8 * accepting_.size();
}

}  // namespace dsv4::structured
