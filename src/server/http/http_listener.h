// HttpListener: cpp-httplib's Server with its per-connection loop replaced. cpp-httplib lets a subclass override
// process_and_close_socket() and call process_request() with its own Stream; we do, to get what its loop lacks:
//   - a deadline for reading each request (DeadlineSocketStream: --request-read-timeout covers the request line,
//     headers and body together); a request that misses it gets 408 and the connection is closed;
//   - closing the connection after a response whose request body was left unread (a refusal before the body: 401,
//     404, 405, 413), so those bytes are never parsed as the next request;
//   - pipelined requests already buffered are served without waiting for the socket;
//   - the connection's socket and state for the handlers (current_connection()), on the worker thread.
#pragma once

#include <httplib.h>

#include <chrono>
#include <functional>
#include <string>

#include "server/http/socket_stream.h"

namespace dsv4::server {

// The connection a worker thread is serving, while it serves it.
struct ConnectionContext {
    int fd = -1;
    const DeadlineSocketStream* stream = nullptr;
    bool close_after_response = false;  // set by a handler: the connection ends after this response

    bool timed_out() const { return stream != nullptr && stream->timed_out(); }
};

// The calling worker thread's connection, or null on any other thread.
ConnectionContext* current_connection();
// Marks the current connection to close after this response (no-op outside a worker).
void close_connection_after_response();

struct ListenerOptions {
    std::chrono::milliseconds request_read_timeout{30000};
    // Called (on the worker) when a request's start arrived but not its request line + headers before the deadline,
    // after the 408 was written; `peer` is "ip:port".
    std::function<void(const std::string& peer)> on_header_timeout;
};

class HttpListener final : public httplib::Server {
  public:
    explicit HttpListener(ListenerOptions options);

  private:
    bool process_and_close_socket(socket_t sock) override;
    // Waits for the next request on a keep-alive connection: false when the peer is idle for the keep-alive
    // timeout or the server stops.
    bool wait_for_request(const DeadlineSocketStream& stream) const;
    void answer_header_timeout(DeadlineSocketStream& stream);

    ListenerOptions options_;
};

}  // namespace dsv4::server
