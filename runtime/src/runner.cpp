// Runner: compile, open the device, and run inferences through the worker pool.
//
// One inference (DESIGN.md "One inference, end to end"):
//   caller thread: span Inference (root of a new trace); inputs validated before anything runs
//   worker:        Quantize/Lower (pre-ops) -> Enqueue (device submit) -> wait on the fence
//                  -> NPU spans Load/Execution(+kernels)/Store from the device timestamps
//                  -> Unlower/Dequantize (post-ops)
#include "furiosa/runtime/runner.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstdlib>
#include <future>
#include <optional>
#include <regex>

#include "cpu_ops.h"
#include "furiosa/compiler/cpu_ops.h"
#include "furiosa/compiler/onnx_import.h"
#include "furiosa/device/sim.h"

namespace furiosa::runtime {

// ---- TensorDesc -----------------------------------------------------------------------------

std::size_t TensorDesc::size() const noexcept {
  return static_cast<std::size_t>(element_count(shape)) * dtype_size(dtype);
}

std::vector<std::int64_t> TensorDesc::strides() const { return contiguous_strides(shape); }

std::string TensorDesc::to_string() const {
  return fmt::format("{}: {} {} {} ({} bytes)", name, dtype_name(dtype), shape_to_string(shape),
                     format.empty() ? "-" : format, size());
}

namespace {

std::string format_of(const Shape& s) {
  switch (s.size()) {
    case 4: return "NCHW";
    case 2: return "NC";
    case 1: return "C";
    default: return "";
  }
}

// Reads an environment variable; empty when unset.
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

device::DeviceFile resolve_device(const std::string& spec_in) {
  std::string spec = spec_in;
  if (spec.empty()) spec = env("FURIOSA_DEVICES");
  if (spec.empty()) spec = env("NPU_DEVNAME");
  if (spec.empty()) spec = "npu0pe0-1";
  std::smatch m;
  if (std::regex_match(spec, m, std::regex(R"(npu:(\d+):(\d+)(?:-(\d+))?)"))) {
    device::DeviceFile f{std::stoi(m[1]), std::stoi(m[2]), m[3].matched ? std::stoi(m[3]) : std::stoi(m[2])};
    if (f.last_pe < f.first_pe) {
      throw Error(ErrorCode::InvalidArgument, fmt::format("device spec '{}': PE range is reversed", spec));
    }
    return f;
  }
  try {
    return device::DeviceFile::parse(spec);
  } catch (const Error&) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("device spec '{}' is not understood (expected a device file such as "
                            "npu0pe0 or npu0pe0-1, or npu:X:Y / npu:X:Y-Z)", spec));
  }
}

// ---- Runner::Impl ---------------------------------------------------------------------------

struct Runner::Impl {
  compiler::CompiledModel compiled;
  Model model;
  std::shared_ptr<profiler::Profiler> profiler;
  std::unique_ptr<device::Device> device;
  std::vector<std::shared_ptr<device::LoadedProgram>> programs;  // per NpuCall
  std::unique_ptr<boost::asio::thread_pool> pool;

  ~Impl() {
    if (pool) pool->join();  // in-flight runs finish before the device closes
  }

  void validate(const std::vector<Tensor>& inputs) const {
    if (inputs.size() != model.inputs.size()) {
      std::string names;
      for (const auto& d : model.inputs) names += (names.empty() ? "" : ", ") + d.name;
      throw Error(ErrorCode::InvalidInput,
                  fmt::format("expected {} input(s) ({}), got {}", model.inputs.size(), names, inputs.size()));
    }
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const TensorDesc& d = model.inputs[i];
      if (inputs[i].dtype() != d.dtype) {
        throw Error(ErrorCode::InvalidInput,
                    fmt::format("input '{}': expected dtype {}, got {}", d.name, dtype_name(d.dtype),
                                dtype_name(inputs[i].dtype())));
      }
      if (inputs[i].shape() != d.shape) {
        throw Error(ErrorCode::InvalidInput,
                    fmt::format("input '{}': expected shape {}, got {}", d.name, shape_to_string(d.shape),
                                shape_to_string(inputs[i].shape())));
      }
    }
  }

  // Records the device-side spans of one execution under `parent`.
  void record_npu_spans(const device::ExecutionTiming& t, const profiler::SpanContext& parent,
                        std::uint64_t flow_id) {
    if (!profiler || !profiler->is_recording()) return;
    const auto& file = device->file();
    auto npu = [&](const char* name, std::int64_t s, std::int64_t e, std::uint64_t parent_id) {
      profiler::SpanRecord r;
      r.trace_id = parent.trace_id;
      r.span_id = profiler->next_span_id();
      r.parent_span_id = parent_id;
      r.name = name;
      r.cat = profiler::Category::NPU;
      r.start_ns = s;
      r.end_ns = e;
      r.card = file.card;
      r.pe_index = file.first_pe;
      r.execution_index = static_cast<std::int64_t>(t.execution_index);
      return r;
    };
    profiler->record(npu("Load", t.load_start_ns, t.load_end_ns, parent.span_id));
    auto exec = npu("Execution", t.exec_start_ns, t.exec_end_ns, parent.span_id);
    exec.flow_id = flow_id;
    const std::uint64_t exec_id = exec.span_id;
    profiler->record(std::move(exec));
    for (const auto& k : t.kernels) {
      auto r = npu(std::string(isa::kernel_name(k.kind)).c_str(), k.start_ns, k.end_ns, exec_id);
      r.operator_index = k.operator_index;
      r.instruction_index = k.instruction_index;
      profiler->record(std::move(r));
    }
    profiler->record(npu("Store", t.store_start_ns, t.store_end_ns, parent.span_id));
  }

  // Host buffers of one inference: dense slots hold Tensors (user inputs and constants are
  // referenced in place), lowered slots raw bytes.
  struct Buffers {
    explicit Buffers(std::size_t n) : tensors(n), raw(n), ref(n, nullptr) {}
    std::vector<std::optional<Tensor>> tensors;
    std::vector<std::vector<std::byte>> raw;
    std::vector<const Tensor*> ref;
  };

  std::span<std::byte> writable(Buffers& b, int s) {
    const auto& slot = compiled.slots[static_cast<std::size_t>(s)];
    const auto i = static_cast<std::size_t>(s);
    if (slot.layout == isa::Layout::Linear) {
      b.tensors[i].emplace(slot.dtype, slot.shape);
      b.ref[i] = &*b.tensors[i];
      return b.tensors[i]->bytes();
    }
    b.raw[i].resize(slot.size_bytes());
    return b.raw[i];
  }

  static std::span<const std::byte> readable(const Buffers& b, int s) {
    const auto i = static_cast<std::size_t>(s);
    return b.ref[i] ? b.ref[i]->bytes() : std::span<const std::byte>(b.raw[i]);
  }

  void run_cpu(const compiler::CpuOp& op, Buffers& b, const profiler::SpanContext& ctx) {
    const std::string name = op.kind == compiler::CpuOpKind::External ? op.node->op_type
                                                                      : std::string(compiler::cpu_op_name(op.kind));
    profiler::ScopedSpan span(profiler.get(), name, ctx);
    span.record().operator_index = op.operator_index;
    if (op.kind != compiler::CpuOpKind::External) {
      const int in = op.inputs.at(0), out = op.outputs.at(0);
      detail::run_cpu_op(op, compiled.slots[static_cast<std::size_t>(in)], readable(b, in),
                         compiled.slots[static_cast<std::size_t>(out)], writable(b, out));
      return;
    }
    std::vector<const Tensor*> ins;
    for (int s : op.inputs) ins.push_back(s >= 0 ? b.ref[static_cast<std::size_t>(s)] : nullptr);
    auto outs = compiler::run_cpu_op(*op.node, ins);
    for (std::size_t o = 0; o < op.outputs.size() && o < outs.size(); ++o) {
      const int s = op.outputs[o];
      if (s < 0) continue;
      const auto& slot = compiled.slots[static_cast<std::size_t>(s)];
      if (outs[o].dtype() != slot.dtype || outs[o].shape() != slot.shape) {
        throw Error(ErrorCode::Internal,
                    fmt::format("external operator '{}' ({}) produced {} {} for '{}', compiled as {} {}",
                                op.node_name, op.node->op_type, dtype_name(outs[o].dtype()),
                                shape_to_string(outs[o].shape()), slot.name, dtype_name(slot.dtype),
                                shape_to_string(slot.shape)));
      }
      b.tensors[static_cast<std::size_t>(s)] = std::move(outs[o]);
      b.ref[static_cast<std::size_t>(s)] = &*b.tensors[static_cast<std::size_t>(s)];
    }
  }

  void run_npu(int index, Buffers& b, const profiler::SpanContext& ctx) {
    const auto& call = compiled.npu_calls[static_cast<std::size_t>(index)];
    std::vector<std::span<const std::byte>> dev_in;
    for (int s : call.input_slots) dev_in.push_back(readable(b, s));
    std::vector<std::span<std::byte>> dev_out;
    for (int s : call.output_slots) dev_out.push_back(writable(b, s));
    std::shared_ptr<device::Fence> fence;
    const std::uint64_t flow_id = profiler ? profiler->next_flow_id() : 0;
    {
      profiler::ScopedSpan enqueue(profiler.get(), "Enqueue", ctx);
      enqueue.record().flow_id = flow_id;
      fence = device->submit(*programs[static_cast<std::size_t>(index)], std::move(dev_in), std::move(dev_out));
    }
    fence->wait();
    if (auto err = fence->error()) std::rethrow_exception(err);
    record_npu_spans(fence->timing(), ctx, flow_id);
  }

  // The worker part of one inference: the compiled steps in order.
  std::vector<Tensor> execute(const std::vector<Tensor>& inputs, const profiler::SpanContext& ctx) {
    Buffers b(compiled.slots.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) b.ref[static_cast<std::size_t>(compiled.input_slots[i])] = &inputs[i];
    for (std::size_t s = 0; s < compiled.slots.size(); ++s) {
      if (compiled.slots[s].constant) b.ref[s] = compiled.slots[s].constant.get();
    }
    for (const auto& step : compiled.steps) {
      if (step.kind == compiler::Step::Kind::Npu) run_npu(step.npu, b, ctx);
      else run_cpu(step.cpu, b, ctx);
    }
    std::vector<Tensor> outputs;
    for (int s : compiled.output_slots) {
      const auto i = static_cast<std::size_t>(s);
      if (b.tensors[i]) outputs.push_back(std::move(*b.tensors[i]));
      else outputs.push_back(*b.ref[i]);  // an input or constant returned as an output
    }
    return outputs;
  }
};

Runner::Runner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runner::~Runner() = default;

const Model& Runner::model() const noexcept { return impl_->model; }
std::string Runner::device_name() const { return impl_->device->file().name(); }
const compiler::PartitionReport& Runner::partition_report() const noexcept { return impl_->compiled.report; }
const compiler::CompiledModel& Runner::compiled() const noexcept { return impl_->compiled; }

std::vector<Tensor> Runner::run(const std::vector<Tensor>& inputs) {
  impl_->validate(inputs);
  profiler::ScopedSpan inference(impl_->profiler.get(), "Inference", {});
  std::packaged_task<std::vector<Tensor>()> task(
      [this, &inputs, ctx = inference.context()] { return impl_->execute(inputs, ctx); });
  auto result = task.get_future();
  boost::asio::post(*impl_->pool, std::move(task));
  return result.get();
}

std::vector<Tensor> Runner::run_with(const std::vector<std::string>& output_names,
                                     const std::map<std::string, Tensor>& named_inputs) {
  std::vector<Tensor> inputs;
  for (const auto& d : impl_->model.inputs) {
    auto it = named_inputs.find(d.name);
    if (it == named_inputs.end()) {
      throw Error(ErrorCode::InvalidInput, fmt::format("input '{}' is not given", d.name));
    }
    inputs.push_back(it->second);
  }
  for (const auto& [name, t] : named_inputs) {
    bool known = false;
    for (const auto& d : impl_->model.inputs) known = known || d.name == name;
    if (!known) throw Error(ErrorCode::InvalidInput, fmt::format("the model has no input named '{}'", name));
  }
  auto outputs = run(inputs);
  if (output_names.empty()) return outputs;
  std::vector<Tensor> selected;
  for (const auto& name : output_names) {
    std::size_t i = 0;
    while (i < impl_->model.outputs.size() && impl_->model.outputs[i].name != name) ++i;
    if (i == impl_->model.outputs.size()) {
      throw Error(ErrorCode::InvalidInput, fmt::format("the model has no output named '{}'", name));
    }
    selected.push_back(outputs[i]);
  }
  return selected;
}

std::unique_ptr<Runner> create_runner(compiler::Graph graph, const RunnerOptions& options) {
  if (options.worker_num < 1) {
    throw Error(ErrorCode::InvalidArgument, fmt::format("worker_num must be >= 1, got {}", options.worker_num));
  }
  auto impl = std::make_unique<Runner::Impl>();
  impl->profiler = options.profiler ? options.profiler : profiler::process_profiler();
  const device::DeviceFile file = resolve_device(options.device);
  device::Driver& driver = options.driver ? *options.driver : device::DriverRegistry::builtin().driver("sim");
  {
    profiler::ScopedSpan compile_span(impl->profiler.get(), "Compile", {});
    compiler::CompilerOptions copts = options.compiler_config;
    copts.pe_count = file.pe_count();
    copts.batch_size = options.batch_size;
    impl->compiled = compiler::compile(std::move(graph), copts);
  }
  for (int s : impl->compiled.input_slots) {
    const auto& slot = impl->compiled.slots[static_cast<std::size_t>(s)];
    impl->model.inputs.push_back({slot.name, slot.dtype, slot.shape, format_of(slot.shape)});
  }
  for (int s : impl->compiled.output_slots) {
    const auto& slot = impl->compiled.slots[static_cast<std::size_t>(s)];
    impl->model.outputs.push_back({slot.name, slot.dtype, slot.shape, format_of(slot.shape)});
  }
  impl->device = driver.open(file);
  for (const auto& call : impl->compiled.npu_calls) impl->programs.push_back(impl->device->load(call.program));
  impl->pool = std::make_unique<boost::asio::thread_pool>(static_cast<std::size_t>(options.worker_num));
  spdlog::debug("runner ready on {} ({} NPU programs)", file.name(), impl->programs.size());
  return std::make_unique<Runner>(std::move(impl));
}

std::unique_ptr<Runner> create_runner(const std::filesystem::path& path, const RunnerOptions& options) {
  return create_runner(compiler::import_onnx(path), options);
}

}  // namespace furiosa::runtime
