#include "core/dot_f64.h"

#include "core/error.h"

namespace dsv4 {

double dot_f64(const float* a, const float* b, int64_t k) {
    DSV4_CHECK(k >= 0, "dot_f64: negative length {}", k);
    // Four independent sums keep the adds in flight; the order does not change the rounded result (header).
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int64_t i = 0;
    for (; i + 4 <= k; i += 4) {
        s0 += static_cast<double>(a[i]) * b[i];
        s1 += static_cast<double>(a[i + 1]) * b[i + 1];
        s2 += static_cast<double>(a[i + 2]) * b[i + 2];
        s3 += static_cast<double>(a[i + 3]) * b[i + 3];
    }
    for (; i < k; ++i) s0 += static_cast<double>(a[i]) * b[i];
    return (s0 + s1) + (s2 + s3);
}

}  // namespace dsv4
