// Completion of asynchronous device work (a host-to-device copy, a program run): what transfers,
// device workers and the prefetch queue hand back so work can overlap.
#pragma once

#include <memory>

namespace ingot {

/// Signals that one piece of asynchronous work finished. Thread-safe.
class Event {
 public:
  virtual ~Event() = default;
  /// True once the work is done (successfully or not); never blocks.
  virtual bool ready() const = 0;
  /// Blocks until the work is done. Rethrows the work's error (an ingot::Error or any other
  /// exception it threw) in the waiting thread, every time wait() is called.
  virtual void wait() const = 0;
};

}  // namespace ingot
