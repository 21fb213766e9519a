#include "server/http/admission.h"

#include <fmt/format.h>

#include "server/http/api_error.h"

namespace dsv4::server {

namespace {
thread_local AdmissionGate::Ticket ticket_of_response_being_written;
}  // namespace

AdmissionGate::AdmissionGate(int max_in_flight) : max_in_flight_(max_in_flight) {}

void AdmissionGate::hold_until_written(Ticket ticket) {
    ticket_of_response_being_written = std::move(ticket);
}

void AdmissionGate::release_after_write() {
    ticket_of_response_being_written.release();
}

AdmissionGate::Ticket& AdmissionGate::Ticket::operator=(Ticket&& other) noexcept {
    if (this != &other) {
        release();
        gate_ = other.gate_;
        other.gate_ = nullptr;
    }
    return *this;
}

void AdmissionGate::Ticket::release() {
    if (gate_ != nullptr) gate_->in_flight_.fetch_sub(1);
    gate_ = nullptr;
}

void AdmissionGate::require_ready() const {
    switch (phase()) {
        case ServerPhase::kLoading:
            throw unavailable_error("The model is still loading", "model_loading", 5);
        case ServerPhase::kDraining:
            throw unavailable_error("The server is shutting down", "draining", 5);
        case ServerPhase::kReady:
            break;
    }
}

AdmissionGate::Ticket AdmissionGate::enter() {
    require_ready();
    if (in_flight_.fetch_add(1) >= max_in_flight_) {
        in_flight_.fetch_sub(1);
        throw overloaded_error(
            fmt::format("The server is busy: {} requests are in flight (the limit); retry later", max_in_flight_), 1);
    }
    return Ticket(this);
}

}  // namespace dsv4::server
