#include "core/fp8_dialect.h"

#include "core/error.h"
#include "core/float_formats.h"

namespace dsv4 {

std::string_view fp8_dialect_name(Fp8Dialect dialect) {
    return dialect == Fp8Dialect::kFnuz ? "fnuz" : "ocp";
}

Fp8Dialect parse_fp8_dialect(std::string_view name) {
    if (name == "ocp") return Fp8Dialect::kOcp;
    if (name == "fnuz") return Fp8Dialect::kFnuz;
    fail("unknown FP8 dialect '{}' (ocp or fnuz)", name);
}

std::string_view fp8_dialect_label(Fp8Dialect dialect) {
    return dialect == Fp8Dialect::kFnuz ? "FNUZ e4m3 (e4m3fnuz)" : "OCP e4m3 (e4m3fn)";
}

Fp8Quant activation_fp8_quant(Fp8Dialect dialect) {
    return {dialect, dialect == Fp8Dialect::kFnuz ? kE4M3FnuzMax : kE4M3Max};
}

Fp8Quant kv_record_fp8_quant(Fp8Dialect dialect) {
    return activation_fp8_quant(dialect);
}

Fp8Quant index_key_fp8_quant(Fp8Dialect dialect) {
    return {dialect, dialect == Fp8Dialect::kFnuz ? kFnuzIndexKeyMax : kE4M3Max};
}

Fp8Sites fp8_sites(Fp8Dialect dialect) {
    return {dialect, activation_fp8_quant(dialect), kv_record_fp8_quant(dialect), index_key_fp8_quant(dialect)};
}

}  // namespace dsv4
