// Shared helpers for the server tests: the V4 tokenizer (loaded once), an in-process server on a free port backed by
// the FakeEngine, SSE parsing and a raw-socket client for disconnect tests.
#pragma once

#include <httplib.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fake_engine.h"
#include "server/http/http_server.h"

namespace dsv4::testing {

// The generated DeepSeek-V4 tokenizer, or null when it is absent (callers GTEST_SKIP; under CI they fail).
std::shared_ptr<const tokenizer::Tokenizer> v4_tokenizer();

#define DSV4_REQUIRE_TOKENIZER()                                                                         \
    do {                                                                                                 \
        if (!::dsv4::testing::v4_tokenizer()) {                                                          \
            if (std::getenv("CI") != nullptr) FAIL() << "the V4 tokenizer.json is missing under CI";     \
            GTEST_SKIP() << "the V4 tokenizer.json is missing: run scripts/install-deps.sh and rebuild"; \
        }                                                                                                \
    } while (0)

struct TestServerOptions {
    std::function<void(FakeEngineOptions&)> engine;
    std::function<void(server::ServerConfig&)> server;
    int max_model_len = 4096;
};

class TestServer {
  public:
    explicit TestServer(TestServerOptions options = {});
    ~TestServer();

    httplib::Client client() const;
    FakeEngine& engine() { return *engine_; }
    server::HttpServer& http() { return *server_; }
    int port() const { return port_; }
    const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
    // Drains like SIGTERM does: 503 to new requests, engine shutdown with `grace`, stop the listener and workers.
    void shutdown(std::chrono::milliseconds grace);

  private:
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
    std::unique_ptr<FakeEngine> engine_;
    std::unique_ptr<server::HttpServer> server_;
    int port_ = -1;
    bool shut_down_ = false;
};

// POST JSON; returns status and body (status -1 when the request failed at the transport level).
struct HttpResult {
    int status = -1;
    std::string body;
    httplib::Headers headers;
    nlohmann::json json() const { return nlohmann::json::parse(body); }
};
HttpResult post_json(const TestServer& server, const std::string& path, const std::string& body,
                     const httplib::Headers& headers = {});
HttpResult get(const TestServer& server, const std::string& path, const httplib::Headers& headers = {});

// The JSON payloads of an SSE body ("data: [DONE]" excluded); `saw_done` tells whether it was there, last.
std::vector<nlohmann::json> parse_sse(const std::string& body, bool* saw_done = nullptr);

// A raw HTTP/1.1 connection, for tests that must close the socket mid-response.
class RawConnection {
  public:
    explicit RawConnection(int port);
    ~RawConnection();
    void send_all(const std::string& bytes);
    // Reads until `needle` appeared in everything received so far (or the timeout passes); returns all received.
    std::string read_until(const std::string& needle, std::chrono::milliseconds timeout);
    void close_now();                                  // closes the socket (a FIN to the server)
    bool peer_closed() const { return peer_closed_; }  // read_until saw the end of the stream

  private:
    int fd_ = -1;
    std::string received_;
    bool peer_closed_ = false;
};

std::string http_post_request(const std::string& path, const std::string& body);

}  // namespace dsv4::testing
