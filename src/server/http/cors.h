// CORS (--allowed-origins, vLLM's spelling): which browser origins may call the API from their own pages. Off by
// default: no Access-Control-* header is ever sent and browsers keep other sites' scripts out. With origins listed,
// every response to an allowed Origin carries Access-Control-Allow-Origin (and Vary: Origin, the exposed headers),
// and preflight OPTIONS requests are answered 204 with the methods and headers a client may use; a preflight from
// an origin that is not listed gets 403. The chat page at / is same-origin and needs none of this.
#pragma once

#include <httplib.h>

#include <string>
#include <string_view>
#include <vector>

namespace dsv4::server {

class CorsPolicy {
  public:
    CorsPolicy() = default;
    // Entries are origins ("https://app.example.com", scheme://host[:port]) or "*" for any origin.
    explicit CorsPolicy(std::vector<std::string> allowed_origins);

    bool enabled() const { return !origins_.empty() || any_; }
    bool allows(std::string_view origin) const;
    // Adds the response headers for an allowed Origin (nothing when the request has none or it is not allowed).
    void apply(const httplib::Request& request, httplib::Response& response) const;
    // A CORS preflight: OPTIONS with Origin and Access-Control-Request-Method.
    static bool is_preflight(const httplib::Request& request);
    // Answers a preflight from an allowed origin (204 with Allow-Methods / Allow-Headers / Max-Age).
    void answer_preflight(const httplib::Request& request, httplib::Response& response) const;

  private:
    std::vector<std::string> origins_;
    bool any_ = false;
};

// The --allowed-origins values: each a comma-separated list, or a JSON list as vLLM takes it ('["https://a.b"]').
// Throws dsv4::Error naming an entry that is not "*" or scheme://host[:port].
std::vector<std::string> parse_allowed_origins(const std::vector<std::string>& values);

}  // namespace dsv4::server
