#include "server/http/http_listener.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/http/api_error.h"

namespace dsv4::server {
namespace {

thread_local ConnectionContext* tls_connection = nullptr;

// Publishes a connection as the worker thread's current one for the scope.
class CurrentConnection {
  public:
    explicit CurrentConnection(ConnectionContext* context) { tls_connection = context; }
    ~CurrentConnection() { tls_connection = nullptr; }
    CurrentConnection(const CurrentConnection&) = delete;
    CurrentConnection& operator=(const CurrentConnection&) = delete;
};

constexpr auto kStopPollInterval = std::chrono::milliseconds(50);

}  // namespace

ConnectionContext* current_connection() {
    return tls_connection;
}

void close_connection_after_response() {
    if (tls_connection != nullptr) tls_connection->close_after_response = true;
}

HttpListener::HttpListener(ListenerOptions options) : options_(std::move(options)) {}

bool HttpListener::wait_for_request(const DeadlineSocketStream& stream) const {
    if (stream.has_buffered_input()) return true;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(keep_alive_timeout_sec_);
    while (svr_sock_ != INVALID_SOCKET) {
        pollfd p{stream.socket(), POLLIN, 0};
        const int ready = ::poll(&p, 1, static_cast<int>(kStopPollInterval.count()));
        if (ready > 0) return true;  // a request, or the peer's FIN (process_request then sees the end)
        if (ready < 0 && errno != EINTR) return false;
        if (std::chrono::steady_clock::now() >= deadline) return false;
    }
    return false;
}

void HttpListener::answer_header_timeout(DeadlineSocketStream& stream) {
    const double seconds = std::chrono::duration<double>(options_.request_read_timeout).count();
    const std::string body = request_timeout_error(seconds).to_json();
    const std::string response = fmt::format(
        "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
        "Connection: close\r\n\r\n{}",
        body.size(), body);
    stream.write(response.data(), response.size());
    if (options_.on_header_timeout) {
        std::string ip;
        int port = -1;
        stream.get_remote_ip_and_port(ip, port);
        options_.on_header_timeout(fmt::format("{}:{}", ip, port));
    }
}

bool HttpListener::process_and_close_socket(socket_t sock) {
    DeadlineSocketStream stream(sock, std::chrono::seconds(write_timeout_sec_));
    ConnectionContext context;
    context.fd = sock;
    context.stream = &stream;
    CurrentConnection current(&context);
    bool ok = true;
    for (size_t left = keep_alive_max_count_; left > 0 && wait_for_request(stream); --left) {
        stream.start_request(options_.request_read_timeout);
        context.close_after_response = false;
        bool client_closes = false;
        ok = process_request(stream, left == 1, client_closes, nullptr);
        // The request line or headers did not arrive in time and nothing was answered: say so before closing.
        if (stream.timed_out() && stream.request_bytes_written() == 0 && stream.request_bytes_read() > 0) {
            answer_header_timeout(stream);
        }
        if (!ok || client_closes || context.close_after_response || stream.timed_out()) break;
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return ok;
}

}  // namespace dsv4::server
