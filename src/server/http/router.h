// Router: registers the routes with cpp-httplib and remembers them, so that the checks before routing can answer 404
// (no such path) or 405 (wrong method, with Allow) before a request body is read. POST handlers receive the body
// read here, for every content type the same way (cpp-httplib's own reader refuses form-encoded bodies over 8 KB
// with a false 413), within the size limit (413 with the size seen) and the request's read deadline (408).
#pragma once

#include <httplib.h>

#include <functional>
#include <string>
#include <vector>

#include "server/http/api_error.h"

namespace dsv4::server {

class Router {
  public:
    using GetHandler = std::function<void(const httplib::Request&, httplib::Response&)>;
    using PostHandler = std::function<void(const httplib::Request&, const std::string& body, httplib::Response&)>;
    // How a refusal is answered (the server counts it and writes the error object).
    using Refuse = std::function<void(httplib::Response&, const ApiError&)>;

    Router(httplib::Server& http, size_t max_body_bytes, Refuse refuse);

    // `pattern` is what cpp-httplib takes (a regular expression over the whole path); the router's own 404/405 check
    // understands the two forms the routes use: a literal path, or a literal prefix followed by "(.+)". Any other
    // pattern is refused at registration (a dsv4::Error), so the two never disagree.
    void get(const std::string& pattern, GetHandler handler);  // GET and HEAD
    void post(const std::string& pattern, PostHandler handler);

    struct Match {
        bool path_known = false;
        bool method_allowed = false;
        std::string allow;  // the path's methods, for Allow ("GET, HEAD", "POST")
    };
    Match match(const std::string& method, const std::string& path) const;

  private:
    struct Route {
        std::string prefix;     // the literal part
        bool any_tail = false;  // "(.+)" after it: one or more further characters
        std::string source;
        bool get = false;
        bool post = false;
    };
    Route& route(const std::string& pattern);

    httplib::Server* http_;
    size_t max_body_bytes_;
    Refuse refuse_;
    std::vector<Route> routes_;
};

// Reads the whole body through `reader` (none without Content-Length or chunked framing). Throws ApiError: 413 past
// `max_body_bytes` (counting decompressed bytes), 408 when the read deadline passed, 400 when the body could not be
// read (the connection ended early, bad chunked framing, corrupt compression).
std::string read_request_body(const httplib::Request& request, const httplib::ContentReader& reader,
                              size_t max_body_bytes);

}  // namespace dsv4::server
