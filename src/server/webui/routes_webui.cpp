// GET /: the chat page. A static single file (inline CSS and JS, no external assets) that talks to this server's own
// /v1/chat/completions; it needs no key to load (it holds nothing) and asks for the API key when the server wants one.
#include "server/http/router.h"
#include "server/http/routes.h"
#include "server/webui/chat_page.h"

namespace dsv4::server {

void register_webui_routes(Router& router, ServerState&) {
    router.get("/", [](const httplib::Request&, httplib::Response& response) {
        const std::string_view page = chat_page_html();
        response.set_content(page.data(), page.size(), "text/html; charset=utf-8");
        // The page only talks to its own origin; nothing may frame it or load other resources.
        response.set_header("Content-Security-Policy",
                            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                            "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
                            "frame-ancestors 'none'");
        response.set_header("X-Content-Type-Options", "nosniff");
        response.set_header("Cache-Control", "no-cache");
    });
}

}  // namespace dsv4::server
