// ModelCheckpoint and PathTemplate: Keras 3's keras.callbacks.ModelCheckpoint and
// the str.format subset its filepath uses. Guide: docs/trainer-callbacks.md, "ModelCheckpoint".
#include "ingot/trainer/callbacks_checkpoint.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <utility>

#include "ingot/runtime/error.h"
#include "ingot/trainer/callbacks_logging.h"
#include "ingot/trainer/model.h"
#include "ingot/trainer/model_io.h"

namespace ingot::callbacks {
namespace {

namespace fs = std::filesystem;

Error template_error(const std::string& pattern, const std::string& what) {
  return Error(ErrorCode::kInvalidArgument, "ModelCheckpoint: filepath '" + pattern + "': " + what,
               "use Python format fields such as {epoch:02d} or {val_loss:.4f}; write {{ and }} for braces");
}

bool is_int_field(const std::string& name) { return name == "epoch" || name == "batch"; }

/// Checks a spec: [0][width][.precision][type] with type in d f e E g G or none; d only for the
/// integer fields, and a float without a type has no precision.
void check_spec(const std::string& pattern, const std::string& name, const std::string& spec) {
  size_t i = 0;
  while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i]))) ++i;
  bool has_precision = false;
  if (i < spec.size() && spec[i] == '.') {
    const size_t start = ++i;
    while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i]))) ++i;
    if (i == start) throw template_error(pattern, "field '" + name + "': '.' without a precision in ':" + spec + "'");
    has_precision = true;
  }
  const std::string type = spec.substr(i);
  if (!(type.empty() || type == "d" || type == "f" || type == "e" || type == "E" || type == "g" || type == "G")) {
    throw template_error(pattern, "field '" + name + "': unsupported format spec ':" + spec + "'");
  }
  if (type == "d" && !is_int_field(name)) {
    throw template_error(pattern, "field '" + name + "' is a log value (a float): ':" + spec + "' needs f, e or g");
  }
  if (type == "d" && has_precision)
    throw template_error(pattern, "field '" + name + "': ':" + spec + "' has a precision");
  if (type.empty() && has_precision) {
    throw template_error(pattern, "field '" + name + "': ':" + spec + "' needs a type (" +
                                      (is_int_field(name) ? "d, f, e or g" : "f, e or g") + ")");
  }
}

/// An integer field's text: as an integer ("{epoch:02d}", "{epoch:3}"), or with f / e / g as
/// Python formats an int with a float type.
std::string format_int(int64_t value, const std::string& spec) {
  const bool float_type = !spec.empty() && std::string("feEgG").find(spec.back()) != std::string::npos;
  if (float_type) return fmt::format(fmt::runtime("{:" + spec + "}"), static_cast<double>(value));
  return fmt::format(fmt::runtime("{:" + spec + "}"), value);
}

std::string format_float(double value, const std::string& spec) {
  if (spec.empty()) return python_float(value);
  // Width only ("{loss:10}"): Python pads str(float) on the left for numbers.
  if (std::isdigit(static_cast<unsigned char>(spec.back()))) {
    const bool zero = spec[0] == '0';
    const auto width = static_cast<size_t>(std::stoul(spec));
    std::string s = python_float(value);
    if (s.size() >= width) return s;
    if (!zero) return std::string(width - s.size(), ' ') + s;
    const size_t sign = s[0] == '-' ? 1 : 0;
    return s.substr(0, sign) + std::string(width - s.size(), '0') + s.substr(sign);
  }
  return fmt::format(fmt::runtime("{:" + spec + "}"), value);
}

std::string available_names(std::optional<int64_t> batch, const Logs& logs) {
  std::string names = batch ? "epoch, batch" : "epoch";
  for (const auto& [name, value] : logs) names += ", " + name;
  return names;
}

std::ostream& out_or(std::ostream* stream, std::ostream& fallback) { return stream != nullptr ? *stream : fallback; }

Error option_error(const std::string& what, const std::string& hint) {
  return Error(ErrorCode::kInvalidArgument, "ModelCheckpoint: " + what, hint);
}

void check_options(const ModelCheckpointOptions& o) {
  if (o.filepath.empty()) throw option_error("filepath is empty", "pass the file to save, e.g. \"best.safetensors\"");
  if (o.monitor.empty()) throw option_error("monitor is empty", "pass the log name to compare, e.g. \"val_loss\"");
  if (o.verbose < 0) throw option_error("verbose = " + std::to_string(o.verbose) + " is negative", "pass 0 or 1");
  if (o.save_freq && *o.save_freq < 1) {
    throw option_error("save_freq = " + std::to_string(*o.save_freq) + " is not a number of batches >= 1",
                       "pass a positive batch count, or leave it unset to save at every epoch end");
  }
  if (o.initial_value_threshold && !std::isfinite(*o.initial_value_threshold)) {
    throw option_error("initial_value_threshold = " + python_float(*o.initial_value_threshold) + " is not finite",
                       "pass a finite value to beat, or leave it unset");
  }
}

ModelCheckpointOptions checked(ModelCheckpointOptions o) {
  check_options(o);
  return o;
}

/// The monitor's direction; a kAuto that the name cannot tell only matters with save_best_only.
MonitorComparison comparison_for(const ModelCheckpointOptions& o) {
  const MonitorMode mode = o.save_best_only || o.mode != MonitorMode::kAuto ? o.mode : MonitorMode::kMin;
  return MonitorComparison("ModelCheckpoint", o.monitor, mode, 0.0);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// PathTemplate

PathTemplate::PathTemplate(std::string pattern) : pattern_(std::move(pattern)) {
  std::string text;
  for (size_t i = 0; i < pattern_.size(); ++i) {
    const char c = pattern_[i];
    if ((c == '{' || c == '}') && i + 1 < pattern_.size() && pattern_[i + 1] == c) {
      text += c;
      ++i;
      continue;
    }
    if (c == '}') throw template_error(pattern_, "single '}' at position " + std::to_string(i));
    if (c != '{') {
      text += c;
      continue;
    }
    const size_t close = pattern_.find('}', i);
    if (close == std::string::npos)
      throw template_error(pattern_, "'{' at position " + std::to_string(i) + " is never closed");
    const std::string field = pattern_.substr(i + 1, close - i - 1);
    const size_t colon = field.find(':');
    Piece piece{field.substr(0, colon), colon == std::string::npos ? "" : field.substr(colon + 1), true};
    if (piece.text.empty()) throw template_error(pattern_, "empty field name at position " + std::to_string(i));
    if (piece.text.find_first_of("!{[.") != std::string::npos) {
      throw template_error(pattern_,
                           "field '" + piece.text + "': conversions, indexing and attributes are not supported");
    }
    check_spec(pattern_, piece.text, piece.spec);
    if (!text.empty()) pieces_.push_back({std::exchange(text, ""), "", false});
    pieces_.push_back(std::move(piece));
    i = close;
  }
  if (!text.empty()) pieces_.push_back({text, "", false});
}

bool PathTemplate::uses_batch() const {
  for (const Piece& p : pieces_) {
    if (p.is_field && p.text == "batch") return true;
  }
  return false;
}

std::string PathTemplate::format(int64_t epoch, std::optional<int64_t> batch, const Logs& logs) const {
  std::string out;
  for (const Piece& p : pieces_) {
    if (!p.is_field) {
      out += p.text;
    } else if (p.text == "epoch") {
      out += format_int(epoch, p.spec);
    } else if (p.text == "batch" && batch) {
      out += format_int(*batch, p.spec);
    } else if (const std::optional<double> v = logs.get(p.text); v && !is_int_field(p.text)) {
      out += format_float(*v, p.spec);
    } else {
      throw Error(ErrorCode::kInvalidArgument,
                  "ModelCheckpoint: failed to format filepath '" + pattern_ + "': no field '" + p.text + "'",
                  "available: " + available_names(batch, logs));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// ModelCheckpoint

ModelCheckpoint::ModelCheckpoint(ModelCheckpointOptions options)
    : options_(checked(std::move(options))),
      template_(options_.filepath),
      monitor_(comparison_for(options_)),
      best_(options_.initial_value_threshold.value_or(monitor_.worst())) {
  if (template_.uses_batch() && !options_.save_freq) {
    throw option_error("filepath '" + options_.filepath + "' has a {batch} field but saves at epoch ends",
                       "set save_freq to a number of batches, or remove {batch}");
  }
}

void ModelCheckpoint::on_train_begin(const Logs&) {
  if (model() == nullptr) {
    throw Error(ErrorCode::kFailedPrecondition, "ModelCheckpoint: the callback has no model to save",
                "pass it to fit, or give the CallbackList the model");
  }
  batches_since_save_ = 0;
  last_batch_seen_ = 0;
  current_epoch_ = 0;
}

void ModelCheckpoint::on_epoch_begin(int64_t epoch, const Logs&) { current_epoch_ = epoch; }

void ModelCheckpoint::on_train_batch_end(int64_t batch, const Logs& logs) {
  if (should_save_on_batch(batch)) save(current_epoch_, batch, logs);
}

void ModelCheckpoint::on_epoch_end(int64_t epoch, const Logs& logs) {
  if (!options_.save_freq) save(epoch, std::nullopt, logs);
}

bool ModelCheckpoint::should_save_on_batch(int64_t batch) {
  if (!options_.save_freq) return false;
  // Keras's count: an index not above the last one seen starts a new epoch.
  batches_since_save_ += batch <= last_batch_seen_ ? batch + 1 : batch - last_batch_seen_;
  last_batch_seen_ = batch;
  if (batches_since_save_ < *options_.save_freq) return false;
  batches_since_save_ = 0;
  return true;
}

bool ModelCheckpoint::should_save(int64_t epoch, const Logs& logs, const std::string& path) {
  std::ostream& out = out_or(options_.stream, std::cout);
  if (!options_.save_best_only) {
    if (options_.verbose > 0) out << "\nEpoch " << epoch + 1 << ": saving model to " << path << '\n' << std::flush;
    return true;
  }
  const std::optional<double> current = logs.get(options_.monitor);
  if (!current) {
    out_or(options_.warnings, std::cerr) << "Warning: Can save best model only with " << options_.monitor
                                         << " available, skipping.\n";
    return false;
  }
  if (!monitor_.is_improvement(*current, best_)) {
    if (options_.verbose > 0) {
      out << fmt::format("\nEpoch {}: {} did not improve from {:.5f}\n", epoch + 1, options_.monitor, best_)
          << std::flush;
    }
    return false;
  }
  if (options_.verbose > 0) {
    out << fmt::format("\nEpoch {}: {} improved from {:.5f} to {:.5f}, saving model to {}\n", epoch + 1,
                       options_.monitor, best_, *current, path)
        << std::flush;
  }
  return true;
}

void ModelCheckpoint::save(int64_t epoch, std::optional<int64_t> batch, const Logs& logs) {
  const std::string path = template_.format(epoch + 1, batch ? std::optional<int64_t>(*batch + 1) : std::nullopt, logs);
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    throw Error(ErrorCode::kInvalidArgument, "ModelCheckpoint: filepath '" + path + "' is an existing directory",
                "specify a file path, e.g. '" + path + "/weights.safetensors'");
  }
  if (!should_save(epoch, logs, path)) return;
  const fs::path dir = fs::path(path).parent_path();
  if (!dir.empty() && !fs::exists(dir, ec)) fs::create_directories(dir, ec);
  if (ec) {
    throw Error(ErrorCode::kInvalidArgument,
                "ModelCheckpoint: cannot create the folder '" + dir.string() + "': " + ec.message(),
                "check the filepath");
  }
  if (options_.save_weights_only) {
    model()->save_weights(path);
  } else {
    save_model(*model(), path);
  }
  if (options_.save_best_only) best_ = *logs.get(options_.monitor);  // once saved: a failed save changes nothing
  saved_.push_back(path);
}

}  // namespace ingot::callbacks
