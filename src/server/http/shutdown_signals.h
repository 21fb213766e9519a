// SIGTERM / SIGINT handling for `dsv4 serve`. The signals are blocked in every thread (construct this before any
// other thread starts: threads inherit the mask) and received by sigwait() on one dedicated thread, which calls
// the handler with the signal and how many have arrived so far. SIGPIPE is ignored (a client that vanishes must
// never kill the server).
#pragma once

#include <functional>
#include <thread>

namespace dsv4::server {

class ShutdownSignals {
  public:
    using Handler = std::function<void(int signal_number, int count)>;

    explicit ShutdownSignals(Handler handler);
    ~ShutdownSignals();  // stops the waiting thread
    ShutdownSignals(const ShutdownSignals&) = delete;
    ShutdownSignals& operator=(const ShutdownSignals&) = delete;

  private:
    Handler handler_;
    std::thread thread_;
};

}  // namespace dsv4::server
