// Route registration and the helpers every route uses. Handlers never let an exception escape: ApiError becomes its
// OpenAI error object; anything else a 500.
#pragma once

#include <httplib.h>

#include <functional>

#include "server/http/api_error.h"
#include "server/http/connection_watch.h"
#include "server/http/model_context.h"

namespace dsv4::server {

void register_generation_routes(httplib::Server& http, ServerState& state);
void register_info_routes(httplib::Server& http, ServerState& state);

// Writes the error object with its status (and Retry-After).
void send_error(httplib::Response& response, const ApiError& error);
void send_json(httplib::Response& response, const std::string& json_text);

// Runs `body`, turning any exception into an error response.
void guarded(httplib::Response& response, const std::function<void()>& body);

// The model, or a 503 while loading / draining.
std::shared_ptr<const ModelContext> ready_model(ServerState& state);

ConnectionAddress connection_address(const httplib::Request& request);

}  // namespace dsv4::server
