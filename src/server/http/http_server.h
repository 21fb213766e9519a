// HttpServer: the cpp-httplib listener (HttpListener) with the checks before routing (RequestChecks) and the routes
// (OpenAI API, /health, /metrics, the chat page). Lifecycle: bind() -> start() (serves /health 503
// and 503 for model routes while loading) -> set_model() (ready) -> begin_drain() (new requests and /health get 503;
// running requests continue) -> [engine shutdown: running requests finish or are aborted] -> stop() (waits for the
// in-flight responses to be written, closes the listener, joins the workers). The engine must outlive stop().
// The listener stays open while draining because cpp-httplib does not start a response's content provider once it
// is stopped: closing it earlier would cut streams admitted just before the drain.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "server/http/model_context.h"
#include "server/http/server_config.h"

namespace dsv4::server {

class HttpListener;
class Router;
class RequestChecks;

class HttpServer {
  public:
    explicit HttpServer(ServerConfig config);
    ~HttpServer();  // drains and waits if still running
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds host:port (port 0 = any free port). Returns the port; throws dsv4::Error naming the address on failure.
    int bind();
    void start();  // serves on a background thread; returns once the listener is accepting
    void set_model(std::shared_ptr<const ModelContext> model) { state_->set_model(std::move(model)); }
    void begin_drain();
    // Waits up to `in_flight_wait` for generation responses still being written, then closes the listener and joins
    // every worker. Idempotent.
    void stop(std::chrono::milliseconds in_flight_wait);

    ServerState& state() { return *state_; }
    int port() const { return port_; }

  private:
    void configure();

    std::unique_ptr<ServerState> state_;
    std::unique_ptr<HttpListener> http_;
    std::unique_ptr<Router> router_;
    std::unique_ptr<RequestChecks> checks_;
    std::thread listener_;
    std::atomic<bool> listener_done_{false};
    int port_ = -1;
    int listen_fd_ = -1;
    bool stopped_ = false;
};

}  // namespace dsv4::server
