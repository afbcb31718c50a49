// The jit's CUDA helpers (compiler/jit/jit_cuda.cpp); internal to compiler/jit.
#pragma once

#include "ingot/runtime/array.h"

namespace ingot {

class CudaDevice;

/// The ingot::Device of `device` (where its arrays live).
Device& cuda_device_of(CudaDevice& device);
/// A copy of the host array `host` on `device` (waits for the copy).
Array copy_to_cuda(CudaDevice& device, const Array& host);

}  // namespace ingot
