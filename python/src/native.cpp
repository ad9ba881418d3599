// furiosa.runtime._native: the pybind11 layer between the Python package (python/furiosa) and the
// C++ runtime. It converts numpy arrays to and from furiosa::Tensor, releases the GIL whenever
// the runtime may wait (run, submit, recv, closing a session), and turns furiosa::Error into the
// Python exception class named after its ErrorCode (furiosa/runtime/errors.py). The public,
// SDK-shaped API is the Python code; nothing here is meant to be imported directly.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "furiosa/core/error.h"
#include "furiosa/core/tensor.h"
#include "furiosa/profiler/profiler.h"
#include "furiosa/profiler/record_table.h"
#include "furiosa/profiler/report.h"
#include "furiosa/runtime/queue.h"
#include "furiosa/runtime/runner.h"
#include "native_trace.h"

namespace py = pybind11;

namespace furiosa::python {
namespace {

using runtime::Model;
using runtime::TensorDesc;

// ---- dtypes and tensors -----------------------------------------------------------------------

py::dtype numpy_dtype(DType dtype) { return py::dtype(std::string(dtype_name(dtype))); }

/// The DType of a numpy dtype, or nullopt for one the runtime has no counterpart of (float64,
/// float16, bool, big-endian, ...).
std::optional<DType> dtype_of(const py::dtype& dt) {
  const std::string order = py::str(dt.attr("byteorder"));
  if (order == ">") return std::nullopt;  // the runtime's tensors are little-endian (x86-64 hosts)
  const std::string name = py::str(dt.attr("name"));
  for (DType d : {DType::Float32, DType::UInt8, DType::Int8, DType::Int32, DType::Int64}) {
    if (name == dtype_name(d)) return d;
  }
  return std::nullopt;
}

/// Copies a numpy array (any strides) into a dense Tensor for model input `desc`. The copy is the
/// one the Tensor's ownership needs (the runtime keeps inputs until the request completes, past
/// the Python call for run_async and queues). Throws Error(InvalidInput) naming the tensor when
/// the object is not an array or its dtype has no runtime counterpart; dtype and shape mismatches
/// against the model are left to the runtime's own validation, which names expected and actual.
Tensor to_tensor(const py::handle& obj, const TensorDesc& desc) {
  if (!py::isinstance<py::array>(obj)) {
    throw Error(ErrorCode::InvalidInput,
                "input '" + desc.name + "': expected a numpy.ndarray, got " +
                    std::string(py::str(py::type::of(obj).attr("__name__"))),
                ErrorSubject::of_tensor(desc.name));
  }
  auto array = py::reinterpret_borrow<py::array>(obj);
  auto dtype = dtype_of(array.dtype());
  if (!dtype) {
    throw Error(ErrorCode::InvalidInput,
                "input '" + desc.name + "': numpy dtype " + std::string(py::str(array.dtype())) +
                    " is not supported (the model expects " + std::string(dtype_name(desc.dtype)) + ")",
                ErrorSubject::of_tensor(desc.name));
  }
  Shape shape(array.shape(), array.shape() + array.ndim());
  // A C-contiguous view when the array already is one (no copy), else a contiguous copy.
  auto dense = py::array::ensure(array, py::array::c_style);
  Tensor t = Tensor::uninitialized(*dtype, std::move(shape));  // every byte copied below
  if (static_cast<std::size_t>(dense.nbytes()) != t.size_bytes()) {
    throw Error(ErrorCode::InvalidInput,
                "input '" + desc.name + "': the array holds " + std::to_string(dense.nbytes()) +
                    " bytes, its shape and dtype need " + std::to_string(t.size_bytes()),
                ErrorSubject::of_tensor(desc.name));
  }
  if (t.size_bytes() > 0) std::memcpy(t.bytes().data(), dense.data(), t.size_bytes());
  return t;
}

/// The model inputs given as one array (single-input models), a list/tuple in model order, or a
/// dict by input name (missing or unknown names are Error(InvalidInput)).
std::vector<Tensor> to_inputs(const py::handle& obj, const std::vector<TensorDesc>& descs) {
  std::vector<Tensor> tensors;
  if (py::isinstance<py::dict>(obj)) {
    auto dict = py::reinterpret_borrow<py::dict>(obj);
    for (auto item : dict) {
      std::string name = py::str(item.first);
      bool known = false;
      for (const auto& d : descs) known = known || d.name == name;
      if (!known) {
        throw Error(ErrorCode::InvalidInput, "unknown input '" + name + "'", ErrorSubject::of_tensor(name));
      }
    }
    for (const auto& d : descs) {
      if (!dict.contains(d.name)) {
        throw Error(ErrorCode::InvalidInput, "input '" + d.name + "' is missing", ErrorSubject::of_tensor(d.name));
      }
      tensors.push_back(to_tensor(dict[py::str(d.name)], d));
    }
    return tensors;
  }
  if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
    auto seq = py::reinterpret_borrow<py::sequence>(obj);
    if (seq.size() != descs.size()) {
      throw Error(ErrorCode::InvalidInput,
                  "the model has " + std::to_string(descs.size()) + " input(s), " +
                      std::to_string(seq.size()) + " given");
    }
    for (std::size_t i = 0; i < descs.size(); ++i) tensors.push_back(to_tensor(seq[i], descs[i]));
    return tensors;
  }
  if (descs.size() != 1) {
    throw Error(ErrorCode::InvalidInput,
                "the model has " + std::to_string(descs.size()) +
                    " inputs: give a list or a dict of arrays, not one array");
  }
  tensors.push_back(to_tensor(obj, descs[0]));
  return tensors;
}

/// A numpy array over the tensor's own bytes (no copy): the array's base is a capsule owning the
/// Tensor, freed when the last view of the array goes away.
py::array to_numpy(Tensor&& tensor) {
  auto* owned = new Tensor(std::move(tensor));
  py::capsule base(owned, [](void* p) { delete static_cast<Tensor*>(p); });
  std::vector<py::ssize_t> shape(owned->shape().begin(), owned->shape().end());
  std::vector<py::ssize_t> strides;
  for (std::int64_t s : contiguous_strides(owned->shape())) {
    strides.push_back(static_cast<py::ssize_t>(s * static_cast<std::int64_t>(dtype_size(owned->dtype()))));
  }
  return py::array(numpy_dtype(owned->dtype()), shape, strides, owned->bytes().data(), base);
}

py::list to_list(std::vector<Tensor>&& tensors) {
  py::list out;
  for (Tensor& t : tensors) out.append(to_numpy(std::move(t)));
  return out;
}

// ---- errors -----------------------------------------------------------------------------------

/// The Python exception object for `error`: an instance of furiosa.runtime.errors.<ErrorCode>
/// carrying the code name and the typed subject (device_file, node, tensor, file).
py::object python_error(const Error& error) {
  auto errors = py::module_::import("furiosa.runtime.errors");
  auto cls = errors.attr("error_class")(std::string(to_string(error.code())));
  return cls(error.message(), py::arg("device_file") = error.device_file(), py::arg("node") = error.node(),
             py::arg("tensor") = error.tensor(), py::arg("file") = error.file());
}

/// Rethrows `error` and returns its Python exception object (RuntimeError-derived Internal for
/// exceptions that are not furiosa::Error).
py::object python_error(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return python_error(e);
  } catch (const std::exception& e) {
    return python_error(Error(ErrorCode::Internal, e.what()));
  }
}

// ---- options ----------------------------------------------------------------------------------

/// SessionOptions from the keyword arguments the Python layer has already checked and
/// normalized (furiosa/runtime/_options.py): compiler_config holds only known keys, by name.
void fill_options(runtime::SessionOptions& options, const std::string& device, int worker_num,
                  std::int64_t batch_size, const py::dict& compiler_config, const std::string& backend) {
  options.device = device;
  options.worker_num = worker_num;
  options.batch_size = batch_size;
  options.backend = backend;
  auto& c = options.compiler_config;
  for (auto item : compiler_config) {
    const std::string key = py::str(item.first);
    if (key == "without_quantize") c.without_quantize = item.second.cast<std::vector<std::string>>();
    else if (key == "normalized_pixel_outputs") c.normalized_pixel_outputs = item.second.cast<std::vector<std::string>>();
    else if (key == "permute_input") c.permute_input = item.second.cast<std::map<std::string, std::vector<std::int64_t>>>();
    else if (key == "input_shapes")
      c.input_shapes = item.second.cast<std::map<std::string, std::vector<std::int64_t>>>();
    else if (key == "remove_lower") c.remove_lower = item.second.cast<bool>();
    else if (key == "remove_unlower") c.remove_unlower = item.second.cast<bool>();
    else throw Error(ErrorCode::InvalidArgument, "compiler_config: unknown key '" + key + "'");
  }
}

py::list describe(const std::vector<TensorDesc>& descs) {
  py::list out;
  for (const auto& d : descs) {
    out.append(py::make_tuple(d.name, std::string(dtype_name(d.dtype)), py::tuple(py::cast(d.shape)), d.format, d.size()));
  }
  return out;
}

// ---- Runner -----------------------------------------------------------------------------------

/// A pending run_async: a runtime request (Runner::start) whose callback completes a future.
/// result() waits (GIL released) and returns the outputs or raises; cancel() cancels the request.
class PendingRun {
 public:
  PendingRun(std::future<std::vector<Tensor>> future, runtime::InferRequest request)
      : future_(std::move(future)), request_(std::move(request)) {}

  /// InferRequest::cancel(): true when the result is (or will be) the Cancelled error. Never
  /// waits for the request.
  bool cancel() { return request_.cancel(); }

  bool done() const {
    return !future_.valid() ||
           future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }

  /// Waits up to `timeout_s` seconds (GIL released); true when the result is ready.
  bool wait(double timeout_s) {
    if (!future_.valid()) return true;
    py::gil_scoped_release release;
    return future_.wait_for(std::chrono::duration<double>(timeout_s)) == std::future_status::ready;
  }

  py::list result() {
    if (!future_.valid()) throw Error(ErrorCode::InvalidArgument, "result() was already taken");
    std::vector<Tensor> out;
    {
      py::gil_scoped_release release;
      out = future_.get();
    }
    return to_list(std::move(out));
  }

 private:
  std::future<std::vector<Tensor>> future_;
  runtime::InferRequest request_;
};

class NativeRunner {
 public:
  NativeRunner(const std::string& path, const std::string& device, int worker_num, std::int64_t batch_size,
               const py::dict& compiler_config, const std::string& backend) {
    runtime::RunnerOptions options;
    fill_options(options, device, worker_num, batch_size, compiler_config, backend);
    py::gil_scoped_release release;
    runner_ = runtime::create_runner(path, options);
  }

  ~NativeRunner() { close(); }

  py::list inputs() const { return describe(get().model().inputs); }
  py::list outputs() const { return describe(get().model().outputs); }
  std::string device_name() const { return get().device_name(); }
  std::string backend() const { return get().backend(); }

  py::list run(const py::handle& inputs) {
    auto& runner = get();
    auto tensors = to_inputs(inputs, runner.model().inputs);
    std::vector<Tensor> out;
    {
      py::gil_scoped_release release;
      out = runner.run(tensors);
    }
    return to_list(std::move(out));
  }

  PendingRun run_async(const py::handle& inputs) {
    auto& runner = get();
    auto tensors = to_inputs(inputs, runner.model().inputs);
    auto promise = std::make_shared<std::promise<std::vector<Tensor>>>();
    auto future = promise->get_future();
    py::gil_scoped_release release;
    // The callback runs on a runtime worker and touches no Python object.
    auto request = runner.start(std::move(tensors), [promise](std::vector<Tensor> out, std::exception_ptr error) {
      if (error) promise->set_exception(error);
      else promise->set_value(std::move(out));
    });
    return PendingRun(std::move(future), std::move(request));
  }

  /// Waits for in-flight runs and releases the device. Idempotent.
  void close() {
    if (!runner_) return;
    std::unique_ptr<runtime::Runner> closing = std::move(runner_);
    if (Py_IsInitialized() && PyGILState_Check()) {
      py::gil_scoped_release release;
      closing.reset();
    } else {
      closing.reset();
    }
  }

 private:
  runtime::Runner& get() const {
    if (!runner_) throw Error(ErrorCode::SessionClosed, "the runner is closed");
    return *runner_;
  }
  std::unique_ptr<runtime::Runner> runner_;
};

// ---- queues -----------------------------------------------------------------------------------

/// The two sides of a create_queue session. Contexts stay on the Python side: each request
/// carries an integer key (the Python layer maps it back), so no Python object is ever touched
/// by a runtime thread.
class NativeQueue {
 public:
  NativeQueue(const std::string& path, const std::string& device, int worker_num, std::int64_t batch_size,
              const py::dict& compiler_config, const std::string& backend, std::size_t input_queue_size,
              std::size_t output_queue_size) {
    runtime::QueueOptions options;
    fill_options(options, device, worker_num, batch_size, compiler_config, backend);
    options.input_queue_size = input_queue_size;
    options.output_queue_size = output_queue_size;
    py::gil_scoped_release release;
    auto [submitter, receiver] = runtime::create_queue(path, options);
    model_ = submitter.model();
    submitter_.emplace(std::move(submitter));
    receiver_.emplace(std::move(receiver));
  }

  ~NativeQueue() {
    if (!submitter_) return;
    py::gil_scoped_release release;
    submitter_.reset();
    receiver_.reset();
  }

  py::list inputs() const { return describe(model_.inputs); }
  py::list outputs() const { return describe(model_.outputs); }

  void submit(const py::handle& inputs, std::uint64_t key) {
    auto tensors = to_inputs(inputs, model_.inputs);
    py::gil_scoped_release release;
    submitter_->submit(std::move(tensors), std::any(key));
  }

  /// (key, outputs, None) for a success, (key, None, exception) for a failed request; raises the
  /// queue's own errors (QueueWaitTimeout, SessionTerminated, SessionClosed). `timeout_ms` < 0
  /// waits without a bound.
  py::tuple recv(std::int64_t timeout_ms) {
    std::optional<runtime::QueueResult> result;
    {
      py::gil_scoped_release release;
      result.emplace(timeout_ms < 0 ? receiver_->recv() : receiver_->recv(std::chrono::milliseconds(timeout_ms)));
    }
    const auto key = std::any_cast<std::uint64_t>(result->context);
    if (result->error) return py::make_tuple(key, py::none(), python_error(result->error));
    return py::make_tuple(key, to_list(std::move(result->outputs)), py::none());
  }

  void close_submitter() {
    py::gil_scoped_release release;
    submitter_->close();
  }
  void close_receiver() {
    py::gil_scoped_release release;
    receiver_->close();
  }

 private:
  Model model_;
  std::optional<runtime::Submitter> submitter_;
  std::optional<runtime::Receiver> receiver_;
};

// ---- profiler ---------------------------------------------------------------------------------

/// A record scope (profiler.record(label)) entered and exited from Python's `with`.
class NativeRecord {
 public:
  NativeRecord(std::shared_ptr<profiler::Profiler> profiler, std::string label)
      : profiler_(std::move(profiler)), label_(std::move(label)) {}
  void enter() { scope_ = std::make_unique<profiler::RecordScope>(profiler_.get(), label_); }
  void exit() { scope_.reset(); }

 private:
  std::shared_ptr<profiler::Profiler> profiler_;
  std::string label_;
  std::unique_ptr<profiler::RecordScope> scope_;
};

/// A profiler and its ProfileScope (the SDK's `with profile(...)`).
class NativeProfiler {
 public:
  NativeProfiler() : profiler_(std::make_shared<profiler::Profiler>()) {}
  void enter() { scope_ = std::make_unique<profiler::ProfileScope>(profiler_); }
  void exit() { scope_.reset(); }
  void pause() { profiler_->pause(); }
  void resume() { profiler_->resume(); }
  NativeRecord record(const std::string& label) { return NativeRecord(profiler_, label); }
  void write_chrome_trace(const std::string& path) const { profiler_->write_chrome_trace(path); }
  std::string record_table_csv() const {
    std::ostringstream out;
    profiler_->record_table().write_csv(out);
    return out.str();
  }
  std::string report(const std::string& name) const {
    auto kind = profiler::parse_report_kind(name);
    if (!kind) throw Error(ErrorCode::InvalidArgument, "unknown report '" + name + "'");
    return profiler::format_report(*kind, profiler_->records());
  }
  std::size_t span_count() const { return profiler_->records().size(); }
  py::dict report_columns(const std::string& name) const {
    return furiosa::python::report_columns(name, profiler_->records());
  }

 private:
  std::shared_ptr<profiler::Profiler> profiler_;
  std::unique_ptr<profiler::ProfileScope> scope_;
};

}  // namespace
}  // namespace furiosa::python

PYBIND11_MODULE(_native, m) {
  using namespace furiosa::python;
  m.doc() = "Native layer of furiosa.runtime (use the furiosa.runtime package, not this module).";

  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const furiosa::Error& e) {
      py::object exc = python_error(e);
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    }
  });

  m.def(
      "describe_model",
      [](const std::string& path, std::int64_t batch_size) {
        furiosa::runtime::SessionOptions options;
        options.batch_size = batch_size;
        furiosa::runtime::Model model;
        {
          py::gil_scoped_release release;
          model = furiosa::runtime::describe_model(path, options);
        }
        return py::make_tuple(describe(model.inputs), describe(model.outputs));
      },
      py::arg("path"), py::arg("batch_size"));

  py::class_<PendingRun>(m, "PendingRun")
      .def("done", &PendingRun::done)
      .def("cancel", &PendingRun::cancel)
      .def("wait", &PendingRun::wait)
      .def("result", &PendingRun::result);

  py::class_<NativeRunner>(m, "Runner")
      .def(py::init<const std::string&, const std::string&, int, std::int64_t, const py::dict&, const std::string&>(),
           py::arg("path"), py::arg("device"), py::arg("worker_num"), py::arg("batch_size"),
           py::arg("compiler_config"), py::arg("backend"))
      .def("inputs", &NativeRunner::inputs)
      .def("outputs", &NativeRunner::outputs)
      .def("device_name", &NativeRunner::device_name)
      .def("backend", &NativeRunner::backend)
      .def("run", &NativeRunner::run)
      .def("run_async", &NativeRunner::run_async)
      .def("close", &NativeRunner::close);

  py::class_<NativeQueue>(m, "Queue")
      .def(py::init<const std::string&, const std::string&, int, std::int64_t, const py::dict&, const std::string&,
                    std::size_t, std::size_t>(),
           py::arg("path"), py::arg("device"), py::arg("worker_num"), py::arg("batch_size"),
           py::arg("compiler_config"), py::arg("backend"), py::arg("input_queue_size"),
           py::arg("output_queue_size"))
      .def("inputs", &NativeQueue::inputs)
      .def("outputs", &NativeQueue::outputs)
      .def("submit", &NativeQueue::submit)
      .def("recv", &NativeQueue::recv)
      .def("close_submitter", &NativeQueue::close_submitter)
      .def("close_receiver", &NativeQueue::close_receiver);

  py::class_<NativeRecord>(m, "Record")
      .def("enter", &NativeRecord::enter)
      .def("exit", &NativeRecord::exit);

  py::class_<NativeProfiler>(m, "Profiler")
      .def(py::init<>())
      .def("enter", &NativeProfiler::enter)
      .def("exit", &NativeProfiler::exit)
      .def("pause", &NativeProfiler::pause)
      .def("resume", &NativeProfiler::resume)
      .def("record", &NativeProfiler::record)
      .def("write_chrome_trace", &NativeProfiler::write_chrome_trace)
      .def("record_table_csv", &NativeProfiler::record_table_csv)
      .def("report", &NativeProfiler::report)
      .def("report_columns", &NativeProfiler::report_columns)
      .def("span_count", &NativeProfiler::span_count);

  furiosa::python::bind_trace_functions(m);
}
