#include "structured/token_trie.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <numeric>
#include <tuple>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace dsv4::structured {
namespace {

constexpr size_t kMaxTokenBytes = 4096;

}  // namespace

TokenTrie::TokenTrie(std::span<const int32_t> ids, std::span<const std::string> tokens) {
    DSV4_CHECK(ids.size() == tokens.size(), "TokenTrie: {} ids for {} tokens", ids.size(), tokens.size());
    std::vector<size_t> order(ids.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tokens[a] < tokens[b]; });
    std::vector<int32_t> path;  // open nodes, by depth - 1
    const std::string* previous = nullptr;
    auto close_to = [&](size_t depth) {
        while (path.size() > depth) {
            nodes_[static_cast<size_t>(path.back())].skip = num_nodes();
            path.pop_back();
        }
    };
    for (size_t i : order) {
        const std::string& s = tokens[i];
        if (s.empty() || s.size() > kMaxTokenBytes) continue;
        size_t lcp = 0;
        if (previous != nullptr) {
            const size_t limit = std::min(previous->size(), s.size());
            while (lcp < limit && (*previous)[lcp] == s[lcp]) ++lcp;
        }
        if (previous != nullptr && lcp == s.size() && lcp == previous->size()) {
            tokens_.push_back(ids[i]);  // the same bytes as the previous token: same node
            continue;
        }
        close_to(lcp);
        for (size_t k = lcp; k < s.size(); ++k) {
            if (k == 0) {
                first_nodes_.push_back(num_nodes());
                first_bytes_.push_back(static_cast<uint8_t>(s[0]));
            }
            parent_.push_back(path.empty() ? -1 : path.back());
            path.push_back(num_nodes());
            nodes_.push_back({0, static_cast<uint16_t>(k + 1), static_cast<uint8_t>(s[k])});
            token_begin_.push_back(static_cast<int32_t>(tokens_.size()));
        }
        tokens_.push_back(ids[i]);
        max_depth_ = std::max(max_depth_, static_cast<int32_t>(s.size()));
        previous = &s;
    }
    close_to(0);
    token_begin_.push_back(static_cast<int32_t>(tokens_.size()));
}

int32_t TokenVocabulary::find_added_token(std::string_view content) const {
    for (size_t id = 0; id < added_token_text.size(); ++id) {
        if (!added_token_text[id].empty() && added_token_text[id] == content) return static_cast<int32_t>(id);
    }
    return -1;
}

namespace {

std::shared_ptr<const TokenVocabulary> finish_vocabulary(std::shared_ptr<TokenVocabulary> vocabulary) {
    std::vector<int32_t> ids;
    std::vector<std::string> pieces;
    for (size_t id = 0; id < vocabulary->bytes.size(); ++id) {
        if (vocabulary->bytes[id].empty()) continue;
        ids.push_back(static_cast<int32_t>(id));
        pieces.push_back(vocabulary->bytes[id]);
    }
    vocabulary->trie = std::make_unique<TokenTrie>(ids, pieces);
    for (int32_t eos : vocabulary->end_tokens) {
        DSV4_CHECK(eos >= 0 && eos < vocabulary->mask_bits, "token vocabulary: end token {} is outside [0, {})", eos,
                   vocabulary->mask_bits);
    }
    return vocabulary;
}

}  // namespace

std::shared_ptr<const TokenVocabulary> make_vocabulary(std::vector<std::string> bytes, std::vector<int32_t> end_tokens,
                                                       int64_t mask_bits) {
    auto vocabulary = std::make_shared<TokenVocabulary>();
    vocabulary->mask_bits = mask_bits;
    bytes.resize(std::min(bytes.size(), static_cast<size_t>(std::max<int64_t>(mask_bits, 0))));
    for (int32_t eos : end_tokens) {
        if (eos >= 0 && static_cast<size_t>(eos) < bytes.size()) bytes[static_cast<size_t>(eos)].clear();
    }
    vocabulary->added_token_text.assign(bytes.size(), "");
    vocabulary->bytes = std::move(bytes);
    vocabulary->end_tokens = std::move(end_tokens);
    return finish_vocabulary(std::move(vocabulary));
}

std::shared_ptr<const TokenVocabulary> make_vocabulary(const tokenizer::Tokenizer& tokenizer,
                                                       std::vector<int32_t> end_tokens, int64_t mask_bits) {
    auto vocabulary = std::make_shared<TokenVocabulary>();
    vocabulary->mask_bits = mask_bits;
    const int64_t count = std::min<int64_t>(tokenizer.vocab_size(), mask_bits);
    vocabulary->bytes.assign(static_cast<size_t>(std::max<int64_t>(count, 0)), "");
    vocabulary->added_token_text.assign(vocabulary->bytes.size(), "");
    for (int32_t id = 0; id < count; ++id) {
        if (!tokenizer.has_id(id)) continue;
        if (tokenizer.is_added(id)) {
            if (!tokenizer.is_special(id))
                vocabulary->added_token_text[static_cast<size_t>(id)] = tokenizer.token_bytes(id);
            continue;
        }
        vocabulary->bytes[static_cast<size_t>(id)] = std::string(tokenizer.token_bytes(id));
    }
    vocabulary->end_tokens = std::move(end_tokens);
    for (int32_t eos : vocabulary->end_tokens) {
        if (eos >= 0 && eos < count) vocabulary->bytes[static_cast<size_t>(eos)].clear();
    }
    return finish_vocabulary(std::move(vocabulary));
}

}  // namespace dsv4::structured

namespace dsv4::structured {

std::shared_ptr<const TokenVocabulary> shared_vocabulary(const tokenizer::Tokenizer& tokenizer,
                                                         const std::vector<int32_t>& end_tokens, int64_t mask_bits) {
    using Key = std::tuple<const tokenizer::Tokenizer*, std::vector<int32_t>, int64_t>;
    static std::mutex mutex;
    static std::map<Key, std::weak_ptr<const TokenVocabulary>> alive;
    std::lock_guard lock(mutex);
    Key key{&tokenizer, end_tokens, mask_bits};
    if (auto found = alive[key].lock()) return found;
    auto vocabulary = make_vocabulary(tokenizer, end_tokens, mask_bits);
    alive[key] = vocabulary;
    return vocabulary;
}

}  // namespace dsv4::structured
