// The vocabulary as grammars see it, and its byte trie. A TokenVocabulary lists, per token id, the bytes the token
// adds to the output (HF ByteLevel pieces decoded, so a token may end in the middle of a UTF-8 character). Added
// tokens (chat markers, DSML, <think>) and special tokens are left out of the trie: a grammar allows them only where
// it names them (GrammarSpec::allowed_added_tokens) or, for the end tokens, where the grammar may end.
// TokenTrie stores the trie in preorder (byte, depth, index after the subtree, parent, tokens ending here), so a walk
// is a loop over an array that skips a whole subtree as soon as the grammar rejects its prefix.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace dsv4::tokenizer {
class Tokenizer;
}

namespace dsv4::structured {

class TokenTrie {
  public:
    // tokens[i] are the bytes of token ids[i]; empty byte strings are ignored.
    TokenTrie(std::span<const int32_t> ids, std::span<const std::string> tokens);

    int32_t num_nodes() const { return static_cast<int32_t>(nodes_.size()); }
    uint8_t byte(int32_t node) const { return nodes_[static_cast<size_t>(node)].byte; }
    int32_t depth(int32_t node) const { return nodes_[static_cast<size_t>(node)].depth; }  // 1 for the first byte
    int32_t skip(int32_t node) const { return nodes_[static_cast<size_t>(node)].skip; }  // first node after the subtree
    int32_t parent(int32_t node) const { return parent_[static_cast<size_t>(node)]; }    // -1 for depth 1
    std::span<const int32_t> tokens_at(int32_t node) const {
        return {
            tokens_.data() + token_begin_[static_cast<size_t>(node)],
            static_cast<size_t>(token_begin_[static_cast<size_t>(node) + 1] - token_begin_[static_cast<size_t>(node)])};
    }
    // Tokens ending at the nodes [begin, end) (end <= num_nodes()), contiguous in preorder: a subtree's tokens are
    // tokens_in(node, skip(node)).
    std::span<const int32_t> tokens_in(int32_t begin, int32_t end) const {
        return {tokens_.data() + token_begin_[static_cast<size_t>(begin)],
                static_cast<size_t>(token_begin_[static_cast<size_t>(end)] - token_begin_[static_cast<size_t>(begin)])};
    }
    int32_t max_depth() const { return max_depth_; }
    // The nodes of depth 1 in preorder, and their bytes: small arrays, so a walk's first step, which rejects most of
    // them, does not touch the per-node arrays spread over the whole trie.
    std::span<const int32_t> first_nodes() const { return first_nodes_; }
    std::span<const uint8_t> first_bytes() const { return first_bytes_; }

  private:
    // What a walk reads at every node, together: a node whose subtree is skipped costs one cache line, not three.
    struct Node {
        int32_t skip = 0;
        uint16_t depth = 0;
        uint8_t byte = 0;
    };
    std::vector<Node> nodes_;
    std::vector<int32_t> parent_;
    std::vector<int32_t> token_begin_;  // per node, plus one: tokens ending at the node, in tokens_
    std::vector<int32_t> tokens_;
    std::vector<int32_t> first_nodes_;
    std::vector<uint8_t> first_bytes_;
    int32_t max_depth_ = 0;
};

struct TokenVocabulary {
    int64_t mask_bits = 0;                      // bits in a token mask: the model's vocabulary size
    std::vector<std::string> bytes;             // per id: what it adds to the output ("" = never by grammar)
    std::vector<std::string> added_token_text;  // per id: the content of added tokens ("" otherwise)
    std::vector<int32_t> end_tokens;            // EOS ids: allowed exactly where the grammar may end
    std::unique_ptr<TokenTrie> trie;

    int32_t find_added_token(std::string_view content) const;  // -1 when absent
};

// From explicit pieces (tests): ids are 0..bytes.size()-1; added tokens none.
std::shared_ptr<const TokenVocabulary> make_vocabulary(std::vector<std::string> bytes, std::vector<int32_t> end_tokens,
                                                       int64_t mask_bits);
// From a tokenizer: ordinary tokens are trie pieces, added tokens are kept aside. mask_bits >= tokenizer vocab or
// smaller (ids at and above mask_bits are dropped).
std::shared_ptr<const TokenVocabulary> make_vocabulary(const tokenizer::Tokenizer& tokenizer,
                                                       std::vector<int32_t> end_tokens, int64_t mask_bits);
// The same, shared while alive: servers (and tests) on one tokenizer build the 129K-token trie once.
std::shared_ptr<const TokenVocabulary> shared_vocabulary(const tokenizer::Tokenizer& tokenizer,
                                                         const std::vector<int32_t>& end_tokens, int64_t mask_bits);

}  // namespace dsv4::structured
