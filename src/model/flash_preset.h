// Built-in model configurations for synthetic models: the real DeepSeek-V4-Flash config.json (model-spec 1.1),
// optionally truncated in depth or in routed experts, and the 0731 revision (DSpark keys).
#pragma once

#include <string>

#include "config/model_config.h"

namespace dsv4 {

// preset: "flash", "flash-0731", "flash-160" (160 experts, the pruned 0731 derivative's count). layers / experts
// override the depth (keeping the real schedule's prefix) and the routed-expert count when > 0.
ModelConfig flash_preset_config(const std::string& preset, int layers = 0, int experts = 0);

}  // namespace dsv4
