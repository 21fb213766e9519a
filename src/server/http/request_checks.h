// RequestChecks: what every request passes before it is routed, in this order. A refusal is counted in
// dsv4:requests_rejected_total, and when the request's body is left unread the connection closes after the answer.
//   1. X-Request-Id: 1 to 128 visible ASCII characters (else 400); echoed on the response
//   2. CORS: headers for an allowed Origin; a preflight is answered here (204, or 403 for an origin not allowed)
//   3. the route: 404 for an unknown path, 405 with Allow for a method it does not take; plain OPTIONS: 204 + Allow
//   4. body framing (request_framing.h): 400 / 501, and 413 at once for a declared size above --max-request-bytes
//   5. the API key, unless the path is public (/health unless --protect-health, /metrics with --public-metrics, /)
//   6. a POST body's encoding (415)
// The same checks answer "Expect: 100-continue" so a refused client never sends its body.
#pragma once

#include <httplib.h>

#include <string>

#include "server/http/cors.h"
#include "server/http/model_context.h"
#include "server/http/router.h"

namespace dsv4::server {

class RequestChecks {
  public:
    RequestChecks(ServerState& state, const Router& router, CorsPolicy cors);

    // The pre-routing handler: Handled when the request was answered here.
    httplib::Server::HandlerResponse run(const httplib::Request& request, httplib::Response& response) const;
    // The Expect: 100-continue handler: 100, or the status of the refusal written into `response`.
    int expect_continue(const httplib::Request& request, httplib::Response& response) const;

  private:
    // Throws the refusal as an ApiError; false when the request was answered without error (preflight, OPTIONS).
    bool check(const httplib::Request& request, httplib::Response& response) const;
    void refuse(const httplib::Request& request, httplib::Response& response, const ApiError& error) const;

    ServerState* state_;
    const Router* router_;
    CorsPolicy cors_;
};

// The client's X-Request-Id ("" when absent); throws a 400 ApiError when it is not 1-128 visible ASCII characters.
std::string client_request_id(const httplib::Request& request);

}  // namespace dsv4::server
