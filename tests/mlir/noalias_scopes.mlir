// RUN: ingot-opt %s --mlir-pipeline='llvm.func(ingot-noalias-scopes)' | FileCheck %s

// A kernel's llvm.noalias pointer arguments become alias scopes on the loads and stores through
// them, which survive OpenMP outlining (the outlined body no longer sees the argument attribute):
// each access is in its argument's scope and noalias with the others'.

// CHECK-LABEL: llvm.func @kernel
// CHECK:         llvm.load %{{.*}} {alias_scopes = [#[[SA:.*]]], {{.*}}noalias_scopes = [#[[SB:.*]]]}
// CHECK:         llvm.store %{{.*}}, %{{.*}} {alias_scopes = [#[[SB]]], {{.*}}noalias_scopes = [#[[SA]]]}
llvm.func @kernel(%a: !llvm.ptr {llvm.noalias}, %b: !llvm.ptr {llvm.noalias}, %i: i64) {
  %pa = llvm.getelementptr %a[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %x = llvm.load %pa : !llvm.ptr -> f32
  %pb = llvm.getelementptr %b[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %x, %pb : f32, !llvm.ptr
  llvm.return
}

// Without noalias arguments nothing is known: no scopes.
// CHECK-LABEL: llvm.func @plain
// CHECK-NOT:     alias_scopes
// CHECK:         llvm.return
llvm.func @plain(%a: !llvm.ptr, %b: !llvm.ptr) {
  %x = llvm.load %a : !llvm.ptr -> f32
  llvm.store %x, %b : f32, !llvm.ptr
  llvm.return
}
