// The model repository of furiosa-serve: a folder MODEL_NAME/VERSION/model.{onnx,tflite,enf} with
// an optional MODEL_NAME/config.json, the layout of Triton's and KServe's model repositories.
#pragma once

#include <cstddef>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace furiosa::server {

/// Dynamic batching of one model (config.json "dynamic_batching"): requests whose inputs have
/// batch dim 1 are combined, up to max_batch_size of them within max_queue_delay of the first,
/// into one execution of the model compiled with batch max_batch_size. A batch not full when the
/// delay expires is padded with zero rows (the compiled program's batch is fixed); the padding's
/// outputs are dropped.
struct DynamicBatching {
  std::int64_t max_batch_size = 8;                        ///< requests per execution (>= 1)
  /// How long a group may wait for more requests once a device slot is free, from its first
  /// request (>= 0; Triton's max_queue_delay_microseconds, whose default 0 this keeps: groups
  /// still form while every slot is busy).
  std::chrono::microseconds max_queue_delay{0};
  /// Batch sizes to compile the model for besides max_batch_size (config.json
  /// "preferred_batch_size", Triton's name; each <= max_batch_size): see batch_ladder().
  std::vector<std::int64_t> preferred_batch_sizes;
};

/// The batch sizes a dynamically batched model is compiled for, ascending and unique:
/// preferred_batch_sizes (default: the powers of two below max_batch_size) and max_batch_size.
/// A group of n requests runs on the smallest of them >= n, so a partial group pays for few
/// padding rows (docs/serving.md "Dynamic batching").
std::vector<std::int64_t> batch_ladder(const DynamicBatching& b);

/// Which versions of a model are served (config.json "version_policy", Triton's field names):
/// {"latest": {"num_versions": N}} the N highest, {"all": {}} every one, {"specific":
/// {"versions": [..]}} those listed (each must exist). Default: latest 1.
struct VersionPolicy {
  enum class Kind { Latest, All, Specific };
  Kind kind = Kind::Latest;
  std::int64_t num_versions = 1;        ///< Latest: how many (>= 1)
  std::vector<std::uint64_t> versions;  ///< Specific: the versions, ascending and unique
};

/// Per-model serving options, read from MODEL_NAME/config.json (every key optional):
///   {"device": "npu0pe0", "worker_num": 2, "batch_size": 1, "max_inflight": 64,
///    "dynamic_batching": {"max_batch_size": 8, "max_queue_delay_us": 1000,
///                         "preferred_batch_size": [1, 2, 4]},
///    "version_policy": {"latest": {"num_versions": 1}}}
/// dynamic_batching excludes a batch_size other than 1 (refused naming the file).
struct ModelConfig {
  /// Device spec (FuriosaAI syntax, device/device_spec.h); "" = the runtime's default
  /// (FURIOSA_DEVICES, else NPU_DEVNAME, else warboy(2)*1).
  std::string device;
  int worker_num = 2;           ///< host workers of the model's queue (>= 1)
  std::int64_t batch_size = 1;  ///< model batch bound to a symbolic dim 0 (>= 1)
  /// Requests of this model admitted at once (submitted, not yet answered); more are answered
  /// 429 / RESOURCE_EXHAUSTED at once (>= 1).
  std::size_t max_inflight = 64;
  /// Dynamic batching; nullopt = every request is its own execution.
  std::optional<DynamicBatching> dynamic_batching;
  /// "input_shapes": input name -> its whole shape, pinning the model's symbolic (free) dims
  /// (CompilerOptions::input_shapes, as furiosa-run --input-shape); empty = none.
  std::map<std::string, std::vector<std::int64_t>> input_shapes;
  VersionPolicy version_policy;  ///< the versions served
};

/// One servable model: by default the highest numeric VERSION folder of MODEL_NAME holding a
/// model file (see served_versions() and for_version() for the others).
struct ModelEntry {
  std::string name;                   ///< MODEL_NAME
  std::string version;                ///< the version served
  /// The versions: as scanned, every version folder with a model file, ascending; in the entry
  /// of a served version (for_version()), the versions its model serves.
  std::vector<std::string> versions;
  std::vector<std::filesystem::path> files;  ///< the model file of each of `versions` (scan)
  std::filesystem::path path;         ///< the served version's model file
  std::string platform;               ///< "onnx", "tflite" or "furiosa_enf", from the file name
  ModelConfig config;
};

/// Scans `dir`. A model folder without any VERSION/model.* file, a version folder name that is
/// not a non-negative integer, or a config.json that is not a JSON object of the keys above with
/// the right types is Error(ModelLoadFailed) naming the file; a missing `dir` is
/// Error(InvalidArgument) naming it. Models are returned sorted by name; an empty repository is
/// allowed (the server then reports ready with no models).
std::vector<ModelEntry> scan_model_repository(const std::filesystem::path& dir);

/// Scans the one model folder `dir` / `name` as scan_model_repository() does, with `config`
/// (when not null) in place of the folder's config.json, which is then not read. Throws the
/// same errors; Error(InvalidArgument) naming the model (escaped) when `name` is not a folder
/// name of `dir` (empty, ".", "..", with a '/', or missing).
ModelEntry scan_model(const std::filesystem::path& dir, const std::string& name,
                      const ModelConfig* config = nullptr);

/// Parses `text` as config.json is parsed and checked (the same bounded, depth-limited parser
/// and rules). Throws Error(ModelLoadFailed) "ORIGIN: what is wrong" (one line) for text that
/// is not a valid configuration. Thread-safe.
ModelConfig parse_model_config(std::string_view text, const std::string& origin);

/// The versions of a scanned `entry` its version policy serves, ascending. Throws
/// Error(ModelLoadFailed) naming the model and version when a "specific" version is missing.
std::vector<std::string> served_versions(const ModelEntry& entry);

/// The entry of one served `version` of a scanned `entry`: version and path set to it, versions
/// set to `served` (what its metadata lists).
ModelEntry for_version(const ModelEntry& entry, const std::string& version,
                       const std::vector<std::string>& served);

}  // namespace furiosa::server
