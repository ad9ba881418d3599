// libcpuid-cap.so: makes a process see a CPU without AVX-512 (and, for `avx2`, without AVX-VNNI),
// so that a program which picks its kernels by CPUID -- ONNX Runtime's MLAS, our simulator's
// `auto` level -- picks the ones a CPU of that class would. compare.sh preloads it into the ONNX
// Runtime benchmark so that the simulator's avx2 level is timed against ONNX Runtime's AVX2
// kernels on the same machine, not against its AVX-512 VNNI ones.
//
// Usage: LD_PRELOAD=libcpuid-cap.so FURIOSA_CPUID_CAP=avx2|avx-vnni COMMAND ...
//
// How: Linux's CPUID faulting (arch_prctl(ARCH_SET_CPUID, 0), x86-64 kernels since 4.12; the CPU
// or hypervisor must offer it: /proc/cpuinfo flag `cpuid_fault`) makes every CPUID instruction
// of the thread raise SIGSEGV. The handler runs the real CPUID with faulting briefly off, clears
// the feature bits above the cap (Intel SDM vol. 2A, CPUID leaf 07H sub-leaves 0 and 1) and
// resumes after the instruction. The setting is per thread and inherited by threads created
// later, so it is switched on in a constructor, before the program starts any. What ran before
// that constructor is not capped: ifunc resolvers (GCC's target_clones) of the executable and its
// libraries, which the dynamic linker runs while relocating them, and the constructors of those
// libraries. ONNX Runtime detects the CPU later, when Node.js loads it with dlopen. XGETBV is not
// affected: the OS still saves the AVX-512 state, which is harmless. This is the mechanism rr
// uses to record CPUID results.
//
// The program may install its own SIGSEGV handler (Node.js resets every signal to its default at
// start, then installs WebAssembly's trap handler). So this library also defines `sigaction` and
// `signal`: for SIGSEGV they record the program's action and keep ours installed, and faults that
// are not CPUID go to the program's action. Those calls are expected while the program starts,
// not concurrently with faults. Errors (no CPUID faulting, unknown cap) print one line to stderr
// and exit with status 3, so that a benchmark never runs silently uncapped.
#include <asm/prctl.h>
#include <cpuid.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

// Leaf 7, sub-leaf 0, EBX: AVX512F (16), DQ (17), IFMA (21), PF (26), ER (27), CD (28), BW (30),
// VL (31).
constexpr std::uint32_t kLeaf7Ebx512 = (1U << 16) | (1U << 17) | (1U << 21) | (1U << 26) |
                                       (1U << 27) | (1U << 28) | (1U << 30) | (1U << 31);
// Leaf 7, sub-leaf 0, ECX: AVX512_VBMI (1), VBMI2 (6), VNNI (11), BITALG (12), VPOPCNTDQ (14).
constexpr std::uint32_t kLeaf7Ecx512 = (1U << 1) | (1U << 6) | (1U << 11) | (1U << 12) | (1U << 14);
// Leaf 7, sub-leaf 0, EDX: AVX512_4VNNIW (2), 4FMAPS (3), VP2INTERSECT (8), FP16 (23), and the
// AMX tiles (22, 24, 25).
constexpr std::uint32_t kLeaf7Edx512 =
    (1U << 2) | (1U << 3) | (1U << 8) | (1U << 22) | (1U << 23) | (1U << 24) | (1U << 25);
// Leaf 7, sub-leaf 1, EAX: AVX512_BF16 (5); AVX-VNNI (4) separately.
constexpr std::uint32_t kLeaf7s1Eax512 = 1U << 5;
constexpr std::uint32_t kLeaf7s1EaxAvxVnni = 1U << 4;

bool g_keep_avx_vnni = false;          // written once, in the constructor, before any thread exists
bool g_installed = false;              // ours is the SIGSEGV handler
struct sigaction g_program_action {};  // what the program asked for SIGSEGV (SIG_DFL at first)

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);

SigactionFn real_sigaction() {
  static const auto fn = reinterpret_cast<SigactionFn>(dlsym(RTLD_NEXT, "sigaction"));
  return fn;
}

long set_cpuid_enabled(bool enabled) {
  return syscall(SYS_arch_prctl, ARCH_SET_CPUID, enabled ? 1L : 0L);
}

// A fault that is not CPUID: the program's handler, or the default action (the instruction
// faults again once the default is restored, and the process dies as it would have).
void forward_fault(int sig, siginfo_t* info, void* context) {
  const struct sigaction& act = g_program_action;
  if ((act.sa_flags & SA_SIGINFO) != 0 && act.sa_sigaction != nullptr) {
    act.sa_sigaction(sig, info, context);
  } else if ((act.sa_flags & SA_SIGINFO) == 0 && act.sa_handler != SIG_DFL &&
             act.sa_handler != SIG_IGN) {
    act.sa_handler(sig);
  } else {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    real_sigaction()(sig, &dfl, nullptr);
    g_installed = false;
  }
}

void on_sigsegv(int sig, siginfo_t* info, void* context) {
  auto* uc = static_cast<ucontext_t*>(context);
  greg_t* regs = uc->uc_mcontext.gregs;
  const auto* ip = reinterpret_cast<const unsigned char*>(regs[REG_RIP]);
  if (ip[0] != 0x0F || ip[1] != 0xA2) {
    forward_fault(sig, info, context);
    return;
  }
  const auto leaf = static_cast<std::uint32_t>(regs[REG_RAX]);
  const auto subleaf = static_cast<std::uint32_t>(regs[REG_RCX]);
  unsigned a = 0;
  unsigned b = 0;
  unsigned c = 0;
  unsigned d = 0;
  set_cpuid_enabled(true);
  __cpuid_count(leaf, subleaf, a, b, c, d);
  set_cpuid_enabled(false);
  if (leaf == 7 && subleaf == 0) {
    b &= ~kLeaf7Ebx512;
    c &= ~kLeaf7Ecx512;
    d &= ~kLeaf7Edx512;
  } else if (leaf == 7 && subleaf == 1) {
    a &= ~(kLeaf7s1Eax512 | (g_keep_avx_vnni ? 0U : kLeaf7s1EaxAvxVnni));
  }
  regs[REG_RAX] = a;
  regs[REG_RBX] = b;
  regs[REG_RCX] = c;
  regs[REG_RDX] = d;
  regs[REG_RIP] += 2;
}

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "libcpuid-cap: %s\n", what);
  std::_Exit(3);
}

__attribute__((constructor)) void install() {
  const char* cap = std::getenv("FURIOSA_CPUID_CAP");
  if (cap == nullptr || std::strcmp(cap, "none") == 0) return;
  if (std::strcmp(cap, "avx-vnni") == 0) {
    g_keep_avx_vnni = true;
  } else if (std::strcmp(cap, "avx2") != 0) {
    fail("FURIOSA_CPUID_CAP must be avx2, avx-vnni or none");
  }
  struct sigaction sa {};
  sa.sa_sigaction = on_sigsegv;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  if (real_sigaction() == nullptr || real_sigaction()(SIGSEGV, &sa, &g_program_action) != 0) {
    fail("cannot install the SIGSEGV handler");
  }
  g_installed = true;
  if (set_cpuid_enabled(false) != 0) {
    fail(
        "this CPU or kernel has no CPUID faulting (arch_prctl ARCH_SET_CPUID; /proc/cpuinfo "
        "flag cpuid_fault), so the cap cannot be applied");
  }
}

}  // namespace

// The program's view of SIGSEGV is its own: it sets and reads g_program_action while ours stays
// installed. Every other signal goes straight to the C library.
extern "C" int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (sig != SIGSEGV || !g_installed) return real_sigaction()(sig, act, old);
  if (old != nullptr) *old = g_program_action;
  if (act != nullptr) g_program_action = *act;
  return 0;
}

extern "C" sighandler_t signal(int sig, sighandler_t handler) {
  struct sigaction act {};
  struct sigaction old {};
  act.sa_handler = handler;
  act.sa_flags = SA_RESTART;
  sigemptyset(&act.sa_mask);
  if (sigaction(sig, &act, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}
