// DeadlineSocketStream: the httplib::Stream of one accepted connection, with a deadline for reading each request.
// cpp-httplib's own stream only bounds each read (read timeout per recv), so a client that sends a byte now and then
// holds a worker thread forever, and with it one of the --http-threads. Here every read fails once the current
// request's deadline has passed: its request line, headers and body must all arrive within --request-read-timeout.
// Writes wait at most the write timeout for the socket to take bytes (a client that stops reading is dropped).
#pragma once

#include <httplib.h>

#include <chrono>
#include <string>
#include <vector>

namespace dsv4::server {

class DeadlineSocketStream final : public httplib::Stream {
  public:
    using Clock = std::chrono::steady_clock;

    DeadlineSocketStream(int fd, std::chrono::milliseconds write_timeout);

    // Starts reading a new request: reads fail once `timeout` has passed.
    void start_request(std::chrono::milliseconds timeout);
    double read_timeout() const { return std::chrono::duration<double>(timeout_).count(); }  // seconds
    bool timed_out() const { return timed_out_; }
    // Bytes of a following (pipelined) request already read from the socket.
    bool has_buffered_input() const { return buffer_begin_ < buffer_end_; }
    size_t request_bytes_read() const { return request_bytes_read_; }
    size_t request_bytes_written() const { return request_bytes_written_; }

    bool is_readable() const override;
    bool is_writable() const override;
    ssize_t read(char* ptr, size_t size) override;
    ssize_t write(const char* ptr, size_t size) override;
    void get_remote_ip_and_port(std::string& ip, int& port) const override;
    void get_local_ip_and_port(std::string& ip, int& port) const override;
    socket_t socket() const override { return fd_; }

  private:
    // Waits until the socket is readable before the deadline; false (and timed_out_) when it passes.
    bool wait_readable() const;

    int fd_;
    std::chrono::milliseconds write_timeout_;
    std::chrono::milliseconds timeout_{0};
    Clock::time_point deadline_ = Clock::time_point::max();
    mutable bool timed_out_ = false;
    std::vector<char> buffer_;
    size_t buffer_begin_ = 0;
    size_t buffer_end_ = 0;
    size_t request_bytes_read_ = 0;
    size_t request_bytes_written_ = 0;
};

// The numeric address and port of a socket's local or peer end ("" and -1 when unknown).
void socket_endpoint(int fd, bool peer, std::string& ip, int& port);

}  // namespace dsv4::server
