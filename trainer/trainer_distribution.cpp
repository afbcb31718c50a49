// Model::Trainer under a distribution: variables split over the mesh (FSDP), state placement
// from the recorded shardings, the devices' updates combined, batches split over the batch axis
// (trainer_state.h; docs/distributed.md).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "ingot/runtime/spmd.h"
#include "rows.h"
#include "trainer_state.h"

namespace ingot {

using detail::all_reduce_bucketed;
using detail::weights_per_output;

bool Model::Trainer::is_split(size_t i) const {
  return options.distribution && trainable[i]->sharding() && !trainable[i]->sharding()->is_fully_replicated();
}

std::vector<std::string> Model::Trainer::split_axes(size_t i) const {
  std::vector<std::string> axes;
  if (!is_split(i)) return axes;
  for (const PartitionDim& dim : trainable[i]->sharding()->spec().dims())
    axes.insert(axes.end(), dim.axes.begin(), dim.axes.end());
  return axes;
}

int64_t Model::Trainer::copies(size_t i) const {
  const distribution::DeviceMesh& mesh = options.distribution->device_mesh();
  const std::vector<std::string> axes = split_axes(i);
  int64_t n = 1;
  for (const std::string& a : mesh.axis_names()) {
    if (std::find(axes.begin(), axes.end(), a) == axes.end()) n *= mesh.axis_size(a);
  }
  return n;
}

Tensor Model::Trainer::gathered(size_t i, const Tensor& block) const {
  if (!is_split(i)) return block;
  const distribution::DeviceMesh& mesh = options.distribution->device_mesh();
  const std::vector<PartitionDim>& dims = trainable[i]->sharding()->spec().dims();
  Tensor x = block;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d].replicated()) continue;
    const std::string& axis = dims[d].axes.at(0);
    if (d == 0) {
      x = all_gather(x, axis, mesh.axis_size(axis));
      continue;
    }
    std::vector<int64_t> perm(static_cast<size_t>(x.rank()));
    for (size_t k = 0; k < perm.size(); ++k) perm[k] = static_cast<int64_t>(k);
    std::swap(perm[0], perm[d]);  // its own inverse
    x = transpose(all_gather(transpose(x, perm), axis, mesh.axis_size(axis)), perm);
  }
  return x;
}

Tensor Model::Trainer::sum_over_mesh(const Tensor& x) const {
  Tensor y = x;
  for (const std::string& axis : options.distribution->device_mesh().axis_names()) y = all_reduce(y, axis, "sum");
  return y;
}

std::vector<NamedSharding> Model::Trainer::state_shardings(const StepLayout& layout) const {
  const NamedSharding replicated(options.distribution->device_mesh().mesh(), PartitionSpec{});
  std::vector<NamedSharding> out;
  for (StepPart p : layout.parts()) {
    switch (p) {
      case StepPart::kTrainable:
        for (Variable* v : trainable) out.push_back(*v->sharding());
        break;
      case StepPart::kNonTrainable:
        for (Variable* v : non_trainable) out.push_back(*v->sharding());
        break;
      case StepPart::kOptimizer:
        out.insert(out.end(), optimizer_shardings.begin(), optimizer_shardings.end());
        break;
      case StepPart::kMetrics:
        out.insert(out.end(), layout.count(p), replicated);
        break;
      default:
        break;  // the batch: split by step_arguments
    }
  }
  return out;
}

void Model::Trainer::describe_optimizer_state() {
  optimizer_shardings.clear();
  const std::string& cls = options.optimizer->class_name();
  optimizer_info = options.optimizer->variable_info(static_cast<int64_t>(trainable.size()));
  if (optimizer_info.size() != O.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: variable_info describes {} optimizer variables, build made {}", cls,
                            optimizer_info.size(), O.size()),
                "an optimizer that overrides build() must override variable_info() to match it");
  }
  for (size_t j = 0; j < O.size(); ++j) {
    const std::optional<int64_t> ref = optimizer_info[j].reference;
    if (!ref) continue;
    if (*ref < 0 || *ref >= static_cast<int64_t>(trainable.size())) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: optimizer variable {} ('{}') refers to trainable variable {}; the model has {}", cls,
                              j, optimizer_info[j].name, *ref, trainable.size()),
                  "refer to an index into the trainable variables apply() gets");
    }
    const Variable& v = *trainable[static_cast<size_t>(*ref)];
    if (O[j].shape() != v.shape()) {
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("{}: optimizer variable {} ('{}') is made from '{}' of shape {} but has shape {}", cls, j,
                      optimizer_info[j].name, v.name(), shape_to_string(v.shape()), shape_to_string(O[j].shape())),
          "an optimizer variable of another shape has no reference (it is then replicated)");
    }
  }
  if (!options.distribution) return;
  const NamedSharding replicated(options.distribution->device_mesh().mesh(), PartitionSpec{});
  for (const optimizers::OptimizerVariableInfo& info : optimizer_info) {
    optimizer_shardings.push_back(info.reference ? *trainable[static_cast<size_t>(*info.reference)]->sharding()
                                                 : replicated);
  }
}

std::vector<Tensor> Model::Trainer::combined(const std::vector<Tensor>& before, const std::vector<Tensor>& after,
                                             const std::string& reduction) const {
  std::vector<Tensor> deltas;
  std::vector<size_t> all;
  for (size_t i = 0; i < after.size(); ++i) {
    deltas.push_back(after[i] - before[i]);
    all.push_back(i);
  }
  all_reduce_bucketed(deltas, all, options.distribution->batch_dim_name(), reduction,
                      options.distribution->gradient_bucket_bytes());
  std::vector<Tensor> out;
  for (size_t i = 0; i < after.size(); ++i) out.push_back(before[i] + deltas[i]);
  return out;
}

std::vector<Tensor> Model::Trainer::combined_non_trainable(const std::vector<Tensor>& before,
                                                           const std::vector<Tensor>& after) const {
  std::vector<Tensor> out = after;
  for (const auto& [aggregation, reduction] :
       {std::pair{VariableAggregation::kMean, "mean"}, std::pair{VariableAggregation::kSum, "sum"}}) {
    std::vector<size_t> which;
    std::vector<Tensor> b, a;
    for (size_t i = 0; i < after.size(); ++i) {
      if (non_trainable[i]->aggregation() != aggregation) continue;
      which.push_back(i);
      b.push_back(before[i]);
      a.push_back(after[i]);
    }
    if (which.empty()) continue;
    const std::vector<Tensor> c = combined(b, a, reduction);
    for (size_t k = 0; k < which.size(); ++k) out[which[k]] = c[k];
  }
  return out;
}

void Model::Trainer::check_aggregations() const {
  if (!options.distribution) return;
  for (const Variable* v : non_trainable) {
    const DType d = v->dtype();
    const bool reducible = d == DType::kF32 || d == DType::kF64 || d == DType::kI32 || d == DType::kI64;
    const VariableAggregation a = v->aggregation();
    if ((a == VariableAggregation::kMean && !is_floating(d)) || (a == VariableAggregation::kSum && !reducible)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: non-trainable variable '{}' of dtype {} has aggregation '{}', which a distributed "
                              "step cannot combine",
                              options.distribution->class_name(), v->name(), dtype_name(d), aggregation_name(a)),
                  "use 'mean' for floating-point state, 'sum' for f32/f64/i32/i64 counts, or 'only_first_replica' "
                  "for state every device updates alike (Variable::set_aggregation)");
    }
  }
}

std::optional<BatchShards> Model::Trainer::batch_shards() const {
  if (!options.distribution || options.distribution->batch_axis_size() == 1) return std::nullopt;
  return BatchShards{options.distribution->batch_dim_name(), options.distribution->batch_axis_size()};
}

PrefetchQueue<Batch>::Distribute Model::Trainer::distribute(bool checked) {
  if (options.distribution) {
    // Data parallel: each batch is checked and split over the batch axis on the producer
    // thread, so the copies to the devices overlap the previous step.
    return [this, checked](Batch b) {
      if (checked) check_batch(b);
      const auto split = [this](const Arrays& a) {
        std::vector<Array> out;
        for (const Array& e : a) out.push_back(split_batch_array(e));
        return Arrays(std::move(out));
      };
      // Ones for missing sample weights are made here, at the batch's whole size (the split
      // batch's size is one process's part).
      const Arrays sw = checked && !b.sample_weight.valid() ? Arrays(weights_per_output(b, n_out)) : b.sample_weight;
      return Batch{split(b.x), split(b.y), split(sw)};
    };
  }
  if (target().host_memory()) return {};
  return [this, checked](Batch b) {
    if (checked) check_batch(b);
    const CompileTarget& device = target();
    const auto to_device = [&device](const Arrays& a) {
      std::vector<Array> out;
      for (const Array& e : a) out.push_back(device.to_target(e));
      return Arrays(std::move(out));
    };
    return Batch{to_device(b.x), to_device(b.y), to_device(b.sample_weight)};
  };
}

int Model::Trainer::num_processes() const {
  return options.distribution ? options.distribution->device_mesh().num_processes() : 1;
}

void Model::Trainer::broadcast_variables(Communicator& processes) {
  for (Variable* v : model->variables()) {
    Array value = to_host(v->value()).clone();
    processes.broadcast(value, 0);
    v->assign(value);
  }
}

std::vector<Array> Model::Trainer::step_arguments(const StepLayout& layout, const StepState<Array>& state) const {
  std::vector<Array> args = layout.flatten(state);
  if (!options.distribution) return args;
  const std::vector<NamedSharding> shardings = state_shardings(layout);
  for (size_t i = 0; i < shardings.size(); ++i) {
    if (!(args[i].sharding() == shardings[i])) args[i] = device_put(state_part(args[i], shardings[i]), shardings[i]);
  }
  for (size_t i = shardings.size(); i < args.size(); ++i) args[i] = split_batch_array(args[i]);
  return args;
}

Array Model::Trainer::split_batch_array(const Array& a) const {
  const distribution::Distribution& d = *options.distribution;
  const NamedSharding split = d.data_sharding();
  if (a.sharding() == split) return a;
  const int64_t n = d.batch_axis_size(), rows = a.rank() > 0 ? a.shape()[0] : 0;
  if (rows % n != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: a batch of {} samples does not split over the {} devices of mesh axis '{}'",
                            d.class_name(), rows, n, d.batch_dim_name()),
                fmt::format("use a batch size and a sample count whose last batch are multiples of {}", n));
  }
  const int processes = num_processes();
  if (processes == 1) return device_put(a, split);
  return device_put(process_rows(to_host(a), d.device_mesh().process_id(), processes), split);
}

Array Model::Trainer::process_rows(const Array& a, int p, int parts) {
  const int64_t n = a.shape()[0] / parts;
  return detail::take_rows(a, detail::iota(p * n, (p + 1) * n));
}

bool Model::Trainer::across_processes(const NamedSharding& s) const {
  return num_processes() > 1 && !s.is_fully_replicated();
}

Array Model::Trainer::state_part(const Array& whole, const NamedSharding& s) const {
  const Array host = to_host(whole);
  if (!across_processes(s)) return host;
  return process_rows(host, options.distribution->device_mesh().process_id(), num_processes());
}

Shape Model::Trainer::whole_shape(const Array& a) const {
  Shape shape = a.shape();
  if (options.distribution && across_processes(a.sharding())) shape[0] *= num_processes();
  return shape;
}

Array Model::Trainer::on_host(const Array& a) const {
  if (!options.distribution) return target().host_memory() ? a : target().to_host(a);
  const Array local = to_host(a);
  if (!across_processes(a.sharding())) return local;
  Array whole = Array::empty(whole_shape(a), local.dtype());
  options.distribution->device_mesh().processes()->process_communicator().all_gather(local, whole);
  return whole;
}

void Model::Trainer::enforce_shardings() {
  if (!target().host_memory()) return;
  const auto enforce = [](Array& a, const NamedSharding& s) {
    if (!(a.sharding() == s)) a = reshard(a, s);
  };
  for (size_t i = 0; i < trainable.size(); ++i) enforce(T[i], *trainable[i]->sharding());
  for (size_t i = 0; i < non_trainable.size(); ++i) enforce(NT[i], *non_trainable[i]->sharding());
  for (size_t i = 0; i < optimizer_shardings.size() && i < O.size(); ++i) enforce(O[i], optimizer_shardings[i]);
}

}  // namespace ingot
