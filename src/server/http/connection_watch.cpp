#include "server/http/connection_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdlib>

#include "core/error.h"

namespace dsv4::server {
namespace {

// "ip", port of a socket address (numeric, like cpp-httplib's getnameinfo(NI_NUMERICHOST)).
bool endpoint_of(const sockaddr_storage& address, std::string& ip, int& port) {
    std::array<char, INET6_ADDRSTRLEN> buffer{};
    if (address.ss_family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
        if (inet_ntop(AF_INET, &in->sin_addr, buffer.data(), buffer.size()) == nullptr) return false;
        port = ntohs(in->sin_port);
    } else if (address.ss_family == AF_INET6) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
        if (inet_ntop(AF_INET6, &in6->sin6_addr, buffer.data(), buffer.size()) == nullptr) return false;
        port = ntohs(in6->sin6_port);
    } else {
        return false;
    }
    ip = buffer.data();
    return true;
}

bool socket_matches(int fd, const ConnectionAddress& want) {
    sockaddr_storage local{};
    sockaddr_storage peer{};
    socklen_t local_len = sizeof(local);
    socklen_t peer_len = sizeof(peer);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return false;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) return false;
    std::string local_ip, peer_ip;
    int local_port = -1, peer_port = -1;
    if (!endpoint_of(local, local_ip, local_port) || !endpoint_of(peer, peer_ip, peer_port)) return false;
    return local_port == want.local_port && peer_port == want.remote_port && peer_ip == want.remote_ip &&
           local_ip == want.local_ip;
}

}  // namespace

// Calls `visit(fd)` for every socket descriptor of this process until it returns true.
template <typename Visit>
static void for_each_socket_fd(Visit visit) {
    DIR* dir = opendir("/proc/self/fd");
    if (dir == nullptr) return;
    while (const dirent* entry = readdir(dir)) {
        char* end = nullptr;
        const long fd = std::strtol(entry->d_name, &end, 10);
        if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
        struct stat st {};
        if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
        if (visit(static_cast<int>(fd))) break;
    }
    closedir(dir);
}

int find_connection_fd(const ConnectionAddress& address) {
    if (address.local_port <= 0 || address.remote_port <= 0) return -1;
    int found = -1;
    for_each_socket_fd([&](int fd) {
        if (!socket_matches(fd, address)) return false;
        found = fd;
        return true;
    });
    return found;
}

int shutdown_connections_on_port(int local_port) {
    int count = 0;
    for_each_socket_fd([&](int fd) {
        sockaddr_storage local{};
        sockaddr_storage peer{};
        socklen_t local_len = sizeof(local);
        socklen_t peer_len = sizeof(peer);
        std::string ip;
        int port = -1;
        if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return false;
        if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) return false;  // not connected
        if (endpoint_of(local, ip, port) && port == local_port && ::shutdown(fd, SHUT_RDWR) == 0) ++count;
        return false;
    });
    return count;
}

ConnectionWatcher::ConnectionWatcher() {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (epoll_fd_ < 0 || wake_fd_ < 0) fail("cannot create the connection watcher (epoll/eventfd failed)");
    epoll_event wake{};
    wake.events = EPOLLIN;
    wake.data.u64 = 0;  // id 0 = the wake fd
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &wake);
    thread_ = std::thread([this] { run(); });
}

ConnectionWatcher::~ConnectionWatcher() {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
    thread_.join();
    close(wake_fd_);
    close(epoll_fd_);
}

int ConnectionWatcher::watch(int fd, std::function<void()> on_disconnect) {
    if (fd < 0) return -1;
    std::lock_guard lock(mutex_);
    const int id = next_id_++;
    epoll_event event{};
    // No EPOLLIN: a pipelined request would keep the fd readable. FIN shows up as EPOLLRDHUP, RST as EPOLLHUP/ERR.
    event.events = EPOLLRDHUP | EPOLLHUP | EPOLLERR;
    event.data.u64 = static_cast<uint64_t>(id);
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) return -1;
    callbacks_.emplace(id, std::make_pair(fd, std::move(on_disconnect)));
    return id;
}

void ConnectionWatcher::unwatch(int id) {
    if (id <= 0) return;
    std::lock_guard lock(mutex_);  // waits for a running callback
    auto it = callbacks_.find(id);
    if (it == callbacks_.end()) return;
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second.first, nullptr);
    callbacks_.erase(it);
}

void ConnectionWatcher::run() {
    std::array<epoll_event, 64> events{};
    for (;;) {
        const int count = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), -1);
        if (count < 0) continue;  // EINTR
        for (int i = 0; i < count; ++i) {
            const auto id = static_cast<int>(events[static_cast<size_t>(i)].data.u64);
            if (id == 0) return;
            std::lock_guard lock(mutex_);
            auto it = callbacks_.find(id);
            if (it == callbacks_.end()) continue;
            // One-shot: remove before calling, so a level-triggered HUP does not fire again.
            epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second.first, nullptr);
            std::function<void()> callback = std::move(it->second.second);
            callbacks_.erase(it);
            callback();
        }
    }
}

WatchedConnection::WatchedConnection(ConnectionWatcher* watcher, const ConnectionAddress& address,
                                     std::function<void()> on_disconnect)
    : watcher_(watcher) {
    if (watcher_ == nullptr) return;
    id_ = watcher_->watch(address.fd >= 0 ? address.fd : find_connection_fd(address), std::move(on_disconnect));
}

WatchedConnection::~WatchedConnection() {
    if (watcher_ != nullptr) watcher_->unwatch(id_);
}

}  // namespace dsv4::server
