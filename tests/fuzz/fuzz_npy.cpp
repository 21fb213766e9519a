// libFuzzer: parse_npy on arbitrary bytes must either return a consistent array or throw dsv4::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "core/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const dsv4::NpyArray array = dsv4::parse_npy(data, size, "fuzz-input");
        const size_t expected = dsv4::npy_item_size(array.dtype) * static_cast<size_t>(array.numel());
        if (array.data.size() != expected) std::abort();
    } catch (const dsv4::Error&) {
    }
    return 0;
}
