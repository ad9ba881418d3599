// Private: what --model-control-mode poll compares between two scans of the model repository
// (ModelRegistry::rescan, model_control.h): a fingerprint per model folder, and the loads,
// reloads and unloads that take the served models from one scan to the next.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace furiosa::server {

/// Model name -> fingerprint: the name, type, size and modification time (ns) of every entry of
/// the model folder and of every entry of its sub-folders (config.json, VERSION/model.*),
/// sorted. Entries are read with lstat and symbolic links are never followed: a link is
/// fingerprinted by the link itself (replacing it is seen, rewriting its target is not), and a
/// model folder that is a link (kept, as scan_model_repository keeps it) by the link alone.
/// The model folders are those scan_model_repository() finds. Throws Error(InvalidArgument)
/// naming `dir` when it is not a folder; an entry that vanishes while it is read is skipped.
std::map<std::string, std::string> repository_fingerprints(const std::filesystem::path& dir);

/// What a rescan does, each list sorted by name.
struct RescanPlan {
  std::vector<std::string> load;    ///< folders new since the last scan
  std::vector<std::string> reload;  ///< folders whose fingerprint changed
  std::vector<std::string> unload;  ///< folders gone: unloaded and dropped from the index
  /// Whether there is nothing to do.
  bool empty() const { return load.empty() && reload.empty() && unload.empty(); }
};

/// The plan from the fingerprints of the last scan, `before`, to those of this one, `now`.
RescanPlan plan_rescan(const std::map<std::string, std::string>& before,
                       const std::map<std::string, std::string>& now);

}  // namespace furiosa::server
