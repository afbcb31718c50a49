// Progbar: the text progress bar of keras.utils.Progbar, used by callbacks::ProgbarLogger (the
// bar fit/evaluate/predict print) and usable on its own. docs/trainer-callbacks.md shows the
// output formats.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "ingot/trainer/logs.h"

namespace ingot::utils {

/// A clock for progress output: seconds (any fixed origin) as a double; must never go backwards.
using Clock = std::function<double()>;

/// Options of a Progbar (Keras's keyword arguments, plus where to write and what time it is).
struct ProgbarOptions {
  /// Characters between the brackets of the bar (>= 1).
  int64_t width = 30;
  /// 0: print nothing. 1: a live bar redrawn in place with '\r' when the stream is a terminal;
  /// on any other stream it behaves as 2. 2: one summary line when the bar is finalized.
  int verbose = 1;
  /// Minimum seconds between two redraws of the live bar (>= 0); the final update always
  /// draws. Keras's default is 0.05 s.
  double interval = 0.05;
  /// Names whose values are averaged over the steps they were reported for (weighted by the
  /// steps each update advanced). Every other value is shown as given: the trainer's logs are
  /// already running means, so averaging them again would be wrong (Keras #23030 made the same
  /// choice with its `stateless_metrics`).
  std::vector<std::string> stateless_metrics;
  /// The unit of the per-unit time, e.g. "11ms/step".
  std::string unit_name = "step";
  /// Where to write; nullptr means std::cout. Must outlive the Progbar.
  std::ostream* stream = nullptr;
  /// Treat `stream` as a terminal (live redraws) even if it is not one. Without it only
  /// std::cout / std::cerr / std::clog attached to a terminal (isatty) count as terminals.
  bool force_terminal = false;
  /// The time source; empty means std::chrono::steady_clock. Tests pass a fake clock.
  Clock clock;
  /// Floating-point operations of one unit (> 0: the time per unit is followed by the achieved
  /// rate, "11ms/step - 118 GFLOP/s": flops_per_unit / seconds per unit / 1e9, three significant
  /// digits). 0: not shown. Must be finite and >= 0.
  double flops_per_unit = 0;
};

/// The progress bar of keras.utils.Progbar (tf.keras 2 look: '=' / '>' / '.' in brackets).
///
/// Live line (verbose 1 on a terminal), redrawn with '\r' and padded with spaces to cover the
/// previous line:
///   " 37/469 [=>............................] - ETA: 3s - loss: 0.5123 - accuracy: 0.8120"
/// and, when finalized, the elapsed seconds and the time per unit, then '\n':
///   "469/469 [==============================] - 5s 11ms/step - loss: 0.4012"
/// With an unknown target the bar becomes a counter: "     37/Unknown - 3s 81ms/step - ...".
/// Summary line (verbose 2, or verbose 1 on a non-terminal), written only when finalized:
///   "469/469 - 5s - 11ms/step - loss: 0.4012\n"
/// Values print as "%.4f" when |v| > 1e-3, else "%.4e" (Keras), NaN as "nan".
/// Time per unit: (now - time at unit 1) / (current - 1) once unit 1 was seen, else
/// (now - start) / current; ETA = time per unit * (target - current), as Keras estimates it.
class Progbar {
 public:
  /// `target`: the total number of units (>= 0), or nullopt when unknown. The start time is
  /// taken now. Throws ingot::Error(kInvalidArgument) naming the option for a negative target,
  /// width < 1, verbose outside {0, 1, 2}, or a negative or non-finite interval.
  explicit Progbar(std::optional<int64_t> target, ProgbarOptions options = {});

  /// Reports progress: `current` units done (>= 0), with named `values` (appended to the
  /// display in first-seen order). `finalize` defaults to `current >= target` (false when the
  /// target is unknown); a finalized update always draws and ends the line. Throws
  /// ingot::Error(kInvalidArgument) for a negative `current`.
  void update(int64_t current, const Logs& values = {}, std::optional<bool> finalize = std::nullopt);
  /// update(units seen so far + n, values): advances by `n` (>= 0) units.
  void add(int64_t n, const Logs& values = {});

  std::optional<int64_t> target() const { return target_; }
  /// Sets ProgbarOptions::flops_per_unit (the FLOPs of one unit are often known only after the
  /// first one ran). Throws ingot::Error(kInvalidArgument) for a negative or non-finite value.
  void set_flops_per_unit(double flops);
  /// Sets the target (e.g. once an unknown epoch length has been seen). Negative: Error.
  void set_target(std::optional<int64_t> target);
  /// Whether updates redraw a live bar (verbose 1 on a terminal).
  bool dynamic_display() const { return dynamic_; }
  const ProgbarOptions& options() const { return options_; }

 private:
  struct Value {
    double sum = 0.0;    // value (stateful) or step-weighted sum (stateless)
    double count = 1.0;  // 1 (stateful) or steps accumulated (stateless)
  };
  void accumulate(int64_t current, const Logs& values);
  double estimate_step_duration(int64_t current, double now);
  void draw_live(int64_t current, bool finalize, double now, double time_per_unit);
  void draw_summary(int64_t current, double now, double time_per_unit);
  std::string format_values() const;
  /// " - 118 GFLOP/s" for ProgbarOptions::flops_per_unit, or "".
  std::string format_rate(double time_per_unit) const;
  double now() const;

  std::optional<int64_t> target_;
  ProgbarOptions options_;
  std::ostream* out_;
  bool dynamic_;
  std::vector<std::pair<std::string, Value>> values_;
  int64_t seen_so_far_ = 0;
  double start_;
  std::optional<double> last_update_;
  std::optional<double> time_after_first_step_;
  int64_t prev_total_width_ = 0;
};

/// Whether `stream` writes to a terminal: true only for std::cout, std::cerr or std::clog whose
/// file descriptor isatty.
bool is_terminal(const std::ostream& stream);

}  // namespace ingot::utils
