// InferRequest (infer_request.h): the handle side of a request's RequestState.
#include "furiosa/runtime/infer_request.h"

#include <thread>

#include "furiosa/core/error.h"
#include "request_pipeline.h"

namespace furiosa::runtime {

InferRequest::InferRequest(std::shared_ptr<detail::RequestState> state) noexcept : state_(std::move(state)) {}

bool InferRequest::cancel() { return state_->cancel(); }

void InferRequest::wait() const {
  std::unique_lock lock(state_->mu);
  if (state_->callback_thread == std::this_thread::get_id()) {
    throw Error(ErrorCode::InvalidArgument, "InferRequest::wait() called from the request's own callback would never return");
  }
  state_->cv.wait(lock, [this] { return state_->done; });
}

bool InferRequest::wait_for(std::chrono::nanoseconds timeout) const {
  std::unique_lock lock(state_->mu);
  if (state_->callback_thread == std::this_thread::get_id()) {
    throw Error(ErrorCode::InvalidArgument,
                "InferRequest::wait_for() called from the request's own callback would never succeed");
  }
  return state_->cv.wait_for(lock, timeout, [this] { return state_->done; });
}

bool InferRequest::done() const {
  std::lock_guard lock(state_->mu);
  return state_->done;
}

}  // namespace furiosa::runtime
