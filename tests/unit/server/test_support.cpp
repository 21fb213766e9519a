#include "test_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>

namespace dsv4::testing {

std::shared_ptr<const tokenizer::Tokenizer> v4_tokenizer() {
    static const std::shared_ptr<const tokenizer::Tokenizer> tokenizer = []() {
        std::shared_ptr<const tokenizer::Tokenizer> loaded;
        if (std::filesystem::exists(DSV4_V4_TOKENIZER_JSON)) {
            loaded = std::make_shared<const tokenizer::Tokenizer>(tokenizer::Tokenizer::load(DSV4_V4_TOKENIZER_JSON));
        }
        return loaded;
    }();
    return tokenizer;
}

TestServer::TestServer(TestServerOptions options) : tokenizer_(v4_tokenizer()) {
    if (!tokenizer_) throw std::runtime_error("the V4 tokenizer is missing");
    FakeEngineOptions engine_options;
    engine_options.info = fake_model_info(*tokenizer_, options.max_model_len);
    engine_options.word_tokens = fake_word_tokens(*tokenizer_);
    engine_options.script = fake_demo_script(tokenizer_);
    engine_options.step_interval = std::chrono::microseconds(200);
    if (options.engine) options.engine(engine_options);
    engine_ = std::make_unique<FakeEngine>(std::move(engine_options));

    server::ServerConfig config;
    config.port = 0;
    config.served_model_name = "dsv4-test";
    config.quiet = true;
    config.max_in_flight = 128;
    if (options.server) options.server(config);
    server_ = std::make_unique<server::HttpServer>(config);
    port_ = server_->bind();
    server_->start();

    auto model = std::make_shared<server::ModelContext>();
    model->engine = engine_.get();
    model->tokenizer = tokenizer_;
    model->encoder = ChatEncoder(config.template_revision);
    model->info = engine_->model_info();
    model->served_name = config.served_model_name;
    model->model_dir = "/models/test";
    model->created = 1700000000;
    model->think_end_token = tokenizer_->token_to_id("</think>").value_or(-1);
    model->bos_token = model->info.bos_token_id;
    server_->set_model(model);
}

TestServer::~TestServer() {
    shutdown(std::chrono::milliseconds(0));
}

void TestServer::shutdown(std::chrono::milliseconds grace) {
    if (shut_down_) return;
    shut_down_ = true;
    server_->begin_drain();
    engine_->shutdown(grace);
    server_->stop(std::chrono::seconds(10));
}

httplib::Client TestServer::client() const {
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(30, 0);
    return client;
}

HttpResult post_json(const TestServer& server, const std::string& path, const std::string& body,
                     const httplib::Headers& headers) {
    httplib::Client client = server.client();
    HttpResult result;
    if (auto response = client.Post(path.c_str(), headers, body, "application/json")) {
        result.status = response->status;
        result.body = response->body;
        result.headers = response->headers;
    }
    return result;
}

HttpResult get(const TestServer& server, const std::string& path, const httplib::Headers& headers) {
    httplib::Client client = server.client();
    HttpResult result;
    if (auto response = client.Get(path.c_str(), headers)) {
        result.status = response->status;
        result.body = response->body;
        result.headers = response->headers;
    }
    return result;
}

std::vector<nlohmann::json> parse_sse(const std::string& body, bool* saw_done) {
    std::vector<nlohmann::json> events;
    bool done = false;
    size_t pos = 0;
    while (pos < body.size()) {
        size_t end = body.find("\n\n", pos);
        if (end == std::string::npos) end = body.size();
        const std::string event = body.substr(pos, end - pos);
        pos = end + 2;
        if (event.rfind("data: ", 0) != 0) continue;
        const std::string data = event.substr(6);
        if (data == "[DONE]") {
            done = true;
            continue;
        }
        if (done) throw std::runtime_error("SSE data after [DONE]");
        events.push_back(nlohmann::json::parse(data));
    }
    if (saw_done != nullptr) *saw_done = done;
    return events;
}

RawConnection::RawConnection(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
        throw std::runtime_error("cannot connect");
    }
}

RawConnection::~RawConnection() {
    close_now();
}

void RawConnection::send_all(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
        const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) throw std::runtime_error("send failed");
        sent += static_cast<size_t>(n);
    }
}

std::string RawConnection::read_until(const std::string& needle, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buffer[4096];
    while (received_.find(needle) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0) continue;
        const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
        if (n <= 0) {
            peer_closed_ = true;
            break;
        }
        received_.append(buffer, static_cast<size_t>(n));
    }
    return received_;
}

void RawConnection::close_now() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

std::string http_post_request(const std::string& path, const std::string& body) {
    return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace dsv4::testing
