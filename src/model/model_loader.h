// Opens a model directory (config.json + safetensors shards) on a backend: parses the config, maps and validates the
// checkpoint, allocates the backend's sequence state and binds the weights.
#pragma once

#include <filesystem>
#include <memory>

#include "backend/backend.h"
#include "loader/checkpoint.h"
#include "model/deepseek_v4.h"

namespace dsv4 {

struct LoadedModel {
    Checkpoint checkpoint;  // must outlive the model: CPU weights point into its mapping
    std::unique_ptr<DeepseekV4> model;
};

std::unique_ptr<LoadedModel> load_model(const std::filesystem::path& dir, Backend& backend, const StateConfig& state);

}  // namespace dsv4
