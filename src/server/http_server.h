// HttpServer: the cpp-httplib listener with the OpenAI routes. Lifecycle: bind() -> start() (serves /health 503
// and 503 for model routes while loading) -> set_model() (ready) -> begin_drain() (new requests get 503, the
// listener closes; running requests continue) -> wait() (every worker finished). The engine must outlive wait().
#pragma once

#include <memory>
#include <thread>

#include "server/model_context.h"
#include "server/server_config.h"

namespace httplib {
class Server;
}

namespace dsv4::server {

class HttpServer {
  public:
    explicit HttpServer(ServerConfig config);
    ~HttpServer();  // drains and waits if still running
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds host:port (port 0 = any free port). Returns the port; throws dsv4::Error naming the address on failure.
    int bind();
    void start();  // serves on a background thread
    void set_model(std::shared_ptr<const ModelContext> model) { state_->set_model(std::move(model)); }
    void begin_drain();
    void wait();

    ServerState& state() { return *state_; }
    int port() const { return port_; }

  private:
    void configure();

    std::unique_ptr<ServerState> state_;
    std::unique_ptr<httplib::Server> http_;
    std::thread listener_;
    int port_ = -1;
    bool draining_ = false;
};

}  // namespace dsv4::server
