// The process-wide programmatic-launch switch (kernels.h, pdl.cuh).
#include <atomic>

#include "backend/cuda/kernels.h"

namespace dsv4::cuda {
namespace {

std::atomic<bool> g_programmatic_launch{true};

}  // namespace

void set_programmatic_launch(bool enabled) {
    g_programmatic_launch.store(enabled, std::memory_order_relaxed);
}

bool programmatic_launch() {
    return g_programmatic_launch.load(std::memory_order_relaxed);
}

}  // namespace dsv4::cuda
