// Client-disconnect detection. cpp-httplib only notices a closed connection when a write fails, which can be long
// after the client left (a prefill with no output, or tokens buffered by the kernel). ConnectionWatcher finds the
// request's socket and watches it with epoll for the peer's FIN/RST (EPOLLRDHUP/EPOLLHUP/EPOLLERR) on one
// background thread, so a disconnect aborts the engine request at once, before its next step.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace dsv4::server {

// The addresses cpp-httplib reports for a request's connection.
struct ConnectionAddress {
    std::string local_ip;
    int local_port = -1;
    std::string remote_ip;
    int remote_port = -1;
    int fd = -1;  // the connection's socket when the worker knows it (no search needed)
};

// The descriptor of this process's TCP socket with exactly these endpoints, or -1 (Linux: scans /proc/self/fd).
// Only needed when the address carries no fd.
int find_connection_fd(const ConnectionAddress& address);

// shutdown(SHUT_RDWR) on every connected socket of this process whose local port is `local_port` (the server's
// accepted connections). cpp-httplib 0.11 keeps an idle keep-alive connection (and its worker thread) until the
// keep-alive timeout even after Server::stop(); this ends them at once. Returns how many were shut down.
int shutdown_connections_on_port(int local_port);

class ConnectionWatcher {
  public:
    ConnectionWatcher();  // starts the epoll thread; throws dsv4::Error if epoll is unavailable
    ~ConnectionWatcher();
    ConnectionWatcher(const ConnectionWatcher&) = delete;
    ConnectionWatcher& operator=(const ConnectionWatcher&) = delete;

    // Calls `on_disconnect` once, on the watcher thread, when the peer closes or resets `fd`. Returns an id for
    // unwatch(), or -1 when the fd cannot be watched. The callback must be cheap and must not call back in here.
    int watch(int fd, std::function<void()> on_disconnect);
    // Stops watching; after it returns the callback is not running and will not run.
    void unwatch(int id);

  private:
    void run();

    int epoll_fd_ = -1;
    int wake_fd_ = -1;                                                // eventfd that stops the thread
    std::mutex mutex_;                                                // guards callbacks_; held while a callback runs
    std::map<int, std::pair<int, std::function<void()>>> callbacks_;  // id -> (fd, callback)
    int next_id_ = 1;
    std::thread thread_;
};

// RAII registration that also sets a flag, for one request.
class WatchedConnection {
  public:
    WatchedConnection(ConnectionWatcher* watcher, const ConnectionAddress& address,
                      std::function<void()> on_disconnect);
    ~WatchedConnection();
    WatchedConnection(const WatchedConnection&) = delete;
    WatchedConnection& operator=(const WatchedConnection&) = delete;
    bool active() const { return id_ > 0; }

  private:
    ConnectionWatcher* watcher_;
    int id_ = -1;
};

}  // namespace dsv4::server
