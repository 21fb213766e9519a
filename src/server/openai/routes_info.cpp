// GET /health, /version, /metrics, /v1/models[/{id}]; POST /tokenize, /detokenize.
#include <nlohmann/json.hpp>

#include "server/http/router.h"
#include "server/http/routes.h"
#include "server/openai/prompt_builder.h"
#include "server/openai/request_parser.h"

namespace dsv4::server {
namespace {

using nlohmann::json;

json model_card(const ModelContext& model) {
    return {{"id", model.served_name},
            {"object", "model"},
            {"created", model.created},
            {"owned_by", "dsv4"},
            {"root", model.model_dir},
            {"parent", nullptr},
            {"max_model_len", model.info.max_model_len}};
}

void handle_health(ServerState& state, httplib::Response& response) {
    switch (state.gate().phase()) {
        case ServerPhase::kReady:
            send_json(response, R"({"status":"ok"})");
            return;
        case ServerPhase::kLoading:
            send_error(response, unavailable_error("Loading model", "model_loading", 5));
            return;
        case ServerPhase::kDraining:
            send_error(response, unavailable_error("The server is shutting down", "draining", 5));
            return;
    }
}

void handle_tokenize(ServerState& state, const std::string& request_body, httplib::Response& response) {
    const auto model = ready_model(state);
    TokenizeRequest parsed = parse_tokenize_request(request_body);
    check_model_name(parsed.model, *model);
    std::vector<int32_t> tokens;
    if (parsed.is_chat) {
        tokens = prepare_chat_prompt(parsed.chat, *model, state.config().default_thinking).prompt_tokens;
    } else {
        CompletionPrompt prompt;
        prompt.text = parsed.prompt;
        if (parsed.prompt.empty()) {
            if (parsed.add_special_tokens) tokens.push_back(model->bos_token);
        } else {
            tokens = prepare_completion_prompt(prompt, parsed.add_special_tokens, *model, "prompt");
        }
    }
    json body = {{"count", tokens.size()}, {"max_model_len", model->info.max_model_len}, {"tokens", tokens}};
    send_json(response, body.dump());
}

void handle_detokenize(ServerState& state, const std::string& request_body, httplib::Response& response) {
    const auto model = ready_model(state);
    DetokenizeRequest parsed = parse_detokenize_request(request_body);
    check_model_name(parsed.model, *model);
    std::vector<int32_t> ids;
    for (size_t i = 0; i < parsed.tokens.size(); ++i) {
        if (parsed.tokens[i] >= model->info.vocab_size) {
            fail_request("tokens", "'tokens[{}]' is token id {}, outside the vocabulary [0, {})", i, parsed.tokens[i],
                         model->info.vocab_size);
        }
        ids.push_back(static_cast<int32_t>(parsed.tokens[i]));
    }
    json body = {{"prompt", model->tokenizer->decode(ids, false)}};
    send_json(response, body.dump(-1, ' ', false, json::error_handler_t::replace));
}

}  // namespace

void register_info_routes(Router& router, ServerState& state) {
    router.get("/health", [&state](const httplib::Request&, httplib::Response& response) {
        guarded(response, [&] { handle_health(state, response); });
    });
    router.get("/version", [](const httplib::Request&, httplib::Response& response) {
#ifdef DSV4_WITH_CUDA
        send_json(response, R"({"version":"0.1.0","build":"cuda"})");
#else
        send_json(response, R"({"version":"0.1.0","build":"cpu"})");
#endif
    });
    router.get("/metrics", [&state](const httplib::Request&, httplib::Response& response) {
        guarded(response, [&] {
            const auto model = state.model();
            std::optional<EngineStats> stats;
            if (model) stats = model->engine->stats();
            const std::string name = model ? model->served_name : state.config().served_model_name;
            const CacheInfo* cache = model ? &model->info.cache : nullptr;
            response.set_content(
                state.metrics().render(name, stats ? &*stats : nullptr, cache, state.gate().in_flight()),
                "text/plain; version=0.0.4; charset=utf-8");
        });
    });
    router.get("/v1/models", [&state](const httplib::Request&, httplib::Response& response) {
        guarded(response, [&] {
            const auto model = ready_model(state);
            send_json(response, json{{"object", "list"}, {"data", json::array({model_card(*model)})}}.dump());
        });
    });
    router.get(R"(/v1/models/(.+))", [&state](const httplib::Request& request, httplib::Response& response) {
        guarded(response, [&] {
            const auto model = ready_model(state);
            const std::string id = request.matches[1];
            if (id != model->served_name) {
                throw not_found_error("The model '" + id + "' does not exist", "model_not_found");
            }
            send_json(response, model_card(*model).dump());
        });
    });
    router.post("/tokenize", [&state](const httplib::Request&, const std::string& body, httplib::Response& response) {
        guarded(response, [&] { handle_tokenize(state, body, response); });
    });
    router.post("/detokenize", [&state](const httplib::Request&, const std::string& body, httplib::Response& response) {
        guarded(response, [&] { handle_detokenize(state, body, response); });
    });
}

}  // namespace dsv4::server
