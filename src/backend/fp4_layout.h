// FP4 e2m1 weight words in the CUDA backend's sign-split layout, and the word's expansion to e4m3 bytes.
//
// The checkpoint packs e2m1 codes two to a byte, low nibble first (backend/weights.h kFp4Row), so a little-endian
// 32-bit word holds the codes c0..c7 of 8 consecutive columns, c_i in bits 4i..4i+3 (bit 4i+3 its sign, bits
// 4i..4i+2 its magnitude index). The sign-split word keeps every magnitude where it is and moves the signs:
//
//   bits 4i .. 4i+2   magnitude of c_i       i = 0..7 (unchanged)
//   bit  8i + 7       sign of c_i            i = 0..3 (bits 7, 15, 23, 31)
//   bit  8i + 3       sign of c_{4+i}        i = 0..3 (bits 3, 11, 19, 27)
//
// Why: a kernel turns a word into 8 e4m3 bytes through a byte table of the 8 magnitudes (the per-32 scale folded
// in): two byte permutes whose selectors are the magnitude nibbles. In this layout the signs of codes 0..3 already sit
// at bit 7 of their bytes and those of codes 4..7 four bits below it, so the expansion is 7 SASS instructions a word
// (expand_fp4_word) where the checkpoint's nibbles took 14 (two more permutes, shifts and masks to move the signs).
// The W4A8 expert kernels were instruction-bound, the expansion 43% of their instructions (ncu, H100).
//
// Where: the CUDA backend permutes FP4 codes once as they arrive (upload_linear on the device, upload_host_linear's
// pinned copies on the host, synthetic weights as they are made) and every CUDA kernel reads this layout; copies of
// permuted bytes (the expert cache's fetches and write-backs) move them as they are. WeightRef::fp4_layout says which
// layout a weight's bytes are in: the CPU backend reads sign-split rows too (an expert tier's host experts, which it
// computes host pairs over) by converting them back row by row. A weight's rows must be whole words (cols % 8 == 0).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define DSV4_FP4_HD __host__ __device__ __forceinline__
#else
#define DSV4_FP4_HD inline
#endif

namespace dsv4 {

// How kFp4Row codes lie in memory.
enum class Fp4Layout : uint8_t {
    kCheckpoint,  // as the checkpoint ships them (the CPU backend's own weights)
    kSignSplit,   // this header's layout (every FP4 weight of the CUDA backend)
};

constexpr uint32_t kFp4MagnitudeBits = 0x77777777u;  // bits 0..2 of every nibble, in both layouts
constexpr uint32_t kFp4ByteSignBits = 0x80808080u;   // bit 7 of every byte

// The bit of a sign-split word that holds the sign of code i (0..7).
DSV4_FP4_HD constexpr int fp4_sign_bit(int i) {
    return i < 4 ? 8 * i + 7 : 8 * (i - 4) + 3;
}

DSV4_FP4_HD constexpr uint32_t fp4_word_from_checkpoint(uint32_t w) {
    uint32_t out = w & kFp4MagnitudeBits;
    for (int i = 0; i < 8; ++i) out |= ((w >> (4 * i + 3)) & 1u) << fp4_sign_bit(i);
    return out;
}

DSV4_FP4_HD constexpr uint32_t fp4_word_to_checkpoint(uint32_t w) {
    uint32_t out = w & kFp4MagnitudeBits;
    for (int i = 0; i < 8; ++i) out |= ((w >> fp4_sign_bit(i)) & 1u) << (4 * i + 3);
    return out;
}

// The checkpoint's 4-bit code (sign in bit 3) of column i (0..7) of a sign-split word.
DSV4_FP4_HD constexpr uint32_t fp4_code_at(uint32_t word, int i) {
    return ((word >> (4 * i)) & 7u) | (((word >> fp4_sign_bit(i)) & 1u) << 3);
}

// PTX prmt.b32 in its default mode, written out for the host: byte n of the result is byte (s >> 4n) & 7 of the
// eight bytes {a, b} (a's bytes first), or that byte's top bit copied into all eight bits when bit 3 of the selector
// nibble is set. Only the low 16 bits of s are read. On the device the instruction itself, not __byte_perm: that
// intrinsic masks each selector nibble to 3 bits first, an AND a permute that expand_fp4_word's selectors (already
// masked) do not need.
DSV4_FP4_HD uint32_t prmt_b32(uint32_t a, uint32_t b, uint32_t s) {
#if defined(__CUDA_ARCH__)
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(s));
    return d;
#else
    const uint64_t bytes = static_cast<uint64_t>(b) << 32 | a;
    uint32_t out = 0;
    for (int n = 0; n < 4; ++n) {
        const uint32_t sel = (s >> (4 * n)) & 0xfu;
        uint32_t byte = static_cast<uint32_t>(bytes >> (8 * (sel & 7u))) & 0xffu;
        if ((sel & 8u) != 0) byte = (byte & 0x80u) != 0 ? 0xffu : 0u;
        out |= byte << (8 * n);
    }
    return out;
#endif
}

// A word's 8 codes as e4m3 bytes, codes 0..3 in `lo` and 4..7 in `hi` (code i at byte i % 4).
struct Fp4Bytes {
    uint32_t lo, hi;
};

// Expands a sign-split word through a magnitude table: byte m of {table_lo, table_hi} is the (positive) e4m3 code of
// magnitude index m (0, 0.5, 1, 1.5, 2, 3, 4, 6, times the group's power of two), and each code's sign becomes bit 7
// of its byte. Seven instructions: the magnitude mask, two byte permutes, one shift of the mask for codes 4..7, one
// of the word for their signs, and two AND-ORs (LOP3).
DSV4_FP4_HD Fp4Bytes expand_fp4_word(uint32_t w, uint32_t table_lo, uint32_t table_hi) {
    const uint32_t magnitudes = w & kFp4MagnitudeBits;  // selector nibbles with bit 3 clear: plain byte picks
    return {prmt_b32(table_lo, table_hi, magnitudes) | (w & kFp4ByteSignBits),
            prmt_b32(table_lo, table_hi, magnitudes >> 16) | ((w << 4) & kFp4ByteSignBits)};
}

// Magnitude tables of expand_fp4_word: the e4m3 codes of 0, 0.5, 1, 1.5 (lo) and 2, 3, 4, 6 (hi), e4m3 0x00 0x30
// 0x38 0x3C 0x40 0x44 0x48 0x4C (the GEMVs' decode; the expert GEMMs build one a power of two, the per-32 scale) ...
constexpr uint32_t kE2m1E4m3Lo = 0x3C383000u;
constexpr uint32_t kE2m1E4m3Hi = 0x4C484440u;
// ... and of the same magnitudes times 2^-6, exactly: each magnitude index's bits moved to bits 2..4 (0x00 0x04 ..
// 0x1C), which is the same number 6 binades down for every code (0.5 becomes the e4m3 subnormal 2^-7, 0 stays 0).
constexpr uint32_t kE2m1E4m3Down6Lo = 0x0C080400u;
constexpr uint32_t kE2m1E4m3Down6Hi = 0x1C181410u;

// Host loops over `words` 4-byte words (any alignment; src and dst may be the same buffer), each word mapped by `map`.
template <uint32_t (*map)(uint32_t)>
inline void fp4_map_words(const void* src, void* dst, int64_t words) {
    for (int64_t i = 0; i < words; ++i) {
        uint32_t w;
        std::memcpy(&w, static_cast<const uint8_t*>(src) + 4 * i, 4);
        w = map(w);
        std::memcpy(static_cast<uint8_t*>(dst) + 4 * i, &w, 4);
    }
}
inline void fp4_words_from_checkpoint(const void* src, void* dst, int64_t words) {
    fp4_map_words<fp4_word_from_checkpoint>(src, dst, words);
}
inline void fp4_words_to_checkpoint(const void* src, void* dst, int64_t words) {
    fp4_map_words<fp4_word_to_checkpoint>(src, dst, words);
}

}  // namespace dsv4
