// RUN: ingot-opt %s --mlir-pipeline='func.func(ingot-sink-donated-updates)' | FileCheck %s

// Adam's order: m' (the donated %m's new value) is computed before the weight update reads the
// old m. The pass moves m' after that read, so bufferization can write it into m's buffer in place.

// CHECK-LABEL: func.func @step
// CHECK:         %[[W:.*]] = arith.addf %[[M0:.*]], %{{.*}} : tensor<4xf32>
// CHECK-NEXT:    %[[MNEW:.*]] = arith.mulf
// CHECK-NEXT:    bufferization.materialize_in_destination %[[MNEW]]
func.func @step(%m: tensor<4xf32> {bufferization.writable = true}, %w: tensor<4xf32>, %g: tensor<4xf32>)
    -> tensor<4xf32> {
  %m_new = arith.mulf %m, %g : tensor<4xf32>
  %w_new = arith.addf %m, %w : tensor<4xf32>
  %done = bufferization.materialize_in_destination %m_new in %m : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %w_new : tensor<4xf32>
}
