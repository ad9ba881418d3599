// The ISA ladder of the fast kernels: which levels the CPU has, and the kernel table of each
// level with the entries it lacks filled from the next lower level (fast_kernels.h). One ladder
// per architecture: x86-64 (avx2 .. avx512) and aarch64 (neon, neon-dotprod, neon-i8mm); a build
// for any other architecture has no fast level (the portable kernels only).
#if defined(__x86_64__)
#include <cpuid.h>
#elif defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include <array>

#include "fast_kernels.h"

namespace furiosa::device::sim::fast {

std::string_view isa_arch(SimIsa isa) noexcept {
  switch (isa) {
    case SimIsa::Avx2:
    case SimIsa::AvxVnni:
    case SimIsa::Avx512Vnni:
    case SimIsa::Avx512: return "x86-64";
    case SimIsa::Neon:
    case SimIsa::NeonDotprod:
    case SimIsa::NeonI8mm: return "aarch64";
    case SimIsa::Portable: return "";
    case SimIsa::Auto: break;
  }
#if defined(__x86_64__)
  return "x86-64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "";
#endif
}

namespace {

#if defined(__x86_64__)

// The fast levels, lowest first (Portable and Auto are not tables).
constexpr std::array<SimIsa, 4> kLadder = {SimIsa::Avx2, SimIsa::AvxVnni, SimIsa::Avx512Vnni,
                                           SimIsa::Avx512};

// AVX-VNNI: CPUID leaf 7, subleaf 1, EAX bit 4 (clang 14's __builtin_cpu_supports does not
// know "avxvnni"). The OS's saving of the YMM state is what the avx2 check already covers.
bool cpu_avx_vnni() noexcept {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (eax & (1u << 4)) != 0;
}

bool detect(SimIsa isa) noexcept {
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks that the OS saves the YMM / ZMM state (XCR0).
  // The 256-bit levels also use FMA3 (QLinearAdd's MlasRatios formula rounds once per fma):
  // every CPU with AVX2 from Intel (Haswell on) and AMD (Excavator, Zen) has it.
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  switch (isa) {
    case SimIsa::Portable: return true;
    case SimIsa::Avx2: return avx2;
    case SimIsa::AvxVnni: return avx2 && cpu_avx_vnni();
    case SimIsa::Avx512Vnni:
      return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    case SimIsa::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi");
    default: return false;
  }
}

Kernels own_kernels(SimIsa isa) noexcept {
  switch (isa) {
    case SimIsa::Avx2: return avx2_kernels();
    case SimIsa::AvxVnni: return avx_vnni_kernels();
    case SimIsa::Avx512Vnni: return avx512_vnni_kernels();
    case SimIsa::Avx512: return avx512_kernels();
    default: return {};
  }
}

#elif defined(__aarch64__)

constexpr std::array<SimIsa, 3> kLadder = {SimIsa::Neon, SimIsa::NeonDotprod, SimIsa::NeonI8mm};

// Advanced SIMD is part of every ARMv8-A Linux system; the dot product (sdot / udot, ARMv8.2,
// optional before ARMv8.4) is reported by the kernel in AT_HWCAP, the int8 matrix multiply
// (usdot, ARMv8.6, optional from ARMv8.2) in AT_HWCAP2. neon-i8mm's functions are compiled for
// "+dotprod+i8mm", so it needs both.
bool detect(SimIsa isa) noexcept {
  const unsigned long hwcap = getauxval(AT_HWCAP);
  const unsigned long hwcap2 = getauxval(AT_HWCAP2);
  const bool neon = (hwcap & HWCAP_ASIMD) != 0;
  const bool dotprod = neon && (hwcap & HWCAP_ASIMDDP) != 0;
  switch (isa) {
    case SimIsa::Portable: return true;
    case SimIsa::Neon: return neon;
    case SimIsa::NeonDotprod: return dotprod;
    case SimIsa::NeonI8mm: return dotprod && (hwcap2 & HWCAP2_I8MM) != 0;
    default: return false;
  }
}

Kernels own_kernels(SimIsa isa) noexcept {
  switch (isa) {
    case SimIsa::Neon: return neon_kernels();
    case SimIsa::NeonDotprod: return neon_dotprod_kernels();
    case SimIsa::NeonI8mm: return neon_i8mm_kernels();
    default: return {};
  }
}

#else

constexpr std::array<SimIsa, 0> kLadder = {};

bool detect(SimIsa isa) noexcept { return isa == SimIsa::Portable; }

Kernels own_kernels(SimIsa) noexcept { return {}; }

#endif

// Fills the null entries of `k` from `lower`.
void fill(Kernels& k, const Kernels& lower) {
  if (k.conv == nullptr) k.conv = lower.conv;
  if (k.matmul == nullptr) k.matmul = lower.matmul;
  if (k.add_run == nullptr) k.add_run = lower.add_run;
  if (k.add_rows == nullptr) k.add_rows = lower.add_rows;
  if (k.sum_rows == nullptr) k.sum_rows = lower.sum_rows;
  if (k.copy_rows == nullptr) k.copy_rows = lower.copy_rows;
  if (k.maxpool_plane == nullptr) {
    k.maxpool_supported = lower.maxpool_supported;
    k.maxpool_plane = lower.maxpool_plane;
  }
}

struct Tables {
  std::array<bool, kLadder.size()> has{};
  std::array<Kernels, kLadder.size()> kernels{};
  int best = -1;  // index of the highest level the CPU has
};

const Tables& tables() noexcept {
  static const Tables t = [] {
    Tables r;
    for (std::size_t i = 0; i < kLadder.size(); ++i) {
      r.has[i] = detect(kLadder[i]);
      if (!r.has[i]) continue;
      r.kernels[i] = own_kernels(kLadder[i]);
      // Entries come from the lower levels this CPU has (a Cascade Lake has avx512-vnni and
      // avx2 but not avx-vnni).
      for (std::size_t j = i; j-- > 0;) {
        if (r.has[j]) fill(r.kernels[i], own_kernels(kLadder[j]));
      }
      r.best = static_cast<int>(i);
    }
    return r;
  }();
  return t;
}

}  // namespace

bool cpu_has(SimIsa isa) noexcept {
  if (isa == SimIsa::Portable) return true;
  const Tables& t = tables();
  for (std::size_t i = 0; i < kLadder.size(); ++i) {
    if (kLadder[i] == isa) return t.has[i];
  }
  return false;
}

const Kernels* kernels_for(SimIsa isa) noexcept {
  const Tables& t = tables();
  if (isa == SimIsa::Auto) {
    return t.best < 0 ? nullptr : &t.kernels[static_cast<std::size_t>(t.best)];
  }
  for (std::size_t i = 0; i < kLadder.size(); ++i) {
    if (kLadder[i] == isa) return t.has[i] ? &t.kernels[i] : nullptr;
  }
  return nullptr;
}

}  // namespace furiosa::device::sim::fast
