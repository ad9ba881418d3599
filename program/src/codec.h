// Private to program/: the pieces the program-file writer and reader share.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "furiosa/program/compiled_model.h"
#include "furiosa/program/compiler_options.h"

namespace furiosa::program::detail {

using json = nlohmann::json;
using Attribute = host::Attribute;
using Node = host::OpNode;

/// The first 8 bytes of every program file (program_file.h).
inline constexpr std::array<char, 8> kMagic = {'\x89', 'F', 'W', 'E', 'N', 'F', '\r', '\n'};
/// Largest element count and dim accepted from a file (guards size arithmetic against overflow).
inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 40;

/// The CBOR document of a compiled model (the body) and of options (the meta block's "options").
/// Throws Error(InvalidArgument) for a model with a null program.
json encode_model(const CompiledModel& model);
json encode_options(const CompilerOptions& options);

/// Decoders of the same documents, validating everything (program_file.h deserialize_program):
/// throw Error(ModelLoadFailed) "<source>: invalid content: <path>: <problem>".
CompiledModel decode_model(const json& body, const std::string& source);
CompilerOptions decode_options(const json& options, const std::string& source);

/// Appends `v` as `bytes` little-endian bytes; reads them back from `in` at `offset`.
void put_le(std::string& out, std::uint64_t v, int bytes);
std::uint64_t get_le(std::string_view in, std::size_t offset, int bytes);
/// zlib crc32 of `bytes` (any length).
std::uint32_t crc_of(std::string_view bytes);

}  // namespace furiosa::program::detail
