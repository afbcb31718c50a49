// CudaProgram accessors (include/ingot/runtime/cuda_program.h).
#include "ingot/runtime/cuda_program.h"

#include <fmt/format.h>

#include <algorithm>

#include "ingot/runtime/error.h"

namespace ingot {

std::vector<CudaGemm> CudaGemm::batch_elements() const {
  if (!batched) return {*this};
  std::vector<CudaGemm> out;
  for (int64_t i = 0; i < batch; ++i) {
    CudaGemm g = *this;
    g.batched = false;
    g.batch = 1;
    for (CudaKernelArg* v : {&g.a, &g.b, &g.c}) {
      if (v->sizes.size() != 3 || v->strides.size() != 3) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("CudaGemm::batch_elements: a batched operand view has rank {}", v->sizes.size()),
                    "batched GEMM views are (batch, rows, cols)");
      }
      v->offset += i * v->strides[0];
      v->sizes = Shape(v->sizes.begin() + 1, v->sizes.end());
      v->strides = Shape(v->strides.begin() + 1, v->strides.end());
    }
    out.push_back(std::move(g));
  }
  return out;
}

const char* epilogue_name(CudaGemm::Epilogue e) {
  switch (e) {
    case CudaGemm::Epilogue::kNone:
      return "none";
    case CudaGemm::Epilogue::kBias:
      return "bias";
    case CudaGemm::Epilogue::kBiasRelu:
      return "bias_relu";
  }
  return "?";
}

std::vector<CudaLaunch> CudaProgram::launches() const {
  std::vector<CudaLaunch> out;
  for (const CudaThunk& t : thunks) {
    if (t.kind == CudaThunk::Kind::kLaunch) out.push_back(t.launch);
  }
  return out;
}

int64_t CudaProgram::gemm_count() const {
  return std::count_if(thunks.begin(), thunks.end(),
                       [](const CudaThunk& t) { return t.kind == CudaThunk::Kind::kGemm; });
}

std::vector<CudaConv> CudaProgram::convs() const {
  std::vector<CudaConv> out;
  for (const CudaThunk& t : thunks) {
    if (t.kind == CudaThunk::Kind::kConv) out.push_back(t.conv);
  }
  return out;
}

const CudaKernelImage& CudaProgram::kernel(const std::string& name) const {
  for (const CudaKernelImage& k : kernels) {
    if (k.name == name) return k;
  }
  throw Error(ErrorCode::kNotFound, fmt::format("CudaProgram has no kernel '{}'", name));
}

namespace {

const char* kind_name(CudaBuffer::Kind k) {
  switch (k) {
    case CudaBuffer::Kind::kInput:
      return "input";
    case CudaBuffer::Kind::kOutput:
      return "output";
    case CudaBuffer::Kind::kTemporary:
      return "temporary";
    case CudaBuffer::Kind::kConstant:
      return "constant";
  }
  return "?";
}

std::string operand(const CudaKernelArg& a) {
  return a.offset == 0 ? fmt::format("buffer {}", a.buffer) : fmt::format("buffer {}+{}", a.buffer, a.offset);
}

/// "conv f32 lhs (8, 1, 28, 28) rhs (8, 1, 3, 3) out (8, 8, 26, 26) groups 1x1 lhs=buffer 0 ...".
std::string describe_conv(const CudaConv& c) {
  const kernels::ConvSpec& s = c.spec;
  return fmt::format("conv {} lhs {} rhs {} out {} groups {}x{} lhs={} rhs={} out={}\n", dtype_name(c.dtype),
                     shape_to_string(s.lhs_shape), shape_to_string(s.rhs_shape), shape_to_string(s.out_shape),
                     s.feature_groups, s.batch_groups, operand(c.lhs), operand(c.rhs), operand(c.out));
}

}  // namespace

std::string CudaProgram::describe() const {
  std::string out;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const CudaBuffer& b = buffers[i];
    const bool io = b.kind == CudaBuffer::Kind::kInput || b.kind == CudaBuffer::Kind::kOutput;
    out += fmt::format("buffer {}: {}{} {} {}, {} bytes\n", i, kind_name(b.kind), io ? fmt::format(" {}", b.index) : "",
                       dtype_name(b.dtype), shape_to_string(b.shape), b.bytes);
  }
  for (const CudaThunk& t : thunks) {
    if (t.kind == CudaThunk::Kind::kLaunch) {
      int64_t memrefs = 0;
      for (const CudaKernelArg& a : t.launch.args) memrefs += a.kind == CudaKernelArg::Kind::kMemref ? 1 : 0;
      out += fmt::format("launch {} grid ({}, {}, {}) block ({}, {}, {}), {} buffers\n", t.launch.kernel,
                         t.launch.grid[0], t.launch.grid[1], t.launch.grid[2], t.launch.block[0], t.launch.block[1],
                         t.launch.block[2], memrefs);
    } else if (t.kind == CudaThunk::Kind::kConv) {
      out += describe_conv(t.conv);
    } else {
      const CudaGemm& g = t.gemm;
      out += fmt::format("gemm {}{} m={} n={} k={}{}{} A={} B={} C={}{}\n", dtype_name(g.dtype),
                         g.batched ? fmt::format(" batch={}", g.batch) : "", g.m, g.n, g.k, g.trans_a ? " A^T" : "",
                         g.trans_b ? " B^T" : "", operand(g.a), operand(g.b), operand(g.c),
                         g.epilogue == CudaGemm::Epilogue::kNone
                             ? ""
                             : fmt::format(" epilogue={} bias={}", epilogue_name(g.epilogue), operand(g.bias)));
    }
  }
  return out;
}

}  // namespace ingot
