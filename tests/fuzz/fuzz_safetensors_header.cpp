// Fuzzes the safetensors validation path with whole file images (u64 length | header JSON | data): any input must
// either give a table whose invariants hold or a dsv4::Error; crashes, hangs, leaks and other exceptions are bugs.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "core/error.h"
#include "loader/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::span<const uint8_t> image(data, size);
    try {
        dsv4::SafetensorsImage parsed = dsv4::parse_safetensors_image(image, "fuzz.safetensors");
        // What the validator promises its callers: every tensor lies inside the data region, ranges are disjoint,
        // and the table is sorted by name so find() works.
        const uint64_t data_size = size - parsed.data_start;
        uint64_t previous_end = 0;
        const dsv4::SafetensorsTensorInfo* previous = nullptr;
        for (const auto& t : parsed.header.tensors) {
            if (t.offset > data_size || t.nbytes > data_size - t.offset) std::abort();
            if (previous != nullptr && !(previous->name < t.name)) std::abort();
            if (parsed.header.find(t.name) != &t) std::abort();
            previous_end = std::max(previous_end, t.offset + t.nbytes);
            previous = &t;
        }
        if (previous_end != parsed.header.data_bytes_used) std::abort();
    } catch (const dsv4::Error&) {
        // Rejected input: the expected outcome for most fuzz inputs.
    }
    return 0;
}
