// The grammar IR shared by every front end (JSON Schema, GBNF, regex, choice lists, DSML tool calls): a context-free
// grammar over BYTES. A grammar is a list of rules; each rule's body is an expression tree (stored as a DAG of node
// indices) of byte sets, literals, sequences, alternatives, bounded / unbounded repetitions and rule references, plus
// two operators on regular (reference-free) sub-expressions: intersection and difference, which the JSON Schema
// front end uses for pattern + length + format on one string and for "any key except the listed ones".
// src/structured/compiled_grammar.h turns it into per-rule automata.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "structured/byte_set.h"

namespace dsv4::structured {

// A schema / grammar that cannot be compiled: unsupported feature, invalid syntax, or over a size limit. The message
// names the feature or the position; the server answers it with a 400.
class GrammarError : public Error {
  public:
    explicit GrammarError(const std::string& message) : Error(message) {}
};

template <typename... Args>
[[noreturn]] void grammar_fail(fmt::format_string<Args...> format, Args&&... args) {
    throw GrammarError(fmt::format(format, std::forward<Args>(args)...));
}

// Bounds that keep pathological inputs (deep nesting, huge enums, exponential regexes) from exhausting time or memory.
struct GrammarLimits {
    int max_nodes = 1 << 20;             // IR nodes
    int max_rules = 1 << 16;             // rules
    int max_repeat = 10000;              // the largest finite bound of one repetition
    int max_nfa_states = 1 << 20;        // NFA states of one rule while compiling
    int max_dfa_states = 200000;         // DFA states of the whole grammar
    int max_regular_dfa_states = 20000;  // DFA states of one intersection / difference operand
};

enum class NodeKind : uint8_t {
    kEmpty,       // matches the empty string
    kBytes,       // one byte in `bytes`
    kLiteral,     // the bytes of `text`
    kSeq,         // children in order
    kAlt,         // one of the children
    kRepeat,      // children[0] repeated min..max times (max < 0: unbounded)
    kRule,        // the rule `rule`
    kIntersect,   // strings both children match (children must be reference-free)
    kDifference,  // strings children[0] matches and children[1] does not (reference-free)
};

struct Node {
    NodeKind kind = NodeKind::kEmpty;
    ByteSet bytes;
    std::string text;
    std::vector<int32_t> children;
    int32_t min = 0;
    int32_t max = -1;
    int32_t rule = -1;
};

struct Rule {
    std::string name;
    int32_t body = -1;  // node index; -1 until defined
};

class Grammar {
  public:
    explicit Grammar(GrammarLimits limits = {}) : limits_(limits) {}

    int32_t empty();
    int32_t bytes(const ByteSet& set);
    int32_t byte(uint8_t value) { return bytes(ByteSet::single(value)); }
    int32_t literal(std::string_view text);
    int32_t seq(std::vector<int32_t> children);
    int32_t alt(std::vector<int32_t> children);
    int32_t repeat(int32_t child, int32_t min, int32_t max);  // max < 0: unbounded
    int32_t optional(int32_t child) { return repeat(child, 0, 1); }
    int32_t star(int32_t child) { return repeat(child, 0, -1); }
    int32_t plus(int32_t child) { return repeat(child, 1, -1); }
    int32_t ref(int32_t rule);
    int32_t intersect(int32_t a, int32_t b);
    int32_t difference(int32_t a, int32_t b);

    // Rules: declare first (so bodies can reference each other), define later. Names are for messages only.
    int32_t add_rule(std::string name);
    void define(int32_t rule, int32_t body);
    int32_t find_rule(std::string_view name) const;  // -1 when absent

    void set_root(int32_t rule) { root_ = rule; }
    int32_t root() const { return root_; }

    const Node& node(int32_t index) const { return nodes_[static_cast<size_t>(index)]; }
    const Rule& rule(int32_t index) const { return rules_[static_cast<size_t>(index)]; }
    int32_t num_nodes() const { return static_cast<int32_t>(nodes_.size()); }
    int32_t num_rules() const { return static_cast<int32_t>(rules_.size()); }
    const GrammarLimits& limits() const { return limits_; }

    // Throws GrammarError when a rule is declared but never defined or the root is unset.
    void check_complete() const;

  private:
    int32_t add(Node node);
    void check_node(int32_t index) const;

    GrammarLimits limits_;
    std::vector<Node> nodes_;
    std::vector<Rule> rules_;
    int32_t root_ = -1;
};

}  // namespace dsv4::structured
