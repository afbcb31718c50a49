// RUN: ingot-opt %s --target cuda --mlir-pipeline='ingot-cuda-gemm-epilogues' | FileCheck %s

// A Dense layer with relu on the GPU (the canonicalized input of the CUDA pipeline's
// gemm-epilogues stage): the f32 cuBLAS GEMM whose product only feeds the bias add, whose sum only
// feeds relu, becomes one cuBLASLt call with the RELU_BIAS epilogue; its result replaces the relu.

// CHECK:       func.func private @ingot_cuda_gemm_bias_relu_f32(memref<?x?xf32>, memref<?x?xf32>, memref<?xf32>, memref<?x?xf32>, i32, i32)
// CHECK-LABEL: func.func @main
// CHECK-SAME:    (%[[A:.*]]: tensor<4x3xf32>, %[[B:.*]]: tensor<3x2xf32>, %[[BIAS:.*]]: tensor<2xf32>)
// CHECK:         call @ingot_cuda_gemm_bias_relu_f32(
// CHECK-NOT:     call @ingot_cuda_gemm_f32
// CHECK-NOT:     arith.addf
// CHECK-NOT:     arith.select
// CHECK:         return
#map = affine_map<(d0, d1) -> (d1)>
#map1 = affine_map<(d0, d1) -> (d0, d1)>
#map2 = affine_map<(d0, d1) -> ()>
module {
  func.func private @ingot_cuda_gemm_f32(memref<?x?xf32>, memref<?x?xf32>, memref<?x?xf32>, i32, i32) attributes {llvm.emit_c_interface}
  func.func @main(%arg0: tensor<4x3xf32>, %arg1: tensor<3x2xf32>, %arg2: tensor<2xf32>) -> tensor<4x2xf32> attributes {llvm.emit_c_interface} {
    %cst = arith.constant dense<0.000000e+00> : tensor<f32>
    %c0_i32 = arith.constant 0 : i32
    %0 = bufferization.to_buffer %arg0 read_only {ingot.read = "m0"} : tensor<4x3xf32> to memref<4x3xf32>
    %cast = memref.cast %0 : memref<4x3xf32> to memref<?x?xf32>
    %1 = bufferization.to_buffer %arg1 read_only {ingot.read = "m2"} : tensor<3x2xf32> to memref<3x2xf32>
    %cast_0 = memref.cast %1 : memref<3x2xf32> to memref<?x?xf32>
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<4x2xf32>
    %cast_1 = memref.cast %alloc : memref<4x2xf32> to memref<?x?xf32>
    call @ingot_cuda_gemm_f32(%cast, %cast_0, %cast_1, %c0_i32, %c0_i32) : (memref<?x?xf32>, memref<?x?xf32>, memref<?x?xf32>, i32, i32) -> ()
    %2 = bufferization.to_tensor %alloc restrict writable : memref<4x2xf32> to tensor<4x2xf32>
    %3 = tensor.empty() : tensor<4x2xf32>
    %4 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel"]} ins(%arg2 : tensor<2xf32>) outs(%3 : tensor<4x2xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<4x2xf32>
    %5 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%2, %4 : tensor<4x2xf32>, tensor<4x2xf32>) outs(%3 : tensor<4x2xf32>) {
    ^bb0(%in: f32, %in_2: f32, %out: f32):
      %10 = arith.addf %in, %in_2 : f32
      linalg.yield %10 : f32
    } -> tensor<4x2xf32>
    %6 = linalg.generic {indexing_maps = [#map2, #map1], iterator_types = ["parallel", "parallel"]} ins(%cst : tensor<f32>) outs(%3 : tensor<4x2xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<4x2xf32>
    %7 = tensor.empty() : tensor<4x2xi8>
    %8 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%5, %6 : tensor<4x2xf32>, tensor<4x2xf32>) outs(%7 : tensor<4x2xi8>) {
    ^bb0(%in: f32, %in_2: f32, %out: i8):
      %10 = arith.cmpf ole, %in, %in_2 : f32
      %11 = arith.extui %10 : i1 to i8
      linalg.yield %11 : i8
    } -> tensor<4x2xi8>
    %9 = linalg.generic {indexing_maps = [#map1, #map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%8, %6, %5 : tensor<4x2xi8>, tensor<4x2xf32>, tensor<4x2xf32>) outs(%3 : tensor<4x2xf32>) {
    ^bb0(%in: i8, %in_2: f32, %in_3: f32, %out: f32):
      %10 = arith.trunci %in : i8 to i1
      %11 = arith.select %10, %in_2, %in_3 : f32
      linalg.yield %11 : f32
    } -> tensor<4x2xf32>
    return %9 : tensor<4x2xf32>
  }
}
