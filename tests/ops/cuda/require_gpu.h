// GPU test programs skip, saying why, where no CUDA device is usable (CI's machines): DSV4_REQUIRE_GPU() at the top of
// a test. Shared by the op, golden and distributed GPU suites.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "backend/cuda/cuda_factory.h"

#define DSV4_REQUIRE_GPU()                                                                              \
    do {                                                                                                \
        std::string why_;                                                                               \
        if (!::dsv4::cuda_available(&why_)) GTEST_SKIP() << "skipped: no CUDA device (" << why_ << ")"; \
    } while (0)
