// Helpers shared by the structured-output tests: compiling a grammar for a text check, a small random vocabulary,
// and the brute-force mask (accept every token on a copy of the matcher) that the trie walk is compared with.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "structured/compiled_grammar.h"
#include "structured/grammar_matcher.h"
#include "structured/token_masker.h"
#include "structured/token_trie.h"

namespace dsv4::structured::testing {

inline std::shared_ptr<const CompiledGrammar> compile(const Grammar& grammar) {
    return std::make_shared<const CompiledGrammar>(grammar);
}

inline bool accepts(const CompiledGrammar& grammar, std::string_view text) {
    return grammar_accepts(grammar, text);
}

// Random tokens over `alphabet` (1..max_len bytes each) plus every single byte of the alphabet, so any text of the
// alphabet can be spelled. Token 0 is the end token.
inline std::shared_ptr<const TokenVocabulary> random_vocabulary(std::mt19937& rng, const std::string& alphabet,
                                                                int count, int max_len) {
    std::vector<std::string> pieces{""};
    for (char c : alphabet) pieces.emplace_back(1, c);
    std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
    std::uniform_int_distribution<int> length(1, max_len);
    while (static_cast<int>(pieces.size()) < count) {
        std::string piece;
        const int n = length(rng);
        for (int i = 0; i < n; ++i) piece += alphabet[pick(rng)];
        pieces.push_back(piece);
    }
    const auto bits = static_cast<int64_t>(pieces.size()) + 3;  // a few ids beyond the pieces: never allowed
    return make_vocabulary(std::move(pieces), {0}, bits);
}

// The mask by definition: token t is allowed when a copy of the matcher accepts it.
inline std::vector<uint64_t> brute_force_mask(const GrammarMatcher& matcher) {
    const TokenMasker& masker = matcher.masker();
    std::vector<uint64_t> bits(masker.words(), 0);
    for (int64_t t = 0; t < masker.vocabulary().mask_bits; ++t) {
        GrammarMatcher copy = matcher;
        if (copy.accept_token(static_cast<int32_t>(t))) bits[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
    }
    return bits;
}

inline std::vector<int32_t> allowed_ids(const std::vector<uint64_t>& bits, int64_t count) {
    std::vector<int32_t> out;
    for (int64_t t = 0; t < count; ++t) {
        if ((bits[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1) out.push_back(static_cast<int32_t>(t));
    }
    return out;
}

}  // namespace dsv4::structured::testing
