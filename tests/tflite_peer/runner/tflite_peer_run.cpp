// The TFLite peer's runner: runs one .tflite model with TensorFlow Lite 2.14's reference kernels
// (tflite::ops::builtin::BuiltinRefOpResolver) and writes the raw bytes of every output.
//
// Usage: tflite_peer_run LIB MODEL OUT_PREFIX [INPUT.bin]...
//   LIB         libtensorflow-lite.so.2.14.1 of the extracted Debian package (tflite_peer.sh)
//   OUT_PREFIX  output i is written to OUT_PREFIX<i>.bin
//   INPUT.bin   raw bytes of input i, exactly the tensor's byte size
// Built with our compiler against no TFLite header: the library is opened with dlopen and the
// few C API functions and the resolver's C++ symbols (exported by libtensorflow-lite) are
// declared here. It runs under Debian unstable's loader (tests/tflite_peer/tflite_peer.sh), since
// the library needs a newer glibc than bookworm's. One thread, no delegate: the C API applies no
// delegate unless asked, and the operators come only from the reference resolver.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

namespace {

struct TfLiteModel;
struct TfLiteInterpreterOptions;
struct TfLiteInterpreter;
struct TfLiteTensor;
struct TfLiteRegistration;

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "tflite_peer_run: %s\n", msg.c_str());
  std::exit(1);
}

void* sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) die(std::string("symbol ") + name + " not found: " + dlerror());
  return p;
}

template <class F>
F fn(void* lib, const char* name) {
  return reinterpret_cast<F>(sym(lib, name));
}

// tflite::ops::builtin::BuiltinRefOpResolver, constructed in place in a buffer larger than the
// class (its constructor and FindOp(BuiltinOperator, int) const are exported).
struct RefResolver {
  alignas(64) unsigned char storage[1 << 16];
  const TfLiteRegistration* (*find)(const void*, int, int) = nullptr;
  const TfLiteRegistration* (*find_custom)(const void*, const char*, int) = nullptr;
};

const TfLiteRegistration* find_builtin(void* user, int op, int version) {
  auto* r = static_cast<RefResolver*>(user);
  return r->find(r->storage, op, version);
}
// Custom operators come from the same resolver: BuiltinRefOpResolver registers
// TFLite_Detection_PostProcess (SSD's box decoding and NMS) and the audio custom operators.
const TfLiteRegistration* find_custom(void* user, const char* op, int version) {
  auto* r = static_cast<RefResolver*>(user);
  return r->find_custom(r->storage, op, version);
}

std::string read_file(const char* path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) die(std::string("cannot read ") + path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) die("usage: tflite_peer_run LIB MODEL OUT_PREFIX [INPUT.bin]...");
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) die(std::string("dlopen: ") + dlerror());

  auto model_create = fn<TfLiteModel* (*)(const char*)>(lib, "TfLiteModelCreateFromFile");
  auto options_create = fn<TfLiteInterpreterOptions* (*)()>(lib, "TfLiteInterpreterOptionsCreate");
  auto set_threads =
      fn<void (*)(TfLiteInterpreterOptions*, int)>(lib, "TfLiteInterpreterOptionsSetNumThreads");
  using FindBuiltin = const TfLiteRegistration* (*)(void*, int, int);
  using FindCustom = const TfLiteRegistration* (*)(void*, const char*, int);
  auto set_resolver = fn<void (*)(TfLiteInterpreterOptions*, FindBuiltin, FindCustom, void*)>(
      lib, "TfLiteInterpreterOptionsSetOpResolver");
  auto create = fn<TfLiteInterpreter* (*)(const TfLiteModel*, const TfLiteInterpreterOptions*)>(
      lib, "TfLiteInterpreterCreate");
  auto allocate = fn<int (*)(TfLiteInterpreter*)>(lib, "TfLiteInterpreterAllocateTensors");
  auto input_count =
      fn<int (*)(const TfLiteInterpreter*)>(lib, "TfLiteInterpreterGetInputTensorCount");
  auto input_tensor =
      fn<TfLiteTensor* (*)(const TfLiteInterpreter*, int)>(lib, "TfLiteInterpreterGetInputTensor");
  auto output_count =
      fn<int (*)(const TfLiteInterpreter*)>(lib, "TfLiteInterpreterGetOutputTensorCount");
  auto output_tensor = fn<const TfLiteTensor* (*)(const TfLiteInterpreter*, int)>(
      lib, "TfLiteInterpreterGetOutputTensor");
  auto byte_size = fn<std::size_t (*)(const TfLiteTensor*)>(lib, "TfLiteTensorByteSize");
  auto copy_from =
      fn<int (*)(TfLiteTensor*, const void*, std::size_t)>(lib, "TfLiteTensorCopyFromBuffer");
  auto copy_to =
      fn<int (*)(const TfLiteTensor*, void*, std::size_t)>(lib, "TfLiteTensorCopyToBuffer");
  auto invoke = fn<int (*)(TfLiteInterpreter*)>(lib, "TfLiteInterpreterInvoke");

  auto resolver = std::make_unique<RefResolver>();
  fn<void (*)(void*)>(lib, "_ZN6tflite3ops7builtin20BuiltinRefOpResolverC1Ev")(resolver->storage);
  resolver->find = fn<const TfLiteRegistration* (*)(const void*, int, int)>(
      lib, "_ZNK6tflite3ops7builtin20BuiltinRefOpResolver6FindOpENS_15BuiltinOperatorEi");
  resolver->find_custom = fn<const TfLiteRegistration* (*)(const void*, const char*, int)>(
      lib, "_ZNK6tflite3ops7builtin20BuiltinRefOpResolver6FindOpEPKci");

  TfLiteModel* model = model_create(argv[2]);
  if (!model) die(std::string("cannot load model ") + argv[2]);
  TfLiteInterpreterOptions* options = options_create();
  set_threads(options, 1);
  set_resolver(options, find_builtin, find_custom, resolver.get());
  TfLiteInterpreter* interp = create(model, options);
  if (!interp) die("cannot create the interpreter (an operator the reference resolver lacks?)");
  if (allocate(interp) != 0) die("AllocateTensors failed");
  const int n_in = input_count(interp);
  if (argc - 4 != n_in)
    die("the model has " + std::to_string(n_in) + " inputs, " + std::to_string(argc - 4) +
        " given");
  for (int i = 0; i < n_in; ++i) {
    const std::string bytes = read_file(argv[4 + i]);
    TfLiteTensor* t = input_tensor(interp, i);
    if (bytes.size() != byte_size(t)) {
      die("input " + std::to_string(i) + " has " + std::to_string(bytes.size()) +
          " bytes, the tensor " + std::to_string(byte_size(t)));
    }
    if (copy_from(t, bytes.data(), bytes.size()) != 0) die("cannot set input " + std::to_string(i));
  }
  if (invoke(interp) != 0) die("Invoke failed");
  for (int i = 0; i < output_count(interp); ++i) {
    const TfLiteTensor* t = output_tensor(interp, i);
    std::vector<char> out(byte_size(t));
    if (copy_to(t, out.data(), out.size()) != 0) die("cannot read output " + std::to_string(i));
    const std::string path = std::string(argv[3]) + std::to_string(i) + ".bin";
    std::ofstream f(path, std::ios::binary);
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    if (!f) die("cannot write " + path);
  }
  return 0;  // the interpreter and library stay alive until exit (no teardown order to get wrong)
}
