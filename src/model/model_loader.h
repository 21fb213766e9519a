// Opens a model directory (config.json + safetensors shards) on a backend: parses the config, maps and validates the
// checkpoint, allocates the backend's sequence state and binds the weights.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>

#include "backend/backend.h"
#include "loader/checkpoint.h"
#include "model/deepseek_v4.h"

namespace dsv4 {

struct LoadedModel {
    std::optional<Checkpoint> checkpoint;  // must outlive the model: CPU weights point into its mapping
    std::unique_ptr<DeepseekV4> model;
};

std::unique_ptr<LoadedModel> load_model(const std::filesystem::path& dir, Backend& backend, const StateConfig& state);

// A model with random weights made directly on the backend (model/synthetic_weights.h): no checkpoint.
std::unique_ptr<LoadedModel> make_synthetic_model(const ModelConfig& config, Backend& backend, const StateConfig& state,
                                                  uint64_t seed);

}  // namespace dsv4
