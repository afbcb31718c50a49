// RUN: ingot-opt %s --target cuda --mlir-pipeline='func.func(ingot-gpu-block-reductions{threads=128 min-reduced=256})' | FileCheck %s
// RUN: not ingot-opt %s --target cuda --mlir-pipeline='func.func(ingot-gpu-block-reductions{threads=0})' 2>&1 | FileCheck %s --check-prefix=ERR

// ERR: ingot-gpu-block-reductions: threads=0 is not a CUDA block size (1 .. 1024 threads)

// A row sum over 1024 elements (>= min-reduced) becomes one block of 128 threads per row with a
// tree reduction (gpu.all_reduce); a short one (16 elements) stays for the loop path.
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>

// CHECK-LABEL: func.func @long_rows
// CHECK:         gpu.launch
// CHECK:           gpu.all_reduce
// CHECK-NOT:     linalg.generic
// CHECK:         return
func.func @long_rows(%x: memref<8x1024xf32>, %y: memref<8xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x1024xf32>) outs(%y : memref<8xf32>) {
    ^bb0(%e: f32, %acc: f32):
      %s = arith.addf %acc, %e : f32
      linalg.yield %s : f32
  }
  return
}

// CHECK-LABEL: func.func @short_rows
// CHECK-NOT:     gpu.launch
// CHECK:         linalg.generic
func.func @short_rows(%x: memref<8x16xf32>, %y: memref<8xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x16xf32>) outs(%y : memref<8xf32>) {
    ^bb0(%e: f32, %acc: f32):
      %s = arith.addf %acc, %e : f32
      linalg.yield %s : f32
  }
  return
}
