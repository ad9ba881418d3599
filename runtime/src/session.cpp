// Session: choose the backend and the devices, compile (or load) the model, and put together
// the parts a request runs through: the DevicePool (devices, load balancing, watchdog), the
// HostBufferPool and the RequestPipeline (admission, stages, completion, cancel). Runner and the
// submit/recv queues are its front ends.
//
// One inference (DESIGN.md "One inference, end to end"; docs/design.md "Runtime"): see
// request_pipeline.h.
#include "session.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "furiosa/device/backends.h"
#include "furiosa/device/device_spec.h"
#include "furiosa/profiler/device_execution.h"
#include "shared_devices.h"

namespace furiosa::runtime::detail {

namespace {

std::string format_of(const Shape& s) {
  switch (s.size()) {
    case 4: return "NCHW";
    case 2: return "NC";
    case 1: return "C";
    default: return "";
  }
}

}  // namespace

std::vector<KernelShapes> kernel_shapes_of(const isa::Program& program) {
  const auto join = [](const std::vector<isa::TensorRef>& refs) {
    std::string out;
    for (const auto& ref : refs) {
      if (!out.empty()) out += ',';
      out += fmt::format("[{}]", fmt::join(ref.shape, ","));
    }
    return out;
  };
  std::vector<KernelShapes> out;
  out.reserve(program.kernels.size());
  for (const auto& k : program.kernels) out.push_back({join(k.inputs), join(k.outputs)});
  return out;
}

profiler::DeviceExecution device_execution_of(const device::ExecutionTiming& t,
                                              const device::DeviceFile& file,
                                              const std::vector<KernelShapes>* shapes) {
  profiler::DeviceExecution e;
  e.card = file.card;
  e.pe_index = file.first_pe;
  e.execution_index = static_cast<std::int64_t>(t.execution_index);
  e.load_start_ns = t.load_start_ns;
  e.load_end_ns = t.load_end_ns;
  e.exec_start_ns = t.exec_start_ns;
  e.exec_end_ns = t.exec_end_ns;
  e.store_start_ns = t.store_start_ns;
  e.store_end_ns = t.store_end_ns;
  e.cycles = static_cast<std::int64_t>(t.kernel_cycles);
  e.kernels.reserve(t.kernels.size());
  for (const auto& k : t.kernels) {
    e.kernels.push_back(
        {isa::kernel_name(k.kind), k.start_ns, k.end_ns, k.operator_index, k.instruction_index,
         static_cast<std::int64_t>(k.cycles), k.bound, static_cast<std::int64_t>(k.dram_bytes),
         static_cast<std::int64_t>(k.spill_bytes), static_cast<std::int64_t>(k.macs),
         static_cast<std::int64_t>(k.bytes), static_cast<std::int64_t>(k.weight_load_cycles)});
    const auto i = static_cast<std::size_t>(k.instruction_index);
    if (shapes != nullptr && k.instruction_index >= 0 && i < shapes->size()) {
      e.kernels.back().in_shapes = (*shapes)[i].inputs;
      e.kernels.back().out_shapes = (*shapes)[i].outputs;
    }
  }
  for (const auto& b : t.backend_spans) e.backend_intervals.push_back({b.name, b.start_ns, b.end_ns});
  return e;
}

Model model_of(const program::CompiledModel& compiled) {
  // Formats: the axis naming the compiler recorded for the slot (e.g. "NHWC" for TFLite
  // images), else the rank-based default.
  const auto desc = [](const program::HostSlot& slot) {
    return TensorDesc{slot.name, slot.dtype, slot.shape,
                      slot.format.empty() ? format_of(slot.shape) : slot.format};
  };
  Model model;
  for (int s : compiled.input_slots) model.inputs.push_back(desc(compiled.slots[static_cast<std::size_t>(s)]));
  for (int s : compiled.output_slots) model.outputs.push_back(desc(compiled.slots[static_cast<std::size_t>(s)]));
  return model;
}

Session::Session(ModelSource source, const SessionConfig& config) {
  if (config.worker_num < 1) {
    throw Error(ErrorCode::InvalidArgument, fmt::format("worker_num must be >= 1, got {}", config.worker_num));
  }
  // A profiler given in the options records everything; otherwise each inference records into
  // the profiler active when it starts (an open profiler::ProfileScope, else
  // FURIOSA_PROFILER_OUTPUT_PATH's), as the SDK's `with profile(...)` attaches to every session.
  profiler_ = config.profiler;
  // Device spec precedence: explicit > FURIOSA_DEVICES > NPU_DEVNAME > warboy(2)*1.
  // Backend: a given driver, else by name / FURIOSA_BACKEND / card presence.
  device::Driver* chosen = config.driver;
  if (chosen != nullptr) {
    backend_ = fmt::format("{} (driver given by the caller)", chosen->name());
  } else {
    const device::BackendChoice choice = device::select_backend(device::builtin_registry(), config.backend);
    chosen = choice.driver;
    backend_ = fmt::format("{} ({})", choice.name, choice.reason);
  }
  device::Driver& driver = *chosen;
  // A program file without any device spec given opens a device of its own target.
  device::DeviceSpecChoice spec_choice = device::choose_device_spec(config.device);
  if (spec_choice.source == "default" && source.program() != nullptr) {
    spec_choice.text = fmt::format("warboy({})*1", source.program()->options.pe_count);
  }
  const auto spec = device::parse_device_spec(spec_choice.text);
  std::vector<device::CardInfo> cards = driver.enumerate();
  // A sharing session may choose a device another sharing session of this process holds.
  if (config.share_devices) mark_shared_devices_free(driver, cards);
  if (cards.empty()) {  // one line saying which backend found nothing, and what runs without a card
    throw Error(ErrorCode::DeviceNotFound,
                fmt::format("{}: no NPU card found (backend {}); the simulator runs without one: "
                            "--backend sim or FURIOSA_BACKEND=sim",
                            driver.name(), backend_));
  }
  const std::vector<device::DeviceFile> files = device::resolve_device_spec(spec, cards);
  {
    const std::shared_ptr<profiler::Profiler> compile_profiler = profiler_ ? profiler_ : profiler::active_profiler();
    profiler::ScopedSpan compile_span(compile_profiler.get(), "Compile", {});
    program::CompilerOptions copts = config.compiler_config;
    copts.pe_count = files.front().pe_count();
    copts.batch_size = config.batch_size;
    const bool from_program_file = source.program() != nullptr;
    CompileResult result = source.compile(copts, files.front().name());
    compiled_ = std::move(result.model);
    // cache: hit | miss | off; a program file is loaded, not compiled.
    compile_span.record().attributes = {{"cache", result.cache}};
    if (from_program_file) compile_span.record().attributes.emplace_back("program", "loaded from a program file");
  }
  model_ = model_of(compiled_);
  devices_ = std::make_unique<DevicePool>(
      driver, files, compiled_, std::chrono::nanoseconds(config.device_timeout), profiler_,
      [this](std::shared_ptr<PooledExecution> execution) {
        pipeline_->on_signalled(std::move(execution));
      },
      config.share_devices);
  // One set of host buffers per worker, with every intermediate slot allocated now.
  buffers_ = std::make_unique<HostBufferPool>(compiled_, static_cast<std::size_t>(config.worker_num));
  pipeline_ = std::make_unique<RequestPipeline>(compiled_, *devices_, files.size(), *buffers_, config.worker_num,
                                                profiler_);
  spdlog::debug("session ready on {} ({} NPU programs)", device_names(), compiled_.npu_calls.size());
}

Session::~Session() {
  // Started requests finish (including those waiting on a device or for admission) before the
  // devices close; then the workers go.
  if (pipeline_) pipeline_->drain();
  devices_.reset();
  pipeline_.reset();
}

std::string Session::device_names() const { return devices_->names(); }

std::vector<DeviceHealth> Session::device_health() const { return devices_->health(); }

std::uint64_t Session::host_operator_ns() const noexcept { return pipeline_->host_operator_ns(); }

std::shared_ptr<RequestState> Session::start(std::shared_ptr<const std::vector<Tensor>> inputs, Completion done,
                                             std::function<void()> on_start, bool first_stage_here) {
  return pipeline_->start(std::move(inputs), std::move(done), std::move(on_start), first_stage_here);
}

void Session::validate(const std::vector<Tensor>& inputs) const {
  if (inputs.size() != model_.inputs.size()) {
    std::string names;
    for (const auto& d : model_.inputs) names += (names.empty() ? "" : ", ") + d.name;
    throw Error(ErrorCode::InvalidInput,
                fmt::format("expected {} input(s) ({}), got {}", model_.inputs.size(), names, inputs.size()));
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const TensorDesc& d = model_.inputs[i];
    if (inputs[i].dtype() != d.dtype) {
      throw Error(ErrorCode::InvalidInput,
                  fmt::format("input '{}': expected dtype {}, got {}", d.name, dtype_name(d.dtype),
                              dtype_name(inputs[i].dtype())),
                  ErrorSubject::of_tensor(d.name));
    }
    if (inputs[i].shape() != d.shape) {
      throw Error(ErrorCode::InvalidInput,
                  fmt::format("input '{}': expected shape {}, got {}", d.name, shape_to_string(d.shape),
                              shape_to_string(inputs[i].shape())),
                  ErrorSubject::of_tensor(d.name));
    }
  }
}

}  // namespace furiosa::runtime::detail
