// The SRAM plan of a program (sram_plan.h): activation lifetimes from the kernels' addresses,
// weight residency, then a walk over the kernels that evicts and spills what does not fit.
#include "sram_plan.h"

#include <algorithm>
#include <limits>
#include <variant>

#include "furiosa/device/kernel_kinds.h"

namespace furiosa::device::sim {

namespace {

constexpr int kLoadStep = -1;  // program inputs are written by Load, before the first kernel

// One activation: bytes written at step `def` at `address`, read at the steps in `uses`.
struct Value {
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
  int def = kLoadStep;
  std::vector<int> uses;  // ascending; the kernel count stands for Store
  bool on_chip = false;
  bool dram_copy = false;  // already written to DRAM once (evicting it again costs nothing)
  bool fused = false;      // produced tile by tile into its only reader, never held whole

  int last_use() const { return uses.empty() ? def : uses.back(); }
  int next_use_after(int step) const {
    const auto it = std::upper_bound(uses.begin(), uses.end(), step);
    return it == uses.end() ? std::numeric_limits<int>::max() : *it;
  }
};

bool overlaps(const Value& v, const isa::TensorRef& ref) {
  return v.address < ref.address + ref.size_bytes() && ref.address < v.address + v.bytes;
}

// The activations of `program` and, per kernel, the values it reads and writes.
struct Lifetimes {
  std::vector<Value> values;
  std::vector<std::vector<std::size_t>> reads;   // per kernel, distinct value indices
  std::vector<std::vector<std::size_t>> writes;  // per kernel
};

Lifetimes lifetimes(const isa::Program& program) {
  Lifetimes lt;
  const std::uint64_t constants_end = program.constants.size();
  std::vector<std::size_t> current;  // values now held at their addresses, oldest first
  const auto define = [&](const isa::TensorRef& ref, int step) {
    std::erase_if(current, [&](std::size_t i) { return overlaps(lt.values[i], ref); });
    lt.values.push_back({ref.address, ref.size_bytes(), step, {}, false, false});
    current.push_back(lt.values.size() - 1);
    return lt.values.size() - 1;
  };
  const auto read = [&](const isa::TensorRef& ref, int step) -> std::size_t {
    for (auto it = current.rbegin(); it != current.rend(); ++it) {
      if (overlaps(lt.values[*it], ref)) {
        lt.values[*it].uses.push_back(step);
        return *it;
      }
    }
    const std::size_t v = define(ref, kLoadStep);  // read before any write: given with the program
    lt.values[v].uses.push_back(step);
    return v;
  };
  for (const auto& ref : program.inputs) define(ref, kLoadStep);
  const int kernel_count = static_cast<int>(program.kernels.size());
  lt.reads.resize(program.kernels.size());
  lt.writes.resize(program.kernels.size());
  for (int k = 0; k < kernel_count; ++k) {
    const isa::Kernel& kernel = program.kernels[static_cast<std::size_t>(k)];
    auto& reads = lt.reads[static_cast<std::size_t>(k)];
    for (const auto& ref : kernel.inputs) {
      if (constants_end > 0 && ref.address + ref.size_bytes() <= constants_end)
        continue;  // a constant
      const std::size_t v = read(ref, k);
      if (std::find(reads.begin(), reads.end(), v) == reads.end()) reads.push_back(v);
    }
    for (const auto& ref : kernel.outputs)
      lt.writes[static_cast<std::size_t>(k)].push_back(define(ref, k));
  }
  for (const auto& ref : program.outputs) read(ref, kernel_count);
  for (auto& v : lt.values) v.uses.erase(std::unique(v.uses.begin(), v.uses.end()), v.uses.end());
  return lt;
}

// Elementwise kinds that may write their output over an input read for the last time (a
// compiler's in-place reuse: each output element is written after its input elements are read).
bool in_place(isa::KernelKind kind) { return isa::kernel_kind_info(kind).in_place; }

// Kinds that compute an output row band from a band of input rows, so that a compiler can run
// them tile by tile right behind the kernel producing their input (depth-first tiling).
bool row_local(isa::KernelKind kind) { return isa::kernel_kind_info(kind).row_local; }

std::uint64_t peak_live(const Lifetimes& lt, int kernel_count) {
  std::uint64_t peak = 0;
  for (int k = 0; k < kernel_count; ++k) {
    std::uint64_t live = 0;
    for (const auto& v : lt.values) {
      if (v.def <= k && k <= v.last_use()) live += v.bytes;
    }
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace

std::uint64_t kernel_weight_bytes(const isa::Kernel& kernel) {
  if (const auto* p = std::get_if<isa::Conv2dParams>(&kernel.params)) {
    return p->weight.size_bytes() + (p->bias ? p->bias->size_bytes() : 0);
  }
  if (const auto* p = std::get_if<isa::MatMulParams>(&kernel.params)) {
    return p->b.size_bytes() + (p->bias ? p->bias->size_bytes() : 0);
  }
  return 0;
}

SramPlan plan_sram(const isa::Program& program, int pe_count, std::uint64_t sram_bytes_per_pe,
                   std::uint64_t weight_budget_per_pe) {
  const auto pes = static_cast<std::uint64_t>(std::max(pe_count, 1));
  const int kernel_count = static_cast<int>(program.kernels.size());
  Lifetimes lt = lifetimes(program);
  SramPlan plan;
  plan.kernels.resize(program.kernels.size());
  plan.peak_live_bytes = peak_live(lt, kernel_count);

  // Weights: resident in program order within the budget; a PE holds its share.
  std::uint64_t budget = std::min(weight_budget_per_pe, sram_bytes_per_pe);
  std::uint64_t resident_per_pe = 0;
  for (const auto& kernel : program.kernels) {
    const std::uint64_t w = kernel_weight_bytes(kernel);
    const std::uint64_t per_pe = (w + pes - 1) / pes;
    std::uint64_t kept = 0;
    if (w > 0 && per_pe <= budget) {
      budget -= per_pe;
      resident_per_pe += per_pe;
      kept = w;
    } else if (w > 0) {
      budget = 0;  // program order: nothing after the first miss is resident
    }
    plan.resident_weights.push_back(kept);
    plan.resident_weight_bytes += kept;
  }
  plan.activation_capacity = sram_bytes_per_pe - resident_per_pe;
  const std::uint64_t capacity = plan.activation_capacity;

  std::uint64_t on_chip = 0;
  const auto place = [&](Value& v) {  // on chip when it fits, else written to DRAM
    if (on_chip + v.bytes <= capacity) {
      v.on_chip = true;
      on_chip += v.bytes;
      return std::uint64_t{0};
    }
    v.dram_copy = true;
    return v.bytes;
  };
  for (std::size_t i = 0; i < lt.values.size(); ++i) {
    Value& v = lt.values[i];
    if (v.def == kLoadStep) place(v);  // Load's DMA writes SRAM when it fits, DRAM otherwise
  }
  for (int k = 0; k < kernel_count; ++k) {
    KernelSpill& spill = plan.kernels[static_cast<std::size_t>(k)];
    const auto& reads = lt.reads[static_cast<std::size_t>(k)];
    const auto& writes = lt.writes[static_cast<std::size_t>(k)];
    for (auto& v : lt.values) {  // values past their last use free their space
      if (v.on_chip && v.last_use() < k) {
        v.on_chip = false;
        on_chip -= v.bytes;
      }
    }
    std::uint64_t out_bytes = 0;
    for (std::size_t w : writes) out_bytes += lt.values[w].bytes;
    std::vector<std::size_t> consumed;  // inputs whose space the output takes over, read on chip
    if (in_place(program.kernels[static_cast<std::size_t>(k)].kind)) {
      std::uint64_t reused = 0;
      for (std::size_t r : reads) {
        Value& v = lt.values[r];
        if (v.on_chip && v.last_use() == k && reused + v.bytes <= out_bytes) {
          reused += v.bytes;
          v.on_chip = false;
          on_chip -= v.bytes;
          consumed.push_back(r);
        }
      }
    }
    if (on_chip + out_bytes > capacity) {  // evict held values, farthest next use first
      std::vector<std::size_t> held;
      for (std::size_t i = 0; i < lt.values.size(); ++i) {
        if (lt.values[i].on_chip && std::find(reads.begin(), reads.end(), i) == reads.end())
          held.push_back(i);
      }
      std::stable_sort(held.begin(), held.end(), [&](std::size_t a, std::size_t b) {
        return lt.values[a].next_use_after(k) > lt.values[b].next_use_after(k);
      });
      for (std::size_t i : held) {
        if (on_chip + out_bytes <= capacity) break;
        Value& v = lt.values[i];
        if (!v.dram_copy) spill.write_bytes += v.bytes;
        v.dram_copy = true;
        v.on_chip = false;
        on_chip -= v.bytes;
      }
    }
    for (std::size_t r : reads) {
      const bool on_chip_read = std::find(consumed.begin(), consumed.end(), r) != consumed.end();
      if (!lt.values[r].on_chip && !lt.values[r].fused && !on_chip_read)
        spill.read_bytes += lt.values[r].bytes;
    }
    for (std::size_t w : writes) {
      Value& v = lt.values[w];
      const bool fusable = v.uses.size() == 1 && v.uses[0] == k + 1 && k + 1 < kernel_count &&
                           row_local(program.kernels[static_cast<std::size_t>(k) + 1].kind);
      if (fusable && on_chip + v.bytes > capacity) {
        v.fused = true;  // too large to hold: made tile by tile into its reader, never in DRAM
        continue;
      }
      spill.write_bytes += place(v);
    }
    for (std::size_t r :
         reads) {  // read back from DRAM: kept on chip for later readers when it fits
      Value& v = lt.values[r];
      if (!v.on_chip && v.next_use_after(k) != std::numeric_limits<int>::max() &&
          on_chip + v.bytes <= capacity) {
        v.on_chip = true;
        on_chip += v.bytes;
      }
    }
    plan.spill_bytes += spill.read_bytes + spill.write_bytes;
  }
  return plan;
}

}  // namespace furiosa::device::sim
