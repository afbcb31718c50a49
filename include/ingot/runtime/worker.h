// Worker threads with FIFO work queues, and the Events they complete: what each Device uses to
// run copies and programs asynchronously (the CPU counterpart of a CUDA stream).
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ingot/runtime/event.h"

namespace ingot {

/// An Event completed by hand, once: by a Worker when its work ran, or by any producer.
/// Thread-safe.
class CompletionEvent final : public Event {
 public:
  /// `completer` is the thread that will call complete() (a worker's thread), if known: a wait()
  /// on that very thread before completion would never return, so it throws instead.
  /// `description` names the work in that error, e.g. "work on cpu:1".
  explicit CompletionEvent(std::thread::id completer = {}, std::string description = "work");

  bool ready() const override;
  /// Blocks until complete(); then rethrows `error` if one was given (every call).
  /// Throws ingot::Error(kFailedPrecondition) instead of blocking forever when called, before
  /// completion, on the completer thread (work waiting on work queued behind it on its own
  /// device).
  void wait() const override;
  /// Marks the work done; `error` (may be null) is what wait() rethrows. A second call throws
  /// ingot::Error(kFailedPrecondition).
  void complete(std::exception_ptr error = nullptr);

 private:
  std::thread::id completer_;
  std::string description_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

/// An Event that is ready once every one of `events` is ready. wait() waits for all of them and
/// then rethrows the first error in list order (so no work is still running when it throws).
/// Null entries are ignored; an empty list gives an Event that is ready at once.
std::shared_ptr<Event> when_all(std::vector<std::shared_ptr<Event>> events);

/// A thread that runs queued work items one at a time in the order they were enqueued (FIFO).
/// Thread-safe. The destructor runs every item still queued, then joins the thread, so every
/// Event handed out completes.
class Worker {
 public:
  /// Starts the thread. `name` (e.g. "cpu:1") appears in errors. Throws
  /// ingot::Error(kInternal) if the operating system cannot start a thread.
  explicit Worker(std::string name);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  /// Queues `work` (non-empty, else ingot::Error(kInvalidArgument)) behind everything enqueued
  /// before. The returned Event completes after `work` ran and was destroyed (so whatever it
  /// captured is released first); an exception thrown by `work` is caught there and rethrown by
  /// Event::wait(). The worker keeps running later work after an exception.
  std::shared_ptr<Event> enqueue(std::function<void()> work);
  /// The worker thread's id (to recognise work running on it).
  std::thread::id thread_id() const { return thread_.get_id(); }
  const std::string& name() const { return name_; }

 private:
  struct Item {
    std::function<void()> work;
    std::shared_ptr<CompletionEvent> done;
  };
  void loop();

  std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  std::thread thread_;  // last: started after the other members exist
};

}  // namespace ingot
