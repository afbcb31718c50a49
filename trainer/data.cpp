// Data adapters and the epoch iterator (include/ingot/trainer/data.h).
#include "ingot/trainer/data.h"

#include "rows.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

namespace ingot {

namespace {

using detail::epoch_order;
using detail::iota;
using detail::take_rows;

/// Rows `rows` of every array of `a`.
Arrays take_rows(const Arrays& a, const std::vector<int64_t>& rows) {
  std::vector<Array> out;
  out.reserve(a.size());
  for (const Array& x : a) out.push_back(take_rows(x, rows));
  return out;
}

/// The name of array i of a list in errors: "y" for a one-array list, "y[1]" otherwise.
std::string element_name(const char* what, const Arrays& a, size_t i) {
  return a.size() == 1 ? std::string(what) : fmt::format("{}[{}]", what, i);
}

void check_samples(const Arrays& a, int64_t n, const char* what) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].valid()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{} is an invalid Array", element_name(what, a, i)),
                  "pass arrays of shape (samples, ...) in every position");
    }
    if (a[i].rank() == 0 || a[i].shape()[0] != n) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{} has shape {} but x has {} samples", element_name(what, a, i),
                              shape_to_string(a[i].shape()), n),
                  "give every array the same number of samples (first dimension)");
    }
  }
}

Arrays on_host(const Arrays& a) {
  std::vector<Array> out;
  for (const Array& x : a) out.push_back(to_host(x));
  return out;
}

}  // namespace

const Array& Arrays::single(const std::string& what) const {
  if (list_.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: expected one array, got {}", what, list_.size()),
                "this call takes one array; for models with several inputs or outputs use the list forms "
                "(fit/evaluate with Arrays, predict_outputs)");
  }
  return list_[0];
}

ArrayDataAdapter::ArrayDataAdapter(Arrays x, Arrays y, Arrays sample_weight, int64_t batch_size, bool shuffle,
                                   uint64_t seed)
    : x_(std::move(x)),
      y_(std::move(y)),
      sw_(std::move(sample_weight)),
      batch_size_(batch_size),
      shuffle_(shuffle),
      seed_(seed) {
  if (!x_.valid() || !x_[0].valid() || x_[0].rank() == 0) {
    throw Error(ErrorCode::kInvalidArgument, "x must be an array of shape (samples, ...) (or a list of them)",
                "pass the inputs with the sample dimension first");
  }
  if (batch_size_ <= 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("batch_size must be > 0, got {}", batch_size_));
  }
  const int64_t n = x_[0].shape()[0];
  if (n == 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("x has no samples (shape {})", shape_to_string(x_[0].shape())),
                "pass at least one sample");
  }
  check_samples(x_, n, "x");
  check_samples(y_, n, "y");
  check_samples(sw_, n, "sample_weight");
  for (size_t i = 0; i < sw_.size(); ++i) {
    if (sw_[i].rank() != 1) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{} must be 1-D (samples,), got shape {}", element_name("sample_weight", sw_, i),
                              shape_to_string(sw_[i].shape())));
    }
    const std::vector<double> w = to_host(sw_[i]).to_doubles();
    for (size_t j = 0; j < w.size(); ++j) {
      if (!std::isfinite(w[j])) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("{} of sample {} is {}", element_name("sample_weight", sw_, i), j, w[j]),
                    "sample weights must be finite (a NaN or infinite weight poisons every step's loss)");
      }
    }
  }
  x_ = on_host(x_);
  y_ = on_host(y_);
  sw_ = on_host(sw_);
}

std::optional<int64_t> ArrayDataAdapter::num_batches() const { return (num_samples() + batch_size_ - 1) / batch_size_; }

std::vector<ir::TensorType> ArrayDataAdapter::x_types() const {
  std::vector<ir::TensorType> out;
  for (const Array& a : x_) {
    Shape s = a.shape();
    s[0] = std::min(batch_size_, s[0]);
    out.push_back({s, a.dtype()});
  }
  return out;
}

std::function<std::optional<Batch>()> ArrayDataAdapter::epoch(int64_t epoch) {
  std::vector<int64_t> order = epoch_order(num_samples(), shuffle_, seed_, epoch);
  auto next = std::make_shared<int64_t>(0);
  return [this, order = std::move(order), next]() -> std::optional<Batch> {
    const int64_t n = num_samples();
    if (*next >= n) return std::nullopt;
    const int64_t end = std::min(n, *next + batch_size_);
    std::vector<int64_t> rows(order.begin() + *next, order.begin() + end);
    *next = end;
    return Batch{take_rows(x_, rows), take_rows(y_, rows), take_rows(sw_, rows)};
  };
}

GeneratorDataAdapter::GeneratorDataAdapter(std::function<std::function<std::optional<Batch>()>()> make_epoch,
                                           ir::TensorType x_type, std::optional<int64_t> num_batches)
    : GeneratorDataAdapter(std::move(make_epoch), std::vector<ir::TensorType>{std::move(x_type)}, num_batches) {}

GeneratorDataAdapter::GeneratorDataAdapter(std::function<std::function<std::optional<Batch>()>()> make_epoch,
                                           std::vector<ir::TensorType> x_types, std::optional<int64_t> num_batches)
    : make_epoch_(std::move(make_epoch)), x_types_(std::move(x_types)), num_batches_(num_batches) {
  if (!make_epoch_) {
    throw Error(ErrorCode::kInvalidArgument, "GeneratorDataAdapter: make_epoch is empty",
                "pass a function returning the epoch's batch generator");
  }
  if (x_types_.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "GeneratorDataAdapter: x_types is empty",
                "describe every model input's batches (shape with the batch dimension, dtype)");
  }
}

std::pair<Batch, Batch> split_validation(const Batch& data, double split) {
  if (!(split >= 0.0 && split < 1.0)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("validation_split must be in [0, 1), got {}", split),
                "give the fraction of the samples held out for validation, e.g. 0.1 (0: none)");
  }
  const int64_t n = data.size();
  const auto train = static_cast<int64_t>(std::floor(static_cast<double>(n) * (1.0 - split)));
  if (split > 0 && (train == 0 || train == n)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("validation_split {} of {} samples leaves {} for training and {} for validation", split, n,
                            train, n - train),
                "choose a split that leaves samples on both sides, or pass validation_data");
  }
  const std::vector<int64_t> a = iota(0, train), b = iota(train, n);
  return {Batch{take_rows(data.x, a), take_rows(data.y, a), take_rows(data.sample_weight, a)},
          Batch{take_rows(data.x, b), take_rows(data.y, b), take_rows(data.sample_weight, b)}};
}

Array class_weights_to_sample_weights(const Array& y, const std::vector<std::pair<int64_t, double>>& class_weight) {
  if (!y.valid() || y.rank() == 0) {
    throw Error(ErrorCode::kInvalidArgument, "class_weight needs labels y of shape (samples, ...)");
  }
  const Array host = to_host(y);
  const int64_t n = host.shape()[0];
  const int64_t width = n == 0 ? 1 : host.size() / n;
  const std::vector<double> v = host.to_doubles();
  std::vector<double> w(static_cast<size_t>(n), 1.0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t label = 0;
    if (width == 1) {
      label = static_cast<int64_t>(v[static_cast<size_t>(i)]);
    } else {  // one-hot: argmax
      for (int64_t c = 1; c < width; ++c) {
        if (v[static_cast<size_t>(i * width + c)] > v[static_cast<size_t>(i * width + label)]) label = c;
      }
    }
    for (const auto& [cls, weight] : class_weight) {
      if (cls == label) w[static_cast<size_t>(i)] = weight;
    }
  }
  return Array::from_doubles(w, {n}, DType::kF32);
}

namespace {

/// class_weighted()'s adapter.
class ClassWeightedAdapter final : public DataAdapter {
 public:
  ClassWeightedAdapter(std::shared_ptr<DataAdapter> data, std::vector<std::pair<int64_t, double>> class_weight)
      : data_(std::move(data)), class_weight_(std::move(class_weight)) {}
  std::optional<int64_t> num_batches() const override { return data_->num_batches(); }
  std::vector<ir::TensorType> x_types() const override { return data_->x_types(); }
  std::function<std::optional<Batch>()> epoch(int64_t epoch) override {
    return [next = data_->epoch(epoch), cw = class_weight_]() -> std::optional<Batch> {
      std::optional<Batch> b = next();
      if (!b) return b;
      if (b->y.size() != 1) {
        throw Error(
            ErrorCode::kInvalidArgument,
            fmt::format("fit: class_weight needs one target per batch; the data adapter's batch has {}", b->y.size()),
            "class_weight is for single-output models with labels (as Keras)");
      }
      if (b->sample_weight.valid()) {
        throw Error(ErrorCode::kInvalidArgument, "fit: class_weight, and the data adapter's batch has a sample_weight",
                    "give the batches no sample_weight, or fold the class weights into it and drop class_weight");
      }
      b->sample_weight = Arrays(class_weights_to_sample_weights(b->y[0], cw));
      return b;
    };
  }

 private:
  std::shared_ptr<DataAdapter> data_;
  std::vector<std::pair<int64_t, double>> class_weight_;
};

}  // namespace

std::shared_ptr<DataAdapter> class_weighted(std::shared_ptr<DataAdapter> data,
                                            std::vector<std::pair<int64_t, double>> class_weight) {
  if (!data) throw Error(ErrorCode::kInvalidArgument, "class_weighted: no data adapter");
  return std::make_shared<ClassWeightedAdapter>(std::move(data), std::move(class_weight));
}

EpochIterator::EpochIterator(std::shared_ptr<DataAdapter> adapter, std::optional<int64_t> steps_per_epoch,
                             PrefetchQueue<Batch>::Distribute distribute, std::string steps_name, bool prefetch)
    : adapter_(std::move(adapter)), steps_(steps_per_epoch), distribute_(std::move(distribute)), prefetch_(prefetch) {
  if (!adapter_) throw Error(ErrorCode::kInvalidArgument, "EpochIterator: no data adapter");
  if (steps_ && *steps_ <= 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{} must be > 0, got {}", steps_name, *steps_));
  }
  if (steps_ && adapter_->num_batches() && *steps_ > *adapter_->num_batches()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} {} exceeds the {} batches of the data", steps_name, *steps_, *adapter_->num_batches()),
                fmt::format("use at most as many steps as the data has batches (or omit {})", steps_name));
  }
}

std::optional<int64_t> EpochIterator::num_steps() const { return steps_ ? steps_ : adapter_->num_batches(); }

void EpochIterator::begin_epoch(int64_t epoch) {
  stop();
  taken_ = 0;
  if (prefetch_) {
    queue_ = std::make_unique<PrefetchQueue<Batch>>(adapter_->epoch(epoch), distribute_);
  } else {
    producer_ = adapter_->epoch(epoch);
    started_ = true;
  }
}

std::optional<Batch> EpochIterator::next() {
  if (!queue_ && !started_) throw Error(ErrorCode::kFailedPrecondition, "EpochIterator::next before begin_epoch");
  if (steps_ && taken_ >= *steps_) {
    stop();
    return std::nullopt;
  }
  std::optional<Batch> b = prefetch_ ? queue_->next() : next_unprefetched();
  if (b) ++taken_;
  return b;
}

std::optional<Batch> EpochIterator::next_unprefetched() {
  if (!producer_) return std::nullopt;  // the epoch ended or was stopped
  std::optional<Batch> b = producer_();
  if (!b) {
    producer_ = nullptr;
    return std::nullopt;
  }
  return distribute_ ? distribute_(std::move(*b)) : std::move(*b);
}

void EpochIterator::stop() {
  if (queue_) queue_->stop();
  producer_ = nullptr;
}

namespace detail {

Array take_rows(const Array& a, const std::vector<int64_t>& rows) {
  if (!a.valid()) return a;
  Shape shape = a.shape();
  const int64_t n = shape[0];
  shape[0] = static_cast<int64_t>(rows.size());
  Array out = Array::empty(shape, a.dtype());
  const int64_t row_bytes = n == 0 ? 0 : a.nbytes() / n;
  const auto* src = static_cast<const char*>(a.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  for (size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(dst + static_cast<int64_t>(i) * row_bytes, src + rows[i] * row_bytes, static_cast<size_t>(row_bytes));
  }
  return out;
}

std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order = iota(0, n);
  if (shuffle) {
    std::mt19937_64 rng(seed + static_cast<uint64_t>(epoch));
    std::shuffle(order.begin(), order.end(), rng);
  }
  return order;
}

std::vector<int64_t> iota(int64_t begin, int64_t end) {
  std::vector<int64_t> v(static_cast<size_t>(std::max<int64_t>(0, end - begin)));
  std::iota(v.begin(), v.end(), begin);
  return v;
}

}  // namespace detail

}  // namespace ingot
