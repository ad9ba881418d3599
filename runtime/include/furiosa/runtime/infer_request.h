// The public asynchronous request: Runner::start() runs one inference and calls back with its
// outputs or its error; the InferRequest handle it returns can cancel the request and wait for
// it. OpenVINO's InferRequest (start_async, set_callback, cancel, wait, wait_for) is the model.
// run(), run_async(), the submit/recv queues, the Python package and furiosa-serve are all built
// on it.
//
//   auto request = runner->start(std::move(inputs), [](std::vector<Tensor> outputs, std::exception_ptr error) {
//     if (error) ... else ...                    // on a runtime worker, exactly once
//   });
//   request.cancel();                            // optional: stops it at its next stage boundary
//   request.wait();                              // the callback has returned
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "furiosa/core/tensor.h"

namespace furiosa::runtime {

namespace detail {
struct RequestState;
}  // namespace detail

/// The completion of one started request: the outputs in model().outputs order (dense,
/// row-major, owned by the callee) and a null error, or no outputs and the request's error
/// (Error(DeviceFault), Error(DeviceTimeout), Error(DeviceNotFound), Error(Cancelled), ...).
///
/// Called exactly once per request that start() accepted, on one of the runtime's worker threads
/// (never on the thread calling start() or cancel()). It should be short: the worker runs other
/// requests' host operators. It must not call wait() on its own request (that throws), should
/// not wait for other requests of the same Runner (it holds a worker they may need) and must not
/// destroy the Runner; it may start further requests. An exception it throws is logged and
/// dropped.
using InferCallback = std::function<void(std::vector<Tensor> outputs, std::exception_ptr error)>;

/// How Runner::start() treats one request.
struct StartOptions {
  /// The caller has already checked the inputs against Runner::model().inputs (count, dtypes,
  /// shapes), as furiosa-serve's protocol decoder does, so start() does not check them again:
  /// one check per request on the serving path. Inputs that do not match are then a programming
  /// error (the host operators read them as model().inputs describe them; a Debug build
  /// asserts). False (the default): start() checks and throws Error(InvalidInput).
  bool inputs_checked = false;
  /// When the runtime admits the request at once, start() runs its first host stage -- the host
  /// operators up to its first device submit (Quantize, Lower, ...) and the submit -- on the
  /// calling thread before returning, instead of handing the request to a worker: one thread
  /// hand-off less, for a caller whose thread would only hand the request on (a server's I/O
  /// thread; docs/serving.md). start() then takes as long as that stage. A request that must
  /// wait for admission is run by a worker as usual. The callback still runs on a worker, and
  /// that stage's errors still go to the callback, never to start()'s caller.
  bool first_stage_on_caller = false;
};

/// A handle to one started request. Cheap to copy; copies refer to the same request. It does not
/// own the request: dropping every handle neither cancels nor waits for it, and the callback
/// still runs. A handle stays usable after its Runner is destroyed (the request is complete
/// then). Thread-safe: any thread may call any member, concurrently.
///
/// A request is, in turn:
///   waiting    accepted by start(), not yet taken by a worker (the runtime admits at most
///              worker_num + 2 x devices requests into its stages; later ones wait in order);
///   running    in its stages: host operators on a worker, an NPU call on a device, ...;
///   completing its callback has been called (the outcome is fixed);
///   done       the callback has returned.
class InferRequest {
 public:
  /// An empty handle (valid() is false; the other members must not be called).
  InferRequest() noexcept = default;
  /// The handle of a request (made by Runner::start()).
  explicit InferRequest(std::shared_ptr<detail::RequestState> state) noexcept;

  /// True when the handle refers to a request.
  bool valid() const noexcept { return state_ != nullptr; }

  /// Cancels the request. A waiting request is withdrawn at once: no host operator or device
  /// execution runs for it, and its callback runs on a worker with Error(Cancelled) as soon as
  /// one is free. A running request stops at its next stage boundary -- before its next host
  /// operator, before its next device submit, when its device execution completes, at the latest
  /// before the callback -- and completes with Error(Cancelled); a device execution already
  /// submitted is never aborted (the device finishes it and its results are dropped). Once the
  /// request is completing, cancel() changes nothing.
  /// Returns true when the request's callback gets (or got) Error(Cancelled) because of a
  /// cancel(), false when it gets (or got) its own outcome. Idempotent; never blocks on the
  /// request.
  bool cancel();

  /// Blocks until the request is done (its callback has returned). Throws Error(InvalidArgument)
  /// when called from inside the request's own callback (it would never return).
  void wait() const;

  /// Like wait(), at most `timeout`; true when the request is done. Throws like wait().
  bool wait_for(std::chrono::nanoseconds timeout) const;

  /// True once the request is done (its callback has returned). Does not block.
  bool done() const;

 private:
  std::shared_ptr<detail::RequestState> state_;
};

}  // namespace furiosa::runtime
