#include "server/http/socket_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace dsv4::server {
namespace {

constexpr size_t kReadBufferBytes = 4096;

// poll() for `events` for up to `timeout` (EINTR restarts with the time left). > 0 ready, 0 timeout, < 0 error.
int poll_for(int fd, short events, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        pollfd p{fd, events, 0};
        const int ready = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
        if (ready >= 0 || errno != EINTR) return ready;
    }
}

}  // namespace

void socket_endpoint(int fd, bool peer, std::string& ip, int& port) {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    ip.clear();
    port = -1;
    const int status = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length)
                            : ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
    if (status != 0) return;
    std::array<char, INET6_ADDRSTRLEN> text{};
    if (address.ss_family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
        if (inet_ntop(AF_INET, &in->sin_addr, text.data(), text.size()) == nullptr) return;
        port = ntohs(in->sin_port);
    } else if (address.ss_family == AF_INET6) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
        if (inet_ntop(AF_INET6, &in6->sin6_addr, text.data(), text.size()) == nullptr) return;
        port = ntohs(in6->sin6_port);
    } else {
        return;
    }
    ip = text.data();
}

DeadlineSocketStream::DeadlineSocketStream(int fd, std::chrono::milliseconds write_timeout)
    : fd_(fd), write_timeout_(write_timeout), buffer_(kReadBufferBytes) {}

void DeadlineSocketStream::start_request(std::chrono::milliseconds timeout) {
    timeout_ = timeout;
    deadline_ = Clock::now() + timeout;
    timed_out_ = false;
    request_bytes_read_ = 0;
    request_bytes_written_ = 0;
}

bool DeadlineSocketStream::wait_readable() const {
    for (;;) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - Clock::now());
        if (left.count() <= 0) {
            timed_out_ = true;
            return false;
        }
        // In slices, so that "no deadline" (time_point::max) never overflows a poll timeout.
        const int ready = poll_for(fd_, POLLIN, std::min<std::chrono::milliseconds>(left, std::chrono::minutes(1)));
        if (ready > 0) return true;
        if (ready < 0) return false;
    }
}

bool DeadlineSocketStream::is_readable() const {
    return has_buffered_input() || wait_readable();
}

bool DeadlineSocketStream::is_writable() const {
    if (poll_for(fd_, POLLOUT, write_timeout_) <= 0) return false;
    // Still connected? A readable socket either has data (alive) or is at end of stream (the peer closed).
    if (poll_for(fd_, POLLIN, std::chrono::milliseconds(0)) <= 0) return true;
    char byte = 0;
    return ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

ssize_t DeadlineSocketStream::read(char* ptr, size_t size) {
    if (size == 0) return 0;
    if (!has_buffered_input()) {
        if (!wait_readable()) return -1;
        ssize_t n = 0;
        // Large reads go straight to the caller; small ones (the line reader asks for 1 byte) through the buffer.
        char* target = size >= buffer_.size() ? ptr : buffer_.data();
        const size_t capacity = size >= buffer_.size() ? size : buffer_.size();
        do {
            n = ::recv(fd_, target, capacity, 0);
        } while (n < 0 && errno == EINTR);
        if (n <= 0) return n;
        if (target == ptr) {
            request_bytes_read_ += static_cast<size_t>(n);
            return n;
        }
        buffer_begin_ = 0;
        buffer_end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, buffer_end_ - buffer_begin_);
    std::memcpy(ptr, buffer_.data() + buffer_begin_, n);
    buffer_begin_ += n;
    request_bytes_read_ += n;
    return static_cast<ssize_t>(n);
}

ssize_t DeadlineSocketStream::write(const char* ptr, size_t size) {
    if (poll_for(fd_, POLLOUT, write_timeout_) <= 0) return -1;
    ssize_t n = 0;
    do {
        n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n > 0) request_bytes_written_ += static_cast<size_t>(n);
    return n;
}

void DeadlineSocketStream::get_remote_ip_and_port(std::string& ip, int& port) const {
    socket_endpoint(fd_, true, ip, port);
}

void DeadlineSocketStream::get_local_ip_and_port(std::string& ip, int& port) const {
    socket_endpoint(fd_, false, ip, port);
}

}  // namespace dsv4::server
