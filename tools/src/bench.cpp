// Benchmark mode of furiosa-run.
#include "bench.h"

#include "furiosa/profiler/statistics.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <thread>

#include "furiosa/runtime/queue.h"

namespace furiosa::tools {
namespace {

using Clock = std::chrono::steady_clock;

// Decides when to stop and prints progress.
class Budget {
 public:
  Budget(const BenchOptions& o) : queries_(o.queries), duration_(o.duration_s), progress_(o.progress) {
    if (queries_ == 0 && duration_ <= 0) queries_ = 100;
    start_ = Clock::now();
  }
  /// Claims one more query; false once the budget is spent.
  bool claim() {
    if (queries_ > 0) return issued_.fetch_add(1) < queries_;
    return elapsed() < duration_;
  }
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  void tick(std::uint64_t done) {
    if (!progress_) return;
    const double t = elapsed();
    std::lock_guard lock(mu_);
    if (t >= 1.0 && t - last_ >= 1.0) {
      last_ = t;
      fmt::print(stderr, "\r{} queries in {:.0f} s ({:.1f} QPS)", done, t, static_cast<double>(done) / t);
      printed_ = true;
    }
  }
  void finish() {
    if (printed_) fmt::print(stderr, "\n");
  }

 private:
  std::uint64_t queries_;
  double duration_;
  bool progress_;
  Clock::time_point start_;
  std::atomic<std::uint64_t> issued_{0};
  std::mutex mu_;
  double last_ = 0;
  bool printed_ = false;
};

// The figures of a run, as furiosa-run prints them.
void print_result(const BenchOptions& o, const BenchResult& r) {
  fmt::print("mode: {}, devices: {}, workers: {}, batch size: {}\n", o.mode, r.devices, o.session.worker_num,
             o.session.batch_size);
  fmt::print("queries: {} ({} errors) in {:.3f} s\n", r.queries, r.errors, r.seconds);
  fmt::print("QPS: {:.1f} (samples/s: {:.1f})\n", r.qps, r.qps * static_cast<double>(o.session.batch_size));
  fmt::print("latency (us): min {:.1f}, mean {:.1f}, p50 {:.1f}, p90 {:.1f}, p95 {:.1f}, p99 {:.1f}, p99.9 {:.1f}, max {:.1f}\n",
             r.min_us, r.mean_us, r.p50_us, r.p90_us, r.p95_us, r.p99_us, r.p999_us, r.max_us);
}

}  // namespace

Tensor random_tensor(const runtime::TensorDesc& d, std::mt19937_64& rng) {
  Tensor t(d.dtype, d.shape);
  switch (d.dtype) {
    case DType::Float32: {
      std::uniform_real_distribution<float> dist(0.0f, 1.0f);
      for (auto& v : t.as<float>()) v = dist(rng);
      break;
    }
    case DType::UInt8: {
      std::uniform_int_distribution<int> dist(0, 255);
      for (auto& v : t.as<std::uint8_t>()) v = static_cast<std::uint8_t>(dist(rng));
      break;
    }
    case DType::Int8: {
      std::uniform_int_distribution<int> dist(-128, 127);
      for (auto& v : t.as<std::int8_t>()) v = static_cast<std::int8_t>(dist(rng));
      break;
    }
    case DType::Int32: {
      std::uniform_int_distribution<std::int32_t> dist(-1000, 1000);
      for (auto& v : t.as<std::int32_t>()) v = dist(rng);
      break;
    }
    case DType::Int64: {
      std::uniform_int_distribution<std::int64_t> dist(-1000, 1000);
      for (auto& v : t.as<std::int64_t>()) v = dist(rng);
      break;
    }
  }
  return t;
}

std::vector<Tensor> random_inputs(const runtime::Model& model, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> inputs;
  for (const auto& d : model.inputs) inputs.push_back(random_tensor(d, rng));
  return inputs;
}

BenchResult run_bench(const BenchOptions& o, const InputMaker& make_inputs) {
  if (o.mode != "sync" && o.mode != "async") {
    throw Error(ErrorCode::InvalidArgument, fmt::format("--mode '{}': expected sync or async", o.mode));
  }
  std::vector<double> lat;
  std::mutex lat_mu;
  std::atomic<std::uint64_t> errors{0}, done{0};
  BenchResult r;
  double seconds = 0;
  if (o.mode == "sync") {
    runtime::RunnerOptions ro;
    static_cast<runtime::SessionOptions&>(ro) = o.session;
    auto runner = runtime::create_runner(o.model, ro);
    r.devices = runner->device_name();
    const std::vector<Tensor> inputs = make_inputs(runner->model());
    runner->run(inputs);  // warm-up, not counted
    const auto t0 = Clock::now();
    Budget b(o);
    std::vector<std::thread> threads;
    for (int w = 0; w < o.session.worker_num; ++w) {
      threads.emplace_back([&] {
        while (b.claim()) {
          const auto s = Clock::now();
          try {
            runner->run(inputs);
          } catch (const std::exception&) {
            ++errors;
          }
          const double us = std::chrono::duration<double, std::micro>(Clock::now() - s).count();
          {
            std::lock_guard lock(lat_mu);
            lat.push_back(us);
          }
          b.tick(++done);
        }
      });
    }
    for (auto& t : threads) t.join();
    b.finish();
    seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  } else {
    runtime::QueueOptions qo;
    static_cast<runtime::SessionOptions&>(qo) = o.session;
    qo.input_queue_size = static_cast<std::size_t>(std::max(2, o.session.worker_num * 2));
    auto [submitter, receiver] = runtime::create_queue(o.model, qo);
    const std::vector<Tensor> inputs = make_inputs(submitter.model());
    Budget b(o);
    const auto t0 = Clock::now();
    std::thread producer([&, &s = submitter] {
      while (b.claim()) s.submit(inputs, Clock::now());
      s.close();
    });
    try {
      for (;;) {
        auto res = receiver.recv(std::chrono::seconds(600));
        const auto submitted = std::any_cast<Clock::time_point>(res.context);
        if (res.error) ++errors;
        lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - submitted).count());
        b.tick(++done);
      }
    } catch (const Error& e) {
      if (e.code() != ErrorCode::SessionTerminated) {
        producer.join();
        throw;
      }
    }
    producer.join();
    b.finish();
    seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    r.devices = o.session.device.empty() ? "default" : o.session.device;
  }
  std::sort(lat.begin(), lat.end());
  r.queries = lat.size();
  r.errors = errors;
  r.seconds = seconds;
  r.qps = seconds > 0 ? static_cast<double>(r.queries) / seconds : 0;
  if (!lat.empty()) {
    r.min_us = lat.front();
    r.max_us = lat.back();
    double sum = 0;
    for (double v : lat) sum += v;
    r.mean_us = sum / static_cast<double>(lat.size());
    r.p50_us = profiler::percentile<double>(lat, 500);
    r.p90_us = profiler::percentile<double>(lat, 900);
    r.p95_us = profiler::percentile<double>(lat, 950);
    r.p99_us = profiler::percentile<double>(lat, 990);
    r.p999_us = profiler::percentile<double>(lat, 999);
  }
  if (o.print) print_result(o, r);
  if (!o.json.empty()) {
    nlohmann::json j = {{"model", o.model.string()}, {"mode", o.mode}, {"devices", r.devices},
                        {"workers", o.session.worker_num}, {"batch_size", o.session.batch_size}, {"queries", r.queries},
                        {"errors", r.errors}, {"qps", r.qps},
                        {"latency_us", {{"min", r.min_us}, {"mean", r.mean_us}, {"p50", r.p50_us}, {"p90", r.p90_us},
                                        {"p95", r.p95_us}, {"p99", r.p99_us}, {"p999", r.p999_us}, {"max", r.max_us}}}};
    std::ofstream f(o.json);
    f << j.dump(2) << "\n";
    if (!f) throw Error(ErrorCode::IoError, fmt::format("cannot write '{}'", o.json.string()));
    fmt::print("wrote {}\n", o.json.string());
  }
  return r;
}

}  // namespace furiosa::tools
