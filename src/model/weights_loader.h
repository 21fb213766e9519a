// Turns the validated tensor set (weight_binding.h: original names, HF renames resolved) into the per-layer weight
// structs, uploading each tensor to the backend in its checkpoint form.
#pragma once

#include "backend/backend.h"
#include "backend/weights.h"
#include "config/model_config.h"
#include "model/weight_binding.h"

namespace dsv4 {

ModelWeights load_model_weights(const ModelConfig& config, const BoundWeights& bound, Backend& backend);

}  // namespace dsv4
