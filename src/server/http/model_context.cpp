#include "server/http/model_context.h"

#include <random>

namespace dsv4::server {

std::string random_hex(size_t chars) {
    static constexpr char kHex[] = "0123456789abcdef";
    thread_local std::mt19937_64 generator{std::random_device{}()};
    std::string out;
    out.reserve(chars);
    uint64_t bits = 0;
    for (size_t i = 0; i < chars; ++i) {
        if (i % 16 == 0) bits = generator();
        out += kHex[bits & 0xF];
        bits >>= 4;
    }
    return out;
}

ServerState::ServerState(ServerConfig config) : config_(std::move(config)), gate_(config_.max_in_flight) {}

std::shared_ptr<const ModelContext> ServerState::model() const {
    std::lock_guard lock(model_mutex_);
    return model_;
}

void ServerState::set_model(std::shared_ptr<const ModelContext> model) {
    {
        std::lock_guard lock(model_mutex_);
        model_ = std::move(model);
    }
    gate_.set_phase(ServerPhase::kReady);
}

}  // namespace dsv4::server
