#include "tokenizer/tokenizer.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace dsv4::tokenizer {
namespace {

bool is_empty_normalizer(const nlohmann::json& normalizer) {
    if (normalizer.is_null()) return true;
    if (!normalizer.is_object() || normalizer.value("type", std::string()) != "Sequence") return false;
    const auto it = normalizer.find("normalizers");
    if (it == normalizer.end() || !it->is_array()) return false;
    for (const auto& inner : *it)
        if (!is_empty_normalizer(inner)) return false;
    return true;
}

void check_normalizer(const nlohmann::json& config) {
    const auto it = config.find("normalizer");
    if (it == config.end() || is_empty_normalizer(*it)) return;
    fail("tokenizer: normalizer {} is not supported (only null or an empty Sequence)", it->dump());
}

void check_decoder(const nlohmann::json& config) {
    const auto it = config.find("decoder");
    if (it != config.end() && it->is_object() && it->value("type", std::string()) == "ByteLevel") return;
    fail("tokenizer: decoder {} is not supported (only ByteLevel)",
         it == config.end() ? std::string("(missing)") : it->dump());
}

}  // namespace

Tokenizer Tokenizer::load(const std::string& path, TokenizerOptions options) {
    std::ifstream file(path, std::ios::binary);
    if (!file) fail("tokenizer: cannot open '{}'", path);
    std::ostringstream buffer;
    buffer << file.rdbuf();
    if (!file.good() && !file.eof()) fail("tokenizer: cannot read '{}'", path);
    try {
        return from_json_text(buffer.str(), options);
    } catch (const Error& e) {
        fail("{} (in '{}')", e.what(), path);
    }
}

Tokenizer Tokenizer::from_json_text(std::string_view json_text, TokenizerOptions options) {
    nlohmann::json config;
    try {
        config = nlohmann::json::parse(json_text);
    } catch (const nlohmann::json::exception& e) {
        fail("tokenizer: tokenizer.json is not valid JSON: {}", e.what());
    }
    if (!config.is_object()) fail("tokenizer: tokenizer.json is not a JSON object");
    Tokenizer t;
    try {
        check_normalizer(config);
        check_decoder(config);
        if (!config.contains("model")) fail("tokenizer: tokenizer.json has no \"model\"");
        t.model_ = std::make_unique<BpeModel>(BpeModel::from_json(config["model"]));
        t.pre_tokenizer_ = std::make_unique<PreTokenizer>(
            PreTokenizer::from_json(config.value("pre_tokenizer", nlohmann::json()), options.fast_pretokenizer));
        t.added_tokens_ = parse_added_tokens(config.value("added_tokens", nlohmann::json()));
    } catch (const nlohmann::json::exception& e) {
        fail("tokenizer: unexpected tokenizer.json structure: {}", e.what());
    }
    t.added_matcher_ = std::make_unique<AddedTokenMatcher>(t.added_tokens_);
    int32_t limit = t.model_->id_limit();
    for (const AddedToken& token : t.added_tokens_) limit = std::max(limit, token.id + 1);
    t.token_bytes_.assign(static_cast<size_t>(limit), std::string());
    t.added_index_.assign(static_cast<size_t>(limit), -1);
    for (int32_t id = 0; id < t.model_->id_limit(); ++id)
        if (const std::string* token = t.model_->id_to_token(id)) t.token_bytes_[id] = byte_level_decode(*token);
    for (size_t i = 0; i < t.added_tokens_.size(); ++i) {
        const AddedToken& token = t.added_tokens_[i];
        t.token_bytes_[static_cast<size_t>(token.id)] = byte_level_decode(token.content);
        t.added_index_[static_cast<size_t>(token.id)] = static_cast<int32_t>(i);
        t.added_ids_.emplace(token.content, token.id);
    }
    return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
    return encode(text, parse_special ? AddedTokenMode::kAll : AddedTokenMode::kNone);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, AddedTokenMode mode) const {
    if (const auto bad = find_invalid_utf8(text)) fail("tokenizer: input is not valid UTF-8 (byte offset {})", *bad);
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 4);
    if (mode == AddedTokenMode::kNone) {
        encode_text_span(text, ids);
        return ids;
    }
    std::vector<TextSpan> spans;
    added_matcher_->split(text, mode == AddedTokenMode::kAll, spans);
    for (const TextSpan& span : spans) {
        if (span.id >= 0) {
            ids.push_back(span.id);
        } else {
            encode_text_span(text.substr(span.begin, span.end - span.begin), ids);
        }
    }
    return ids;
}

void Tokenizer::encode_text_span(std::string_view text, std::vector<int32_t>& out) const {
    thread_local std::vector<std::string_view> pieces;
    thread_local std::deque<std::string> storage;  // prefixed copies (add_prefix_space); only valid in this call
    pieces.clear();
    storage.clear();
    pre_tokenizer_->split(text, pieces, storage);
    for (std::string_view piece : pieces) model_->encode_piece(piece, out);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
    std::string bytes;
    for (int32_t id : ids) {
        if (skip_special && is_special(id)) continue;
        bytes.append(token_bytes(id));
    }
    return utf8_lossy(bytes);
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
    if (const auto it = added_ids_.find(std::string(token)); it != added_ids_.end()) return it->second;
    return model_->token_to_id(token);
}

bool Tokenizer::has_id(int32_t id) const {
    return is_added(id) || model_->id_to_token(id) != nullptr;
}

std::string Tokenizer::id_to_token(int32_t id) const {
    if (is_added(id)) return added_tokens_[static_cast<size_t>(added_index_[static_cast<size_t>(id)])].content;
    if (const std::string* token = model_->id_to_token(id)) return *token;
    fail("tokenizer: id {} is not a token (vocab size {})", id, vocab_size());
}

bool Tokenizer::is_added(int32_t id) const {
    return id >= 0 && id < vocab_size() && added_index_[static_cast<size_t>(id)] >= 0;
}

bool Tokenizer::is_special(int32_t id) const {
    return is_added(id) && added_tokens_[static_cast<size_t>(added_index_[static_cast<size_t>(id)])].special;
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
    if (id < 0 || id >= vocab_size()) return {};
    return token_bytes_[static_cast<size_t>(id)];
}

}  // namespace dsv4::tokenizer
