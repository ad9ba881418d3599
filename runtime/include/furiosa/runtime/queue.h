// Asynchronous submit/recv queues, as in FuriosaAI's SDK (`create_queue` -> Submitter,
// Receiver): serving code submits requests with a context and receives results, possibly out of
// submission order, while workers overlap host pre/post-processing with device execution.
#pragma once

#include <any>
#include <chrono>
#include <cstddef>
#include <exception>
#include <filesystem>
#include <memory>
#include <utility>
#include <vector>

#include "furiosa/runtime/runner.h"

namespace furiosa::runtime {

/// Options of create_queue: the shared SessionOptions plus the queue bounds. Names follow
/// FuriosaAI's SDK.
struct QueueOptions : SessionOptions {
  /// Requests submitted but not yet taken by a worker; submit() blocks while this many wait.
  std::size_t input_queue_size = 64;
  /// Results not yet received; workers wait while this many are pending (>= 1).
  std::size_t output_queue_size = 64;
};


/// One result: the submitted context and the outputs, or the request's error.
struct QueueResult {
  std::any context;
  std::vector<Tensor> outputs;    ///< empty when `error` is set
  std::exception_ptr error;       ///< the request's failure (e.g. Error(DeviceFault)), or null
  /// The outputs; rethrows `error` when the request failed.
  std::vector<Tensor>& value();
};

namespace detail {
struct QueueState;
}

/// The submitting side. Thread-safe. Destroying it closes it (in-flight requests still finish).
class Submitter {
 public:
  explicit Submitter(std::shared_ptr<detail::QueueState> state);
  ~Submitter();
  Submitter(Submitter&&) noexcept;
  Submitter& operator=(Submitter&&) noexcept;

  /// The model's inputs and outputs.
  const Model& model() const;
  /// Per device of the session, in device-list order, as Runner::device_health (executions
  /// completed, faults, resets, ...). Thread-safe.
  std::vector<DeviceHealth> device_health() const;
  /// Host time spent in the model's host (CPU) operators, summed over every request since the
  /// queue was created, in ns (wall time on the workers). Thread-safe.
  std::uint64_t host_operator_ns() const;
  /// Queues one request; `inputs` are moved in, not copied. Blocks while input_queue_size
  /// requests are waiting for a worker. Throws Error(InvalidInput) naming the tensor (nothing is
  /// queued) and Error(SessionClosed) after close() of either side.
  void submit(std::vector<Tensor> inputs, std::any context = {});
  /// No more submits; requests already submitted still complete and can be received, after which
  /// Receiver::recv reports SessionTerminated. Idempotent.
  void close();

 private:
  std::shared_ptr<detail::QueueState> state_;
};

/// The receiving side. Thread-safe. Destroying it closes it.
class Receiver {
 public:
  explicit Receiver(std::shared_ptr<detail::QueueState> state);
  ~Receiver();
  Receiver(Receiver&&) noexcept;
  Receiver& operator=(Receiver&&) noexcept;

  /// The next result, waiting at most `timeout`. Throws Error(QueueWaitTimeout) when none came in
  /// time, Error(SessionTerminated) once the Submitter is closed and every result was received,
  /// Error(SessionClosed) after close().
  QueueResult recv(std::chrono::nanoseconds timeout = std::chrono::hours(24 * 365));
  /// Stops the session: later submits fail with SessionClosed, results not yet received are
  /// dropped, requests in flight finish on the device and are discarded. Idempotent.
  void close();

 private:
  std::shared_ptr<detail::QueueState> state_;
};

/// Compiles the model (or loads a program file, .enf), opens the devices and starts the workers,
/// exactly as create_runner does with the same path (compile cache, program-file checks). Throws
/// like create_runner.
std::pair<Submitter, Receiver> create_queue(const std::filesystem::path& model, const QueueOptions& options = {});

}  // namespace furiosa::runtime
