// Route registration and the helpers every route uses. Handlers never let an exception escape: ApiError becomes its
// OpenAI error object; anything else a 500.
#pragma once

#include <httplib.h>

#include <functional>

#include "server/http/api_error.h"
#include "server/http/connection_watch.h"
#include "server/http/model_context.h"

namespace dsv4::server {

class Router;

void register_generation_routes(Router& router, ServerState& state);
void register_info_routes(Router& router, ServerState& state);
// GET / (the chat page), unless --no-webui.
void register_webui_routes(Router& router, ServerState& state);

// Writes the error object with its status (and Retry-After, Allow).
void send_error(httplib::Response& response, const ApiError& error);
// A refused request: counted in dsv4:requests_rejected_total (by rejection_reason), then send_error.
void refuse_request(ServerState& state, httplib::Response& response, const ApiError& error);
// Sets X-Request-Id (replacing an earlier value).
void set_request_id_header(httplib::Response& response, const std::string& id);
void send_json(httplib::Response& response, const std::string& json_text);

// Runs `body`, turning any exception into an error response.
void guarded(httplib::Response& response, const std::function<void()>& body);

// The model, or a 503 while loading / draining.
std::shared_ptr<const ModelContext> ready_model(ServerState& state);

ConnectionAddress connection_address(const httplib::Request& request);

}  // namespace dsv4::server
