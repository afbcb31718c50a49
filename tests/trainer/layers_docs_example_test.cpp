// The example of docs/trainer-layers.md, built and run: output shapes, parameter counts and
// finite outputs (keeps the page's code compiling).
#include <gtest/gtest.h>

#include <cmath>

#include "ingot/trainer/model.h"
#include "test_util.h"

namespace ingot {
namespace {

TEST(LayersDocsExample, BuildsAndPredicts) {
  Sequential model(
      {std::make_shared<Conv2D>(Conv2DLayerOptions{.filters = 32, .kernel_regularizer = regularizers::l2(1e-4)}),
       std::make_shared<BatchNormalization>(), std::make_shared<Activation>("gelu"),
       std::make_shared<AveragePooling2D>(AveragePooling2DOptions{.padding = "same"}),
       std::make_shared<GlobalAveragePooling2D>(), std::make_shared<LayerNormalization>(),
       std::make_shared<Dense>(DenseOptions{.units = 10, .kernel_initializer = initializers::orthogonal()})});
  Array x = Array::zeros({2, 8, 8, 1}, DType::kF32);
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = std::sin(0.3f * static_cast<float>(i));
  const Array y = model.predict_on_batch(x);
  ASSERT_EQ(y.shape(), (Shape{2, 10}));
  for (double v : y.to_doubles()) EXPECT_TRUE(std::isfinite(v));
  // conv 3*3*32 + 32, BN 4 * 32, LN 2 * 32, dense 32 * 10 + 10.
  EXPECT_EQ(model.count_params(), 320 + 128 + 64 + 330);
  EXPECT_NE(model.summary().find("Non-trainable params: 64"), std::string::npos) << model.summary();

  Sequential text({std::make_shared<Embedding>(EmbeddingOptions{.input_dim = 1000, .output_dim = 16}),
                   std::make_shared<Flatten>(), std::make_shared<Dense>(DenseOptions{.units = 2})});
  text.build_model({1, 20}, DType::kI32);
  EXPECT_EQ(text.predict_on_batch(Array::zeros({3, 20}, DType::kI32)).shape(), (Shape{3, 2}));
}

}  // namespace
}  // namespace ingot
