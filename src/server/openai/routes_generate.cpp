// POST /v1/chat/completions and /v1/completions: parse, build the prompt, admit, submit, then either stream SSE
// chunks from a chunked content provider or answer with one JSON object.
#include <fmt/format.h>

#include <chrono>

#include "server/generation/generation.h"
#include "server/http/request_checks.h"
#include "server/http/router.h"
#include "server/http/routes.h"
#include "server/openai/chat_response.h"
#include "server/openai/completion_response.h"
#include "server/openai/prompt_builder.h"
#include "server/openai/request_parser.h"

namespace dsv4::server {
namespace {

// Streams into a cpp-httplib chunked response; each write() is one HTTP chunk.
class HttplibByteSink : public ByteSink {
  public:
    explicit HttplibByteSink(httplib::DataSink& sink) : sink_(&sink) {}
    bool write(std::string_view bytes) override {
        if (!ok_) return false;
        ok_ = sink_->write(bytes.data(), bytes.size());
        return ok_;
    }

  private:
    httplib::DataSink* sink_;
    bool ok_ = true;
};

// Everything a response needs after the handler returned (streams run later, in the content provider).
struct PreparedGeneration {
    std::shared_ptr<const ModelContext> model;
    std::shared_ptr<GenerationRun> run;
    AdmissionGate::Ticket ticket;
    ResponseIdentity identity;
    std::string engine_id;            // the engine request id (unique among live requests)
    std::string response_request_id;  // X-Request-Id of the response: the client's, else identity.id
    GenerationOptions options;
    ConnectionAddress address;
    // Builds the sink for this request (chat or completion, stream or not).
    std::function<std::unique_ptr<ResponseSink>(ByteSink* out)> make_sink;
    std::function<std::string(const ResponseSink&)> response_json;  // non-stream
    std::function<std::optional<ApiError>(const ResponseSink&)> sink_error;
};

int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// Aborts the engine requests from the watcher thread when the client disconnects.
std::function<void()> disconnect_action(std::atomic<bool>& gone, Engine* engine, std::vector<std::string> ids) {
    return [&gone, engine, ids = std::move(ids)] {
        gone.store(true);
        for (const std::string& id : ids) engine->abort(id);
    };
}

void respond_streaming(ServerState& state, std::shared_ptr<PreparedGeneration> prepared, httplib::Response& response) {
    response.set_header("Cache-Control", "no-cache");
    response.set_header("X-Accel-Buffering", "no");  // nginx: do not buffer SSE
    set_request_id_header(response, prepared->response_request_id);
    response.set_chunked_content_provider(
        "text/event-stream",
        [&state, prepared](size_t, httplib::DataSink& data_sink) {
            HttplibByteSink out(data_sink);
            std::atomic<bool> gone{false};
            WatchedConnection watch(&state.watcher(), prepared->address,
                                    disconnect_action(gone, prepared->model->engine, prepared->run->request_ids()));
            std::unique_ptr<ResponseSink> sink = prepared->make_sink(&out);
            prepared->run->run(*sink, gone);
            if (prepared->run->client_left()) return false;  // closes the connection
            data_sink.done();
            return true;
        },
        [prepared](bool) { prepared->ticket.release(); });
}

void respond_once(ServerState& state, PreparedGeneration& prepared, httplib::Response& response) {
    std::atomic<bool> gone{false};
    WatchedConnection watch(&state.watcher(), prepared.address,
                            disconnect_action(gone, prepared.model->engine, prepared.run->request_ids()));
    std::unique_ptr<ResponseSink> sink = prepared.make_sink(nullptr);
    prepared.run->run(*sink, gone);
    set_request_id_header(response, prepared.response_request_id);
    if (auto error = prepared.sink_error(*sink)) {
        send_error(response, *error);
    } else {
        send_json(response, prepared.response_json(*sink));
    }
    AdmissionGate::hold_until_written(std::move(prepared.ticket));  // in flight until the body is on the wire
}

void respond(ServerState& state, std::shared_ptr<PreparedGeneration> prepared, httplib::Response& response) {
    prepared->run->submit();
    if (prepared->options.stream) {
        respond_streaming(state, std::move(prepared), response);
    } else {
        respond_once(state, *prepared, response);
    }
}

std::shared_ptr<PreparedGeneration> begin(ServerState& state, const httplib::Request& request,
                                          std::string_view id_prefix) {
    auto prepared = std::make_shared<PreparedGeneration>();
    prepared->ticket = state.gate().enter();
    prepared->model = ready_model(state);
    // A client's X-Request-Id names the response ("chatcmpl-<id>", as vLLM does) and comes back in the header; the
    // engine id gets a random suffix, so two requests sent with the same id never collide.
    const std::string client_id = client_request_id(request);
    const std::string id = client_id.empty() ? random_hex(32) : client_id;
    prepared->identity = {fmt::format("{}-{}", id_prefix, id), prepared->model->served_name, unix_now()};
    prepared->engine_id =
        client_id.empty() ? prepared->identity.id : fmt::format("{}-{}", prepared->identity.id, random_hex(8));
    prepared->response_request_id = client_id.empty() ? prepared->identity.id : client_id;
    prepared->address = connection_address(request);
    return prepared;
}

ChoiceConfig base_choice_config(const GenerationOptions& options, const ModelContext& model) {
    ChoiceConfig config;
    config.skip_special_tokens = options.sampling.skip_special_tokens;
    config.stop = options.sampling.stop;
    config.include_stop_str_in_output = options.sampling.include_stop_str_in_output;
    config.min_tokens = options.sampling.min_tokens;
    config.logprobs = options.logprobs;
    config.reasoning_end_token = model.think_end_token;
    return config;
}

void handle_chat(ServerState& state, const httplib::Request& request, const std::string& body,
                 httplib::Response& response) {
    const auto arrival = std::chrono::steady_clock::now();
    auto prepared = begin(state, request, "chatcmpl");
    const ModelContext& model = *prepared->model;
    ChatRequest chat = parse_chat_request(body);
    check_model_name(chat.options.model, model);
    PreparedChat prompt = prepare_chat_prompt(chat, model, state.config().default_thinking);
    if (chat.options.structured) {
        // In thinking mode the reasoning stays free; the grammar applies from </think> on.
        chat.options.sampling.constraint =
            model.structured->compile(*chat.options.structured, prompt.thinking ? model.think_end_token : -1,
                                      *model.tokenizer, model.info, state.metrics().structured);
    }
    finalize_sampling(chat.options, prompt.prompt_tokens.size(), model, 0, "messages");

    GenerationSpec spec{.params = chat.options.sampling,
                        .choice = base_choice_config(chat.options, model),
                        .jobs = {},
                        .arrival = arrival};
    spec.choice.chat = true;
    spec.choice.thinking = prompt.thinking;
    spec.choice.parallel_tool_calls = chat.parallel_tool_calls;
    spec.choice.tool_call_id_prefix = fmt::format("call_{}_", random_hex(16));
    spec.jobs.push_back({prepared->engine_id, std::move(prompt.prompt_tokens)});
    prepared->run = std::make_shared<GenerationRun>(*model.engine, *model.tokenizer, state.metrics(), std::move(spec));

    const ChatResponseOptions options{.num_choices = chat.options.sampling.n,
                                      .logprobs = chat.options.logprobs,
                                      .thinking = prompt.thinking,
                                      .stream = chat.options.stream_options};
    const ResponseIdentity identity = prepared->identity;
    prepared->make_sink = [identity, options](ByteSink* out) -> std::unique_ptr<ResponseSink> {
        if (out != nullptr) return std::make_unique<ChatStreamSink>(*out, identity, options);
        return std::make_unique<ChatAccumulator>(identity, options);
    };
    prepared->response_json = [](const ResponseSink& sink) {
        return static_cast<const ChatAccumulator&>(sink).response_json();
    };
    prepared->sink_error = [](const ResponseSink& sink) { return static_cast<const ChatAccumulator&>(sink).error(); };
    prepared->options = std::move(chat.options);
    respond(state, std::move(prepared), response);
}

void handle_completion(ServerState& state, const httplib::Request& request, const std::string& body,
                       httplib::Response& response) {
    const auto arrival = std::chrono::steady_clock::now();
    auto prepared = begin(state, request, "cmpl");
    const ModelContext& model = *prepared->model;
    CompletionRequest completion = parse_completion_request(body);
    check_model_name(completion.options.model, model);

    GenerationSpec spec{.params = {}, .choice = {}, .jobs = {}, .arrival = arrival};
    std::vector<std::string> echo_text;
    size_t longest = 0;
    const bool single = completion.prompts.size() == 1;
    for (size_t i = 0; i < completion.prompts.size(); ++i) {
        const std::string param = single ? "prompt" : fmt::format("prompt[{}]", i);
        std::vector<int32_t> tokens =
            prepare_completion_prompt(completion.prompts[i], completion.add_special_tokens, model, param);
        longest = std::max(longest, tokens.size());
        if (completion.echo) {
            const std::string text =
                completion.prompts[i].is_text ? completion.prompts[i].text : model.tokenizer->decode(tokens, false);
            echo_text.insert(echo_text.end(), static_cast<size_t>(completion.options.sampling.n), text);
        }
        spec.jobs.push_back(
            {single ? prepared->engine_id : fmt::format("{}-{}", prepared->engine_id, i), std::move(tokens)});
    }
    if (completion.options.structured) {
        completion.options.sampling.constraint = model.structured->compile(
            *completion.options.structured, -1, *model.tokenizer, model.info, state.metrics().structured);
    }
    finalize_sampling(completion.options, longest, model, 16, "prompt");
    spec.params = completion.options.sampling;
    spec.choice = base_choice_config(completion.options, model);
    const int num_choices = static_cast<int>(spec.jobs.size()) * completion.options.sampling.n;
    prepared->run = std::make_shared<GenerationRun>(*model.engine, *model.tokenizer, state.metrics(), std::move(spec));

    const CompletionResponseOptions options{.num_choices = num_choices,
                                            .logprobs = completion.options.logprobs,
                                            .stream = completion.options.stream_options,
                                            .echo_text = std::move(echo_text)};
    const ResponseIdentity identity = prepared->identity;
    prepared->make_sink = [identity, options](ByteSink* out) -> std::unique_ptr<ResponseSink> {
        if (out != nullptr) return std::make_unique<CompletionStreamSink>(*out, identity, options);
        return std::make_unique<CompletionAccumulator>(identity, options);
    };
    prepared->response_json = [](const ResponseSink& sink) {
        return static_cast<const CompletionAccumulator&>(sink).response_json();
    };
    prepared->sink_error = [](const ResponseSink& sink) {
        return static_cast<const CompletionAccumulator&>(sink).error();
    };
    prepared->options = std::move(completion.options);
    respond(state, std::move(prepared), response);
}

// Errors before generation starts are refusals (counted by reason); later ones are part of the response.
void guarded_generation(ServerState& state, httplib::Response& response, const std::function<void()>& body) {
    try {
        body();
    } catch (const ApiError& error) {
        refuse_request(state, response, error);
    } catch (const std::exception& e) {
        send_error(response, internal_error(fmt::format("Internal error: {}", e.what())));
    }
}

}  // namespace

void register_generation_routes(Router& router, ServerState& state) {
    router.post("/v1/chat/completions",
                [&state](const httplib::Request& request, const std::string& body, httplib::Response& response) {
                    guarded_generation(state, response, [&] { handle_chat(state, request, body, response); });
                });
    router.post("/v1/completions",
                [&state](const httplib::Request& request, const std::string& body, httplib::Response& response) {
                    guarded_generation(state, response, [&] { handle_completion(state, request, body, response); });
                });
}

}  // namespace dsv4::server
