// Every layer kind the trainer has, trained on one device and under DataParallel on 2 and 4 CPU
// devices and under FSDP (kernels split over 4 devices): the loss history, the weights and the
// non-trainable state (moving statistics, RNG states) must equal the one-device run, as JAX's
// global-view jit gives (issue 21). Layers whose result is not computed example by example are
// the point: BatchNormalization takes its statistics over the global batch, Dropout draws each
// example's mask at its global position (counter-based Threefry), and the non-trainable state is
// combined by its aggregation (RNG states are never averaged).
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "ingot/interp/interpreter.h"
#include "ingot/runtime/runtime.h"
#include "ingot/trace/call.h"
#include "ingot/trainer/attention.h"
#include "ingot/trainer/distribution.h"
#include "ingot/trainer/layers_embedding.h"
#include "ingot/trainer/layers_normalization.h"
#include "ingot/trainer/layers_pooling.h"
#include "ingot/trainer/model.h"
#include "spmd_models.h"
#include "test_util.h"

namespace ingot {
namespace {

using Layers = std::vector<std::shared_ptr<Layer>>;

/// One layer kind's model (built for `input` samples, batch dim 1) and its training data.
struct Case {
  std::string name;
  std::function<Layers()> layers;
  Shape input;                             ///< one sample's shape (with a leading 1)
  bool integer_inputs;                     ///< token ids in [0, 10) instead of random floats
  std::string fsdp_kernels = ".*/kernel";  ///< the variables FSDP splits over the 4 devices
};

// A bias right before BatchNormalization, and attention's key bias, have a gradient that is zero
// in exact arithmetic (the normalization removes the mean; softmax ignores a per-query constant);
// Adam divides its float noise by its own magnitude into full-size steps, so such biases differ
// between any two summation orders. The models leave them out, as is usual.
std::vector<Case> cases() {
  using std::make_shared;
  const auto dense = [](int64_t units, std::string activation = "linear") {
    return make_shared<Dense>(DenseOptions{.units = units, .activation = std::move(activation)});
  };
  return {
      {"Dropout",
       [=] {
         return Layers{dense(16, "relu"), make_shared<Dropout>(DropoutOptions{.rate = 0.5, .seed = 3}), dense(4)};
       },
       {1, 8},
       false},
      // 7 features: an odd number of 32-bit draws per example (a Threefry block holds two).
      {"DropoutOddFeatures",
       [=] { return Layers{dense(7, "relu"), make_shared<Dropout>(DropoutOptions{.rate = 0.3, .seed = 4}), dense(4)}; },
       {1, 8},
       false,
       "dense/kernel"},  // the (7, 4) kernel does not split over 4 devices
      {"BatchNormalization",
       [=] {
         return Layers{make_shared<Dense>(DenseOptions{.units = 16, .use_bias = false}),
                       make_shared<BatchNormalization>(BatchNormalizationOptions{.momentum = 0.9}),
                       make_shared<Activation>("relu"), dense(4)};
       },
       {1, 8},
       false},
      {"BatchNormalizationConv",  // statistics over batch, height and width
       [=] {
         return Layers{make_shared<Conv2D>(Conv2DLayerOptions{
                           .filters = 4, .kernel_size = {4, 4}, .padding = "same", .use_bias = false}),
                       make_shared<BatchNormalization>(BatchNormalizationOptions{.momentum = 0.8}),
                       make_shared<GlobalAveragePooling2D>(), dense(4)};
       },
       {1, 6, 6, 4},
       false},
      {"LayerNormalization",
       [=] { return Layers{dense(16), make_shared<LayerNormalization>(), dense(4)}; },
       {1, 8},
       false},
      {"Embedding",
       [=] {
         return Layers{make_shared<Embedding>(EmbeddingOptions{.input_dim = 10, .output_dim = 4}),
                       make_shared<Flatten>(), dense(4)};
       },
       {1, 5},
       true},
      {"MultiHeadAttention",
       [=] {
         return Layers{make_shared<MultiHeadAttention>(
                           MultiHeadAttentionOptions{.num_heads = 4, .key_dim = 4, .use_bias = false}),
                       make_shared<Flatten>(), dense(4)};
       },
       {1, 3, 8},
       false},
      {"Pooling",
       [=] {
         return Layers{make_shared<Conv2D>(Conv2DLayerOptions{.filters = 4, .kernel_size = {4, 4}, .padding = "same"}),
                       make_shared<MaxPooling2D>(),
                       make_shared<AveragePooling2D>(AveragePooling2DOptions{.pool_size = {3, 3}}),
                       make_shared<Flatten>(), dense(4)};
       },
       {1, 6, 6, 4},
       false},
      {"Regularizers",
       [=] {
         return Layers{make_shared<Dense>(DenseOptions{.units = 16,
                                                       .activation = "relu",
                                                       .kernel_regularizer = regularizers::l2(0.01),
                                                       .bias_regularizer = regularizers::l1(0.01)}),
                       dense(4)};
       },
       {1, 8},
       false},
  };
}

std::shared_ptr<Sequential> make_model(const Case& c) {
  auto m = std::make_shared<Sequential>(c.layers(), ModelOptions{.name = "parity", .seed = 17});
  m->build_model(c.input, c.integer_inputs ? DType::kI32 : DType::kF32);
  return m;
}

/// 32 samples of the case's shape; labels in [0, 4).
struct CaseData {
  Array x, y = Array::empty({32}, DType::kI32);
  explicit CaseData(const Case& c) {
    Shape shape = c.input;
    shape[0] = 32;
    x = testing::random_array(shape, DType::kF32, 29);
    if (c.integer_inputs) {
      Array ids = Array::empty(shape, DType::kI32);
      const std::vector<double> r = x.to_doubles();
      for (size_t i = 0; i < r.size(); ++i) ids.data<int32_t>()[i] = static_cast<int32_t>(std::abs(r[i]) * 1000) % 10;
      x = ids;
    }
    for (int64_t i = 0; i < 32; ++i) y.data<int32_t>()[i] = static_cast<int32_t>((i * 3) % 4);
  }
};

struct Meshes {
  Runtime runtime{RuntimeOptions{.num_cpu_devices = 4}};
  std::shared_ptr<distribution::Distribution> data_parallel(int64_t n) const {
    std::vector<Device*> devices(runtime.devices().begin(), runtime.devices().begin() + n);
    return std::make_shared<distribution::DataParallel>(
        distribution::DeviceMesh({.shape = {n}, .axis_names = {"batch"}, .devices = devices}));
  }
  std::shared_ptr<distribution::Distribution> fsdp(const std::string& kernels) const {
    distribution::DeviceMesh mesh({.shape = {4}, .axis_names = {"batch"}, .devices = runtime.devices()});
    distribution::LayoutMap layouts(mesh);
    layouts.set(kernels, PartitionSpec{"batch"});
    return std::make_shared<distribution::ModelParallel>(layouts, "batch");
  }
};

class LayerParity : public ::testing::TestWithParam<Case> {};

TEST_P(LayerParity, EveryMeshTrainsLikeOneDevice) {
  const Case& c = GetParam();
  const CaseData data(c);
  const FitOptions fit{.x = data.x, .y = data.y, .batch_size = 16, .epochs = 3, .verbose = 0, .shuffle = false};
  auto one = make_model(c);
  testing::spmd_compile(*one, nullptr, /*with_accuracy=*/false);
  const auto h1 = one->fit(fit);
  const Logs e1 = one->evaluate({.x = data.x, .y = data.y, .batch_size = 16, .verbose = 0});
  Meshes meshes;
  const std::vector<std::pair<std::string, std::shared_ptr<distribution::Distribution>>> runs = {
      {"DataParallel(2)", meshes.data_parallel(2)},
      {"DataParallel(4)", meshes.data_parallel(4)},
      {"FSDP(4)", meshes.fsdp(c.fsdp_kernels)}};
  for (const auto& [label, d] : runs) {
    SCOPED_TRACE(label);
    auto m = make_model(c);
    testing::spmd_compile(*m, d, /*with_accuracy=*/false);
    const auto h = m->fit(fit);
    ASSERT_EQ(h->values("loss").size(), 3u);
    for (size_t e = 0; e < 3; ++e) EXPECT_NEAR(h->values("loss")[e], h1->values("loss")[e], 2e-5) << "epoch " << e;
    // Every variable, trainable or not (moving statistics, RNG states), equals one device's.
    testing::expect_arrays_near(m->get_weights(), one->get_weights(), 2e-5);
    const Logs e = m->evaluate({.x = data.x, .y = data.y, .batch_size = 16, .verbose = 0});
    EXPECT_NEAR(*e.get("loss"), *e1.get("loss"), 2e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Layers, LayerParity, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

/// Dropout (rate 0.5, key 9) in training on ones of (rows, cols) from RNG counter `counter`:
/// returns the output and the new state's counter.
std::pair<std::vector<double>, uint64_t> dropout_draw(int64_t rows, int64_t cols, uint64_t counter) {
  Dropout drop(DropoutOptions{.rate = 0.5, .seed = 9});
  drop.build({rows, cols});
  Variable& state = *drop.variables()[0];
  const Array ones = Array::full({rows, cols}, 1.0, DType::kF32);
  const TraceFn fn = [&](const std::vector<Tensor>& a) {
    LayerContext ctx(true);
    ctx.bind(state, a[1]);
    const Tensor y = drop.call(ctx, a[0]);
    return std::vector<Tensor>{y, *ctx.new_value(state)};
  };
  const std::vector<Array> out = interp::interpret(trace(fn, {{{rows, cols}, DType::kF32}, state.type()}),
                                                   {ones, Array::from_vector<uint64_t>({9, counter}, {2})});
  return {out[0].to_doubles(), out[1].to_vector<uint64_t>()[1]};
}

TEST(LayerParity, DropoutDrawsEachExamplesMaskAtItsGlobalPosition) {
  // Example b's draws start at Threefry block counter + b * ceil(cols / 2): the rows 8.. of a
  // 16-row batch are the rows a call on 8 rows makes from counter 8 * ceil(cols / 2) -- the draw
  // of the second of two DataParallel shards. The state advances past the whole batch.
  for (const int64_t cols : {6, 7}) {
    SCOPED_TRACE(cols);
    const uint64_t blocks = static_cast<uint64_t>((cols + 1) / 2);
    const auto [whole, after_whole] = dropout_draw(16, cols, 0);
    const auto [first, after_first] = dropout_draw(8, cols, 0);
    const auto [second, after_second] = dropout_draw(8, cols, 8 * blocks);
    EXPECT_EQ(after_whole, 16 * blocks);
    EXPECT_EQ(after_first, 8 * blocks);
    EXPECT_EQ(after_second, 16 * blocks);
    const std::vector<double> halves = [&] {
      std::vector<double> v = first;
      v.insert(v.end(), second.begin(), second.end());
      return v;
    }();
    EXPECT_EQ(whole, halves);
    int64_t dropped = 0;
    for (double v : whole) {
      EXPECT_TRUE(v == 0.0 || v == 2.0) << v;
      dropped += v == 0.0;
    }
    EXPECT_GT(dropped, 16 * cols / 4);  // about half
    EXPECT_LT(dropped, 16 * cols * 3 / 4);
  }
}

TEST(LayerParity, AnAggregationTheCollectivesCannotCombineIsRefusedAtCompile) {
  Meshes meshes;
  auto m = make_model(cases()[0]);  // Dense, Dropout (u64 RNG state), Dense
  for (Variable* v : m->non_trainable_variables()) v->set_aggregation(VariableAggregation::kMean);
  testing::expect_error(
      [&] {
        testing::spmd_compile(*m, meshes.data_parallel(2), false);
        const CaseData data(cases()[0]);
        m->fit({.x = data.x, .y = data.y, .batch_size = 16, .epochs = 1, .verbose = 0});
      },
      ErrorCode::kInvalidArgument, {"seed_generator_state", "u64", "'mean'", "only_first_replica"});
  EXPECT_STREQ(aggregation_name(VariableAggregation::kOnlyFirstReplica), "only_first_replica");
}

}  // namespace
}  // namespace ingot
