// The public C++ API: load a model for a device and run it. This header names no compiler type:
// a program file (.enf) runs with the programs-only target furiosa::runtime_core; ONNX and TFLite
// paths need the default target furiosa::runtime, which brings the compiler in (and
// furiosa/runtime/from_graph.h for graphs imported by the caller).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "furiosa/device/driver.h"
#include "furiosa/core/error.h"
#include "furiosa/core/tensor.h"
#include "furiosa/profiler/profiler.h"
#include "furiosa/program/compiled_model.h"
#include "furiosa/program/compiler_options.h"
#include "furiosa/runtime/infer_request.h"

namespace furiosa::runtime {

/// Description of a model input or output, as FuriosaAI's SDK reports it.
struct TensorDesc {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  /// Axis naming: "NCHW" for 4-D image tensors, "NC" for 2-D, "C" for 1-D, "" otherwise;
  /// "NHWC" for the 4-D image inputs and outputs of TFLite models (their own layout: inputs are
  /// given and outputs returned NHWC, the host Lower step transposes).
  std::string format;

  /// Bytes of a dense tensor of this description.
  std::size_t size() const noexcept;
  /// Row-major strides in elements.
  std::vector<std::int64_t> strides() const;
  /// "name: uint8 [1, 1, 28, 28] NCHW (784 bytes)", the name through escape_text (one line).
  std::string to_string() const;
};

/// The inputs and outputs of a compiled model.
struct Model {
  std::vector<TensorDesc> inputs;
  std::vector<TensorDesc> outputs;
};

/// What a session is created from: the options create_runner and create_queue share. Names
/// follow FuriosaAI's SDK (`device`, `worker_num`, `batch_size`, `compiler_config`).
struct SessionOptions {
  /// Device spec in FuriosaAI's syntax (device/device_spec.h): "warboy(2)*1", "warboy*2",
  /// "npu:0:0", "npu:0:0-1", "npu:0", "npu0pe1", or a comma-separated list (requests go to the
  /// least loaded device). Empty means FURIOSA_DEVICES, else NPU_DEVNAME, else "warboy(2)*1"
  /// (one fused PE: npu0pe0-1 on the default simulated card).
  std::string device;
  /// Host workers running host pre/post-ops (>= 1). They never wait on a device fence: the
  /// fence's signal hands the request back to them (docs/design.md "Runtime").
  int worker_num = 2;
  /// Model-level batch: bound to a symbolic dim 0 of the inputs (e.g. MobileNetV2's
  /// `batch_size`); a model whose dim 0 is fixed accepts only its own batch. >= 1.
  std::int64_t batch_size = 1;
  /// Compiler options. batch_size and pe_count are set from the fields above and the device.
  program::CompilerOptions compiler_config;
  /// Where spans go: every inference of the session records into it. Null (the default) means
  /// the profiler active when each inference starts: the innermost open
  /// profiler::ProfileScope (the SDK's `with profile(...)`), else the
  /// FURIOSA_PROFILER_OUTPUT_PATH profiler if that is set, else none.
  std::shared_ptr<profiler::Profiler> profiler;
  /// Backend by name ("sim", "pcie"); empty or "auto" means FURIOSA_BACKEND, else pcie when a
  /// Warboy card is present, else sim (device::select_backend). Ignored when `driver` is set.
  std::string backend;
  /// A driver to open the device with instead of a built-in backend (tests, tools with their own
  /// simulator configuration). Borrowed: must outlive the Runner or queue.
  device::Driver* driver = nullptr;
  /// Watchdog limit of one execution: an execution that has not finished this long after the
  /// device's previous progress fails its request with Error(DeviceTimeout) and the device is
  /// reset (docs/devices.md "Recovery"). Zero (the default) means
  /// max(kDefaultDeviceTimeoutFloor, 1000 x the program's modelled device time).
  std::chrono::milliseconds device_timeout{0};
  /// Share the devices with the other sessions of this process that set it too (Triton's many
  /// models on one GPU; furiosa-serve sets it for every model): a device file already opened by
  /// such a session is not DeviceBusy but used as it is, its programs loaded beside the others'.
  /// Executions of all of them go through the device's one FIFO queue, so a device is shared in
  /// submission order; its watchdog and recovery cover all of them (a reset aborts every
  /// execution behind a hung one, and each is submitted again by its own session), and
  /// DeviceHealth counts every execution on the device. Only the same device file is shared:
  /// "npu0pe0" while another session holds "npu0pe0-1" is DeviceBusy, as is any device held by
  /// another process. The device closes when its last session does.
  bool share_devices = false;
};

/// Floor of the default watchdog limit: the simulator computes on a shared host, far slower
/// than the modelled card, so the limit must not fire on a slow but healthy execution.
inline constexpr std::chrono::milliseconds kDefaultDeviceTimeoutFloor{30'000};

/// What the runtime saw and did on one device of a session, cumulative since it was opened.
struct DeviceHealth {
  std::string device_file;       ///< e.g. "npu0pe0"
  std::uint64_t completed = 0;   ///< executions whose fence signalled success
  /// Device time of those executions, Load start to Store end (ExecutionTiming::busy_ns: a Load
  /// that overlaps the previous execution counts from that execution's Store end), summed, in
  /// ns: its rate is the device's utilisation.
  std::uint64_t busy_ns = 0;
  std::uint64_t faults = 0;      ///< executions failed by the device (DeviceFault), not retried
  std::uint64_t timeouts = 0;    ///< executions failed by the watchdog (DeviceTimeout)
  std::uint64_t resets = 0;      ///< device resets after a timeout
  std::uint64_t retried = 0;     ///< executions aborted by a reset and submitted again
  bool lost = false;             ///< the device was lost: no more requests go to it
  device::DeviceCounters counters;  ///< the backend's counters (sim: "sim.faults.<kind>")
};

/// Options of create_runner (the shared SessionOptions; nothing runner-specific yet).
struct RunnerOptions : SessionOptions {};


/// A model compiled for and bound to one device. run() is thread-safe: calls from many threads
/// are spread over the workers and share the device's in-order queue. Destroying the Runner
/// waits for in-flight runs, then releases the device.
class Runner {
 public:
  struct Impl;
  explicit Runner(std::unique_ptr<Impl> impl);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  /// Inputs and outputs of the model.
  const Model& model() const noexcept;
  /// The device files this runner holds, comma separated, e.g. "npu0pe0-1".
  std::string device_name() const;
  /// The backend and why it was chosen, e.g. "sim (no Warboy card found by pcie)".
  std::string backend() const;
  /// Where each node of the model runs, and why.
  const program::PartitionReport& partition_report() const noexcept;
  /// The compiled model (program, CPU ops).
  const program::CompiledModel& compiled() const noexcept;

  /// Per device of the session, in device-list order. Thread-safe.
  std::vector<DeviceHealth> device_health() const;

  /// Runs one inference. `inputs` are in model().inputs order, dense row-major. Throws
  /// Error(InvalidInput) naming the tensor, expected and actual value when the count, dtype or
  /// shape is wrong (nothing is submitted then), Error(DeviceFault) when the device fails,
  /// Error(DeviceTimeout) when the execution hung (the device is reset), Error(DeviceNotFound)
  /// when every device of the session is lost.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

  /// Starts one inference and returns at once; the future holds the outputs or the error
  /// (Error(DeviceFault), ...). Input validation errors are thrown here, before anything runs.
  /// The inputs are moved into the request (no copy when the caller passes an rvalue).
  std::future<std::vector<Tensor>> run_async(std::vector<Tensor> inputs);

  /// Starts one inference and returns its handle at once (infer_request.h: callback exactly once
  /// on a worker, cancel(), wait()). `inputs` are moved into the request (no copy for an
  /// rvalue). Throws, before anything runs and without ever calling `callback`,
  /// Error(InvalidInput) like run() (unless options.inputs_checked). Thread-safe.
  InferRequest start(std::vector<Tensor> inputs, InferCallback callback, const StartOptions& options = {});

  /// Host time spent in the model's host (CPU) operators, summed over every request since the
  /// runner was created, in ns (wall time on the threads running them). Thread-safe.
  std::uint64_t host_operator_ns() const;

  /// Runs with inputs given by name and returns the named outputs (all outputs, in model order,
  /// when `output_names` is empty). Unknown or missing names are Error(InvalidInput).
  std::vector<Tensor> run_with(const std::vector<std::string>& output_names,
                               const std::map<std::string, Tensor>& named_inputs);

 private:
  std::unique_ptr<Impl> impl_;
};

/// Compiles the model at `path` (a .tflite file, by extension or its "TFL3" identifier, else
/// ONNX; compiler::import_model) and opens the device. The compile goes through the compile
/// cache (compiler/compile_cache.h; FURIOSA_COMPILE_CACHE_DIR, "off" to disable): a model compiled
/// before with the same options is loaded, not compiled; the trace's Compile span says
/// `cache: hit|miss|off`.
///
/// A program file (program/program_file.h: extension .enf or its magic; `furiosa-compile`) is
/// loaded instead of compiled. Its target must match the device: a device whose PE count differs
/// from the file's is Error(IncompatibleModel) naming both (with no device spec given anywhere, a
/// device of the file's target is opened). Its batch size applies: options.batch_size must be 1
/// (the default) or equal to it, else Error(IncompatibleModel) naming both; compiler knobs in
/// options.compiler_config must be all default or equal to the file's. A corrupted, truncated or
/// other-version file is Error(ModelLoadFailed) naming the file and the problem.
///
/// With the programs-only target (furiosa::runtime_core) any path that is not a program file is
/// Error(ModelLoadFailed) naming it and saying so.
///
/// Throws Error(ModelLoadFailed), Error(UnsupportedOperator), Error(IncompatibleModel),
/// Error(DeviceNotFound), Error(DeviceBusy).
std::unique_ptr<Runner> create_runner(const std::filesystem::path& path,
                                      const RunnerOptions& options = {});


/// The inputs and outputs (names, dtypes, shapes at options.batch_size, formats) the model at
/// `path` has when run with `options`, found by importing and compiling it (through the compile
/// cache) or by loading its program file, without opening a device or starting workers
/// (options.device and options.driver are not used; a program file's target is not checked).
/// Equal to create_runner(path, options)->model(). Throws Error(ModelLoadFailed),
/// Error(UnsupportedOperator), Error(IncompatibleModel) like create_runner.
Model describe_model(const std::filesystem::path& path, const SessionOptions& options = {});

}  // namespace furiosa::runtime
