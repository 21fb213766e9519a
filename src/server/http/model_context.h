// ModelContext: what the routes need once the model is loaded (engine, tokenizer, chat encoder, limits), and
// ServerState: everything the routes share. Routes read the model through ServerState::model(), which is null until
// loading finished.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "dsv4/engine.h"
#include "server/generation/structured_outputs.h"
#include "server/http/admission.h"
#include "server/http/connection_watch.h"
#include "server/http/metrics.h"
#include "server/http/server_config.h"
#include "tokenizer/chat_encoding.h"
#include "tokenizer/tokenizer.h"

namespace dsv4::server {

struct ModelContext {
    Engine* engine = nullptr;  // outlives every worker thread of the server
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
    ChatEncoder encoder{ChatTemplateRevision::kV4};
    ModelInfo info;
    std::string served_name;       // what requests must name in "model"
    std::string model_dir;         // reported by /v1/models as "root"
    int64_t created = 0;           // load time (Unix seconds), reported by /v1/models
    int32_t think_end_token = -1;  // </think>, for reasoning token counts
    int32_t bos_token = 0;
    // Compiled grammars for structured outputs (built on the first structured request).
    std::shared_ptr<StructuredOutputs> structured = std::make_shared<StructuredOutputs>();
};

// Random request / tool-call ids: "chatcmpl-<32 hex>", "call_<16 hex>_".
std::string random_hex(size_t chars);

class ServerState {
  public:
    explicit ServerState(ServerConfig config);

    const ServerConfig& config() const { return config_; }
    AdmissionGate& gate() { return gate_; }
    ServerMetrics& metrics() { return metrics_; }
    ConnectionWatcher& watcher() { return watcher_; }

    std::shared_ptr<const ModelContext> model() const;
    // Publishes the loaded model and opens the gate (phase kReady).
    void set_model(std::shared_ptr<const ModelContext> model);

  private:
    ServerConfig config_;
    AdmissionGate gate_;
    ServerMetrics metrics_;
    ConnectionWatcher watcher_;
    mutable std::mutex model_mutex_;
    std::shared_ptr<const ModelContext> model_;
};

}  // namespace dsv4::server
