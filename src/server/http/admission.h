// AdmissionGate: the server-side half of overload handling. The engine caps its own queue (429 from submit); this
// gate caps generation requests in flight on the HTTP side, because each one holds a worker thread while it waits,
// and it knows whether the server is loading (503), serving, or draining for shutdown (503). Every refusal carries
// Retry-After.
#pragma once

#include <atomic>
#include <string>

namespace dsv4::server {

enum class ServerPhase : int { kLoading, kReady, kDraining };

class AdmissionGate {
  public:
    explicit AdmissionGate(int max_in_flight);

    // Held for the duration of one admitted request.
    class Ticket {
      public:
        Ticket() = default;
        explicit Ticket(AdmissionGate* gate) : gate_(gate) {}
        Ticket(Ticket&& other) noexcept : gate_(other.gate_) { other.gate_ = nullptr; }
        Ticket& operator=(Ticket&& other) noexcept;
        Ticket(const Ticket&) = delete;
        Ticket& operator=(const Ticket&) = delete;
        ~Ticket() { release(); }
        void release();

      private:
        AdmissionGate* gate_ = nullptr;
    };

    // Admits a generation request or throws ApiError: 503 loading / draining, 429 when max_in_flight are running.
    Ticket enter();
    // cpp-httplib writes a handler's response after the handler has returned, on the same worker thread. A ticket
    // handed over here stays in flight until release_after_write() (called by the access logger, which cpp-httplib
    // runs after the write), so a drain never closes a connection while its response is still being written. The
    // next request on the thread releases a ticket whose write failed before the logger could run.
    static void hold_until_written(Ticket ticket);
    static void release_after_write();
    // Throws the 503 for loading / draining (for routes that need the model but hold no ticket).
    void require_ready() const;

    void set_phase(ServerPhase phase) { phase_.store(static_cast<int>(phase)); }
    ServerPhase phase() const { return static_cast<ServerPhase>(phase_.load()); }
    int in_flight() const { return in_flight_.load(); }
    int max_in_flight() const { return max_in_flight_; }

  private:
    int max_in_flight_;
    std::atomic<int> in_flight_{0};
    std::atomic<int> phase_{static_cast<int>(ServerPhase::kLoading)};
};

}  // namespace dsv4::server
