// keras.layers.Embedding (include/ingot/trainer/layers_embedding.h).
#include "ingot/trainer/layers_embedding.h"

#include <fmt/format.h>

#include "layers_util.h"

namespace ingot {

using namespace layers_detail;

Embedding::Embedding(EmbeddingOptions options) : Layer(options.name), o_(std::move(options)) {
  require_positive(o_.input_dim, "Embedding", "input_dim");
  require_positive(o_.output_dim, "Embedding", "output_dim");
}

void Embedding::build(const Shape&) {
  embeddings_ = &add_weight("embeddings", {o_.input_dim, o_.output_dim}, o_.embeddings_initializer);
}

Tensor Embedding::call(LayerContext& ctx, const Tensor& x) {
  if (x.dtype() == DType::kBool) {
    throw Error(ErrorCode::kDTypeMismatch, "Embedding expects integer indices, got bool inputs",
                "convert the inputs to an integer type");
  }
  const Tensor indices = is_floating(x.dtype()) ? convert(x, DType::kI32) : x;
  if (o_.embeddings_regularizer) add_penalty(ctx, o_.embeddings_regularizer, *embeddings_, "embeddings_regularizer");
  return take(ctx.value(*embeddings_), indices);  // out-of-range indices clamp (gather semantics)
}

}  // namespace ingot
