// The pure step builders (loss, train, test, predict) traced into the step functions, and
// Model::train_step's parts (compute_gradients, apply_gradients, update_metrics) (trainer_state.h).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "ingot/autodiff/autodiff.h"
#include "trainer_state.h"

namespace ingot {

using detail::all_reduce_bucketed;
using detail::slice;

TraceFn Model::Trainer::loss_fn(bool training, bool scaled) const {
  return [this, training, scaled](const std::vector<Tensor>& b) {
    StepSizes sizes = this->sizes();
    if (!scaled) sizes[StepPart::kOptimizer] = 0;
    const StepState<Tensor> s = StepLayout::loss_arguments(sizes).unflatten(b);
    const size_t nn = non_trainable.size();
    LayerContext ctx(training);
    ctx.set_batch_shards(batch_shards());
    bind_variables(ctx, s);
    std::vector<Tensor> y_pred = model->forward(ctx, s.x);
    if (y_pred.size() != n_out) {
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("model '{}' returned {} outputs while built with {}", model->name(), y_pred.size(), n_out),
          "call_outputs must return the same number of outputs on every call");
    }
    std::optional<Tensor> loss;
    std::vector<Tensor> output_losses;
    for (size_t i = 0; i < n_out; ++i) {
      if (!out_loss[i]) continue;
      Tensor li = (*out_loss[i])(s.y[i], y_pred[i], s.sample_weight[i]);
      if (out_weight[i] != 1.0) li = li * out_weight[i];
      if (n_out > 1) output_losses.push_back(li);
      loss = loss ? *loss + li : li;
    }
    for (const Tensor& extra : ctx.losses()) {
      loss = *loss + (extra.dtype() == loss->dtype() ? extra : convert(extra, loss->dtype()));
    }
    std::vector<Tensor> out = {scaled ? options.optimizer->scale_loss(*loss, s.optimizer) : *loss};
    for (size_t i = 0; i < nn; ++i) out.push_back(ctx.new_value(*non_trainable[i]).value_or(s.non_trainable[i]));
    out.push_back(*loss);
    out.insert(out.end(), output_losses.begin(), output_losses.end());
    out.insert(out.end(), y_pred.begin(), y_pred.end());
    return out;
  };
}

void Model::Trainer::bind_variables(LayerContext& ctx, const StepState<Tensor>& s) const {
  for (size_t i = 0; i < trainable.size(); ++i) ctx.bind(*trainable[i], gathered(i, s.trainable[i]));
  for (size_t i = 0; i < non_trainable.size(); ++i) ctx.bind(*non_trainable[i], s.non_trainable[i]);
}

TraceFn Model::Trainer::train_step() const {
  return [this](const std::vector<Tensor>& a) {
    const StepSizes sizes = this->sizes();
    TrainStepState s = StepLayout::train_arguments(sizes).unflatten(a);
    const std::vector<Tensor> nt_before = s.non_trainable, m_before = s.metrics;
    model->train_step(s);
    for (StepPart p : {StepPart::kTrainable, StepPart::kNonTrainable, StepPart::kOptimizer, StepPart::kMetrics}) {
      check_state(s.part(p), sizes[p], step_part_name(p));
    }
    if (options.distribution) {  // the devices' updates combined (the gradients were, in compute_gradients)
      s.non_trainable = combined_non_trainable(nt_before, s.non_trainable);
      s.metrics = combined(m_before, s.metrics, "sum");
    }
    std::vector<Tensor> out = StepLayout::train_results(sizes).flatten(s);
    std::vector<Tensor> results = metric_results(s.metrics);
    out.insert(out.end(), results.begin(), results.end());
    return out;
  };
}

void Model::Trainer::check_state(const std::vector<Tensor>& v, size_t want, const char* what) {
  if (v.size() != want) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("train_step left {} {} state tensors, the model has {}", v.size(), what, want),
                "a custom train_step must keep every state list's length (replace values, do not add or drop)");
  }
}

TraceFn Model::Trainer::test_step() const {
  return [this](const std::vector<Tensor>& a) {
    const StepSizes sizes = this->sizes();
    const StepState<Tensor> s = StepLayout::test_arguments(sizes).unflatten(a);
    const size_t nn = non_trainable.size(), k = output_loss_trackers.size();
    StepState<Tensor> loss_args = s;
    loss_args.optimizer.clear();
    // [loss, NT'..., loss, output losses..., y_pred...]
    StepSizes loss_sizes = sizes;
    loss_sizes[StepPart::kOptimizer] = 0;
    const std::vector<Tensor> r = loss_fn(false)(StepLayout::loss_arguments(loss_sizes).flatten(loss_args));
    std::vector<Tensor> out = update_metric_state(s.metrics, r[1 + nn], slice(r, 2 + nn, k), s.y,
                                                  slice(r, 2 + nn + k, n_out), s.sample_weight);
    if (options.distribution) out = combined(s.metrics, out, "sum");
    const std::vector<Tensor> results = metric_results(out);
    out.insert(out.end(), results.begin(), results.end());
    return out;
  };
}

TraceFn Model::Trainer::predict_step() const {
  return [this](const std::vector<Tensor>& a) {
    const StepState<Tensor> s = StepLayout::predict_arguments(sizes()).unflatten(a);
    LayerContext ctx(false);
    ctx.set_batch_shards(batch_shards());
    bind_variables(ctx, s);
    std::vector<Tensor> out = model->forward(ctx, s.x);
    if (num_processes() > 1) {  // every device gets the whole batch's predictions (replicated outputs)
      const distribution::Distribution& d = *options.distribution;
      for (Tensor& y : out) y = all_gather(y, d.batch_dim_name(), d.batch_axis_size());
    }
    return out;
  };
}

// ---- Model::train_step and its parts -----------------------------------------------------------

namespace {

Model::Trainer& compiled_trainer(const std::shared_ptr<Model::Trainer>& t, const char* who) {
  if (!t || !t->options.optimizer) {
    throw Error(ErrorCode::kFailedPrecondition, fmt::format("{} needs a model compiled with an optimizer", who),
                "call model.compile(...) first");
  }
  return *t;
}

}  // namespace

void Model::train_step(TrainStepState& state) {
  StepGradients g = compute_gradients(state);
  state.non_trainable = g.non_trainable;
  apply_gradients(state, g.gradients);
  update_metrics(state, g.loss, g.y_pred, g.output_losses);
}

StepGradients Model::compute_gradients(const TrainStepState& s) {
  Trainer& t = compiled_trainer(trainer_, "compute_gradients");
  const size_t nt = s.trainable.size(), nn = s.non_trainable.size();
  if (s.x.size() != t.n_in || s.y.size() != t.n_out || s.sample_weight.size() != t.n_out) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("compute_gradients: {} x, {} y, {} sample_weight tensors; model '{}' has {} inputs and {} "
                            "outputs",
                            s.x.size(), s.y.size(), s.sample_weight.size(), name(), t.n_in, t.n_out),
                "pass one x per input and one y and sample weight per output");
  }
  // The optimizer's variables are read by scale_loss, not differentiated.
  const std::vector<Tensor> b = StepLayout::loss_arguments(t.sizes()).flatten(s);
  const std::vector<int64_t> argnums = StepLayout::loss_arguments(t.sizes()).indices(StepPart::kTrainable);
  // [scaled loss, NT'..., loss, output losses (k)..., y_pred (n_out)..., grads...]; apply()
  // unscales the gradients.
  std::vector<Tensor> vg = value_and_grad(t.loss_fn(true, /*scaled=*/true), argnums, /*has_aux=*/true)(b);
  const size_t k = t.output_loss_trackers.size();
  const size_t y_at = 2 + nn + k;
  std::vector<Tensor> gradients = slice(vg, y_at + t.n_out, nt);
  if (t.options.distribution) {  // every device applies the devices' mean gradient
    const distribution::Distribution& d = *t.options.distribution;
    std::vector<size_t> averaged;  // all-reduced (mean) over the batch axis together, below
    for (size_t i = 0; i < gradients.size(); ++i) {
      if (!gradients[i].valid()) continue;
      // A split variable's gradient came through all_gather's VJP: its block summed (reduce_scatter)
      // over the devices along each axis it is split over. Along the batch axis that sums the
      // shards' gradients; along another axis the devices saw the same data, so it multiplies one
      // gradient by the axis size. Dividing by every split axis's size leaves the batch mean when
      // the batch axis is one of them, else one shard's gradient, averaged over the batch axis
      // below like a replicated variable's.
      const std::vector<std::string> axes = t.split_axes(i);
      double parts = 1;
      for (const std::string& a : axes) parts *= static_cast<double>(d.device_mesh().axis_size(a));
      if (parts > 1) gradients[i] = gradients[i] / parts;
      if (std::find(axes.begin(), axes.end(), d.batch_dim_name()) == axes.end()) averaged.push_back(i);
    }
    all_reduce_bucketed(gradients, averaged, d.batch_dim_name(), "mean", d.gradient_bucket_bytes());
  }
  return {vg[1 + nn], slice(vg, y_at, t.n_out), slice(vg, 2 + nn, k), std::move(gradients), slice(vg, 1, nn)};
}

void Model::apply_gradients(TrainStepState& s, const std::vector<Tensor>& gradients) {
  Trainer& t = compiled_trainer(trainer_, "apply_gradients");
  // Split variables' gradients are one device's block: norms and finiteness checks sum over the
  // devices (FSDP; docs/distributed.md).
  optimizers::GradientLayout layout;
  layout.scopes = t.update_scopes;
  if (t.options.distribution) {
    for (size_t i = 0; i < s.trainable.size(); ++i) {
      layout.split.push_back(t.is_split(i));
      layout.copies.push_back(t.is_split(i) ? t.copies(i) : 1);
    }
    layout.sum_over_devices = [&t](const Tensor& x) { return t.sum_over_mesh(x); };
  }
  auto [new_t, new_o] = t.options.optimizer->apply(s.optimizer, s.trainable, gradients, layout);
  s.trainable = std::move(new_t);
  s.optimizer = std::move(new_o);
}

void Model::update_metrics(TrainStepState& s, const Tensor& loss, const std::vector<Tensor>& y_pred,
                           const std::vector<Tensor>& output_losses) {
  Trainer& t = compiled_trainer(trainer_, "update_metrics");
  s.metrics = t.update_metric_state(s.metrics, loss, output_losses, s.y, y_pred, s.sample_weight);
}

}  // namespace ingot
