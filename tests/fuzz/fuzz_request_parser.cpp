// libFuzzer target for the server's request parser (JSON -> native request structs, no engine, no I/O).
// Input: byte 0 picks the route (chat, completions, tokenize, detokenize), the rest is the request body.
// Asserts (abort on failure): the parser either returns a request or throws ApiError with status 400 and a
// non-empty message whose JSON error object parses; nothing else ever escapes. Parsed chat requests are also
// validated and rendered by the chat encoder (which may only throw dsv4::Error), as the route would.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.h"
#include "sample/sampling_params.h"
#include "server/http/api_error.h"
#include "server/openai/prompt_builder.h"
#include "server/openai/request_parser.h"
#include "tokenizer/chat_encoding.h"

namespace {

using namespace dsv4;
using namespace dsv4::server;

[[noreturn]] void fail(const char* what, std::string_view body) {
    std::fprintf(stderr, "fuzz_request_parser: %s\nbody (%zu bytes): %.*s\n", what, body.size(),
                 static_cast<int>(body.size()), body.data());
    std::abort();
}

void check_rejection(const ApiError& error, std::string_view body) {
    if (error.status() != 400) fail("a rejection that is not a 400", body);
    if (std::string_view(error.what()).empty()) fail("an error without a message", body);
    const nlohmann::json object = nlohmann::json::parse(error.to_json(), nullptr, false);
    if (!object.is_object() || !object["error"]["message"].is_string()) fail("an unparsable error object", body);
}

// What the chat route does after parsing, minus the tokenizer and the engine.
void render_chat(const ChatRequest& request) {
    SamplingParams params = request.options.sampling;
    if (request.options.max_tokens) params.max_tokens = *request.options.max_tokens;
    try {
        validate_sampling_params(params, 129280);
    } catch (const Error&) {
    }
    for (const auto revision : {ChatTemplateRevision::kV4, ChatTemplateRevision::kV4_0731}) {
        try {
            (void)ChatEncoder(revision).encode(request.conversation, chat_options_for(request, ThinkingMode::kChat));
        } catch (const Error&) {
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        switch (data[0] % 4) {
            case 0:
                render_chat(parse_chat_request(body));
                break;
            case 1:
                (void)parse_completion_request(body);
                break;
            case 2:
                (void)parse_tokenize_request(body);
                break;
            default:
                (void)parse_detokenize_request(body);
                break;
        }
    } catch (const ApiError& error) {
        check_rejection(error, body);
    } catch (const std::exception& e) {
        fail(e.what(), body);
    }
    return 0;
}
