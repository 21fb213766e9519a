#include "structured/grammar.h"

namespace dsv4::structured {

int32_t Grammar::add(Node node) {
    if (static_cast<int>(nodes_.size()) >= limits_.max_nodes) {
        grammar_fail("the grammar is too large (more than {} nodes)", limits_.max_nodes);
    }
    for (int32_t child : node.children) check_node(child);
    nodes_.push_back(std::move(node));
    return static_cast<int32_t>(nodes_.size() - 1);
}

void Grammar::check_node(int32_t index) const {
    DSV4_CHECK(index >= 0 && index < num_nodes(), "grammar: node {} does not exist", index);
}

int32_t Grammar::empty() {
    return add(Node{});
}

int32_t Grammar::bytes(const ByteSet& set) {
    Node node;
    node.kind = NodeKind::kBytes;
    node.bytes = set;
    return add(std::move(node));
}

int32_t Grammar::literal(std::string_view text) {
    if (text.empty()) return empty();
    Node node;
    node.kind = NodeKind::kLiteral;
    node.text = std::string(text);
    return add(std::move(node));
}

int32_t Grammar::seq(std::vector<int32_t> children) {
    if (children.empty()) return empty();
    if (children.size() == 1) return children[0];
    Node node;
    node.kind = NodeKind::kSeq;
    node.children = std::move(children);
    return add(std::move(node));
}

int32_t Grammar::alt(std::vector<int32_t> children) {
    DSV4_CHECK(!children.empty(), "grammar: an alternative needs at least one branch");
    if (children.size() == 1) return children[0];
    Node node;
    node.kind = NodeKind::kAlt;
    node.children = std::move(children);
    return add(std::move(node));
}

int32_t Grammar::repeat(int32_t child, int32_t min, int32_t max) {
    if (min < 0 || (max >= 0 && max < min)) grammar_fail("invalid repetition bounds {{{},{}}}", min, max);
    if (min > limits_.max_repeat || max > limits_.max_repeat) {
        grammar_fail("repetition bound {} is over the limit of {}", std::max(min, max), limits_.max_repeat);
    }
    if (min == 1 && max == 1) return child;
    if (max == 0) return empty();
    Node node;
    node.kind = NodeKind::kRepeat;
    node.children = {child};
    node.min = min;
    node.max = max;
    return add(std::move(node));
}

int32_t Grammar::ref(int32_t rule) {
    DSV4_CHECK(rule >= 0 && rule < num_rules(), "grammar: rule {} does not exist", rule);
    Node node;
    node.kind = NodeKind::kRule;
    node.rule = rule;
    return add(std::move(node));
}

int32_t Grammar::intersect(int32_t a, int32_t b) {
    Node node;
    node.kind = NodeKind::kIntersect;
    node.children = {a, b};
    return add(std::move(node));
}

int32_t Grammar::difference(int32_t a, int32_t b) {
    Node node;
    node.kind = NodeKind::kDifference;
    node.children = {a, b};
    return add(std::move(node));
}

int32_t Grammar::add_rule(std::string name) {
    if (num_rules() >= limits_.max_rules) grammar_fail("the grammar has too many rules (limit {})", limits_.max_rules);
    rules_.push_back(Rule{std::move(name), -1});
    return num_rules() - 1;
}

void Grammar::define(int32_t rule, int32_t body) {
    DSV4_CHECK(rule >= 0 && rule < num_rules(), "grammar: rule {} does not exist", rule);
    check_node(body);
    rules_[static_cast<size_t>(rule)].body = body;
}

int32_t Grammar::find_rule(std::string_view name) const {
    for (int32_t i = 0; i < num_rules(); ++i) {
        if (rules_[static_cast<size_t>(i)].name == name) return i;
    }
    return -1;
}

void Grammar::check_complete() const {
    if (root_ < 0 || root_ >= num_rules()) grammar_fail("the grammar has no root rule");
    for (const Rule& rule : rules_) {
        if (rule.body < 0) grammar_fail("rule '{}' is used but never defined", rule.name);
    }
}

}  // namespace dsv4::structured
