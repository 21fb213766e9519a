#include "backend/cpu/cpu_numerics.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/quant_sim.h"

namespace dsv4::cpu {

void round_bf16(float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] = round_to_bf16(x[i]);
}

void fp8_sim(float* x, int64_t n, int block, Fp8Quant quant) {
    dsv4::fp8_sim(x, n, block, quant);
}

void act_quant_sim(float* x, int64_t n, Fp8Quant quant) {
    round_bf16(x, n);
    dsv4::act_quant_fp8_sim(x, n, 128, quant);
}

void fp4_sim(float* x, int64_t n, int block) {
    dsv4::fp4_sim(x, n, block);
}

void hadamard(float* x, int64_t n) {
    dsv4::hadamard_inplace(x, static_cast<int>(n));
}

}  // namespace dsv4::cpu
