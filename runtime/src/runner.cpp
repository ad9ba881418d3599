// Runner: compile, open the device, and run inferences through the worker pool.
//
// Every entry point is a request of the session's RequestPipeline (request_pipeline.h): start()
// returns its handle, run_async() completes a future from its callback, run() waits for that
// future (and lends the caller's inputs instead of copying them). Inputs are validated once,
// before anything runs.
#include "furiosa/runtime/runner.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <future>
#include <optional>

#include "factories.h"
#include "furiosa/core/text.h"
#include "session.h"

namespace furiosa::runtime {

// ---- TensorDesc -----------------------------------------------------------------------------

std::size_t TensorDesc::size() const noexcept {
  return static_cast<std::size_t>(element_count(shape)) * dtype_size(dtype);
}

std::vector<std::int64_t> TensorDesc::strides() const { return contiguous_strides(shape); }

std::string TensorDesc::to_string() const {
  return fmt::format("{}: {} {} {} ({} bytes)", escape_text(name), dtype_name(dtype), shape_to_string(shape),
                     format.empty() ? "-" : format, size());
}

// ---- Runner ---------------------------------------------------------------------------------

struct Runner::Impl {
  std::unique_ptr<detail::Session> session;
  Model model;  // the session's (with the compiler's recorded formats, e.g. NHWC for TFLite)
};

Runner::Runner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runner::~Runner() = default;

const Model& Runner::model() const noexcept { return impl_->model; }
std::string Runner::device_name() const { return impl_->session->device_names(); }
std::string Runner::backend() const { return impl_->session->backend(); }
std::vector<DeviceHealth> Runner::device_health() const { return impl_->session->device_health(); }
const program::PartitionReport& Runner::partition_report() const noexcept { return impl_->session->compiled().report; }
const program::CompiledModel& Runner::compiled() const noexcept { return impl_->session->compiled(); }

std::uint64_t Runner::host_operator_ns() const { return impl_->session->host_operator_ns(); }

InferRequest Runner::start(std::vector<Tensor> inputs, InferCallback callback, const StartOptions& options) {
  if (!options.inputs_checked) impl_->session->validate(inputs);
  return InferRequest(impl_->session->start(std::make_shared<const std::vector<Tensor>>(std::move(inputs)),
                                            std::move(callback), {}, options.first_stage_on_caller));
}

std::vector<Tensor> Runner::run(const std::vector<Tensor>& inputs) {
  impl_->session->validate(inputs);
  // The caller waits, so its vector is borrowed, not copied.
  std::shared_ptr<const std::vector<Tensor>> borrowed(&inputs, [](const std::vector<Tensor>*) {});
  std::promise<std::vector<Tensor>> promise;
  auto result = promise.get_future();
  impl_->session->start(borrowed, [&promise](std::vector<Tensor> out, std::exception_ptr err) {
    if (err) promise.set_exception(err);
    else promise.set_value(std::move(out));
  });
  return result.get();
}

std::future<std::vector<Tensor>> Runner::run_async(std::vector<Tensor> inputs) {
  auto promise = std::make_shared<std::promise<std::vector<Tensor>>>();
  auto result = promise->get_future();
  start(std::move(inputs), [promise](std::vector<Tensor> out, std::exception_ptr err) {
    if (err) promise->set_exception(err);
    else promise->set_value(std::move(out));
  });
  return result;
}

std::vector<Tensor> Runner::run_with(const std::vector<std::string>& output_names,
                                     const std::map<std::string, Tensor>& named_inputs) {
  std::vector<Tensor> inputs;
  for (const auto& d : model().inputs) {
    auto it = named_inputs.find(d.name);
    if (it == named_inputs.end()) {
      throw Error(ErrorCode::InvalidInput, fmt::format("input '{}' is not given", d.name),
                  ErrorSubject::of_tensor(d.name));
    }
    inputs.push_back(it->second);
  }
  for (const auto& [name, t] : named_inputs) {
    bool known = false;
    for (const auto& d : model().inputs) known = known || d.name == name;
    if (!known) {
      throw Error(ErrorCode::InvalidInput, fmt::format("the model has no input named '{}'", name),
                  ErrorSubject::of_tensor(name));
    }
  }
  auto outputs = run(inputs);
  if (output_names.empty()) return outputs;
  std::vector<Tensor> selected;
  for (const auto& name : output_names) {
    std::size_t i = 0;
    while (i < model().outputs.size() && model().outputs[i].name != name) ++i;
    if (i == model().outputs.size()) {
      throw Error(ErrorCode::InvalidInput, fmt::format("the model has no output named '{}'", name),
                  ErrorSubject::of_tensor(name));
    }
    selected.push_back(outputs[i]);
  }
  return selected;
}

namespace detail {

std::unique_ptr<Runner> runner_from(ModelSource source, const RunnerOptions& options) {
  auto impl = std::make_unique<Runner::Impl>();
  impl->session = std::make_unique<detail::Session>(std::move(source), static_cast<const SessionOptions&>(options));
  impl->model = impl->session->model();
  return std::make_unique<Runner>(std::move(impl));
}

Model describe_from(ModelSource source, const SessionOptions& options) {
  program::CompilerOptions copts = options.compiler_config;
  copts.batch_size = options.batch_size;
  return model_of(source.compile(copts, /*device=*/"").model);
}

}  // namespace detail

std::unique_ptr<Runner> create_runner(const std::filesystem::path& path, const RunnerOptions& options) {
  return detail::runner_from(detail::ModelSource(path), options);
}

Model describe_model(const std::filesystem::path& path, const SessionOptions& options) {
  return detail::describe_from(detail::ModelSource(path), options);
}

}  // namespace furiosa::runtime
