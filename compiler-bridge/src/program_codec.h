// The CBOR encoding of CompilerOptions shared by the program file (its meta block) and the
// compile cache (its key), so both read the options the same way.
#pragma once

#include <cstdint>
#include <vector>

#include "furiosa/compiler/compiler.h"

namespace furiosa::compiler::detail {

/// Canonical CBOR bytes of `options` (deterministic: equal options give equal bytes).
std::vector<std::uint8_t> options_to_cbor(const CompilerOptions& options);

}  // namespace furiosa::compiler::detail
