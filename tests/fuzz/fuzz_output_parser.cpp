// libFuzzer target for the DSV4 output parser. Input: byte 0 = mode (bit 0: thinking), the rest = generated text.
// Asserts (abort on failure):
// - chunk independence: whole, byte by byte and a chunking derived from the input give the same reasoning, content,
//   tool names, ids and arguments;
// - no leak: content and reasoning never contain "<｜", "｜DSML｜", "<think>", "</think>"; tool names and arguments
//   never contain "<｜" or "｜DSML｜";
// - arguments are always one valid JSON object when the text is valid UTF-8.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "tokenizer/output_parser.h"

namespace {

using dsv4::OutputParserOptions;
using dsv4::ParsedOutput;

[[noreturn]] void fail(const char* what, std::string_view text) {
    std::fprintf(stderr, "fuzz_output_parser: %s\ninput (%zu bytes): %.*s\n", what, text.size(),
                 static_cast<int>(text.size()), text.data());
    std::abort();
}

// Chunk sizes 1..16 from a small generator seeded by the input, so a crash reproduces from the input alone.
ParsedOutput parse_chunked(std::string_view text, const OutputParserOptions& options, std::uint64_t seed,
                           bool byte_by_byte) {
    dsv4::StreamingOutputParser parser(options);
    ParsedOutput output;
    std::uint64_t state = seed | 1;
    for (std::size_t pos = 0; pos < text.size();) {
        std::size_t size = 1;
        if (!byte_by_byte) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            size = 1 + static_cast<std::size_t>(state % 16);
        }
        dsv4::accumulate_deltas(output, parser.push(text.substr(pos, size)));
        pos += size;
    }
    dsv4::accumulate_deltas(output, parser.finish());
    return output;
}

bool same(const ParsedOutput& a, const ParsedOutput& b) {
    if (a.reasoning != b.reasoning || a.content != b.content || a.tool_calls.size() != b.tool_calls.size()) {
        return false;
    }
    for (std::size_t i = 0; i < a.tool_calls.size(); ++i) {
        const auto& x = a.tool_calls[i];
        const auto& y = b.tool_calls[i];
        if (x.id != y.id || x.name != y.name || x.arguments != y.arguments || x.complete != y.complete ||
            x.arguments_repaired != y.arguments_repaired) {
            return false;
        }
    }
    return true;
}

bool contains(std::string_view text, std::string_view part) {
    return text.find(part) != std::string_view::npos;
}

bool valid_utf8(std::string_view text) {
    // RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF (what nlohmann::json accepts).
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
    for (std::size_t i = 0; i < text.size();) {
        const unsigned lead = byte(i);
        std::size_t length = 0;
        unsigned low = 0x80, high = 0xBF;  // range of the second byte
        if (lead < 0x80) {
            length = 1;
        } else if (lead >= 0xC2 && lead <= 0xDF) {
            length = 2;
        } else if (lead >= 0xE0 && lead <= 0xEF) {
            length = 3;
            if (lead == 0xE0) low = 0xA0;
            if (lead == 0xED) high = 0x9F;
        } else if (lead >= 0xF0 && lead <= 0xF4) {
            length = 4;
            if (lead == 0xF0) low = 0x90;
            if (lead == 0xF4) high = 0x8F;
        } else {
            return false;
        }
        if (i + length > text.size()) return false;
        for (std::size_t k = 1; k < length; ++k) {
            const unsigned b = byte(i + k);
            if (k == 1 ? (b < low || b > high) : (b < 0x80 || b > 0xBF)) return false;
        }
        i += length;
    }
    return true;
}

// RFC 8259 syntax; nlohmann additionally rejects numbers beyond double range (1e9999), which is still valid JSON.
bool is_json_object(const std::string& text) {
    try {
        return nlohmann::json::parse(text).is_object();
    } catch (const nlohmann::json::out_of_range& error) {
        return error.id == 406;
    } catch (const nlohmann::json::exception&) {
        return false;
    }
}

void check_no_leak(const ParsedOutput& output, std::string_view text) {
    for (std::string_view forbidden : {"<｜", "｜DSML｜", "<think>", "</think>"}) {
        if (contains(output.content, forbidden)) fail("markup leaked into content", text);
        if (contains(output.reasoning, forbidden)) fail("markup leaked into reasoning", text);
    }
    const bool check_json = valid_utf8(text);
    for (const auto& call : output.tool_calls) {
        for (std::string_view forbidden : {"<｜", "｜DSML｜"}) {
            if (contains(call.arguments, forbidden)) fail("markup leaked into arguments", text);
            if (contains(call.name, forbidden)) fail("markup leaked into a tool name", text);
        }
        if (check_json && !is_json_object(call.arguments)) fail("arguments are not a JSON object", text);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    OutputParserOptions options;
    options.thinking = (data[0] & 1) != 0;
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

    std::uint64_t seed = 1469598103934665603ull;  // FNV-1a of the input
    for (std::size_t i = 0; i < size; ++i) seed = (seed ^ data[i]) * 1099511628211ull;

    const ParsedOutput whole = dsv4::parse_output(text, options);
    check_no_leak(whole, text);
    if (!same(parse_chunked(text, options, seed, /*byte_by_byte=*/false), whole)) fail("chunked != whole", text);
    if (text.size() <= 4096 && !same(parse_chunked(text, options, seed, /*byte_by_byte=*/true), whole)) {
        fail("byte by byte != whole", text);
    }
    return 0;
}
