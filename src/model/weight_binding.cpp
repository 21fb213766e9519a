// Weight binding: expected tensor set vs checkpoint, HF renames, draft probing, grouped reporting.
#include "model/weight_binding.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>

#include "core/error.h"
#include "loader/text_util.h"

namespace dsv4 {
namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
    return s.substr(0, prefix.size()) == prefix;
}
bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
    for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
        s.replace(pos, from.size(), to);
    }
}

void replace_suffix(std::string& s, std::string_view from, std::string_view to) {
    if (ends_with(s, from)) s.replace(s.size() - from.size(), from.size(), to);
}

// Original -> HF renames inside one block (model-spec 4.2 [HF-conv]); order matters (indexer before attn).
std::string hf_block_name(std::string name) {
    static constexpr std::pair<std::string_view, std::string_view> kInfix[] = {
        {".attn_norm.", ".input_layernorm."},
        {".ffn_norm.", ".post_attention_layernorm."},
        {".attn.indexer.compressor.", ".self_attn.compressor.indexer."},
        {".attn.indexer.wq_b.", ".self_attn.compressor.indexer.q_b_proj."},
        {".attn.indexer.weights_proj.", ".self_attn.compressor.indexer.scorer.weights_proj."},
        {".attn.", ".self_attn."},
        {".ffn.", ".mlp."},
        {"compressor.norm.", "compressor.kv_norm."},
        {"compressor.indexer.norm.", "compressor.indexer.kv_norm."},
        {".wq_a.", ".q_a_proj."},
        {".wq_b.", ".q_b_proj."},
        {".wkv.", ".kv_proj."},
        {".wgate.", ".gate_proj."},
        {".wo_a.", ".o_a_proj."},
        {".wo_b.", ".o_b_proj."},
        {".q_norm.", ".q_a_norm."},
    };
    for (const auto& [from, to] : kInfix) replace_all(name, from, to);
    static constexpr std::pair<std::string_view, std::string_view> kSuffix[] = {
        {".hc_attn_fn", ".attn_hc.fn"},
        {".hc_attn_base", ".attn_hc.base"},
        {".hc_attn_scale", ".attn_hc.scale"},
        {".hc_ffn_fn", ".ffn_hc.fn"},
        {".hc_ffn_base", ".ffn_hc.base"},
        {".hc_ffn_scale", ".ffn_hc.scale"},
        {".attn_sink", ".sinks"},
        {".ape", ".position_bias"},
        {".gate.bias", ".gate.e_score_correction_bias"},
    };
    for (const auto& [from, to] : kSuffix) replace_suffix(name, from, to);
    if (name.find("experts.") != std::string::npos) {  // shared and per-expert routed: w1/w3/w2
        replace_all(name, ".w1.", ".gate_proj.");
        replace_all(name, ".w3.", ".up_proj.");
        replace_all(name, ".w2.", ".down_proj.");
    }
    return name;
}

// Layer index N of an HF stacked-experts tensor name ("model.layers.N.mlp.experts.<not a digit>..."), if it is one.
std::optional<int> stacked_expert_layer(std::string_view name) {
    constexpr std::string_view kPrefix = "model.layers.";
    if (!starts_with(name, kPrefix)) return std::nullopt;
    name.remove_prefix(kPrefix.size());
    size_t digits = 0;
    while (digits < name.size() && std::isdigit(static_cast<unsigned char>(name[digits]))) ++digits;
    if (digits == 0 || digits > 6) return std::nullopt;
    int layer = std::stoi(std::string(name.substr(0, digits)));
    std::string_view rest = name.substr(digits);
    constexpr std::string_view kExperts = ".mlp.experts.";
    if (!starts_with(rest, kExperts) || rest.size() == kExperts.size()) return std::nullopt;
    if (std::isdigit(static_cast<unsigned char>(rest[kExperts.size()]))) return std::nullopt;
    return layer;
}

// Backbone layer of a routed-expert spec name ("layers.N.ffn.experts.E...."), if it is one.
std::optional<int> routed_expert_layer(const TensorSpec& spec) {
    if (spec.component != Component::kRoutedExperts || !starts_with(spec.name, "layers.")) return std::nullopt;
    return std::stoi(spec.name.substr(7));
}

std::string describe_tensor(DType dtype, std::span<const int64_t> shape) {
    return fmt::format("{} {}", dtype_name(dtype), format_shape(shape));
}

void describe_group(std::string& out, std::string_view title, const std::vector<BindingIssue>& issues,
                    size_t max_lines) {
    if (issues.empty()) return;
    out += fmt::format("\n{} ({}):", title, issues.size());
    if (issues.size() <= max_lines) {
        for (const auto& issue : issues) out += fmt::format("\n  {}  {}", quote_name(issue.name), issue.detail);
        return;
    }
    // Too many to list: one line per name pattern, in first-seen order.
    std::vector<std::pair<std::string, size_t>> patterns;  // pattern -> count
    std::vector<const BindingIssue*> first;
    for (const auto& issue : issues) {
        std::string pattern = tensor_name_pattern(issue.name);
        auto it = std::find_if(patterns.begin(), patterns.end(), [&](const auto& p) { return p.first == pattern; });
        if (it == patterns.end()) {
            patterns.emplace_back(std::move(pattern), 1);
            first.push_back(&issue);
        } else {
            ++it->second;
        }
    }
    for (size_t i = 0; i < patterns.size() && i < max_lines; ++i) {
        if (patterns[i].second == 1) {
            out += fmt::format("\n  {}  {}", quote_name(first[i]->name), first[i]->detail);
        } else {
            out += fmt::format("\n  {} x{}  (first: {}  {})", quote_name(patterns[i].first), patterns[i].second,
                               quote_name(first[i]->name), first[i]->detail);
        }
    }
    if (patterns.size() > max_lines)
        out += fmt::format("\n  ... and {} more name patterns", patterns.size() - max_lines);
}

}  // namespace

std::string_view checkpoint_naming_name(CheckpointNaming naming) {
    switch (naming) {
        case CheckpointNaming::kOriginal:
            return "original DeepSeek names";
        case CheckpointNaming::kHf:
            return "HF transformers names";
    }
    return "?";
}

std::string hf_tensor_name(std::string_view original, bool is_scale) {
    std::string name(original);
    if (starts_with(name, "mtp.")) return name;
    if (is_scale) replace_suffix(name, ".scale", ".weight_scale_inv");
    if (name == "embed.weight") return "model.embed_tokens.weight";
    if (name == "head.weight") return "lm_head.weight";
    if (name == "norm.weight") return "model.norm.weight";
    if (starts_with(name, "hc_head_")) return "model.hc_head.hc_" + name.substr(8);
    if (starts_with(name, "layers.")) return "model." + hf_block_name(std::move(name));
    return name;
}

CheckpointNaming detect_checkpoint_naming(const Checkpoint& checkpoint) {
    if (checkpoint.find("model.embed_tokens.weight") != nullptr || checkpoint.find("lm_head.weight") != nullptr) {
        return CheckpointNaming::kHf;
    }
    for (const auto& t : checkpoint.tensors()) {
        if (starts_with(t.name, "model.layers.")) return CheckpointNaming::kHf;
    }
    return CheckpointNaming::kOriginal;
}

DraftLayout probe_draft_layout(const ModelConfig& config, const Checkpoint& checkpoint) {
    DraftLayout layout;
    while (checkpoint.find(fmt::format("mtp.{}.attn_norm.weight", layout.stages)) != nullptr) ++layout.stages;
    if (layout.stages == 0) return layout;
    if (checkpoint.find("mtp.0.e_proj.weight") != nullptr) {
        layout.kind = DraftKind::kMtp;
    } else if (checkpoint.find("mtp.0.main_proj.weight") != nullptr || config.dspark.has_value()) {
        layout.kind = DraftKind::kDspark;
    } else {
        layout.kind = DraftKind::kMtp;  // its missing e_proj/h_proj will be reported
    }
    return layout;
}

std::string BindingReport::describe(size_t max_lines) const {
    std::string out = fmt::format(
        "checkpoint ({}) vs model config: {} of {} expected tensors match; {} missing, {} unexpected, {} wrong "
        "dtype/shape, {} unsupported",
        checkpoint_naming_name(naming), matched, expected, missing.size(), unexpected.size(), wrong.size(),
        unsupported.size());
    describe_group(out, "missing", missing, max_lines);
    describe_group(out, "unexpected", unexpected, max_lines);
    describe_group(out, "wrong dtype/shape", wrong, max_lines);
    describe_group(out, "unsupported", unsupported, max_lines);
    return out;
}

// The name with every all-digit component (layer, expert, stage index) shown as '#':
// "layers.#.ffn.experts.#.w1.weight".
std::string tensor_name_pattern(std::string_view name) {
    std::string out;
    size_t start = 0;
    while (start <= name.size()) {
        size_t end = std::min(name.find('.', start), name.size());
        std::string_view part = name.substr(start, end - start);
        bool index = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
            return std::isdigit(static_cast<unsigned char>(c)) != 0;
        });
        out += index ? std::string_view("#") : part;
        if (end < name.size()) out += '.';
        start = end + 1;
    }
    return out;
}

const TensorView* BoundWeights::find(std::string_view original_name) const {
    auto it = views_.find(original_name);
    return it == views_.end() ? nullptr : it->second;
}

const TensorView& BoundWeights::get(std::string_view original_name) const {
    const TensorView* view = find(original_name);
    if (view == nullptr) fail("weights: no tensor {} bound", quote_name(original_name));
    return *view;
}

void BoundWeights::replace_bytes(std::string_view original_name, std::vector<uint8_t> bytes) {
    auto it = views_.find(original_name);
    DSV4_CHECK(it != views_.end(), "weights: no tensor {} bound", quote_name(original_name));
    const TensorView& old = *it->second;
    DSV4_CHECK(bytes.size() == old.nbytes, "weights: {} holds {} bytes, the replacement {}", quote_name(original_name),
               old.nbytes, bytes.size());
    OwnedTensor& owned = owned_.emplace_back();
    owned.bytes = std::move(bytes);
    owned.shape.assign(old.shape.begin(), old.shape.end());
    owned.view = TensorView{owned.bytes.data(), old.dtype, owned.shape, owned.bytes.size()};
    it->second = &owned.view;
}

BindingReport validate_weights(const ModelConfig& config, const Checkpoint& checkpoint, BoundWeights* bound) {
    BindingReport report;
    report.naming = detect_checkpoint_naming(checkpoint);
    report.drafts = probe_draft_layout(config, checkpoint);
    std::vector<TensorSpec> specs = expected_tensors(config, report.drafts);
    const bool hf = report.naming == CheckpointNaming::kHf;

    std::vector<bool> consumed(checkpoint.tensors().size(), false);
    auto consume = [&](const CheckpointTensor* entry) {
        consumed[static_cast<size_t>(entry - checkpoint.tensors().data())] = true;
    };
    std::set<int> stacked_layers;
    if (hf) {
        for (const auto& t : checkpoint.tensors()) {
            if (auto layer = stacked_expert_layer(t.name)) {
                stacked_layers.insert(*layer);
                consume(&t);
                report.unsupported.push_back(
                    {std::string(t.name), "stacked routed experts: per-expert slicing is not implemented yet"});
            }
        }
    }
    for (const auto& spec : specs) {
        auto expert_layer = routed_expert_layer(spec);
        if (expert_layer && stacked_layers.count(*expert_layer) != 0) continue;  // reported as unsupported
        ++report.expected;
        const std::string name = hf ? hf_tensor_name(spec.name, spec.is_scale) : spec.name;
        const CheckpointTensor* entry = checkpoint.find_entry(name);
        if (entry == nullptr) {
            report.missing.push_back({name, describe_tensor(spec.dtype, spec.shape)});
            continue;
        }
        consume(entry);
        const TensorView& view = *entry->view;
        if (view.dtype != spec.dtype ||
            !std::equal(view.shape.begin(), view.shape.end(), spec.shape.begin(), spec.shape.end())) {
            report.wrong.push_back({name, fmt::format("expected {}, got {}", describe_tensor(spec.dtype, spec.shape),
                                                      describe_tensor(view.dtype, view.shape))});
            continue;
        }
        ++report.matched;
        if (bound != nullptr) bound->views_.emplace(spec.name, &view);
    }
    for (size_t i = 0; i < consumed.size(); ++i) {
        const CheckpointTensor& t = checkpoint.tensors()[i];
        if (!consumed[i])
            report.unexpected.push_back({std::string(t.name), describe_tensor(t.view->dtype, t.view->shape)});
    }
    if (bound != nullptr) {
        bound->naming = report.naming;
        bound->drafts = report.drafts;
        bound->specs = std::move(specs);
        bound->fp8_dialect = config.fp8_dialect;
    }
    return report;
}

BoundWeights bind_weights(const ModelConfig& config, const Checkpoint& checkpoint) {
    BoundWeights bound;
    BindingReport report = validate_weights(config, checkpoint, &bound);
    if (!report.ok()) fail("{}: {}", checkpoint.dir().string(), report.describe());
    return bound;
}

}  // namespace dsv4
