// Progbar (keras.utils.Progbar) and ProgbarLogger (keras.callbacks.ProgbarLogger). The output
// formats, the time-per-unit estimate and the ETA follow Keras's Progbar (tf.keras 2 bar look);
// written from its documented behaviour, see docs/trainer-callbacks.md.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <iostream>
#include <string>

#include "ingot/runtime/error.h"
#include "ingot/trainer/callbacks.h"
#include "ingot/trainer/model.h"
#include "ingot/trainer/progbar.h"

namespace ingot::utils {
namespace {

/// printf into a std::string.
__attribute__((format(printf, 1, 2))) std::string sformat(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  va_end(args);
  return out;
}

/// Decimal digits of `n` (1 for n <= 9, including 0 and negatives).
int num_digits(int64_t n) {
  int digits = 1;
  while (n >= 10) {
    n /= 10;
    ++digits;
  }
  return digits;
}

/// Keras's value format: "%.4f" when |v| > 1e-3, else "%.4e"; NaN as "nan" (whatever its sign).
std::string format_value(double v) {
  if (std::isnan(v)) return "nan";
  return std::fabs(v) > 1e-3 ? sformat("%.4f", v) : sformat("%.4e", v);
}

/// " 5s/step", " 11ms/step" or " 250us/step" (Keras's _format_time).
std::string format_time(double time_per_unit, const std::string& unit) {
  if (time_per_unit >= 1 || time_per_unit == 0) {
    return sformat(" %.0fs/%s", time_per_unit, unit.c_str());
  }
  if (time_per_unit >= 1e-3) return sformat(" %.0fms/%s", time_per_unit * 1e3, unit.c_str());
  return sformat(" %.0fus/%s", time_per_unit * 1e6, unit.c_str());
}

/// "1:02:03" above an hour, "2:03" above a minute, else "42s" (whole seconds, truncated).
std::string format_eta(double eta) {
  const double clamped = std::clamp(std::isnan(eta) ? 0.0 : eta, 0.0, 1e15);
  const auto seconds = static_cast<long long>(clamped);
  if (clamped > 3600) {
    return sformat("%lld:%02lld:%02lld", seconds / 3600, (seconds % 3600) / 60, seconds % 60);
  }
  if (clamped > 60) return sformat("%lld:%02lld", seconds / 60, seconds % 60);
  return sformat("%llds", seconds);
}

/// Characters as a terminal shows them: UTF-8 continuation bytes do not count.
int64_t display_width(const std::string& s) {
  return std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void check_target(std::optional<int64_t> target) {
  if (target && *target < 0) {
    throw Error(ErrorCode::kInvalidArgument, "Progbar: target = " + std::to_string(*target) + " is negative",
                "pass the number of units (>= 0), or nullopt when it is unknown");
  }
}

void check_progbar_layout(int64_t width, double interval) {
  if (width < 1) {
    throw Error(ErrorCode::kInvalidArgument, "progress bar width = " + std::to_string(width) + " is not positive",
                "pass width >= 1 (Keras's default is 30)");
  }
  if (!std::isfinite(interval) || interval < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "progress bar interval = " + std::to_string(interval) + " s is negative or not finite",
                "pass the minimum seconds between redraws (>= 0; Keras's default is 0.05)");
  }
}

void check_flops_per_unit(double flops) {
  if (!std::isfinite(flops) || flops < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "Progbar: flops_per_unit = " + std::to_string(flops) + " is negative or not finite",
                "pass the floating-point operations of one unit, or 0 to show no rate");
  }
}

}  // namespace

bool is_terminal(const std::ostream& stream) {
  if (&stream == &std::cout) return isatty(STDOUT_FILENO) != 0;
  if (&stream == &std::cerr || &stream == &std::clog) return isatty(STDERR_FILENO) != 0;
  return false;
}

Progbar::Progbar(std::optional<int64_t> target, ProgbarOptions options)
    : target_(target), options_(std::move(options)) {
  check_target(target);
  check_progbar_layout(options_.width, options_.interval);
  check_flops_per_unit(options_.flops_per_unit);
  if (options_.verbose < 0 || options_.verbose > 2) {
    throw Error(ErrorCode::kInvalidArgument,
                "Progbar: verbose = " + std::to_string(options_.verbose) + " is not 0, 1 or 2",
                "pass 0 (silent), 1 (live bar) or 2 (one line when finalized)");
  }
  out_ = options_.stream != nullptr ? options_.stream : &std::cout;
  dynamic_ = options_.verbose == 1 && (options_.force_terminal || is_terminal(*out_));
  start_ = now();
}

double Progbar::now() const { return options_.clock ? options_.clock() : steady_seconds(); }

void Progbar::set_target(std::optional<int64_t> target) {
  check_target(target);
  target_ = target;
}

void Progbar::add(int64_t n, const Logs& values) {
  if (n < 0) {
    throw Error(ErrorCode::kInvalidArgument, "Progbar::add: n = " + std::to_string(n) + " is negative",
                "pass the number of units done since the last update");
  }
  update(seen_so_far_ + n, values);
}

void Progbar::update(int64_t current, const Logs& values, std::optional<bool> finalize) {
  if (current < 0) {
    throw Error(ErrorCode::kInvalidArgument, "Progbar::update: current = " + std::to_string(current) + " is negative",
                "pass the number of units done so far (>= 0)");
  }
  const bool fin = finalize.value_or(target_.has_value() && current >= *target_);
  accumulate(current, values);
  seen_so_far_ = current;
  const double t = now();
  const double time_per_unit = estimate_step_duration(current, t);
  if (dynamic_) {
    if (last_update_ && t - *last_update_ < options_.interval && !fin) return;
    draw_live(current, fin, t, time_per_unit);
  } else if (options_.verbose != 0 && fin) {
    draw_summary(current, t, time_per_unit);
  }
  last_update_ = t;
}

void Progbar::accumulate(int64_t current, const Logs& values) {
  const auto& stateless = options_.stateless_metrics;
  for (const auto& [name, v] : values) {
    auto it = std::find_if(values_.begin(), values_.end(), [&](const auto& e) { return e.first == name; });
    const bool averaged = std::find(stateless.begin(), stateless.end(), name) != stateless.end();
    if (!averaged) {
      const Value shown{v, 1.0};
      if (it == values_.end()) {
        values_.emplace_back(name, shown);
      } else {
        it->second = shown;
      }
      continue;
    }
    // Weighted by the units this update advanced (at least 1), as Keras averages.
    const auto base = static_cast<double>(std::max<int64_t>(current - seen_so_far_, 1));
    if (it == values_.end()) {
      values_.emplace_back(name, Value{v * base, base});
    } else {
      it->second.sum += v * base;
      it->second.count += base;
    }
  }
}

double Progbar::estimate_step_duration(int64_t current, double now) {
  if (current == 0) return 0.0;
  double time_per_unit;
  if (time_after_first_step_ && current > 1) {
    time_per_unit = (now - *time_after_first_step_) / static_cast<double>(current - 1);
  } else {
    time_per_unit = (now - start_) / static_cast<double>(current);
  }
  if (current == 1) time_after_first_step_ = now;
  return time_per_unit;
}

std::string Progbar::format_values() const {
  std::string out;
  for (const auto& [name, v] : values_) {
    out += " - " + name + ": " + format_value(v.sum / std::max(1.0, v.count));
  }
  return out;
}

void Progbar::draw_live(int64_t current, bool finalize, double now, double time_per_unit) {
  std::string bar;
  if (target_) {
    const int64_t target = *target_;
    bar = sformat("%*lld/%lld [", num_digits(target), static_cast<long long>(current), static_cast<long long>(target));
    const double progress = target > 0 ? static_cast<double>(current) / static_cast<double>(target) : 1.0;
    const int64_t width = options_.width;
    const int64_t filled = std::clamp<int64_t>(static_cast<int64_t>(static_cast<double>(width) * progress), 0, width);
    if (filled > 0) {
      bar += std::string(static_cast<size_t>(filled - 1), '=');
      bar += current < target ? '>' : '=';
    }
    bar += std::string(static_cast<size_t>(width - filled), '.');
    bar += ']';
  } else {
    bar = sformat("%7lld/Unknown", static_cast<long long>(current));
  }
  std::string info;
  if (target_ && !finalize) {
    info = " - ETA: " + format_eta(time_per_unit * static_cast<double>(*target_ - current));
  } else {
    info =
        sformat(" - %.0fs", now - start_) + format_time(time_per_unit, options_.unit_name) + format_rate(time_per_unit);
  }
  info += format_values();
  const int64_t total_width = display_width(bar) + display_width(info);
  std::string message = "\r" + bar + info;
  if (prev_total_width_ > total_width) {
    message += std::string(static_cast<size_t>(prev_total_width_ - total_width), ' ');
  }
  if (finalize) message += '\n';
  *out_ << message << std::flush;
  prev_total_width_ = total_width;
}

void Progbar::set_flops_per_unit(double flops) {
  check_flops_per_unit(flops);
  options_.flops_per_unit = flops;
}

std::string Progbar::format_rate(double time_per_unit) const {
  if (options_.flops_per_unit <= 0 || time_per_unit <= 0) return "";
  return sformat(" - %.3g GFLOP/s", options_.flops_per_unit / time_per_unit / 1e9);
}

void Progbar::draw_summary(int64_t current, double now, double time_per_unit) {
  std::string line = target_ ? sformat("%*lld/%lld", num_digits(*target_), static_cast<long long>(current),
                                       static_cast<long long>(*target_))
                             : sformat("%lld/Unknown", static_cast<long long>(current));
  line += sformat(" - %.0fs", now - start_);
  line += " -" + format_time(time_per_unit, options_.unit_name);
  line += format_rate(time_per_unit);
  line += format_values();
  line += '\n';
  *out_ << line << std::flush;
}

}  // namespace ingot::utils

namespace ingot::callbacks {

ProgbarLogger::ProgbarLogger(ProgbarLoggerOptions options) : options_(std::move(options)) {
  utils::check_progbar_layout(options_.width, options_.interval);
}

void ProgbarLogger::set_params(const Params& params) {
  Callback::set_params(params);
  target_ = params.steps;
}

void ProgbarLogger::reset_progbar() {
  seen_ = 0;
  progbar_.reset();
}

void ProgbarLogger::maybe_init_progbar() {
  if (progbar_) return;
  progbar_.emplace(target_, utils::ProgbarOptions{.width = options_.width,
                                                  .verbose = params().verbose,
                                                  .interval = options_.interval,
                                                  .stream = options_.stream,
                                                  .force_terminal = options_.force_terminal,
                                                  .clock = options_.clock});
}

double ProgbarLogger::training_flops() const {
  if (!options_.show_gflops || !called_in_fit_ || model() == nullptr) return 0;
  return model()->train_step_cost_analysis().flops;
}

void ProgbarLogger::update_progbar(int64_t batch, const Logs& logs) {
  maybe_init_progbar();
  // The bar is made at epoch begin, before the first step compiled: its FLOPs are known now.
  if (options_.show_gflops) progbar_->set_flops_per_unit(training_flops());
  seen_ = batch + 1;  // one-based
  if (params().verbose == 1) progbar_->update(seen_, logs, /*finalize=*/false);
}

void ProgbarLogger::finalize_progbar(const Logs& logs) {
  maybe_init_progbar();
  if (!target_) {
    // An epoch of unknown length has ended: its length is the target from now on (Keras).
    target_ = seen_;
    progbar_->set_target(target_);
  }
  progbar_->update(*target_, logs, /*finalize=*/true);
}

void ProgbarLogger::on_train_begin(const Logs&) { called_in_fit_ = true; }

// Keras never clears the flag; clearing it lets a user's logger serve a later evaluate too.
void ProgbarLogger::on_train_end(const Logs&) { called_in_fit_ = false; }

void ProgbarLogger::on_epoch_begin(int64_t epoch, const Logs&) {
  reset_progbar();
  maybe_init_progbar();
  if (params().verbose != 0 && params().epochs > 1) {
    std::ostream& out = options_.stream != nullptr ? *options_.stream : std::cout;
    out << "Epoch " << epoch + 1 << '/' << params().epochs << '\n' << std::flush;
  }
}

void ProgbarLogger::on_epoch_end(int64_t, const Logs& logs) { finalize_progbar(logs); }

void ProgbarLogger::on_train_batch_end(int64_t batch, const Logs& logs) { update_progbar(batch, logs); }

void ProgbarLogger::on_test_begin(const Logs&) {
  if (called_in_fit_) return;  // validation inside fit is silent
  reset_progbar();
  maybe_init_progbar();
}

void ProgbarLogger::on_test_end(const Logs& logs) {
  if (!called_in_fit_) finalize_progbar(logs);
}

void ProgbarLogger::on_test_batch_end(int64_t batch, const Logs& logs) {
  if (!called_in_fit_) update_progbar(batch, logs);
}

void ProgbarLogger::on_predict_begin(const Logs&) {
  reset_progbar();
  maybe_init_progbar();
}

void ProgbarLogger::on_predict_end(const Logs& logs) { finalize_progbar(logs); }

void ProgbarLogger::on_predict_batch_end(int64_t batch, const Logs&) {
  update_progbar(batch, Logs{});  // predictions are not shown
}

}  // namespace ingot::callbacks
