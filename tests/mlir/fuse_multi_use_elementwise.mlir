// RUN: ingot-opt %s --mlir-pipeline='func.func(ingot-fuse-multi-use-elementwise)' | FileCheck %s

// A cheap producer (the bias add) with two elementwise consumers is cloned into each of them and
// disappears; a transcendental producer (exp) is not duplicated.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>

// CHECK-LABEL: func.func @bias_add_relu
func.func @bias_add_relu(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xi1>, tensor<4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<4x8xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
    ^bb0(%a: f32, %c: f32, %o: f32):
      %s = arith.addf %a, %c : f32
      linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %em = tensor.empty() : tensor<4x8xi1>
  %mask = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%sum : tensor<4x8xf32>) outs(%em : tensor<4x8xi1>) {
    ^bb0(%a: f32, %o: i1):
      %m = arith.cmpf ole, %a, %zero : f32
      linalg.yield %m : i1
  } -> tensor<4x8xi1>
  %relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%sum : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
    ^bb0(%a: f32, %o: f32):
      %r = arith.maximumf %a, %zero : f32
      linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %mask, %relu : tensor<4x8xi1>, tensor<4x8xf32>
}
// Both consumers read %x and %b directly and recompute the add; no generic is left that only adds.
// CHECK:      linalg.generic
// CHECK-SAME:   ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8xf32>)
// CHECK:        arith.addf
// CHECK-NEXT:   arith.cmpf ole
// CHECK:      linalg.generic
// CHECK-SAME:   ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8xf32>)
// CHECK:        arith.addf
// CHECK-NEXT:   arith.maximumf
// CHECK-NOT:  linalg.generic
// CHECK:      return

// CHECK-LABEL: func.func @exp_is_computed_once
func.func @exp_is_computed_once(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %ex = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
    ^bb0(%a: f32, %o: f32):
      %v = math.exp %a : f32
      linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %d = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ex : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
    ^bb0(%a: f32, %o: f32):
      %v = arith.addf %a, %a : f32
      linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ex : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
    ^bb0(%a: f32, %o: f32):
      %v = arith.negf %a : f32
      linalg.yield %v : f32
  } -> tensor<4x8xf32>
  return %d, %n : tensor<4x8xf32>, tensor<4x8xf32>
}
// CHECK:     math.exp
// CHECK-NOT: math.exp
// CHECK:     return
