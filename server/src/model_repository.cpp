// Model repository scanning (model_repository.h).
#include "furiosa/server/model_repository.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "bounded_json.h"
#include "furiosa/core/error.h"
#include "furiosa/core/text.h"

namespace furiosa::server {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void bad_file(const fs::path& file, const std::string& message) {
  throw Error(ErrorCode::ModelLoadFailed, fmt::format("{}: {}", file.string(), message),
              ErrorSubject::of_file(file.string()));
}

bool is_version(const std::string& name) {
  return !name.empty() && name.size() <= 18 && std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::vector<std::int64_t> batch_ladder(const DynamicBatching& b) {
  std::vector<std::int64_t> ladder = b.preferred_batch_sizes;
  if (ladder.empty()) {
    for (std::int64_t p = 1; p < b.max_batch_size; p *= 2) ladder.push_back(p);
  }
  std::erase_if(ladder, [&](std::int64_t p) { return p < 1 || p > b.max_batch_size; });
  ladder.push_back(b.max_batch_size);
  std::sort(ladder.begin(), ladder.end());
  ladder.erase(std::unique(ladder.begin(), ladder.end()), ladder.end());
  return ladder;
}

namespace {

VersionPolicy read_version_policy(const fs::path& file, const nlohmann::json& value) {
  const char* shape =
      "\"version_policy\" must be one of {\"latest\": {\"num_versions\": N}}, {\"all\": {}}, "
      "{\"specific\": {\"versions\": [..]}}";
  if (!value.is_object() || value.size() != 1) bad_file(file, shape);
  VersionPolicy policy;
  // (An iterator, not a structured binding of *items().begin(): that binds to a proxy whose
  // lifetime ends with the statement; ASan reports the use after scope.)
  const auto first = value.cbegin();
  const std::string kind = first.key();
  const nlohmann::json& body = first.value();
  if (!body.is_object()) bad_file(file, shape);
  if (kind == "latest") {
    policy.kind = VersionPolicy::Kind::Latest;
    const auto n = body.find("num_versions");
    if (body.size() != 1 || n == body.end() || !n->is_number_integer() ||
        n->get<std::int64_t>() < 1) {
      bad_file(file, "\"version_policy.latest\" must be {\"num_versions\": N} with N >= 1");
    }
    policy.num_versions = n->get<std::int64_t>();
  } else if (kind == "all") {
    if (!body.empty()) bad_file(file, "\"version_policy.all\" must be {}");
    policy.kind = VersionPolicy::Kind::All;
  } else if (kind == "specific") {
    policy.kind = VersionPolicy::Kind::Specific;
    const auto v = body.find("versions");
    if (body.size() != 1 || v == body.end() || !v->is_array() || v->empty() || v->size() > 1024)
      bad_file(file, "\"version_policy.specific\" must be {\"versions\": [1 to 1024 versions]}");
    for (const auto& x : *v) {
      if (!x.is_number_unsigned()) {
        bad_file(file, "\"version_policy.specific.versions\" must hold non-negative integers");
      }
      policy.versions.push_back(x.get<std::uint64_t>());
    }
    std::sort(policy.versions.begin(), policy.versions.end());
    policy.versions.erase(std::unique(policy.versions.begin(), policy.versions.end()),
                          policy.versions.end());
  } else {
    bad_file(file, shape);
  }
  return policy;
}

/// `file` names the configuration in errors (a path, or what else it came from).
ModelConfig read_config(const fs::path& file, std::string_view text) {
  ModelConfig config;
  nlohmann::json j;
  const JsonParse parsed = parse_bounded_json(text, j);
  if (parsed == JsonParse::TooDeep) bad_file(file, fmt::format("nested deeper than {} levels", kMaxJsonDepth));
  if (parsed != JsonParse::Ok || !j.is_object()) bad_file(file, "not a JSON object");
  for (const auto& [key, value] : j.items()) {
    // (The bindings are captured explicitly: clang 14 cannot capture a structured binding.)
    auto positive = [&, &key = key, &value = value](std::int64_t minimum) {
      if (!value.is_number_integer() || value.get<std::int64_t>() < minimum) {
        bad_file(file, fmt::format("\"{}\" must be an integer >= {}", key, minimum));
      }
      return value.get<std::int64_t>();
    };
    if (key == "device") {
      if (!value.is_string()) bad_file(file, "\"device\" must be a device spec string");
      config.device = value.get<std::string>();
    } else if (key == "worker_num") {
      config.worker_num = static_cast<int>(std::min<std::int64_t>(positive(1), 1024));
    } else if (key == "batch_size") {
      config.batch_size = positive(1);
    } else if (key == "max_inflight") {
      config.max_inflight = static_cast<std::size_t>(positive(1));
    } else if (key == "dynamic_batching") {
      if (!value.is_object()) bad_file(file, "\"dynamic_batching\" must be an object");
      DynamicBatching b;
      for (const auto& [k, v] : value.items()) {
        auto at_least = [&, &k = k, &v = v](std::int64_t minimum) {
          if (!v.is_number_integer() || v.get<std::int64_t>() < minimum) {
            bad_file(file, fmt::format("\"dynamic_batching.{}\" must be an integer >= {}", k, minimum));
          }
          return v.get<std::int64_t>();
        };
        if (k == "max_batch_size") {
          b.max_batch_size = std::min<std::int64_t>(at_least(1), 4096);
        } else if (k == "max_queue_delay_us") {
          b.max_queue_delay = std::chrono::microseconds(std::min<std::int64_t>(at_least(0), 60'000'000));
        } else if (k == "preferred_batch_size") {
          if (!v.is_array() || v.empty() || v.size() > 16) {
            bad_file(
                file,
                "\"dynamic_batching.preferred_batch_size\" must be a list of 1 to 16 batch sizes");
          }
          for (const auto& size : v) {
            if (!size.is_number_integer() || size.get<std::int64_t>() < 1 ||
                size.get<std::int64_t>() > 4096) {
              bad_file(
                  file,
                  "\"dynamic_batching.preferred_batch_size\" must hold integers from 1 to 4096");
            }
            b.preferred_batch_sizes.push_back(size.get<std::int64_t>());
          }
        } else {
          bad_file(
              file,
              fmt::format(
                  "unknown key \"dynamic_batching.{}\" (known: max_batch_size, max_queue_delay_us, "
                  "preferred_batch_size)",
                  k));
        }
      }
      for (std::int64_t p : b.preferred_batch_sizes) {
        if (p > b.max_batch_size) {
          bad_file(
              file,
              fmt::format(
                  "\"dynamic_batching.preferred_batch_size\" {} is larger than max_batch_size {}",
                  p, b.max_batch_size));
        }
      }
      config.dynamic_batching = b;
    } else if (key == "version_policy") {
      config.version_policy = read_version_policy(file, value);
    } else if (key == "input_shapes") {
      if (!value.is_object())
        bad_file(file, "\"input_shapes\" must be an object {input name: [dims]}");
      for (const auto& [name, dims] : value.items()) {
        std::vector<std::int64_t> shape;
        if (dims.is_array() && dims.size() <= 16) {
          for (const auto& d : dims) {
            if (!d.is_number_integer() || d.get<std::int64_t>() < 1 ||
                d.get<std::int64_t>() > (1 << 24))
              break;
            shape.push_back(d.get<std::int64_t>());
          }
        }
        if (shape.empty() || shape.size() != dims.size()) {
          bad_file(
              file,
              fmt::format(
                  "\"input_shapes.{}\" must be a list of 1 to 16 dims, each from 1 to 16777216",
                  escape_text(name)));
        }
        config.input_shapes[name] = std::move(shape);
      }
    } else {
      bad_file(file, fmt::format("unknown key \"{}\" (known: device, worker_num, batch_size, "
                                 "max_inflight, dynamic_batching, input_shapes, version_policy)",
                                 escape_text(key)));
    }
  }
  if (config.dynamic_batching && config.batch_size != 1) {
    bad_file(file, "\"dynamic_batching\" combines batch-1 requests: \"batch_size\" must be 1 (or absent)");
  }
  return config;
}

ModelConfig read_config(const fs::path& file) {
  std::ifstream in(file);
  if (!in) bad_file(file, "cannot read");
  std::stringstream text;
  text << in.rdbuf();
  return read_config(file, text.str());
}

}  // namespace

ModelConfig parse_model_config(std::string_view text, const std::string& origin) {
  return read_config(fs::path(origin), text);
}

namespace {

ModelEntry scan_folder(const fs::path& model_dir, const ModelConfig* config) {
  std::error_code ec;
  ModelEntry entry;
  entry.name = model_dir.filename().string();
  std::vector<std::pair<std::uint64_t, fs::path>> found;
  for (const auto& version_dir : fs::directory_iterator(model_dir)) {
    if (!version_dir.is_directory()) continue;
    const std::string version = version_dir.path().filename().string();
    if (!is_version(version))
      bad_file(version_dir.path(), "a version folder must be named by a non-negative integer");
    for (const char* file : {"model.onnx", "model.tflite", "model.enf"}) {
      if (fs::is_regular_file(version_dir.path() / file, ec)) {
        found.emplace_back(std::stoull(version), version_dir.path() / file);
        break;
      }
    }
  }
  if (found.empty()) bad_file(model_dir, "no VERSION/model.onnx, model.tflite or model.enf");
  std::sort(found.begin(), found.end());
  for (const auto& [v, p] : found) {
    entry.versions.push_back(std::to_string(v));
    entry.files.push_back(p);
  }
  if (config)
    entry.config = *config;
  else if (fs::is_regular_file(model_dir / "config.json", ec))
    entry.config = read_config(model_dir / "config.json");
  return for_version(entry, entry.versions.back(), entry.versions);
}

}  // namespace

std::vector<ModelEntry> scan_model_repository(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw Error(ErrorCode::InvalidArgument, fmt::format("model repository '{}' is not a folder", dir.string()),
                ErrorSubject::of_file(dir.string()));
  }
  std::vector<ModelEntry> models;
  for (const auto& model_dir : fs::directory_iterator(dir)) {
    if (model_dir.is_directory()) models.push_back(scan_folder(model_dir.path(), nullptr));
  }
  std::sort(models.begin(), models.end(), [](const ModelEntry& a, const ModelEntry& b) { return a.name < b.name; });
  return models;
}

ModelEntry scan_model(const fs::path& dir, const std::string& name, const ModelConfig* config) {
  std::error_code ec;
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos || !fs::is_directory(dir / name, ec)) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("unknown model '{}': no such folder in the model repository",
                            escape_text(name)));
  }
  return scan_folder(dir / name, config);
}

std::vector<std::string> served_versions(const ModelEntry& entry) {
  const VersionPolicy& policy = entry.config.version_policy;
  std::vector<std::string> out;
  switch (policy.kind) {
    case VersionPolicy::Kind::Latest: {
      const auto n = std::min<std::size_t>(entry.versions.size(),
                                           static_cast<std::size_t>(policy.num_versions));
      out.assign(entry.versions.end() - static_cast<std::ptrdiff_t>(n), entry.versions.end());
      break;
    }
    case VersionPolicy::Kind::All: out = entry.versions; break;
    case VersionPolicy::Kind::Specific:
      for (std::uint64_t v : policy.versions) {
        const std::string version = std::to_string(v);
        if (std::find(entry.versions.begin(), entry.versions.end(), version) ==
            entry.versions.end()) {
          throw Error(
              ErrorCode::ModelLoadFailed,
              fmt::format(
                  "model '{}': version {} of its version_policy has no VERSION/model.* file",
                  escape_text(entry.name), version));
        }
        out.push_back(version);
      }
      break;
  }
  return out;
}

ModelEntry for_version(const ModelEntry& entry, const std::string& version,
                       const std::vector<std::string>& served) {
  ModelEntry out = entry;
  const auto it = std::find(entry.versions.begin(), entry.versions.end(), version);
  if (it != entry.versions.end() && entry.files.size() == entry.versions.size())
    out.path = entry.files[static_cast<std::size_t>(it - entry.versions.begin())];
  out.version = version;
  out.versions = served;
  const auto ext = out.path.extension().string();
  out.platform = ext == ".onnx" ? "onnx" : ext == ".tflite" ? "tflite" : "furiosa_enf";
  return out;
}

}  // namespace furiosa::server
