#include "ingot/runtime/worker.h"

#include <fmt/format.h>

#include <system_error>

#include "ingot/runtime/error.h"

namespace ingot {

CompletionEvent::CompletionEvent(std::thread::id completer, std::string description)
    : completer_(completer), description_(std::move(description)) {}

bool CompletionEvent::ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void CompletionEvent::wait() const {
  std::unique_lock<std::mutex> lock(mu_);
  if (!done_ && completer_ != std::thread::id{} && std::this_thread::get_id() == completer_) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("waiting for {} from the worker thread that has to run it would "
                            "never return",
                            description_),
                "work running on a device's worker must not wait for work queued later on the "
                "same device; enqueue a continuation instead");
  }
  cv_.wait(lock, [this] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

void CompletionEvent::complete(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) {
      throw Error(ErrorCode::kFailedPrecondition,
                  fmt::format("CompletionEvent::complete: {} was already completed", description_),
                  "complete each event exactly once");
    }
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

namespace {

class AllEvent final : public Event {
 public:
  explicit AllEvent(std::vector<std::shared_ptr<Event>> events) : events_(std::move(events)) {}
  bool ready() const override {
    for (const auto& e : events_) {
      if (!e->ready()) return false;
    }
    return true;
  }
  void wait() const override {
    std::exception_ptr first;
    for (const auto& e : events_) {
      try {
        e->wait();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }

 private:
  std::vector<std::shared_ptr<Event>> events_;
};

}  // namespace

std::shared_ptr<Event> when_all(std::vector<std::shared_ptr<Event>> events) {
  std::erase(events, nullptr);
  return std::make_shared<AllEvent>(std::move(events));
}

Worker::Worker(std::string name) : name_(std::move(name)) {
  try {
    thread_ = std::thread([this] { loop(); });
  } catch (const std::system_error& e) {
    throw Error(ErrorCode::kInternal, fmt::format("could not start the worker thread of {}: {}", name_, e.what()),
                "the process may have reached its thread limit; use fewer devices");
  }
}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_ptr<Event> Worker::enqueue(std::function<void()> work) {
  if (!work) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("Worker::enqueue: empty work function for {}", name_),
                "pass a callable");
  }
  auto done = std::make_shared<CompletionEvent>(thread_.get_id(), "work on " + name_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Item{std::move(work), done});
  }
  cv_.notify_one();
  return done;
}

void Worker::loop() {
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    std::exception_ptr error;
    try {
      item.work();
    } catch (...) {
      error = std::current_exception();
    }
    item.work = nullptr;  // release captures before signalling completion
    item.done->complete(std::move(error));
  }
}

}  // namespace ingot
