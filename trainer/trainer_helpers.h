// Small helpers shared by the trainer's files: gradient buckets for the data-parallel
// all-reduce, list slicing, host copies and batch sample weights. Internal to ingot_trainer.
#pragma once

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "ingot/runtime/cuda.h"
#include "ingot/trace/ops.h"
#include "ingot/trainer/data.h"
#include "ingot/trainer/layers.h"

namespace ingot::detail {

/// Buckets of the tensors `which` (indices into xs) of one dtype: last index first, each bucket at
/// most `cap` bytes (a larger tensor alone), the first at most min(cap, 1 MiB) (PyTorch DDP's
/// bucket_cap_mb and small first bucket).
inline std::vector<std::vector<size_t>> buckets(const std::vector<Tensor>& xs, const std::vector<size_t>& which,
                                                int64_t cap) {
  std::vector<std::vector<size_t>> out;
  int64_t bytes = 0;
  for (auto it = which.rbegin(); it != which.rend(); ++it) {
    const int64_t size = num_elements(xs[*it].shape()) * dtype_size(xs[*it].dtype());
    const int64_t limit = out.size() == 1 ? std::min<int64_t>(cap, int64_t{1} << 20) : cap;
    if (out.empty() || (bytes + size > limit && !out.back().empty())) {
      out.emplace_back();
      bytes = 0;
    }
    out.back().push_back(*it);
    bytes += size;
  }
  return out;
}

/// The `reduction` ("sum" or "mean") over the devices of xs[i] for i in `which`, as few
/// all_reduces: per dtype, the tensors of each bucket (buckets(), `cap` bytes) flattened and
/// concatenated, reduced, then sliced and reshaped back (PyTorch DDP's gradient buckets: one
/// collective per bucket instead of one per tensor, whose latency dominated small models'
/// data-parallel steps -- MLP step on 2 CPU devices 49-64 ms -> 5-8 ms; several buckets let the
/// scheduler start the last layers' all-reduce while the earlier layers' gradients are computed).
inline void all_reduce_bucketed(std::vector<Tensor>& xs, const std::vector<size_t>& which, const std::string& axis,
                                const std::string& reduction, int64_t cap) {
  std::map<DType, std::vector<size_t>> by_dtype;
  for (size_t i : which) by_dtype[xs[i].dtype()].push_back(i);
  for (const auto& [dtype, all] : by_dtype) {
    for (const std::vector<size_t>& members : buckets(xs, all, cap)) {
      std::vector<Tensor> flat;
      for (size_t i : members) flat.push_back(flatten(xs[i]));
      const Tensor bucket = all_reduce(flat.size() == 1 ? flat[0] : concatenate(flat, 0), axis, reduction);
      int64_t at = 0;
      for (size_t i : members) {
        const Shape shape = xs[i].shape();
        const int64_t n = num_elements(shape);
        xs[i] = reshape(slice_axis(bucket, 0, at, at + n), shape);
        at += n;
      }
    }
  }
}

inline std::vector<Tensor> slice(const std::vector<Tensor>& v, size_t begin, size_t count) {
  return {v.begin() + static_cast<std::ptrdiff_t>(begin), v.begin() + static_cast<std::ptrdiff_t>(begin + count)};
}

inline std::vector<Array> values_of(const std::vector<Variable*>& vars) {
  std::vector<Array> out;
  for (Variable* v : vars) out.push_back(v->value());
  return out;
}

/// The value of the one-element array `a`, read on the host (copied down from `target`).
inline double scalar(const Array& a, const CompileTarget& target) { return target.to_host(a).to_doubles().at(0); }
/// The value of the one-element host array `a`.
inline double scalar(const Array& a) { return to_host(a).to_doubles().at(0); }

/// One sample-weight array per output: ones (batch,) when the batch has none (weights of 1 give
/// Keras's unweighted values), the one array for every output, or the per-output arrays.
inline std::vector<Array> weights_per_output(const Batch& b, size_t outputs) {
  if (!b.sample_weight.valid()) return std::vector<Array>(outputs, Array::full({b.size()}, 1.0, DType::kF32));
  if (b.sample_weight.size() == 1) return std::vector<Array>(outputs, b.sample_weight[0]);
  return b.sample_weight.list();
}

/// Concatenates arrays along dim 0 into a host array (parts on `target` are copied down).
inline Array concat_rows(const std::vector<Array>& parts, const CompileTarget& target) {
  if (parts.empty()) return Array();
  Shape shape = parts[0].shape();
  shape[0] = 0;
  for (const Array& p : parts) shape[0] += p.shape()[0];
  Array out = Array::empty(shape, parts[0].dtype());
  auto* dst = static_cast<char*>(out.raw_data());
  for (const Array& p : parts) {
    const Array h = target.to_host(p);
    std::memcpy(dst, h.raw_data(), static_cast<size_t>(h.nbytes()));
    dst += h.nbytes();
  }
  return out;
}

/// Adds to `out`, for each variable of `layer` (named by `path`, the layer names from the model
/// down, as the name scopes of their calls read), the path of the deepest layer owning it.
inline void add_owner_paths(Layer& layer, const std::string& path, std::map<const Variable*, std::string>& out) {
  for (const std::shared_ptr<Layer>& child : layer.sublayers()) {
    add_owner_paths(*child, path + "/" + child->scope_name(), out);
  }
  for (Variable* v : layer.variables()) out.try_emplace(v, path);
}

}  // namespace ingot::detail
