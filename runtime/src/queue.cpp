// Submit/recv queues over a Session. Each submit is one request of the session's pipeline, the
// same as Runner::start's (request_pipeline.h); its callback delivers into the mailbox, and a
// hook when a worker takes it frees its place in the input queue.
//
// States: open -> (Submitter::close) draining -> terminated once nothing is in flight and every
// result was received; Receiver::close (or destroying the Receiver) closes from any state.
// Every submitted request yields exactly one result: delivered, or dropped after the receiver
// closed. Workers never wait once the receiver is closed, so teardown cannot hang.
#include "furiosa/runtime/queue.h"

#include <fmt/format.h>

#include <condition_variable>
#include <deque>
#include <mutex>

#include "factories.h"
#include "session.h"

namespace furiosa::runtime {

std::vector<Tensor>& QueueResult::value() {
  if (error) std::rethrow_exception(error);
  return outputs;
}

namespace detail {

/// The part shared with requests in flight (never owns the Session).
struct Mailbox {
  std::mutex mu;
  std::condition_variable cv;  // notified on every change
  std::size_t waiting = 0;     // submitted, not yet taken by a worker
  std::size_t in_flight = 0;   // submitted, result not yet delivered or dropped
  std::deque<QueueResult> results;
  bool submitter_closed = false;
  bool receiver_closed = false;
  std::size_t input_queue_size = 64;
  std::size_t output_queue_size = 64;
};

/// Owned by Submitter and Receiver only, so the Session (whose destructor joins the workers) is
/// destroyed on a user thread.
struct QueueState {
  std::shared_ptr<Mailbox> mailbox;
  std::unique_ptr<Session> session;
  Model model;  // the session's (with the compiler's recorded formats)
};

}  // namespace detail

Submitter::Submitter(std::shared_ptr<detail::QueueState> state) : state_(std::move(state)) {}
Submitter::~Submitter() {
  if (state_) close();
}
Submitter::Submitter(Submitter&&) noexcept = default;
Submitter& Submitter::operator=(Submitter&& other) noexcept {
  if (this != &other) {
    if (state_) close();
    state_ = std::move(other.state_);
  }
  return *this;
}

const Model& Submitter::model() const { return state_->model; }

std::vector<DeviceHealth> Submitter::device_health() const { return state_->session->device_health(); }

std::uint64_t Submitter::host_operator_ns() const { return state_->session->host_operator_ns(); }

void Submitter::submit(std::vector<Tensor> inputs, std::any context) {
  auto& box = *state_->mailbox;
  state_->session->validate(inputs);
  {
    std::unique_lock lock(box.mu);
    box.cv.wait(lock, [&] { return box.waiting < box.input_queue_size || box.submitter_closed || box.receiver_closed; });
    if (box.submitter_closed || box.receiver_closed) {
      throw Error(ErrorCode::SessionClosed, "submit on a closed queue");
    }
    ++box.waiting;
    ++box.in_flight;
  }
  auto mailbox = state_->mailbox;
  // The request's completion: deliver (waiting for room) unless the receiver is gone.
  auto done = [mailbox, context = std::move(context)](std::vector<Tensor> outputs, std::exception_ptr error) mutable {
    std::unique_lock lock(mailbox->mu);
    mailbox->cv.wait(lock, [&] {
      return mailbox->results.size() < mailbox->output_queue_size || mailbox->receiver_closed;
    });
    if (!mailbox->receiver_closed) {
      mailbox->results.push_back(QueueResult{std::move(context), std::move(outputs), error});
    }
    --mailbox->in_flight;
    mailbox->cv.notify_all();
  };
  // A worker taking the request frees a place in the input queue.
  auto on_start = [mailbox] {
    std::lock_guard lock(mailbox->mu);
    --mailbox->waiting;
    mailbox->cv.notify_all();
  };
  state_->session->start(std::make_shared<const std::vector<Tensor>>(std::move(inputs)), std::move(done),
                         std::move(on_start));
}

void Submitter::close() {
  auto& box = *state_->mailbox;
  std::lock_guard lock(box.mu);
  box.submitter_closed = true;
  box.cv.notify_all();
}

Receiver::Receiver(std::shared_ptr<detail::QueueState> state) : state_(std::move(state)) {}
Receiver::~Receiver() {
  if (state_) close();
}
Receiver::Receiver(Receiver&&) noexcept = default;
Receiver& Receiver::operator=(Receiver&& other) noexcept {
  if (this != &other) {
    if (state_) close();
    state_ = std::move(other.state_);
  }
  return *this;
}

QueueResult Receiver::recv(std::chrono::nanoseconds timeout) {
  auto& box = *state_->mailbox;
  std::unique_lock lock(box.mu);
  const bool ready = box.cv.wait_for(lock, timeout, [&] {
    return !box.results.empty() || box.receiver_closed || (box.submitter_closed && box.in_flight == 0);
  });
  if (box.receiver_closed) throw Error(ErrorCode::SessionClosed, "recv on a closed queue");
  if (!box.results.empty()) {
    QueueResult r = std::move(box.results.front());
    box.results.pop_front();
    box.cv.notify_all();
    return r;
  }
  if (ready) throw Error(ErrorCode::SessionTerminated, "the submitter is closed and every result was received");
  throw Error(ErrorCode::QueueWaitTimeout,
              fmt::format("no result within {} ms", std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()));
}

void Receiver::close() {
  auto& box = *state_->mailbox;
  std::lock_guard lock(box.mu);
  box.receiver_closed = true;
  box.results.clear();
  box.cv.notify_all();
}

namespace detail {

std::pair<Submitter, Receiver> queue_from(ModelSource source, const QueueOptions& options) {
  if (options.input_queue_size < 1 || options.output_queue_size < 1) {
    throw Error(ErrorCode::InvalidArgument, "input_queue_size and output_queue_size must be >= 1");
  }
  auto state = std::make_shared<detail::QueueState>();
  state->mailbox = std::make_shared<detail::Mailbox>();
  state->mailbox->input_queue_size = options.input_queue_size;
  state->mailbox->output_queue_size = options.output_queue_size;
  state->session = std::make_unique<detail::Session>(
      std::move(source), static_cast<const SessionOptions&>(options));
  state->model = state->session->model();
  return {Submitter(state), Receiver(state)};
}

}  // namespace detail

std::pair<Submitter, Receiver> create_queue(const std::filesystem::path& model, const QueueOptions& options) {
  return detail::queue_from(detail::ModelSource(model), options);
}

}  // namespace furiosa::runtime
