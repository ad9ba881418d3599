// The simulator backend ("sim"): simulated Warboy cards, exclusive device files, simulated DRAM,
// and per open Device an execution queue served by SimConfig::compute_threads host threads.
//
// Executions: a thread takes the next queued execution and, still holding the queue lock, places
// it on the device's modelled timeline (start = max(now, end of the previous execution); the
// durations come from the program's cost model, timing.cpp, made once at load), so executions
// never overlap on the timeline and the timeline follows submission order. It then computes
// the execution on the host (functional mode: Load copies, kernels with ONNX quantized-operator
// semantics in kernels.cpp, Store copies; timing mode: nothing), with pacing sleeps until the
// modelled Store end, and signals the fence. Two executions of one program computed at once use
// separate copies of the program's region (the first uses the region itself).
//
// Environment, read by builtin_registry() when its "sim" driver is first used (drivers
// made with create_sim_driver() take only the SimConfig they are given):
//   FURIOSA_SIM_CARDS          number of simulated cards      (default 1, allowed 0..256)
//   FURIOSA_SIM_PES_PER_CARD   PEs per simulated card         (default 2, allowed 1..64)
//   FURIOSA_SIM_FAULTS         faults to inject (parse_sim_faults; default none)
//   FURIOSA_SIM_LOCK_DIR       directory of the system-wide PE locks ("off": none; default
//                              sim_default_lock_dir())
// An empty variable counts as unset; any other value that is not an integer in range makes the
// driver creation throw Error(InvalidArgument) naming the variable.
//
// Memory model: each card has an address space of SimConfig::dram_bytes. Allocations are placed
// first-fit at kDramAlign-aligned addresses and each one owns separate zero-initialised host
// storage (calloc, so untouched pages cost nothing). DMA (write/read) must stay inside one
// allocation of the calling Device; anything else is Error(DeviceFault) naming the device file and
// address. Closing a Device frees its allocations and releases its cores. A LoadedProgram keeps
// its region's storage alive, so queued executions never touch freed memory.
//
// Faults (SimConfig::faults, docs/devices.md "Fault injection"): each device decides, in the
// order executions are taken (queue lock held), whether the next one faults. An error or DMA
// fault fails the fence without computing; a hang keeps the fence unsignalled and stops the
// device taking work until reset() (which aborts the hung and queued executions) or close; a
// lost device fails that and every later execution with DeviceNotFound and refuses submits.
//
// Lifetime: the driver, its Devices and their LoadedPrograms share one SimState through
// shared_ptr, so a Device still releases its cores correctly when it outlives the driver.

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <memory>
#include <mutex>
#include <vector>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include <sys/stat.h>

#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "furiosa/core/error.h"
#include "furiosa/device/sim.h"
#include "kernels.h"
#include "pe_locks.h"
#include "timing.h"

// The project version reported as firmware "sim-<version>". The build may pass the real one;
// otherwise this must be kept in step with project(VERSION) in the top-level CMakeLists.txt.
#ifndef FURIOSA_VERSION
#define FURIOSA_VERSION "0.1.0"
#endif

namespace furiosa::device {

namespace {

// Integer value of environment variable `name` in [lo, hi], or `fallback` when unset or empty.
int env_int(const char* name, int fallback, int lo, int hi) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < lo || value > hi) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}='{}' is not an integer in [{}, {}]", name, text, lo, hi));
  }
  return static_cast<int>(value);
}

}  // namespace

SimConfig sim_config_from_environment() {
  SimConfig config;
  config.cards = env_int("FURIOSA_SIM_CARDS", config.cards, 0, 256);
  config.pes_per_card = env_int("FURIOSA_SIM_PES_PER_CARD", config.pes_per_card, 1, 64);
  if (const char* faults = std::getenv("FURIOSA_SIM_FAULTS"); faults != nullptr && *faults != '\0') {
    try {
      config.faults = parse_sim_faults(faults);
    } catch (const Error& e) {
      throw Error(ErrorCode::InvalidArgument, fmt::format("FURIOSA_SIM_FAULTS: {}", e.message()));
    }
  }
  config.min_execution_time =
      std::chrono::microseconds(env_int("FURIOSA_SIM_MIN_EXECUTION_US", 0, 0, 600'000'000));
  if (const char* gate = std::getenv("FURIOSA_SIM_GATE"); gate != nullptr) config.gate_path = gate;
  (void)sim_isa_from_environment();  // throws for a bad FURIOSA_SIM_ISA
  const char* lock_dir = std::getenv("FURIOSA_SIM_LOCK_DIR");
  if (lock_dir == nullptr || *lock_dir == '\0') config.lock_dir = sim::default_lock_dir();
  else if (std::string_view(lock_dir) == "off") config.lock_dir.clear();
  else config.lock_dir = lock_dir;
  return config;
}

std::string sim_default_lock_dir() { return sim::default_lock_dir();
}


namespace {

/// Alignment (and minimum address-space footprint) of simulated DRAM allocations.
constexpr std::uint64_t kDramAlign = 256;

// ns since the steady clock's epoch: the clock of every timestamp in ExecutionTiming.
std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Zero-filled host storage of `bytes` bytes; null when the host is out of memory.
std::shared_ptr<std::byte> zeroed_storage(std::uint64_t bytes) {
  void* p = std::calloc(static_cast<std::size_t>(std::max<std::uint64_t>(bytes, 1)), 1);
  if (p == nullptr) return nullptr;
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); });
}

/// One allocation in a card's simulated DRAM.
struct Allocation {
  std::uint64_t size = 0;           ///< bytes requested
  std::uint64_t reserved = 0;       ///< address space taken (size rounded up to kDramAlign)
  std::uint64_t owner = 0;          ///< id of the SimDevice that allocated it
  std::uint64_t id = 0;             ///< unique per allocation, so stale handles are recognised
  std::shared_ptr<std::byte> data;  ///< `size` bytes of storage
};

/// Host storage behind a device address: the allocation's bytes and the offset into them.
struct Located {
  std::shared_ptr<std::byte> data;
  std::uint64_t offset = 0;
};

/// State shared by a SimDriver, its SimDevices and their loaded programs: which cores are held
/// and what each card's DRAM holds. Thread-safe (one mutex; data copies happen outside it).
class SimState {
 public:
  explicit SimState(const SimConfig& config)
      : config(config), dram_(static_cast<std::size_t>(config.cards)) {}

  const SimConfig config;

  /// Reserves the cores of `file`; throws DeviceNotFound / DeviceBusy. Returns an owner id.
  std::uint64_t acquire(const DeviceFile& file) {
    const int cards = config.cards, pes = config.pes_per_card;
    if (file.card < 0 || file.card >= cards || file.first_pe < 0 || file.last_pe < file.first_pe ||
        file.last_pe >= pes) {
      const std::string what =
          cards == 0 ? std::string("the sim driver has no cards")
                     : fmt::format("the sim driver has card(s) npu0..npu{} with PEs pe0..pe{} each",
                                   cards - 1, pes - 1);
      throw Error(ErrorCode::DeviceNotFound,
                  fmt::format("{}: no such device; {}", file.name(), what),
                  ErrorSubject::of_device(file.name()));
    }
    std::lock_guard lock(mu_);
    for (const DeviceFile& held : held_) {
      if (held.overlaps(file)) {
        throw Error(ErrorCode::DeviceBusy,
                    fmt::format("{}: device busy: its cores are held by {}", file.name(), held.name()),
                    ErrorSubject::of_device(file.name()));
      }
    }
    held_.push_back(file);
    return next_owner_++;
  }

  /// Releases the cores reserved by acquire(file).
  void release_cores(const DeviceFile& file) {
    std::lock_guard lock(mu_);
    auto it = std::find(held_.begin(), held_.end(), file);
    if (it != held_.end()) held_.erase(it);
  }

  /// The cards with their per-PE availability.
  std::vector<CardInfo> enumerate() const {
    std::lock_guard lock(mu_);
    std::vector<CardInfo> cards;
    for (int c = 0; c < config.cards; ++c) {
      CardInfo info;
      info.index = c;
      info.arch = "warboy";
      info.busname = fmt::format("0000:{:02x}:00.0", c + 1);  // bus 00 is the host bridge
      info.serial = fmt::format("SIM{:04d}", c);
      info.firmware_version = "sim-" FURIOSA_VERSION;
      info.driver_version = "sim";
      info.numa_node = 0;
      info.pe_count = config.pes_per_card;
      info.pe_busy.assign(static_cast<std::size_t>(config.pes_per_card), false);
      for (const DeviceFile& held : held_) {
        if (held.card != c) continue;
        for (int pe = held.first_pe; pe <= held.last_pe; ++pe) {
          info.pe_busy[static_cast<std::size_t>(pe)] = true;
        }
      }
      if (!config.lock_dir.empty()) {  // holders in any process, from the lock files
        const auto n = static_cast<std::size_t>(config.pes_per_card);
        info.pe_holder_pid.assign(n, 0);
        info.pe_faults.assign(n, 0);
        info.pe_resets.assign(n, 0);
        info.pe_executions.assign(n, 0);
        info.pe_busy_ns.assign(n, 0);
        for (int pe = 0; pe < config.pes_per_card; ++pe) {
          const sim::PeHolder h = sim::probe_pe(config.lock_dir, c, pe);
          const auto i = static_cast<std::size_t>(pe);
          info.pe_holder_pid[i] = h.pid;
          info.pe_faults[i] = h.faults;
          info.pe_resets[i] = h.resets;
          info.pe_executions[i] = h.executions;
          info.pe_busy_ns[i] = h.busy_ns;
          if (h.pid != 0) info.pe_busy[i] = true;
        }
      }
      for (int pe = 0; pe < config.pes_per_card; ++pe) info.device_files.push_back({c, pe, pe});
      if (config.pes_per_card >= 2) info.device_files.push_back({c, 0, config.pes_per_card - 1});
      cards.push_back(std::move(info));
    }
    return cards;
  }

  /// Allocates `bytes` on `file`'s card for `owner`; returns the address and the allocation.
  /// Throws DeviceFault when the card's DRAM has no gap large enough or the host has no memory.
  std::pair<std::uint64_t, Allocation> allocate(const DeviceFile& file, std::uint64_t owner,
                                                std::uint64_t bytes) {
    const std::uint64_t dram = config.dram_bytes;
    std::lock_guard lock(mu_);
    auto& card = dram_[static_cast<std::size_t>(file.card)];
    std::uint64_t used = 0;
    for (const auto& entry : card) used += entry.second.reserved;
    auto exhausted = [&] {
      return Error(ErrorCode::DeviceFault,
                   fmt::format("{}: device DRAM exhausted: cannot allocate {} bytes (npu{} has {} "
                               "bytes, {} in use)",
                               file.name(), bytes, file.card, dram, used),
                   ErrorSubject::of_device(file.name()));
    };
    if (bytes > dram) throw exhausted();
    const std::uint64_t reserved =
        std::max<std::uint64_t>((bytes + kDramAlign - 1) / kDramAlign * kDramAlign, kDramAlign);
    std::uint64_t cursor = 0;  // first-fit over the gaps between allocations
    for (const auto& [address, allocation] : card) {
      if (address - cursor >= reserved) break;
      cursor = address + allocation.reserved;
    }
    if (cursor > dram || dram - cursor < reserved) throw exhausted();
    Allocation allocation{bytes, reserved, owner, next_allocation_id_++, zeroed_storage(bytes)};
    if (!allocation.data) {
      throw Error(ErrorCode::DeviceFault,
                  fmt::format("{}: host memory for {} bytes of simulated DRAM is exhausted",
                              file.name(), bytes));
    }
    card.emplace(cursor, allocation);
    return {cursor, std::move(allocation)};
  }

  /// Frees the allocation of `owner` at buffer.address; throws DeviceFault when there is none.
  void release(const DeviceFile& file, std::uint64_t owner, const DeviceBuffer& buffer) {
    std::lock_guard lock(mu_);
    auto& card = dram_[static_cast<std::size_t>(file.card)];
    auto it = card.find(buffer.address);
    if (it == card.end() || it->second.owner != owner || it->second.size != buffer.size) {
      throw Error(ErrorCode::DeviceFault,
                  fmt::format("{}: release of {} bytes at 0x{:x}, which is not a buffer allocated "
                              "on this device",
                              file.name(), buffer.size, buffer.address),
                  ErrorSubject::of_device(file.name()));
    }
    card.erase(it);
  }

  /// Frees the allocation at `address` if it is still allocation `id` (no-op otherwise).
  void release_if_current(int card_index, std::uint64_t address, std::uint64_t id) noexcept {
    std::lock_guard lock(mu_);
    auto& card = dram_[static_cast<std::size_t>(card_index)];
    auto it = card.find(address);
    if (it != card.end() && it->second.id == id) card.erase(it);
  }

  /// Frees every allocation of `owner` on `card_index`.
  void release_all(int card_index, std::uint64_t owner) noexcept {
    std::lock_guard lock(mu_);
    std::erase_if(dram_[static_cast<std::size_t>(card_index)],
                  [owner](const auto& entry) { return entry.second.owner == owner; });
  }

  /// The storage of [address, address + bytes) when it lies inside one allocation of `owner`;
  /// throws DeviceFault naming the device file, the access and the address otherwise.
  Located locate(const DeviceFile& file, std::uint64_t owner, std::uint64_t address,
                 std::uint64_t bytes, std::string_view access) const {
    std::lock_guard lock(mu_);
    const auto& card = dram_[static_cast<std::size_t>(file.card)];
    auto it = card.upper_bound(address);
    if (it != card.begin()) {
      --it;
      const Allocation& a = it->second;
      const std::uint64_t offset = address - it->first;
      if (a.owner == owner && offset <= a.size && bytes <= a.size - offset) {
        return {a.data, offset};
      }
    }
    throw Error(ErrorCode::DeviceFault,
                fmt::format("{}: {} of {} bytes at 0x{:x} is outside the buffers allocated on "
                            "this device",
                            file.name(), access, bytes, address));
  }

 private:
  mutable std::mutex mu_;
  std::vector<DeviceFile> held_;                           // open device files
  std::vector<std::map<std::uint64_t, Allocation>> dram_;  // per card, by address
  std::uint64_t next_owner_ = 1;
  std::uint64_t next_allocation_id_ = 1;
};

/// A program resident in a SimDevice's DRAM. Frees its region when destroyed (unless the Device
/// already freed it on close); keeps the region's storage alive for queued executions.
class SimLoadedProgram final : public LoadedProgram,
                               public std::enable_shared_from_this<SimLoadedProgram> {
 public:
  SimLoadedProgram(std::shared_ptr<const isa::Program> program, std::shared_ptr<SimState> state,
                   int card, std::uint64_t owner, std::uint64_t base, const Allocation& allocation,
                   int pe_count)
      : program_(std::move(program)),
        state_(std::move(state)),
        card_(card),
        owner_(owner),
        base_(base),
        allocation_id_(allocation.id),
        storage_(allocation.data),
        size_(allocation.size),
        prepared_(state_->config.mode == SimMode::Functional ? sim::prepare_program(*program_)
                                                             : nullptr),
        cost_(sim::model_program(state_->config, *program_, pe_count)) {
    modelled_ns_ = 0;
    for (std::int64_t ns : cost_.load_ns) modelled_ns_ += ns;
    modelled_ns_ += sim::cycles_to_ns(state_->config, cost_.kernel_cycles);
    for (std::int64_t ns : cost_.store_ns) modelled_ns_ += ns;
    if (state_->config.mode != SimMode::Functional || size_ == 0) return;
    // Everything an execution needs is made now, not by the first executions (docs/timing.md
    // "Cold start"): the region's pages past the constants (calloc leaves them unmapped until
    // the first execution writes its activations) and one private region per further compute
    // thread (two executions of the program computed at once).
    const std::uint64_t constants = program_->constants.size();
    if (size_ > constants) {
      std::memset(storage_.get() + constants, 0, static_cast<std::size_t>(size_ - constants));
    }
    const int spares = std::max(state_->config.compute_threads, 1) - 1;
    for (int i = 0; i < spares; ++i) spare_regions_.push_back(copy_region());
  }
  ~SimLoadedProgram() override { state_->release_if_current(card_, base_, allocation_id_); }

  const isa::Program& program() const noexcept override { return *program_; }
  std::int64_t modelled_ns() const noexcept override { return modelled_ns_; }
  /// Id of the SimDevice that loaded it.
  std::uint64_t owner() const noexcept { return owner_; }
  /// Device address of the program's DRAM region.
  std::uint64_t base_address() const noexcept { return base_; }
  /// The program's DRAM region (TensorRef addresses are offsets into it).
  std::span<std::byte> region() const noexcept {
    return {storage_.get(), static_cast<std::size_t>(size_)};
  }
  /// The kernels' per-program state (packed weights), made once at load (functional mode).
  const sim::PreparedProgram* prepared() const noexcept { return prepared_.get(); }
  /// The program's modelled cost on the device it was loaded on.
  const sim::ProgramCost& cost() const noexcept { return cost_; }

  /// A region to compute one execution in: the program's own region when no other execution
  /// of this program is being computed, else a private copy (constants at the start, the rest
  /// zero). Give it back with release_region(). Thread-safe.
  std::byte* acquire_region() const {
    std::lock_guard lock(regions_mu_);
    if (!primary_busy_) {
      primary_busy_ = true;
      return storage_.get();
    }
    if (!spare_regions_.empty()) {
      std::byte* r = spare_regions_.back().release();
      spare_regions_.pop_back();
      return r;
    }
    return copy_region().release();
  }
  /// Returns a region from acquire_region().
  void release_region(std::byte* region) const {
    std::lock_guard lock(regions_mu_);
    if (region == storage_.get()) {
      primary_busy_ = false;
    } else {
      spare_regions_.emplace_back(region);
    }
  }

 private:
  /// A private region: the constants at the start, the rest zero (every page written).
  std::unique_ptr<std::byte[]> copy_region() const {
    auto copy = std::make_unique<std::byte[]>(static_cast<std::size_t>(size_));
    // (A program without constants has a null data(): memcpy's source must not be null.)
    if (!program_->constants.empty()) {
      std::memcpy(copy.get(), program_->constants.data(), program_->constants.size());
    }
    return copy;
  }

  std::shared_ptr<const isa::Program> program_;
  std::shared_ptr<SimState> state_;
  int card_;
  std::uint64_t owner_;
  std::uint64_t base_;
  std::uint64_t allocation_id_;
  std::shared_ptr<std::byte> storage_;
  std::uint64_t size_;
  std::shared_ptr<const sim::PreparedProgram> prepared_;
  sim::ProgramCost cost_;
  std::int64_t modelled_ns_ = 0;  ///< Load + kernels + Store, one execution
  mutable std::mutex regions_mu_;
  mutable bool primary_busy_ = false;
  mutable std::vector<std::unique_ptr<std::byte[]>> spare_regions_;
};

/// An open simulated device file: DRAM access on its card and an execution queue served by
/// SimConfig::compute_threads threads (timeline in submission order; see the file comment).
class SimDevice final : public Device {
 public:
  SimDevice(std::shared_ptr<SimState> state, const DeviceFile& file, std::uint64_t owner, sim::PeLocks locks)
      : state_(std::move(state)), file_(file), name_(file.name()), owner_(owner),
        rng_(fault_seed(state_->config.faults.seed, name_)), locks_(std::move(locks)) {
    const int threads = std::max(state_->config.compute_threads, 1);
    warm_ups_.resize(static_cast<std::size_t>(threads));
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(static_cast<std::size_t>(i)); });
  }

  /// Drains the queue (every queued execution runs and signals its fence), joins the worker,
  /// frees this device's DRAM and releases its cores.
  ~SimDevice() override {
    std::vector<std::shared_ptr<Fence>> aborted;
    {
      std::lock_guard lock(queue_mu_);
      stopping_ = true;
      // A hung device runs nothing more: its hung and queued executions fail.
      if (hung_) aborted = take_unfinished_locked();
    }
    queue_not_empty_.notify_all();
    queue_not_full_.notify_all();
    hang_cv_.notify_all();
    for (auto& f : aborted) {
      f->fail(std::make_exception_ptr(Error(ErrorCode::SessionClosed,
                                            fmt::format("{}: the device closed while it was hung", name_),
                                            ErrorSubject::of_device(name_))));
    }
    for (auto& w : workers_) w.join();
    state_->release_all(file_.card, owner_);
    state_->release_cores(file_);
    spdlog::debug("sim: closed {}", name_);
  }

  const DeviceFile& file() const noexcept override { return file_; }

  DeviceBuffer allocate(std::uint64_t bytes) override {
    return {state_->allocate(file_, owner_, bytes).first, bytes};
  }

  void release(const DeviceBuffer& buffer) override { state_->release(file_, owner_, buffer); }

  void write(std::uint64_t address, std::span<const std::byte> data) override {
    Located at = state_->locate(file_, owner_, address, data.size(), "DMA write");
    if (!data.empty()) std::memcpy(at.data.get() + at.offset, data.data(), data.size());
    std::lock_guard lock(counters_mu_);
    counters_.dma_bytes_to_device += data.size();
  }

  void read(std::uint64_t address, std::span<std::byte> data) override {
    Located at = state_->locate(file_, owner_, address, data.size(), "DMA read");
    if (!data.empty()) std::memcpy(data.data(), at.data.get() + at.offset, data.size());
    std::lock_guard lock(counters_mu_);
    counters_.dma_bytes_to_host += data.size();
  }

  std::shared_ptr<LoadedProgram> load(std::shared_ptr<const isa::Program> program) override {
    if (!program)
      throw Error(ErrorCode::InvalidArgument, fmt::format("{}: load of a null program", name_));
    if (program->constants.size() > program->dram_bytes) {
      throw Error(
          ErrorCode::DeviceFault,
          fmt::format("{}: program '{}' has {} bytes of constants but a DRAM region of "
                      "only {} bytes",
                      name_, program->name, program->constants.size(), program->dram_bytes));
    }
    auto [base, allocation] = state_->allocate(file_, owner_, program->dram_bytes);
    if (!program->constants.empty()) {
      std::memcpy(allocation.data.get(), program->constants.data(), program->constants.size());
    }
    {
      std::lock_guard lock(counters_mu_);
      counters_.dma_bytes_to_device += program->constants.size();
    }
    auto loaded = std::make_shared<SimLoadedProgram>(std::move(program), state_, file_.card, owner_,
                                                     base, allocation, file_.pe_count());
    warm_up(loaded);
    return loaded;
  }

  std::shared_ptr<Fence> submit(const LoadedProgram& program,
                                std::vector<std::span<const std::byte>> inputs,
                                std::vector<std::span<std::byte>> outputs) override {
    const auto* loaded = dynamic_cast<const SimLoadedProgram*>(&program);
    if (loaded == nullptr || loaded->owner() != owner_) {
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("{}: program '{}' was not loaded on this device", name_,
                              program.program().name));
    }
    const isa::Program& prog = loaded->program();
    check_sizes(prog, "input", prog.inputs, inputs);
    check_sizes(prog, "output", prog.outputs, outputs);

    Task task{loaded->shared_from_this(), std::move(inputs), std::move(outputs),
              std::make_shared<Fence>(), 0, std::nullopt};
    std::shared_ptr<Fence> fence = task.fence;
    {
      std::unique_lock lock(queue_mu_);
      const std::size_t capacity = std::max<std::size_t>(state_->config.queue_capacity, 1);
      queue_not_full_.wait(lock, [&] { return stopping_ || queue_.size() < capacity; });
      if (stopping_) {
        throw Error(ErrorCode::SessionClosed, fmt::format("{}: the device is closing", name_));
      }
      if (lost_) throw lost_error();
      task.index = next_execution_index_++;
      queue_.push_back(std::move(task));
    }
    queue_not_empty_.notify_one();
    return fence;
  }

  DeviceCounters counters() const override {
    std::lock_guard lock(counters_mu_);
    return counters_;
  }

  void reset() override {
    std::vector<std::shared_ptr<Fence>> aborted;
    std::vector<std::uint64_t> indices;
    {
      std::lock_guard lock(queue_mu_);
      if (lost_) throw lost_error();
      indices.reserve(queue_.size() + 1);
      if (hung_task_) indices.push_back(hung_task_->index);
      for (const Task& t : queue_) indices.push_back(t.index);
      aborted = take_unfinished_locked();
      hung_ = false;
      ++reset_generation_;
    }
    {
      std::lock_guard lock(counters_mu_);
      ++counters_.resets;
      publish_locked();
    }
    hang_cv_.notify_all();
    queue_not_full_.notify_all();
    queue_not_empty_.notify_all();
    for (std::size_t i = 0; i < aborted.size(); ++i) aborted[i]->fail(reset_abort_error(file_, indices[i]));
    spdlog::debug("sim: {} reset ({} executions aborted)", name_, aborted.size());
  }

 private:
  /// One queued execution.
  struct Task {
    std::shared_ptr<const SimLoadedProgram> program;
    std::vector<std::span<const std::byte>> inputs;
    std::vector<std::span<std::byte>> outputs;
    std::shared_ptr<Fence> fence;
    std::uint64_t index = 0;  ///< execution_index
    std::optional<SimFaultKind> fault;  ///< injected into this execution (decided when taken)
  };

  /// Seed of a device's fault generator: the plan's seed mixed with the device file's name
  /// (FNV-1a), so the devices of one driver draw different but repeatable sequences.
  static std::uint64_t fault_seed(std::uint64_t seed, const std::string& name) {
    std::uint64_t h = 1469598103934665603ull ^ seed;
    for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    return h;
  }

  Error lost_error() const {
    return Error(ErrorCode::DeviceNotFound,
                 fmt::format("{}: device lost (injected fault); close and open it again", name_),
                 ErrorSubject::of_device(name_));
  }

  /// The fault of the execution about to be taken, if any (queue_mu_ held, in taking order).
  /// Every `p` rule draws once per execution, so the sequence repeats whatever else fires.
  std::optional<SimFaultKind> decide_fault_locked() {
    const SimFaultPlan& plan = state_->config.faults;
    if (lost_) return SimFaultKind::Lost;
    if (plan.empty()) return std::nullopt;
    const std::uint64_t n = ++taken_;
    std::optional<SimFaultKind> chosen;
    for (const SimFaultRule& r : plan.rules) {
      bool fire = false;
      if (r.every > 0) fire = n % r.every == 0;
      else if (r.has_after) fire = n > r.after;
      else fire = std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < r.p;
      // Precedence when several fire: lost, hang, dma, error.
      auto rank = [](SimFaultKind k) {
        switch (k) {
          case SimFaultKind::Lost: return 3;
          case SimFaultKind::Hang: return 2;
          case SimFaultKind::Dma: return 1;
          case SimFaultKind::Error: return 0;
        }
        return 0;
      };
      if (fire && (!chosen || rank(r.kind) > rank(*chosen))) chosen = r.kind;
    }
    if (chosen) {
      if (*chosen == SimFaultKind::Lost) lost_ = true;
      std::lock_guard lock(counters_mu_);
      counters_.backend_counters[fmt::format("sim.faults.{}", sim_fault_name(*chosen))] += 1;
      ++faults_;
      publish_locked();
    }
    return chosen;
  }

  /// Removes the hung execution and every queued one (queue_mu_ held); returns their fences.
  std::vector<std::shared_ptr<Fence>> take_unfinished_locked() {
    std::vector<std::shared_ptr<Fence>> fences;
    if (hung_task_) fences.push_back(std::move(hung_task_->fence));
    hung_task_.reset();
    for (Task& t : queue_) fences.push_back(std::move(t.fence));
    queue_.clear();
    return fences;
  }

  /// Throws InvalidInput unless `given` matches the program's tensors in count and byte sizes.
  template <class Span>
  void check_sizes(const isa::Program& prog, std::string_view what,
                   const std::vector<isa::TensorRef>& refs, const std::vector<Span>& given) const {
    if (given.size() != refs.size()) {
      throw Error(ErrorCode::InvalidInput,
                  fmt::format("{}: program '{}' has {} {}(s) but {} were given", name_, prog.name,
                              refs.size(), what, given.size()));
    }
    for (std::size_t i = 0; i < refs.size(); ++i) {
      if (given[i].size() != refs[i].size_bytes()) {
        throw Error(ErrorCode::InvalidInput,
                    fmt::format("{}: {} {} of program '{}' ({} {} {}) must be {} bytes but {} "
                                "bytes were given",
                                name_, what, i, prog.name, shape_to_string(refs[i].shape),
                                dtype_name(refs[i].dtype), isa::layout_name(refs[i].layout),
                                refs[i].size_bytes(), given[i].size()));
      }
    }
  }

  /// A load-time warm-up of one program, run once by every compute thread (see warm_up()).
  struct WarmUp {
    std::shared_ptr<const SimLoadedProgram> program;
    std::mutex mu;
    std::condition_variable done;
    std::size_t pending = 0;  ///< compute threads that have not run it yet (mu)
  };

  /// Whether load() runs a warm-up execution on every compute thread (SimConfig::warm_up).
  bool warm_up_enabled() const noexcept {
    const SimConfig& config = state_->config;
    if (config.mode != SimMode::Functional) return false;
    switch (config.warm_up) {
      case SimWarmUp::Off: return false;
      case SimWarmUp::Always: return true;
      case SimWarmUp::FastKernels: return sim::fast_kernels_active();
    }
    return false;
  }

  /// Functional mode: every compute thread runs the program once on whatever its region holds,
  /// off the timeline (no execution index, counters, spans or fence), so that the per-thread
  /// scratch of the kernels, the regions' pages and the caches are ready before the first real
  /// execution. Blocks until all threads have run it. A kernel that fails here is left to fail
  /// (and be reported) in the real execution.
  void warm_up(const std::shared_ptr<const SimLoadedProgram>& program) {
    if (!warm_up_enabled() || program->program().kernels.empty()) return;
    auto w = std::make_shared<WarmUp>();
    w->program = program;
    w->pending = warm_ups_.size();
    {
      std::lock_guard lock(queue_mu_);
      if (stopping_) return;
      for (auto& list : warm_ups_) list.push_back(w);
    }
    queue_not_empty_.notify_all();
    std::unique_lock lock(w->mu);
    w->done.wait(lock, [&] { return w->pending == 0; });
  }

  /// Runs one warm-up on the calling compute thread.
  static void run_warm_up(WarmUp& w) {
    const SimLoadedProgram& loaded = *w.program;
    const isa::Program& prog = loaded.program();
    std::byte* region_data = loaded.acquire_region();
    try {
      const std::span<std::byte> region(region_data, loaded.region().size());
      for (std::size_t k = 0; k < prog.kernels.size(); ++k) {
        sim::run_kernel(prog.kernels[k], region, loaded.prepared(), k);
      }
    } catch (...) {  // reported by the real execution
    }
    loaded.release_region(region_data);
    {
      std::lock_guard lock(w.mu);
      --w.pending;
    }
    w.done.notify_all();
  }

  /// The worker `me`: runs its warm-ups and the queued executions in order until closing and
  /// drained.
  void worker_loop(std::size_t me) {
#ifdef __linux__
    // Pacing sleeps until modelled times in the microsecond range; the default 50 us timer
    // slack would add that much to every paced completion.
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
    for (;;) {
      Task task;
      ExecutionTiming timing;
      {
        std::unique_lock lock(queue_mu_);
        // A hung device takes nothing until reset() or close (load-time warm-ups still run).
        queue_not_empty_.wait(lock, [this, me] { return stopping_ || (!queue_.empty() && !hung_) || !warm_ups_[me].empty(); });
        if (!warm_ups_[me].empty()) {
          std::shared_ptr<WarmUp> w = std::move(warm_ups_[me].front());
          warm_ups_[me].pop_front();
          lock.unlock();
          run_warm_up(*w);
          continue;
        }
        if (queue_.empty()) return;  // closing, and every execution has been run
        if (!stopping_ && gate_closed()) {  // SimConfig::gate_path: the test holds executions
          lock.unlock();
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          continue;
        }
        task = std::move(queue_.front());
        queue_.pop_front();
        task.fault = decide_fault_locked();
        if (task.fault == SimFaultKind::Hang) {
          // The fence stays unsignalled until reset() or close fails it; the inputs and
          // outputs are never touched.
          hung_ = true;
          queue_not_full_.notify_one();
          hung_task_ = Task{nullptr, {}, {}, task.fence, task.index, task.fault};
          const std::uint64_t generation = reset_generation_;
          hang_cv_.wait(lock, [&] { return stopping_ || reset_generation_ != generation; });
          if (hung_task_ && hung_task_->fence == task.fence) {  // closing: nobody reset it
            hung_task_.reset();
            hung_ = false;
            lock.unlock();
            task.fence->fail(std::make_exception_ptr(
                Error(ErrorCode::SessionClosed, fmt::format("{}: the device closed while it was hung", name_),
                      ErrorSubject::of_device(name_))));
          }
          continue;
        }
        timing = place_on_timeline(task);
      }
      queue_not_full_.notify_one();
      try {
        execute(task, std::move(timing));
      } catch (...) {  // execute() reports through the fence; this is the last resort
        task.fence->fail(std::current_exception());
      }
    }
  }

  /// Checks that `ref` (a program input or output) is well formed and inside the region.
  void check_dma(const isa::TensorRef& ref, std::span<std::byte> region, std::string_view what,
                 std::size_t index, std::uint64_t execution) const {
    const std::uint64_t size = ref.size_bytes();
    const bool bad_layout = ref.layout == isa::Layout::LoweredNCHW && ref.shape.size() != 4;
    if (bad_layout || ref.address > region.size() || size > region.size() - ref.address) {
      throw Error(ErrorCode::DeviceFault,
                  fmt::format("{}: execution {}: DMA of {} {} ({} bytes at 0x{:x}) is outside the "
                              "program region of {} bytes",
                              name_, execution, what, index, size, ref.address, region.size()),
                  ErrorSubject::of_device(name_));
    }
  }

  /// Modelled timing of `task`, placed after the previous execution on the device timeline
  /// (call with queue_mu_ held, in the order executions are taken).
  ExecutionTiming place_on_timeline(const Task& task) {
    const SimConfig& config = state_->config;
    const sim::ProgramCost& cost = task.program->cost();
    const isa::Program& prog = task.program->program();
    ExecutionTiming t;
    t.execution_index = task.index;
    std::int64_t clock = std::max(steady_now_ns(), timeline_ns_);
    t.load_start_ns = clock;
    for (std::int64_t ns : cost.load_ns) clock += ns;
    t.load_end_ns = clock;
    t.exec_start_ns = clock;
    t.kernels.reserve(cost.kernels.size());
    for (std::size_t k = 0; k < cost.kernels.size(); ++k) {
      KernelTiming kt;
      kt.kind = prog.kernels[k].kind;
      kt.operator_index = prog.kernels[k].operator_index;
      kt.instruction_index = static_cast<std::int32_t>(k);
      kt.cycles = cost.kernels[k].cycles;
      kt.start_ns = clock;
      clock += sim::cycles_to_ns(config, kt.cycles);
      kt.end_ns = clock;
      t.kernels.push_back(kt);
    }
    t.exec_end_ns = clock;
    t.store_start_ns = clock;
    for (std::int64_t ns : cost.store_ns) clock += ns;
    t.store_end_ns = clock;
    t.kernel_cycles = cost.kernel_cycles;
    t.task_cycles = static_cast<std::uint64_t>(
        std::ceil(static_cast<double>(t.store_end_ns - t.load_start_ns) * config.clock_ghz));
    t.macs = cost.macs;
    t.peak_macs_per_cycle = static_cast<std::uint64_t>(config.macs_per_cycle_per_pe) *
                            static_cast<std::uint64_t>(file_.pe_count());
    t.dma_bytes_to_device = cost.dma_bytes_to_device;
    t.dma_bytes_to_host = cost.dma_bytes_to_host;
    timeline_ns_ = clock;
    return t;
  }

  /// True when SimConfig::gate_path is set and nothing exists at it (not followed if a link).
  bool gate_closed() const {
    const std::string& gate = state_->config.gate_path;
    struct stat st {};
    return !gate.empty() && ::lstat(gate.c_str(), &st) != 0;
  }

  /// Runs one execution on the host (functional mode: Load, kernels, Store; timing mode: only
  /// the DMA checks), paces it, updates the counters and signals or fails its fence.
  void execute(Task& task, ExecutionTiming timing) {
    const SimConfig& config = state_->config;
    const isa::Program& prog = task.program->program();
    const std::span<std::byte> primary = task.program->region();
    std::exception_ptr error;
    std::byte* region_data = nullptr;
    std::int64_t host_start_ns = steady_now_ns(), host_end_ns = 0;
    try {
      if (task.fault == SimFaultKind::Lost) throw lost_error();
      if (task.fault == SimFaultKind::Dma) {
        throw Error(ErrorCode::DeviceFault,
                    fmt::format("{}: execution {}: DMA error during Load (injected fault)", name_, task.index),
                    ErrorSubject::of_device(name_));
      }
      if (task.fault == SimFaultKind::Error) {
        throw Error(ErrorCode::DeviceFault,
                    fmt::format("{}: execution {}: execution error (injected fault)", name_, task.index),
                    ErrorSubject::of_device(name_));
      }
      for (std::size_t i = 0; i < prog.inputs.size(); ++i) check_dma(prog.inputs[i], primary, "input", i, task.index);
      for (std::size_t i = 0; i < prog.outputs.size(); ++i) check_dma(prog.outputs[i], primary, "output", i, task.index);
      if (config.mode == SimMode::Functional) {
        region_data = task.program->acquire_region();
        const std::span<std::byte> region(region_data, primary.size());
        for (std::size_t i = 0; i < prog.inputs.size(); ++i) {  // Load
          const std::span<const std::byte> src = task.inputs[i];
          if (!src.empty()) std::memcpy(region.data() + prog.inputs[i].address, src.data(), src.size());
        }
        for (std::size_t k = 0; k < prog.kernels.size(); ++k) {  // Execution
          run_kernel(prog.kernels[k], k, region, task.index, task.program->prepared());
        }
        for (std::size_t i = 0; i < prog.outputs.size(); ++i) {  // Store
          const std::span<std::byte> dst = task.outputs[i];
          if (!dst.empty()) std::memcpy(dst.data(), region.data() + prog.outputs[i].address, dst.size());
        }
        host_end_ns = steady_now_ns();
      }
    } catch (const Error&) {
      error = std::current_exception();
    } catch (const std::exception& e) {
      error = std::make_exception_ptr(
          Error(ErrorCode::DeviceFault,
                fmt::format("{}: execution {}: {}", name_, task.index, e.what()),
                ErrorSubject::of_device(name_)));
    }
    if (region_data != nullptr) task.program->release_region(region_data);
    {
      std::lock_guard lock(counters_mu_);
      if (!error) ++counters_.executions;
      busy_ns_ += static_cast<std::uint64_t>(std::max<std::int64_t>(0, timing.store_end_ns - timing.load_start_ns));
      if (const std::int64_t now = steady_now_ns(); now - last_publish_ns_ >= kPublishPeriodNs) {
        last_publish_ns_ = now;
        publish_locked();
      }
      counters_.cycles += timing.kernel_cycles;
      counters_.task_cycles += timing.task_cycles;
      counters_.macs += timing.macs;
      counters_.dma_bytes_to_device += timing.dma_bytes_to_device;
      counters_.dma_bytes_to_host += timing.dma_bytes_to_host;
      // The simulator's own figures (docs/devices.md): host time spent computing the execution
      // functionally (0 in timing mode) and, when the host finished after the modelled Store
      // end, the overrun, also drawn as a "SimOverrun" span (the fence was signalled then).
      timing.backend_counters["sim.host_compute_ns"] = host_end_ns > 0 ? host_end_ns - host_start_ns : 0;
      const std::int64_t overrun = host_end_ns > timing.store_end_ns ? host_end_ns - timing.store_end_ns : 0;
      timing.backend_counters["sim.overrun_ns"] = overrun;
      if (overrun > 0) {
        timing.backend_spans.push_back({"SimOverrun", timing.store_end_ns, host_end_ns});
        counters_.backend_counters["sim.overruns"] += 1;
        counters_.backend_counters["sim.overrun_ns"] += overrun;
      }
    }
    if (config.min_execution_time.count() > 0) {  // SimConfig::min_execution_time
      std::this_thread::sleep_until(
          std::chrono::steady_clock::time_point(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
              std::chrono::nanoseconds(host_start_ns))) +
          config.min_execution_time);
    }
    if (config.pacing) {
      std::this_thread::sleep_until(std::chrono::steady_clock::time_point(
          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
              std::chrono::nanoseconds(timing.store_end_ns))));
    }
    if (error) {
      task.fence->fail(error);
    } else {
      task.fence->signal(std::move(timing));
    }
  }

  /// Runs kernel `index` functionally; any failure becomes Error(DeviceFault) naming the device
  /// file, the execution, the instruction index, the kernel name and its node.
  void run_kernel(const isa::Kernel& kernel, std::size_t index, std::span<std::byte> region,
                  std::uint64_t execution, const sim::PreparedProgram* prepared) const {
    auto fault = [&](std::string_view detail) {
      return Error(
          ErrorCode::DeviceFault,
          fmt::format("{}: execution {}: instruction {} ({}, node '{}') failed: {}", name_,
                      execution, index, isa::kernel_name(kernel.kind), kernel.node_name, detail),
          ErrorSubject{name_, kernel.node_name, {}, {}});
    };
    try {
      sim::run_kernel(kernel, region, prepared, index);
    } catch (const Error& e) {
      throw fault(e.message());
    } catch (const std::exception& e) {
      throw fault(e.what());
    }
  }

  std::shared_ptr<SimState> state_;
  const DeviceFile file_;
  const std::string name_;  ///< file_.name()
  const std::uint64_t owner_;

  std::mutex queue_mu_;
  std::condition_variable queue_not_empty_;
  std::condition_variable queue_not_full_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  std::uint64_t next_execution_index_ = 0;

  /// Per compute thread: load-time warm-ups it has still to run (queue_mu_).
  std::vector<std::deque<std::shared_ptr<WarmUp>>> warm_ups_;

  std::int64_t timeline_ns_ = 0;  ///< device clock: end of the last placed execution (queue_mu_)

  // Fault injection state (queue_mu_).
  std::condition_variable hang_cv_;   ///< wakes the hung worker on reset() or close
  std::mt19937_64 rng_;               ///< draws of `p` rules
  std::uint64_t taken_ = 0;           ///< executions taken so far (1-based count of the last)
  bool hung_ = false;                 ///< an execution hangs: nothing more is taken
  bool lost_ = false;                 ///< the device is lost
  std::optional<Task> hung_task_;     ///< the hung execution (its fence), until reset or close
  std::uint64_t reset_generation_ = 0;

  mutable std::mutex counters_mu_;
  DeviceCounters counters_;
  std::uint64_t faults_ = 0;  ///< injected faults (counters_mu_), published in the lock files
  std::uint64_t busy_ns_ = 0;  ///< sum of executions' NPU Total (counters_mu_), published too
  std::int64_t last_publish_ns_ = 0;  ///< steady clock of the last periodic publish (counters_mu_)
  /// Executions republish the counters at most this often (furiosactl top reads them).
  static constexpr std::int64_t kPublishPeriodNs = 100'000'000;

  /// Writes the counters into the PEs' lock files (counters_mu_ held).
  void publish_locked() const noexcept {
    locks_.publish({0, {}, faults_, counters_.resets, counters_.executions, busy_ns_});
  }
  sim::PeLocks locks_;        ///< system-wide ownership of the PEs (none without a lock_dir)

  std::vector<std::thread> workers_;  ///< started last, in the constructor body
};

/// The simulator driver: a set of simulated cards.
class SimDriver final : public Driver {
 public:
  explicit SimDriver(const SimConfig& config) : state_(std::make_shared<SimState>(config)) {}

  std::string_view name() const noexcept override { return "sim"; }

  std::vector<CardInfo> enumerate() const override { return state_->enumerate(); }

  std::unique_ptr<Device> open(const DeviceFile& file) override {
    const std::uint64_t owner = state_->acquire(file);
    try {
      sim::PeLocks locks;
      if (!state_->config.lock_dir.empty()) locks = sim::PeLocks(state_->config.lock_dir, file);
      auto device = std::make_unique<SimDevice>(state_, file, owner, std::move(locks));
      spdlog::debug("sim: opened {}", file.name());
      return device;
    } catch (...) {
      state_->release_cores(file);
      throw;
    }
  }

 private:
  std::shared_ptr<SimState> state_;
};

// Throws Error(InvalidArgument) unless `config` describes a usable simulator.
void validate(const SimConfig& config) {
  auto bad = [](std::string_view what) {
    return Error(ErrorCode::InvalidArgument, fmt::format("invalid SimConfig: {}", what));
  };
  if (config.cards < 0) throw bad(fmt::format("cards = {} must be >= 0", config.cards));
  if (config.pes_per_card < 1)
    throw bad(fmt::format("pes_per_card = {} must be >= 1", config.pes_per_card));
  if (!(config.clock_ghz > 0)) throw bad("clock_ghz must be > 0");
  if (!(config.macs_per_cycle_per_pe > 0)) throw bad("macs_per_cycle_per_pe must be > 0");
  if (!(config.pcie_bytes_per_ns > 0)) throw bad("pcie_bytes_per_ns must be > 0");
  if (config.dma_latency_ns < 0) throw bad("dma_latency_ns must be >= 0");
  if (config.array_align < 1) throw bad("array_align must be >= 1");
  if (!(config.sram_bytes_per_cycle_per_pe > 0)) throw bad("sram_bytes_per_cycle_per_pe must be > 0");
  if (!(config.dram_bytes_per_ns > 0)) throw bad("dram_bytes_per_ns must be > 0");
  if (!(config.fused_exchange_bytes_per_cycle > 0)) throw bad("fused_exchange_bytes_per_cycle must be > 0");
  if (config.compute_threads < 1 || config.compute_threads > 64)
    throw bad(fmt::format("compute_threads = {} must be in 1..64", config.compute_threads));
}

}  // namespace

std::string_view sim_mode_name(SimMode mode) noexcept {
  return mode == SimMode::Timing ? "timing" : "functional";
}

std::unique_ptr<Driver> create_sim_driver(const SimConfig& config) {
  validate(config);
  return std::make_unique<SimDriver>(config);
}

void register_sim_backend(DriverRegistry& registry) {
  // The environment is read when the "sim" driver is first used, not at registration.
  registry.register_factory("sim", [] { return create_sim_driver(sim_config_from_environment()); });
}

}  // namespace furiosa::device
