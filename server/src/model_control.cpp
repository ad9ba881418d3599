// ModelRegistry (model_control.h): the served model versions, their states, and load/unload on
// a control thread.
#include "model_control.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <memory>
#include <utility>

#include "furiosa/core/error.h"
#include "furiosa/core/text.h"
#include "repository_poll.h"

namespace furiosa::server {
namespace {

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

/// The load line of one version, as furiosa-serve prints it.
std::string describe(const ModelService& model) {
  const ModelEntry& entry = model.entry();
  const auto& b = entry.config.dynamic_batching;
  return fmt::format("model {} version {}: {} ({}, {} input(s), {} output(s), device {}{})\n",
                     entry.name, entry.version, entry.path.string(), entry.platform,
                     model.model().inputs.size(), model.model().outputs.size(),
                     entry.config.device.empty() ? "default" : entry.config.device,
                     b ? fmt::format(", dynamic batching {} within {} us, compiled for batches {}",
                                     b->max_batch_size, b->max_queue_delay.count(),
                                     fmt::join(batch_ladder(*b), ", "))
                       : "");
}

std::uint64_t version_number(const std::string& v) { return std::stoull(v); }

}  // namespace

ModelRegistry::ModelRegistry(const ServerOptions& options, ServiceMetrics& metrics,
                             std::ostream& log)
    : options_(options), metrics_(metrics), log_(log) {
  const bool poll = options_.model_control_mode == ModelControlMode::Poll;
  // Before the scan: a change made while the models load is seen by the first rescan.
  if (poll) fingerprints_ = repository_fingerprints(options_.model_repository);
  const auto entries = scan_model_repository(options_.model_repository);
  for (const auto& entry : entries) {
    Slot& slot = slots_[entry.name];
    try {
      slot.versions = served_versions(entry);
    } catch (const std::exception& e) {
      slot.reason = e.what();  // the index shows it; loading it fails with it
    }
  }
  std::vector<std::string> initial;
  const bool all = options_.model_control_mode != ModelControlMode::Explicit ||
                   std::find(options_.load_models.begin(), options_.load_models.end(), "*") !=
                       options_.load_models.end();
  if (all) {
    for (const auto& entry : entries) initial.push_back(entry.name);
  } else {
    for (const auto& name : options_.load_models) {
      if (!slots_.count(name)) {
        throw Error(
            ErrorCode::InvalidArgument,
            fmt::format("--load-model '{}': no such model in the repository", escape_text(name)));
      }
      initial.push_back(name);
    }
  }
  try {
    for (const auto& name : initial) {
      if (slots_[name].served.empty()) do_load(name);
    }
  } catch (...) {
    for (auto& s : services_) s->release();
    throw;
  }
  log_.flush();
  control_ = std::thread([this] { run_jobs(); });
  if (poll) poll_ = std::thread([this] { poll_loop(); });
}

ModelRegistry::~ModelRegistry() {
  close();
  for (auto& s : services_) s->release();
}

const std::map<std::uint64_t, ModelService*>& ModelRegistry::served_of(
    const std::string& name) const {
  auto it = slots_.find(name);
  if (it == slots_.end()) {
    throw ServeError(ServeStatus::NotFound, fmt::format("unknown model '{}'", escape_text(name)));
  }
  const Slot* slot = &it->second;
  if (slot->served.empty()) {
    throw ServeError(ServeStatus::Unavailable,
                     fmt::format("model '{}' is not available ({}{}{})", escape_text(name),
                                 lowercase(slot->state), slot->reason.empty() ? "" : ": ",
                                 escape_text(slot->reason)));
  }
  return slot->served;
}

ModelLease ModelRegistry::find(const std::string& name, const std::string& version) const {
  std::lock_guard lock(mutex_);
  const auto models = versions_of_locked(name, version);
  return ModelLease(*models.back(), std::shared_lock(models.back()->use_mutex()));
}

std::vector<ModelService*> ModelRegistry::versions_of_locked(const std::string& name,
                                                             const std::string& version) const {
  const auto& served = served_of(name);
  std::vector<ModelService*> out;
  if (version.empty()) {
    for (const auto& [v, model] : served) out.push_back(model);
    return out;
  }
  const bool numeric =
      !version.empty() && version.size() <= 18 &&
      std::all_of(version.begin(), version.end(), [](char c) { return c >= '0' && c <= '9'; });
  const auto it = numeric ? served.find(version_number(version)) : served.end();
  if (it == served.end()) {
    std::vector<std::uint64_t> versions;
    for (const auto& [v, model] : served) versions.push_back(v);
    throw ServeError(
        ServeStatus::NotFound,
        fmt::format("model '{}' has no served version '{}' (serving {})", escape_text(name),
                    escape_text(version), fmt::join(versions, ", ")));
  }
  out.push_back(it->second);
  return out;
}

std::vector<const ModelService*> ModelRegistry::versions_of(const std::string& name,
                                                            const std::string& version) const {
  std::lock_guard lock(mutex_);
  const auto models = versions_of_locked(name, version);
  return {models.begin(), models.end()};
}

std::vector<const ModelService*> ModelRegistry::served() const {
  std::lock_guard lock(mutex_);
  std::vector<const ModelService*> out;
  for (const auto& [name, slot] : slots_) {
    for (const auto& [v, model] : slot.served) out.push_back(model);
  }
  return out;
}

std::vector<IndexRow> ModelRegistry::index(bool ready_only) const {
  std::lock_guard lock(mutex_);
  std::vector<IndexRow> out;
  for (const auto& [name, slot] : slots_) {
    if (ready_only && slot.state != "READY") continue;
    const std::string reason = slot.state == "UNAVAILABLE" ? slot.reason : "";
    if (slot.versions.empty()) out.push_back({name, "", slot.state, reason});
    for (const auto& v : slot.versions) out.push_back({name, v, slot.state, reason});
  }
  return out;
}

void ModelRegistry::load(const std::string& name, Done done, std::optional<ModelConfig> config) {
  check_explicit(true, name);
  enqueue(Job{true, name, std::move(done), false, std::move(config)});
}

void ModelRegistry::unload(const std::string& name, Done done) {
  check_explicit(false, name);
  enqueue(Job{false, name, std::move(done), false, std::nullopt});
}

void ModelRegistry::check_explicit(bool load, const std::string& name) const {
  if (options_.model_control_mode == ModelControlMode::None) {
    throw ServeError(
        ServeStatus::InvalidArgument,
        fmt::format("cannot {} model '{}': the server runs with --model-control-mode none (every "
                    "model is loaded at start; start it with --model-control-mode explicit)",
                    load ? "load" : "unload", escape_text(name)));
  }
  if (options_.model_control_mode == ModelControlMode::Poll) {
    // Triton's words (its explicit-control check in poll mode), then ours.
    throw ServeError(
        ServeStatus::InvalidArgument,
        fmt::format("cannot {} model '{}': explicit model load / unload is not allowed if "
                    "polling is enabled (--model-control-mode poll: the server follows the "
                    "repository folder)",
                    load ? "load" : "unload", escape_text(name)));
  }
}

void ModelRegistry::enqueue(Job job) {
  {
    std::lock_guard lock(mutex_);
    if (!closed_) {
      jobs_.push_back(std::move(job));
      jobs_cv_.notify_one();
      return;
    }
  }
  throw ServeError(ServeStatus::Unavailable, "the server is shutting down");
}

void ModelRegistry::run_jobs() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      jobs_cv_.wait(lock, [this] { return closed_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // closed
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    std::exception_ptr error;
    try {
      if (job.load) {
        do_load(job.name, job.config ? &*job.config : nullptr);
      } else {
        bool known = true;
        if (job.forget) {
          std::lock_guard lock(mutex_);
          known = slots_.count(job.name) != 0;
        }
        if (known) do_unload(job.name);
        if (job.forget) {
          std::lock_guard lock(mutex_);
          slots_.erase(job.name);  // its ModelServices stay in services_ (model_control.h)
        }
      }
    } catch (...) {
      error = std::current_exception();
    }
    job.done(error);
  }
}

void ModelRegistry::do_load(const std::string& name, const ModelConfig* config) {
  ModelEntry entry;
  try {
    entry = scan_model(options_.model_repository, name, config);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::InvalidArgument) throw ServeError(ServeStatus::NotFound, e.what());
    // A model not serving (a new folder a rescan found, say) is listed UNAVAILABLE with the
    // error; a loaded one keeps serving its versions (the reload is refused before unloading).
    std::lock_guard lock(mutex_);
    Slot& slot = slots_[name];
    if (slot.served.empty()) {
      slot.state = "UNAVAILABLE";
      slot.reason = one_line(e.what());
    }
    throw;
  }
  bool known = false;
  {
    std::lock_guard lock(mutex_);
    known = slots_.count(name) != 0;
  }
  if (known)
    do_unload(name);  // a reload: the devices of the old versions are free for the new ones
  std::vector<std::string> versions;
  std::vector<std::unique_ptr<ModelService>> loaded;
  // Returns the error to answer: the model named, one line.
  auto fail = [&](const std::exception& e) {
    for (auto& m : loaded) m->release();
    std::lock_guard lock(mutex_);
    for (auto& m : loaded) services_.push_back(std::move(m));
    Slot& slot = slots_[name];
    slot.state = "UNAVAILABLE";
    slot.reason = one_line(e.what());
    slot.versions = versions;  // none when the policy itself failed
    return ServeError(status_of(e),
                      fmt::format("cannot load model '{}': {}", escape_text(name), slot.reason));
  };
  try {
    versions = served_versions(entry);
    {
      std::lock_guard lock(mutex_);
      Slot& slot = slots_[name];
      slot.state = "LOADING";
      slot.reason.clear();
      slot.versions = versions;
    }
    for (const auto& v : versions)
      loaded.push_back(std::make_unique<ModelService>(for_version(entry, v, versions), metrics_));
  } catch (const std::exception& e) {
    throw fail(e);
  }
  std::lock_guard lock(mutex_);
  Slot& slot = slots_[name];
  for (auto& m : loaded) {
    log_ << describe(*m);
    slot.served[version_number(m->entry().version)] = m.get();
    services_.push_back(std::move(m));
  }
  log_.flush();
  slot.state = "READY";
}

void ModelRegistry::do_unload(const std::string& name) {
  std::map<std::uint64_t, ModelService*> served;
  {
    std::lock_guard lock(mutex_);
    auto it = slots_.find(name);
    if (it == slots_.end()) {
      throw ServeError(ServeStatus::NotFound, fmt::format("unknown model '{}'", escape_text(name)));
    }
    if (it->second.served.empty()) return;
    served.swap(it->second.served);  // new requests find it unavailable from now on
    it->second.state = "UNLOADING";
  }
  for (auto& [v, model] : served) model->close();  // every version stops taking requests first
  for (auto& [v, model] : served) model->release();
  std::lock_guard lock(mutex_);
  Slot& slot = slots_[name];
  slot.state = "UNAVAILABLE";
  slot.reason = "unloaded";
  log_ << fmt::format("model {} unloaded\n", name);
  log_.flush();
}

void ModelRegistry::rescan() {
  if (options_.model_control_mode != ModelControlMode::Poll) {
    throw Error(ErrorCode::InvalidArgument,
                "the repository is rescanned only with --model-control-mode poll");
  }
  std::lock_guard scan(rescan_mutex_);
  auto now = repository_fingerprints(options_.model_repository);
  const RescanPlan plan = plan_rescan(fingerprints_, now);
  if (plan.empty()) return;
  // Queued on the control thread like explicit requests; waited for here.
  struct Pending {
    std::mutex mutex;
    std::condition_variable cv;
    std::size_t left = 0;
  };
  auto pending = std::make_shared<Pending>();
  auto queue = [&](bool load, bool forget, const std::string& name) {
    auto done = [this, pending, load, name](std::exception_ptr error) {
      if (error) {
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          std::lock_guard lock(mutex_);
          if (!closed_)
            log_ << fmt::format("repository poll: cannot {} model {}: {}\n",
                              load ? "load" : "unload", name, one_line(e.what()));
          log_.flush();
        }
      }
      std::lock_guard lock(pending->mutex);
      --pending->left;
      pending->cv.notify_all();
    };
    {
      std::lock_guard lock(pending->mutex);
      ++pending->left;
    }
    try {
      enqueue(Job{load, name, std::move(done), forget, std::nullopt});
    } catch (...) {
      std::lock_guard lock(pending->mutex);
      --pending->left;
      throw;
    }
  };
  std::exception_ptr refused;
  try {
    for (const auto& name : plan.unload) queue(false, true, name);
    for (const auto& name : plan.reload) queue(true, false, name);
    for (const auto& name : plan.load) queue(true, false, name);
  } catch (...) {
    refused = std::current_exception();  // closed: wait for what was queued, then throw
  }
  {
    std::unique_lock lock(pending->mutex);
    pending->cv.wait(lock, [&] { return pending->left == 0; });
  }
  if (refused) std::rethrow_exception(refused);
  fingerprints_ = std::move(now);
}

void ModelRegistry::poll_loop() {
  const auto period = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(options_.repository_poll_s));
  std::unique_lock lock(mutex_);
  for (;;) {
    poll_cv_.wait_for(lock, period, [this] { return closed_; });
    if (closed_) return;
    lock.unlock();
    try {
      rescan();
    } catch (const std::exception& e) {
      std::lock_guard log_lock(mutex_);
      if (!closed_) {
        log_ << fmt::format("repository poll: {}\n", one_line(e.what()));
        log_.flush();
      }
    }
    lock.lock();
  }
}

std::vector<ModelService*> ModelRegistry::served_now() {
  std::lock_guard lock(mutex_);
  std::vector<ModelService*> models;
  for (const auto& [name, slot] : slots_) {
    for (const auto& [v, model] : slot.served) models.push_back(model);
  }
  return models;
}

void ModelRegistry::stop_batching() {
  for (ModelService* m : served_now()) m->stop_batching();
}

void ModelRegistry::update_device_metrics() {
  // An unloaded version's runners are gone: its last figures were counted while it served.
  for (ModelService* m : served_now()) m->update_device_metrics();
}

void ModelRegistry::close() {
  std::call_once(close_once_, [this] { close_now(); });
}

void ModelRegistry::close_now() {
  std::deque<Job> refused;
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    refused.swap(jobs_);
    jobs_cv_.notify_all();
    poll_cv_.notify_all();
  }
  if (control_.joinable()) control_.join();
  for (auto& job : refused) {
    job.done(std::make_exception_ptr(
        ServeError(ServeStatus::Unavailable, "the server is shutting down")));
  }
  // A rescan in progress has had every job it queued answered: the poll thread ends.
  if (poll_.joinable()) poll_.join();
  std::vector<ModelService*> all;
  {
    std::lock_guard lock(mutex_);
    for (auto& s : services_) all.push_back(s.get());
  }
  for (ModelService* m : all) m->close();
  // Releasing waits for the runtime's workers to finish with every request: what they still
  // hold (a batched group's completions, which keep HTTP sessions alive) is dropped now, while
  // the io_context those sessions belong to still exists (InferenceServer::Impl destroys it
  // before the registry).
  for (ModelService* m : all) m->release();
}

}  // namespace furiosa::server
