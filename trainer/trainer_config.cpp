// Model::Trainer's compile configuration: losses, loss weights and metric slots resolved against
// the model's outputs, the metric state, and the checks of each batch (trainer_state.h).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "ingot/trainer/losses.h"
#include "trainer_state.h"

namespace ingot {

using detail::slice;

void Model::Trainer::configure_outputs() {
  n_in = model->input_types().size();
  n_out = model->output_types().size();
  const std::vector<std::string> names = model->output_names();
  const auto count_error = [&](const char* what, size_t n, const char* hint) {
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("compile: {} has {} entries, model '{}' has {} outputs ({})", what, n, model->name(),
                             n_out, fmt::join(names, ", ")),
                 hint);
  };
  if (!options.losses.empty() && options.losses.size() != n_out) {
    throw count_error("losses", options.losses.size(), "give one loss per output (null for none), or one .loss");
  }
  if (!options.loss_weights.empty() && options.loss_weights.size() != n_out) {
    throw count_error("loss_weights", options.loss_weights.size(), "give one weight per output");
  }
  if (options.output_metrics.size() > n_out) {
    throw count_error("output_metrics", options.output_metrics.size(), "give at most one metric list per output");
  }
  if (options.output_weighted_metrics.size() > n_out) {
    throw count_error("output_weighted_metrics", options.output_weighted_metrics.size(),
                      "give at most one metric list per output");
  }
  if (n_out > 1 && (!options.metrics.empty() || !options.weighted_metrics.empty())) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("compile: model '{}' has {} outputs ({}); `metrics` / `weighted_metrics` do not say "
                            "which output they watch",
                            model->name(), n_out, fmt::join(names, ", ")),
                "pass output_metrics / output_weighted_metrics: one metric list per output (Keras's list of lists)");
  }
  out_loss = options.losses.empty() ? std::vector<std::shared_ptr<losses::Loss>>(n_out, options.loss) : options.losses;
  out_weight = options.loss_weights.empty() ? std::vector<double>(n_out, 1.0) : options.loss_weights;
  if (std::none_of(out_loss.begin(), out_loss.end(), [](const auto& l) { return l != nullptr; })) {
    throw Error(ErrorCode::kInvalidArgument, "compile: no output has a loss", "give at least one output a loss");
  }
  tracked_outputs.clear();
  output_loss_trackers.clear();
  for (size_t i = 0; n_out > 1 && i < n_out; ++i) {
    if (!out_loss[i]) continue;
    tracked_outputs.push_back(i);
    output_loss_trackers.emplace_back(names[i] + "_loss");
  }
  slots.clear();
  const auto add = [&](const std::vector<std::shared_ptr<metrics::Metric>>& list, size_t output, bool weighted) {
    for (const auto& m : list) {
      const std::string prefix = n_out > 1 ? names[output] + "_" : "";
      slots.push_back({m.get(), output, weighted, prefix + m->name()});
    }
  };
  if (n_out == 1) {
    add(options.metrics, 0, false);
    add(options.weighted_metrics, 0, true);
  }
  for (size_t i = 0; i < options.output_metrics.size(); ++i) add(options.output_metrics[i], i, false);
  for (size_t i = 0; i < options.output_weighted_metrics.size(); ++i) add(options.output_weighted_metrics[i], i, true);
  // A weighted metric named like an unweighted one is logged "weighted_<name>" (Keras's
  // CompileMetrics), after the output prefix.
  for (MetricSlot& w : slots) {
    if (!w.weighted) continue;
    const bool clash = std::any_of(slots.begin(), slots.end(), [&](const MetricSlot& u) {
      return !u.weighted && u.output == w.output && u.name == w.name;
    });
    if (clash) {
      const std::string prefix = n_out > 1 ? names[w.output] + "_" : "";
      w.name = prefix + "weighted_" + w.metric->name();
    }
  }
  // Two entries logged under one name would overwrite each other in the logs (Keras does so
  // silently): refuse before any step.
  std::vector<std::string> logged = {"loss"};
  for (const metrics::Mean& m : output_loss_trackers) logged.push_back(m.name());
  for (const MetricSlot& slot : slots) {
    if (std::find(logged.begin(), logged.end(), slot.name) != logged.end()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("compile: two entries would be logged as '{}'", slot.name),
                  "give one of the metrics another name (its options' `name`)");
    }
    logged.push_back(slot.name);
  }
}

std::vector<std::string> Model::Trainer::metric_names() const {
  std::vector<std::string> names;
  for (const metrics::Mean& m : output_loss_trackers) names.push_back(m.name());
  for (const MetricSlot& s : slots) names.push_back(s.name);
  return names;
}

StepSizes Model::Trainer::sizes() const {
  StepSizes s;
  s[StepPart::kTrainable] = trainable.size();
  s[StepPart::kNonTrainable] = non_trainable.size();
  s[StepPart::kOptimizer] = O.size();
  s[StepPart::kMetrics] = metric_state_size();
  s[StepPart::kX] = n_in;
  s[StepPart::kY] = n_out;
  s[StepPart::kSampleWeight] = n_out;
  return s;
}

size_t Model::Trainer::metric_state_size() const {
  size_t n = 2 + 2 * output_loss_trackers.size();
  for (const MetricSlot& s : slots) n += s.metric->initial_state().size();
  return n;
}

std::vector<Array> Model::Trainer::initial_metric_state() const {
  std::vector<Array> s = loss_tracker.initial_state();
  for (const metrics::Mean& m : output_loss_trackers) {
    for (Array& a : m.initial_state()) s.push_back(a);
  }
  for (const MetricSlot& slot : slots) {
    for (Array& a : slot.metric->initial_state()) s.push_back(a);
  }
  return s;
}

std::vector<Tensor> Model::Trainer::update_metric_state(const std::vector<Tensor>& m, const Tensor& loss,
                                                        const std::vector<Tensor>& output_losses,
                                                        const std::vector<Tensor>& y, const std::vector<Tensor>& y_pred,
                                                        const std::vector<Tensor>& sw) const {
  check_count(y, n_out, "y");
  check_count(y_pred, n_out, "y_pred");
  check_count(sw, n_out, "sample_weight");
  check_count(output_losses, output_loss_trackers.size(), "output_losses");
  const int64_t batch = y_pred[0].dim(0);
  std::vector<Tensor> out = loss_tracker.add_batch(slice(m, 0, 2), loss, batch);
  size_t at = 2;
  for (size_t i = 0; i < output_loss_trackers.size(); ++i, at += 2) {
    std::vector<Tensor> s = output_loss_trackers[i].add_batch(slice(m, at, 2), output_losses[i], batch);
    out.insert(out.end(), s.begin(), s.end());
  }
  for (const MetricSlot& slot : slots) {
    const size_t n = slot.metric->initial_state().size();
    const size_t o = slot.output;
    std::vector<Tensor> s;
    try {
      s = slot.weighted ? slot.metric->update_state(slice(m, at, n), y[o], y_pred[o], sw[o])
                        : slot.metric->update_state(slice(m, at, n), y[o], y_pred[o]);
    } catch (const Error& e) {
      if (n_out == 1) throw;
      throw e.with_context(fmt::format("metric '{}' of output '{}'", slot.name, model->output_names().at(o)));
    }
    out.insert(out.end(), s.begin(), s.end());
    at += n;
  }
  return out;
}

void Model::Trainer::check_count(const std::vector<Tensor>& v, size_t want, const char* what) {
  if (v.size() != want) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("update_metrics: {} tensors in {}, the model needs {}", v.size(), what, want),
                "pass one tensor per model output (output_losses: one per output with a loss, several outputs only)");
  }
}

std::vector<Tensor> Model::Trainer::metric_results(const std::vector<Tensor>& m) const {
  std::vector<Tensor> results = {loss_tracker.result(slice(m, 0, 2))};
  size_t at = 2;
  for (const metrics::Mean& t : output_loss_trackers) {
    results.push_back(t.result(slice(m, at, 2)));
    at += 2;
  }
  for (const MetricSlot& slot : slots) {
    const size_t n = slot.metric->initial_state().size();
    results.push_back(slot.metric->result(slice(m, at, n)));
    at += n;
  }
  return results;
}

std::vector<Tensor> Model::Trainer::update_metrics(const std::vector<Tensor>& m, const Tensor& loss,
                                                   const std::vector<Tensor>& output_losses,
                                                   const std::vector<Tensor>& y, const std::vector<Tensor>& y_pred,
                                                   const std::vector<Tensor>& sw) const {
  std::vector<Tensor> out = update_metric_state(m, loss, output_losses, y, y_pred, sw);
  std::vector<Tensor> results = metric_results(out);
  out.insert(out.end(), results.begin(), results.end());
  return out;
}

bool Model::Trainer::compiled() const { return options.jit_compile && !options.run_eagerly; }

void Model::Trainer::check_batch(const Batch& b) const {
  // Batches already split over a mesh or on a CUDA device were checked by distribute().
  if (b.x.valid() && (b.x[0].sharding().num_devices() > 1 || b.x[0].device().kind() != DeviceKind::kCpu)) return;
  if (!b.y.valid()) {
    throw Error(ErrorCode::kInvalidArgument, "a batch has no targets y",
                "pass y (or validation_data.y / a generator yielding Batch{x, y, ...})");
  }
  if (b.x.size() != n_in || b.y.size() != n_out) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("a batch has {} x and {} y arrays; model '{}' has {} inputs and {} outputs", b.x.size(),
                            b.y.size(), model->name(), n_in, n_out),
                "pass one x per model input and one y per output, in the model's order");
  }
  if (b.sample_weight.size() > 1 && b.sample_weight.size() != n_out) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("a batch has {} sample_weight arrays; model '{}' has {} outputs", b.sample_weight.size(),
                            model->name(), n_out),
                "pass one sample_weight (for every output) or one per output");
  }
  check_labels(b.y);
}

void Model::Trainer::check_labels(const Arrays& y) const {
  const std::vector<ir::TensorType>& outs = model->output_types();
  if (out_loss.size() != outs.size()) return;  // before prepare
  for (size_t i = 0; i < y.size() && i < outs.size(); ++i) {
    const std::shared_ptr<losses::Loss>& loss = out_loss.at(i);
    if (!y[i].valid() || !loss || !loss->labels_are_indices()) continue;
    try {
      losses::validate_sparse_labels(y[i], outs[i].shape.back());
    } catch (const Error& e) {
      if (y.size() == 1) throw;
      throw e.with_context(fmt::format("y[{}] (output '{}')", i, model->output_names().at(i)));
    }
  }
}

}  // namespace ingot
