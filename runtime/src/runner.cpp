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
#include <regex>

#include "cpu_ops.h"
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
  std::shared_ptr<device::LoadedProgram> program;
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

  void run_ops(const std::vector<compiler::CpuOp>& ops, std::vector<std::vector<std::byte>>& buf,
               const std::vector<std::span<const std::byte>>& view, const profiler::SpanContext& ctx) {
    for (const auto& op : ops) {
      profiler::ScopedSpan span(profiler.get(), compiler::cpu_op_name(op.kind), ctx);
      span.record().operator_index = op.operator_index;
      const auto& in_slot = compiled.slots[static_cast<std::size_t>(op.input)];
      const auto& out_slot = compiled.slots[static_cast<std::size_t>(op.output)];
      auto& out = buf[static_cast<std::size_t>(op.output)];
      out.resize(out_slot.size_bytes());
      std::span<const std::byte> in = view[static_cast<std::size_t>(op.input)].empty()
                                          ? std::span<const std::byte>(buf[static_cast<std::size_t>(op.input)])
                                          : view[static_cast<std::size_t>(op.input)];
      detail::run_cpu_op(op, in_slot, in, out_slot, out);
    }
  }

  // The worker part of one inference.
  std::vector<Tensor> execute(const std::vector<Tensor>& inputs, const profiler::SpanContext& ctx) {
    const auto& slots = compiled.slots;
    std::vector<std::vector<std::byte>> buf(slots.size());
    // Model inputs are read in place (no copy).
    std::vector<std::span<const std::byte>> view(slots.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      view[static_cast<std::size_t>(compiled.input_slots[i])] = inputs[i].bytes();
    }
    auto read = [&](int s) -> std::span<const std::byte> {
      auto v = view[static_cast<std::size_t>(s)];
      return v.empty() ? std::span<const std::byte>(buf[static_cast<std::size_t>(s)]) : v;
    };
    run_ops(compiled.pre_ops, buf, view, ctx);
    if (program) {
      std::vector<std::span<const std::byte>> dev_in;
      for (int s : compiled.program_input_slots) dev_in.push_back(read(s));
      std::vector<std::span<std::byte>> dev_out;
      for (int s : compiled.program_output_slots) {
        auto& b = buf[static_cast<std::size_t>(s)];
        b.resize(slots[static_cast<std::size_t>(s)].size_bytes());
        dev_out.emplace_back(b);
      }
      std::shared_ptr<device::Fence> fence;
      const std::uint64_t flow_id = profiler ? profiler->next_flow_id() : 0;
      {
        profiler::ScopedSpan enqueue(profiler.get(), "Enqueue", ctx);
        enqueue.record().flow_id = flow_id;
        fence = device->submit(*program, std::move(dev_in), std::move(dev_out));
      }
      fence->wait();
      if (auto err = fence->error()) std::rethrow_exception(err);
      record_npu_spans(fence->timing(), ctx, flow_id);
    }
    run_ops(compiled.post_ops, buf, view, ctx);
    std::vector<Tensor> outputs;
    for (std::size_t i = 0; i < compiled.output_slots.size(); ++i) {
      const int s = compiled.output_slots[i];
      const auto& slot = slots[static_cast<std::size_t>(s)];
      if (!view[static_cast<std::size_t>(s)].empty()) {  // an input returned as an output
        auto v = view[static_cast<std::size_t>(s)];
        outputs.emplace_back(slot.dtype, slot.shape, std::vector<std::byte>(v.begin(), v.end()));
      } else {
        outputs.emplace_back(slot.dtype, slot.shape, std::move(buf[static_cast<std::size_t>(s)]));
      }
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
  if (impl->compiled.program) impl->program = impl->device->load(impl->compiled.program);
  impl->pool = std::make_unique<boost::asio::thread_pool>(static_cast<std::size_t>(options.worker_num));
  spdlog::debug("runner ready on {} ({} kernels)", file.name(),
                impl->compiled.program ? impl->compiled.program->kernels.size() : 0);
  return std::make_unique<Runner>(std::move(impl));
}

std::unique_ptr<Runner> create_runner(const std::filesystem::path& path, const RunnerOptions& options) {
  return create_runner(compiler::import_onnx(path), options);
}

}  // namespace furiosa::runtime
