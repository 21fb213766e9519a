// Fuzz target for the tokenizer's text handling, on arbitrary bytes:
//   * streaming lossy UTF-8 (any chunking) equals the one-shot conversion and never emits invalid UTF-8;
//   * for valid UTF-8 input, the hand-written DeepSeek pre-tokenizer matchers equal Oniguruma's segments.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/pretokenizer_deepseek.h"
#include "tokenizer/unicode.h"

namespace {

using dsv4::tokenizer::Segment;

const char* const kPatterns[] = {R"(\p{N}{1,3})", "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+",
                                 R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^)"
                                 "\r\n"
                                 R"(\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[)"
                                 "\r\n"
                                 R"(]*|\s*[)"
                                 "\r\n"
                                 R"(]+|\s+(?!\S)|\s+)"};

void check_sanitizer(std::string_view bytes) {
    const std::string whole = dsv4::tokenizer::utf8_lossy(bytes);
    dsv4::tokenizer::Utf8Sanitizer sanitizer;
    std::string streamed;
    // Chunk sizes come from the data itself so the fuzzer explores them.
    size_t pos = 0;
    while (pos < bytes.size()) {
        const size_t take = 1 + static_cast<uint8_t>(bytes[pos]) % 5;
        std::string out;
        sanitizer.push(bytes.substr(pos, take), out);
        if (dsv4::tokenizer::find_invalid_utf8(out)) std::abort();
        streamed += out;
        pos += take;
    }
    sanitizer.finish(streamed);
    if (streamed != whole) std::abort();
}

void check_fast_paths(std::string_view text) {
    static const auto finders = [] {
        std::vector<
            std::pair<std::unique_ptr<dsv4::tokenizer::SegmentFinder>, std::unique_ptr<dsv4::tokenizer::SegmentFinder>>>
            pairs;
        for (const char* p : kPatterns)
            pairs.emplace_back(dsv4::tokenizer::make_deepseek_fast_finder(p), dsv4::tokenizer::make_regex_finder(p));
        return pairs;
    }();
    for (const auto& [fast, regex] : finders) {
        std::vector<Segment> a;
        std::vector<Segment> b;
        fast->find_segments(text, a);
        regex->find_segments(text, b);
        if (a.size() != b.size()) std::abort();
        for (size_t i = 0; i < a.size(); ++i)
            if (a[i].begin != b[i].begin || a[i].end != b[i].end || a[i].is_match != b[i].is_match) std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    check_sanitizer(bytes);
    if (!dsv4::tokenizer::find_invalid_utf8(bytes)) check_fast_paths(bytes);
    return 0;
}
