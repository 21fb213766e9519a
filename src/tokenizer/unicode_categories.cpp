#include "tokenizer/unicode_categories.h"

#include <oniguruma.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "tokenizer/pretokenizer_regex.h"

namespace dsv4::tokenizer {
namespace {

constexpr char32_t kCodePointLimit = 0x110000;

// Sets `bit` for every code point Oniguruma lists for `ctype`; its range list is {count, from0, to0, ...}.
void mark_ctype(std::vector<uint8_t>& table, OnigCtype ctype, uint8_t bit) {
    OnigCodePoint single_byte_out = 0;
    const OnigCodePoint* ranges = nullptr;
    const int rc = ONIG_ENCODING_UTF8->get_ctype_code_range(ctype, &single_byte_out, &ranges);
    if (rc != 0 || ranges == nullptr) fail("tokenizer: Oniguruma has no code ranges for ctype {}", ctype);
    const OnigCodePoint count = ranges[0];
    for (OnigCodePoint i = 0; i < count; ++i) {
        const OnigCodePoint from = ranges[1 + 2 * i];
        const OnigCodePoint to = ranges[2 + 2 * i];
        for (OnigCodePoint c = from; c <= to && c < kCodePointLimit; ++c) table[c] |= bit;
    }
}

OnigCtype property_ctype(const char* name) {
    auto* begin = reinterpret_cast<OnigUChar*>(const_cast<char*>(name));
    const int ctype = ONIGENC_PROPERTY_NAME_TO_CTYPE(ONIG_ENCODING_UTF8, begin, begin + std::strlen(name));
    if (ctype < 0) fail("tokenizer: Oniguruma does not know the Unicode property {}", name);
    return static_cast<OnigCtype>(ctype);
}

std::vector<uint8_t> build_table() {
    ensure_oniguruma_initialized();
    std::vector<uint8_t> table(kCodePointLimit, 0);
    mark_ctype(table, property_ctype("L"), kClassLetter);
    mark_ctype(table, property_ctype("M"), kClassMark);
    mark_ctype(table, property_ctype("N"), kClassNumber);
    mark_ctype(table, property_ctype("P"), kClassPunctuation);
    mark_ctype(table, property_ctype("S"), kClassSymbol);
    mark_ctype(table, ONIGENC_CTYPE_SPACE, kClassSpace);
    mark_ctype(table, ONIGENC_CTYPE_WORD, kClassWord);
    return table;
}

}  // namespace

const uint8_t* char_class_table() {
    static const std::vector<uint8_t> table = build_table();
    return table.data();
}

}  // namespace dsv4::tokenizer
