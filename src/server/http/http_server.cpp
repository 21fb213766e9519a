#include "server/http/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "core/error.h"
#include "server/http/connection_watch.h"
#include "server/http/http_listener.h"
#include "server/http/request_checks.h"
#include "server/http/router.h"
#include "server/http/routes.h"

namespace dsv4::server {
namespace {

thread_local std::chrono::steady_clock::time_point request_start;

constexpr int kListenBacklog = 1024;

// The error object for a status cpp-httplib set itself (a request it could not parse, or a backstop limit).
ApiError error_for_status(int status, const httplib::Request& request, size_t max_body) {
    const ConnectionContext* connection = current_connection();
    if (connection != nullptr && connection->timed_out()) {
        return request_timeout_error(connection->stream->read_timeout());
    }
    switch (status) {
        case 404:
            return not_found_error(fmt::format("Not found: {} {}", request.method, request.path), "not_found");
        case 413:
            return declared_body_too_large_error(request.get_header_value("Content-Length"), max_body);
        case 414:
            return ApiError(414, "invalid_request_error", "The request line is too long (at most 8192 bytes)", {},
                            "uri_too_long");
        case 400:
            return ApiError(400, "invalid_request_error",
                            "Malformed HTTP request (request line or headers; each header line at most 8192 bytes)", {},
                            "invalid_http_framing");
        default:
            return ApiError(status, status >= 500 ? "server_error" : "invalid_request_error",
                            fmt::format("HTTP error {}", status));
    }
}

void log_request(const ServerState& state, const httplib::Request& request, const httplib::Response& response) {
    if (state.config().quiet) return;
    // Requests cpp-httplib rejects while parsing never reach the pre-routing handler: no start time, no path.
    const bool timed = request_start != std::chrono::steady_clock::time_point{};
    const double ms =
        timed ? std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - request_start).count()
              : 0.0;
    const std::string id = response.get_header_value("X-Request-Id");
    std::fprintf(stderr, "dsv4 serve: %s:%d \"%s %s\" %d %.1f ms%s%s\n", request.remote_addr.c_str(),
                 request.remote_port, request.method.c_str(), timed ? request.path.c_str() : "(unparsed)",
                 response.status, ms, id.empty() ? "" : " id=", id.c_str());
}

}  // namespace

void send_json(httplib::Response& response, const std::string& json_text) {
    if (response.status < 0) response.status = 200;
    response.set_content(json_text, "application/json");
}

void send_error(httplib::Response& response, const ApiError& error) {
    response.status = error.status();
    if (error.retry_after_s() > 0) response.set_header("Retry-After", std::to_string(error.retry_after_s()));
    if (error.status() == 401) response.set_header("WWW-Authenticate", "Bearer");
    if (!error.allow().empty()) response.set_header("Allow", error.allow());
    response.set_content(error.to_json(), "application/json");
}

void refuse_request(ServerState& state, httplib::Response& response, const ApiError& error) {
    if (const std::string_view reason = rejection_reason(error); !reason.empty()) {
        state.metrics().count_rejection(reason);
    }
    send_error(response, error);
}

void set_request_id_header(httplib::Response& response, const std::string& id) {
    response.headers.erase("X-Request-Id");
    response.set_header("X-Request-Id", id);
}

void guarded(httplib::Response& response, const std::function<void()>& body) {
    try {
        body();
    } catch (const ApiError& error) {
        send_error(response, error);
    } catch (const std::exception& e) {
        send_error(response, internal_error(fmt::format("Internal error: {}", e.what())));
    }
}

std::shared_ptr<const ModelContext> ready_model(ServerState& state) {
    state.gate().require_ready();
    auto model = state.model();
    if (!model) throw unavailable_error("The model is still loading", "model_loading", 5);
    return model;
}

ConnectionAddress connection_address(const httplib::Request& request) {
    const ConnectionContext* connection = current_connection();
    return {request.local_addr, request.local_port, request.remote_addr, request.remote_port,
            connection != nullptr ? connection->fd : -1};
}

HttpServer::HttpServer(ServerConfig config) {
    if (config.max_in_flight <= 0) config.max_in_flight = 256;
    if (config.http_threads <= 0) config.http_threads = config.max_in_flight + 16;
    state_ = std::make_unique<ServerState>(std::move(config));
    ListenerOptions listener;
    listener.request_read_timeout = std::chrono::milliseconds(
        static_cast<int64_t>(std::max(0.001, state_->config().request_read_timeout_s) * 1000.0));
    ServerState* state = state_.get();
    listener.on_header_timeout = [state](const std::string& peer) {
        state->metrics().count_http_status(408);
        state->metrics().count_rejection("read_timeout");
        if (!state->config().quiet) {
            std::fprintf(stderr, "dsv4 serve: %s \"(request headers not received in time)\" 408\n", peer.c_str());
        }
    };
    http_ = std::make_unique<HttpListener>(std::move(listener));
    configure();
}

HttpServer::~HttpServer() {
    begin_drain();
    stop(std::chrono::milliseconds(0));
}

void HttpServer::configure() {
    const ServerConfig& config = state_->config();
    const size_t threads = static_cast<size_t>(config.http_threads);
    http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http_->set_tcp_nodelay(true);  // without it Nagle + delayed ACK add ~40 ms per SSE chunk
    http_->set_keep_alive_max_count(1000);
    http_->set_keep_alive_timeout(config.keep_alive_timeout_s);
    http_->set_write_timeout(config.write_timeout_s);
    // A backstop only: RequestChecks refuses a declared length above the limit before cpp-httplib would read it.
    http_->set_payload_max_length(config.max_request_bytes);

    // cpp-httplib 0.11's default socket options add SO_REUSEPORT, which lets a second server bind the same port and
    // silently take half the connections: keep SO_REUSEADDR only, so a busy port is an error. It also listens with
    // a backlog of 5, so a burst of connections (64 clients starting at once) fails with resets: remember the
    // listening socket so bind() can raise the backlog.
    http_->set_socket_options([this](socket_t sock) {
        const int yes = 1;
        ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
        listen_fd_ = sock;
    });

    ServerState* state = state_.get();
    router_ = std::make_unique<Router>(
        *http_, config.max_request_bytes,
        [state](httplib::Response& response, const ApiError& error) { refuse_request(*state, response, error); });
    checks_ = std::make_unique<RequestChecks>(*state_, *router_, CorsPolicy(config.allowed_origins));
    const RequestChecks* checks = checks_.get();
    http_->set_pre_routing_handler([checks](const httplib::Request& request, httplib::Response& response) {
        request_start = std::chrono::steady_clock::now();
        AdmissionGate::release_after_write();  // the previous response's, if its write failed
        return checks->run(request, response);
    });
    http_->set_expect_100_continue_handler([checks](const httplib::Request& request, httplib::Response& response) {
        return checks->expect_continue(request, response);
    });
    http_->set_post_routing_handler([](const httplib::Request&, httplib::Response& response) {
        const ConnectionContext* connection = current_connection();
        if (connection != nullptr && (connection->close_after_response || connection->timed_out())) {
            response.headers.erase("Keep-Alive");
            response.set_header("Connection", "close");
        }
    });
    httplib::Server::HandlerWithResponse error_handler = [state](const httplib::Request& request,
                                                                 httplib::Response& response) {
        if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // already an error object
        const ApiError error = error_for_status(response.status, request, state->config().max_request_bytes);
        close_connection_after_response();  // cpp-httplib could not read this request: the stream is out of step
        refuse_request(*state, response, error);
        return httplib::Server::HandlerResponse::Handled;
    };
    http_->set_error_handler(std::move(error_handler));
    http_->set_exception_handler([](const httplib::Request&, httplib::Response& response, std::exception_ptr) {
        send_error(response, internal_error("Internal error"));
    });
    http_->set_logger([state](const httplib::Request& request, const httplib::Response& response) {
        state->metrics().count_http_status(response.status);
        log_request(*state, request, response);
        request_start = {};
        AdmissionGate::release_after_write();
    });
    register_generation_routes(*router_, *state_);
    register_info_routes(*router_, *state_);
    if (config.webui) register_webui_routes(*router_, *state_);
}

int HttpServer::bind() {
    const ServerConfig& config = state_->config();
    if (config.port == 0) {
        port_ = http_->bind_to_any_port(config.host);
        if (port_ <= 0) fail("cannot bind {} on any port", config.host);
    } else {
        if (!http_->bind_to_port(config.host, config.port)) {
            fail("cannot bind {}:{} (address in use, or not an address of this machine?)", config.host, config.port);
        }
        port_ = config.port;
    }
    if (listen_fd_ < 0 || ::listen(listen_fd_, kListenBacklog) != 0) fail("cannot raise the listen backlog");
    return port_;
}

void HttpServer::start() {
    listener_ = std::thread([this] {
        http_->listen_after_bind();
        listener_done_ = true;
    });
    // cpp-httplib's stop() does nothing to a server whose accept loop has not begun yet, so a stop() right after
    // start() would leave the listener blocked in accept() forever: wait for the loop (or its failure).
    while (!http_->is_running() && !listener_done_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HttpServer::begin_drain() {
    state_->gate().set_phase(ServerPhase::kDraining);
}

void HttpServer::stop(std::chrono::milliseconds in_flight_wait) {
    if (stopped_) return;
    stopped_ = true;
    const auto deadline = std::chrono::steady_clock::now() + in_flight_wait;
    while (state_->gate().in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (listener_.joinable()) {
        http_->stop();                        // closes the listening socket
        shutdown_connections_on_port(port_);  // ends idle keep-alive connections now, not at their timeout
        listener_.join();
    }
}

}  // namespace dsv4::server
