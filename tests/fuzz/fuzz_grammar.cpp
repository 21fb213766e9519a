// libFuzzer target for the structured-output front ends and the grammar compiler. Input: byte 0 picks the front end
// (JSON Schema strict / loose, GBNF, regex, DSML tool call parameters), the rest is its text.
// Asserts (abort on failure): a spec either compiles or throws GrammarError with a message, nothing else escapes;
// a compiled grammar's matcher, masks over a small vocabulary (trie walk, cached, brute force) agree on the input's
// own bytes. Size limits bound the time: a hang is a bug (libFuzzer reports it as a timeout).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "structured/compiled_grammar.h"
#include "structured/gbnf.h"
#include "structured/grammar_matcher.h"
#include "structured/grammar_spec.h"
#include "structured/json_schema.h"
#include "structured/regex.h"
#include "structured/token_masker.h"

namespace {

using namespace dsv4::structured;

[[noreturn]] void fail(const char* what, std::string_view text) {
    std::fprintf(stderr, "fuzz_grammar: %s\ninput (%zu bytes): %.*s\n", what, text.size(),
                 static_cast<int>(text.size()), text.data());
    std::abort();
}

Grammar build(uint8_t mode, std::string_view text) {
    switch (mode % 5) {
        case 0:
        case 1: {
            JsonSchemaOptions options;
            options.strict = mode % 5 == 0;
            options.max_whitespace = 2;
            return compile_json_schema(text, options);
        }
        case 2:
            return parse_gbnf(text);
        case 3: {
            Grammar g;
            const int32_t root = g.add_rule("root");
            g.set_root(root);
            g.define(root, compile_regex(g, text, {RegexText::kRaw, (mode & 8) != 0}));
            return g;
        }
        default:
            return tool_call_grammar({{"f", std::string(text)}}, (mode & 8) != 0);
    }
}

// Masks over a vocabulary of the input's own byte pieces: the cached walk equals the brute force, step by step.
void check_masks(const std::shared_ptr<const CompiledGrammar>& grammar, std::string_view text) {
    std::vector<std::string> pieces{""};
    for (size_t i = 0; i < text.size() && pieces.size() < 48; i += 2) pieces.emplace_back(text.substr(i, 1 + i % 3));
    for (int b = 0; b < 128 && pieces.size() < 96; b += 7) pieces.emplace_back(1, static_cast<char>(b));
    auto vocabulary = make_vocabulary(pieces, {0}, static_cast<int64_t>(pieces.size()));
    auto masker = std::make_shared<const TokenMasker>(grammar, vocabulary, std::vector<int32_t>{});
    GrammarMatcher matcher(masker);
    for (int step = 0; step < 6; ++step) {
        std::vector<uint64_t> bits(masker->words());
        matcher.fill_mask(bits);
        int32_t next = -1;
        for (int32_t t = 0; t < vocabulary->mask_bits; ++t) {
            GrammarMatcher copy = matcher;
            const bool allowed = copy.accept_token(t);
            if (allowed != (((bits[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1) != 0))
                fail("mask != brute force", text);
            if (allowed && t != 0 && next < 0) next = t;
        }
        if (next < 0 || !matcher.accept_token(next)) return;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0 || size > 4096) return 0;
    const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
    std::shared_ptr<const CompiledGrammar> grammar;
    try {
        grammar = std::make_shared<const CompiledGrammar>(build(data[0], text));
    } catch (const GrammarError& e) {
        if (std::string_view(e.what()).empty()) fail("a GrammarError without a message", text);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "exception: %s\n", e.what());
        fail("an exception other than GrammarError", text);
    }
    (void)grammar_accepts(*grammar, text);
    check_masks(grammar, text);
    return 0;
}
