// Private: the models an InferenceServer serves and their control (Triton's model repository
// extension): which versions of which models are loaded, their state for the repository index,
// and load/unload requests, carried out one at a time on a control thread of their own so that
// compiling a model or draining one never holds a front end's thread.
//
// Lifetimes: a ModelService, once created, lives until the registry is destroyed (an unloaded
// one keeps its entry, model description and statistics; its runners and device are released).
// So a front end may keep a ModelService& in a completion (http_session.cpp posts the encoding
// of an answer) without counting references; what must not run during an unload, a thread
// inside ModelService::infer(), holds a ModelLease.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "furiosa/server/server.h"
#include "model_service.h"

namespace furiosa::server {

/// One row of POST /v2/repository/index.
struct IndexRow {
  std::string name;
  std::string version;  ///< "" for a model whose versions are unknown (its folder is broken)
  std::string state;    ///< Triton's: "READY", "LOADING", "UNLOADING", "UNAVAILABLE"
  std::string reason;   ///< why UNAVAILABLE ("not loaded", "unloaded", a load error); else ""
};

/// A served model version in use: while it exists the version cannot be released (its
/// use_mutex() is held shared). Hold it only across calls that return promptly (infer()).
class ModelLease {
 public:
  /// Holds `model` (whose use_mutex() the caller has locked shared in `lock`).
  ModelLease(ModelService& model, std::shared_lock<std::shared_mutex> lock)
      : model_(&model), lock_(std::move(lock)) {}
  /// The model.
  ModelService& operator*() const noexcept { return *model_; }
  /// The model.
  ModelService* operator->() const noexcept { return model_; }

 private:
  ModelService* model_;
  std::shared_lock<std::shared_mutex> lock_;
};

/// The models of a repository and their control. Thread-safe.
class ModelRegistry {
 public:
  /// Called once with the outcome of a load or unload (null: done), on the control thread or,
  /// when the registry closes first, in close().
  using Done = std::function<void(std::exception_ptr)>;

  /// Scans options.model_repository and loads what options.model_control_mode says (every
  /// model, or options.load_models), printing one line per version to `log`. Throws like
  /// InferenceServer's constructor; Error(InvalidArgument) naming an unknown --load-model.
  ModelRegistry(const ServerOptions& options, ServiceMetrics& metrics, std::ostream& log);
  /// close(), then releases every model.
  ~ModelRegistry();
  ModelRegistry(const ModelRegistry&) = delete;
  ModelRegistry& operator=(const ModelRegistry&) = delete;

  /// The served `version` of model `name` ("" = its highest served version). Throws
  /// ServeError(NotFound) naming the model (escaped) when the repository has no such model or
  /// the version is not served, ServeError(Unavailable) when the model is not loaded (state
  /// and reason in the message).
  ModelLease find(const std::string& name, const std::string& version) const;
  /// Every served version of `name` (`version` "" ) or that one version, for statistics: the
  /// pointers stay valid until the registry is destroyed. Throws as find().
  std::vector<const ModelService*> versions_of(const std::string& name,
                                               const std::string& version) const;
  /// Every version served now, in name then version order.
  std::vector<const ModelService*> served() const;
  /// The repository index: one row per model version (the versions its policy selects), in
  /// name then version order; only READY rows when `ready_only`.
  std::vector<IndexRow> index(bool ready_only) const;

  /// Queues a load of `name` (a reload when it is loaded: unloaded first, then loaded again
  /// from the repository, config.json re-read). Throws, without queueing: ServeError
  /// (InvalidArgument) in ModelControlMode::None and Poll (as Triton: "explicit model load /
  /// unload is not allowed if polling is enabled"), ServeError(Unavailable) after close().
  /// `done` gets ServeError(NotFound) for a name that is no folder of the repository, the
  /// scan's or runtime's error otherwise (the model is then UNAVAILABLE with it as reason).
  /// `config` (a load's "config" parameter, load_parameters.h) replaces the folder's
  /// config.json for this load only; a later load without one reads config.json again.
  void load(const std::string& name, Done done, std::optional<ModelConfig> config = std::nullopt);
  /// Queues a graceful unload of `name`: new requests are refused (Unavailable) at once,
  /// requests already admitted are answered, then the devices are released and `done` called.
  /// Unloading a model that is not loaded succeeds. Throws as load(); `done` gets
  /// ServeError(NotFound) for a model the repository does not have.
  void unload(const std::string& name, Done done);

  /// ModelControlMode::Poll: compares the repository's folders with the last scan
  /// (repository_poll.h) and queues, on the control thread as load()/unload() do, a load per
  /// new folder, a reload per changed one and an unload per removed one (dropped from the
  /// index); returns once they are all done (a failed load leaves its model UNAVAILABLE with
  /// the error, printed to the log, and is retried only once its folder changes again; a new
  /// folder whose scan fails, a broken config.json say, is listed UNAVAILABLE with it). The
  /// poll thread calls it every repository_poll_s seconds; tests call it directly. Concurrent
  /// calls run one after the other. Throws Error(InvalidArgument) in another mode, or naming
  /// the repository when it is no longer a folder (nothing is unloaded then). Not to be called
  /// from a Done callback (it waits for the control thread).
  void rescan();

  /// ModelService::update_device_metrics() of every served version.
  void update_device_metrics();
  /// ModelService::stop_batching() of every served version.
  void stop_batching();
  /// Refuses further control requests, finishes the one in progress, answers queued ones
  /// ServeError(Unavailable), then closes and releases every model (ModelService::close(),
  /// release(): no runtime worker holds a request's completion afterwards). Idempotent;
  /// concurrent callers return once it is done.
  void close();

 private:
  /// What the registry knows of one model of the repository.
  struct Slot {
    std::string state = "UNAVAILABLE";
    std::string reason = "not loaded";
    std::vector<std::string> versions;              ///< the versions of the index rows
    std::map<std::uint64_t, ModelService*> served;  ///< READY: by version number
  };
  struct Job {
    bool load = true;
    std::string name;
    Done done;
    bool forget = false;  ///< an unload by rescan(): the folder is gone, its slot erased
    std::optional<ModelConfig> config;  ///< a load's "config" parameter
  };

  /// Throws ServeError(InvalidArgument) when the mode does not take load/unload requests.
  void check_explicit(bool load, const std::string& name) const;
  void enqueue(Job job);
  /// The poll thread: rescan() every options_.repository_poll_s until close().
  void poll_loop();
  void run_jobs();
  /// Loads `name` now (on the control thread, or the constructor's), with `config` (when not
  /// null) in place of its config.json.
  void do_load(const std::string& name, const ModelConfig* config = nullptr);
  /// Unloads `name` now; false when the repository has no such model.
  void do_unload(const std::string& name);
  /// The served versions of `name` (mutex_ held); throws as find().
  const std::map<std::uint64_t, ModelService*>& served_of(const std::string& name) const;
  /// versions_of() with mutex_ held.
  std::vector<ModelService*> versions_of_locked(const std::string& name,
                                                const std::string& version) const;
  void close_now();
  std::vector<ModelService*> served_now();

  ServerOptions options_;
  ServiceMetrics& metrics_;
  std::ostream& log_;
  mutable std::mutex mutex_;  ///< guards slots_, services_, jobs_, closed_
  std::map<std::string, Slot> slots_;
  std::vector<std::unique_ptr<ModelService>> services_;  ///< every one ever created
  std::deque<Job> jobs_;
  bool closed_ = false;
  std::once_flag close_once_;
  std::condition_variable jobs_cv_;
  std::condition_variable poll_cv_;  ///< wakes the poll thread at close()
  std::mutex rescan_mutex_;          ///< one rescan() at a time; guards fingerprints_
  std::map<std::string, std::string> fingerprints_;  ///< the last scan's (Poll mode)
  std::thread control_;  ///< runs the jobs (started by the constructor)
  std::thread poll_;     ///< Poll mode: calls rescan() periodically
};

}  // namespace furiosa::server
