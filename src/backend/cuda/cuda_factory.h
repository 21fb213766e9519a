// Entry points of the CUDA backend for host code that is compiled without nvcc (CLI, engine, tests).
// Available when the build has DSV4_WITH_CUDA (cmake -DDSV4_CUDA=ON); guard calls with #ifdef DSV4_WITH_CUDA.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace dsv4 {

std::unique_ptr<Backend> make_cuda_backend(Numerics numerics, int device = 0);
// Whether a CUDA device can be used here; when not, `why` (if given) says why (no driver, no device, ...).
bool cuda_available(std::string* why = nullptr);

}  // namespace dsv4
