// CudaExecutable: the pure parts (PTX choice per compute capability, launch parameter words,
// the column-major GEMM call, program validation) and whole runs of hand-made CudaPrograms on the
// fake driver (fake_cuda_driver.h), whose kernels are host bodies that read MLIR's memref
// descriptors from the launch words and whose GEMMs go through a host BLAS on the fake stream.
#if INGOT_HAVE_CUDA_TOOLKIT

#include "ingot/runtime/cuda_executable.h"
#include "ingot/runtime/nccl.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstring>
#include <filesystem>

#include "fake_cuda_driver.h"
#include "fake_cublas.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;
using testing::FakeCudaScope;

// ---------------------------------------------------------------------------------------------
// Helpers

/// Fake PTX for `arch` with one entry `entry` of `params` 64-bit parameters.
std::string fake_ptx(const std::string& arch, const std::string& entry, int params) {
  std::string p = fmt::format(".version 8.0\n.target {}\n.address_size 64\n.visible .entry {}(\n", arch, entry);
  for (int i = 0; i < params; ++i)
    p += fmt::format("\t.param .u64 {}_param_{}{}\n", entry, i, i + 1 < params ? "," : "");
  return p + ")\n{\n\tret;\n}\n";
}

CudaKernelImage image(const std::string& name, int params, const std::vector<std::string>& archs) {
  CudaKernelImage k;
  k.name = name;
  const std::string entry = name.substr(name.rfind('.') + 1);
  for (const std::string& a : archs) k.ptx[a] = fake_ptx(a, entry, params);
  return k;
}

CudaKernelArg memref(int64_t buffer, int64_t offset, Shape sizes, Shape strides) {
  CudaKernelArg a;
  a.kind = CudaKernelArg::Kind::kMemref;
  a.buffer = buffer;
  a.offset = offset;
  a.sizes = std::move(sizes);
  a.strides = std::move(strides);
  return a;
}

CudaKernelArg index_arg(int64_t v) {
  CudaKernelArg a;
  a.kind = CudaKernelArg::Kind::kIndex;
  a.value = v;
  return a;
}

CudaBuffer buffer(CudaBuffer::Kind kind, int64_t index, Shape shape, DType dtype = DType::kF32) {
  CudaBuffer b;
  b.kind = kind;
  b.index = index;
  b.shape = shape;
  b.dtype = dtype;
  b.bytes = num_elements(shape) * dtype_size(dtype);
  return b;
}

CudaThunk launch_thunk(std::string kernel, std::array<int64_t, 3> grid, std::array<int64_t, 3> block,
                       std::vector<CudaKernelArg> args) {
  CudaThunk t;
  t.kind = CudaThunk::Kind::kLaunch;
  t.launch.kernel = std::move(kernel);
  t.launch.grid = grid;
  t.launch.block = block;
  t.launch.args = std::move(args);
  return t;
}

uint64_t address(const Array& a) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(a.buffer()->data())); }

template <typename T>
T* at(uint64_t address) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(address));
}

/// A rank-2 memref descriptor read from launch words starting at `w`.
struct View2 {
  uint64_t aligned;
  int64_t offset, sizes[2], strides[2];
  float& operator()(int64_t i, int64_t j) const { return at<float>(aligned)[offset + i * strides[0] + j * strides[1]]; }
};
View2 view2(const std::vector<uint64_t>& w, size_t first) {
  auto s = [&](size_t i) { return static_cast<int64_t>(w[first + i]); };
  return {w[first + 1], s(2), {s(3), s(4)}, {s(5), s(6)}};
}

// The elementwise program: tmp = x + c (kernel "add_kernel.add_kernel", three rank-2 memrefs,
// 21 words), out = tmp[1, :] * k (kernel "scale_kernel.scale_kernel": a rank-1 view at element
// offset 3 of tmp, an index k, the rank-1 output: 5 + 1 + 5 = 11 words).
// Buffers: 0 input x f32 (2, 3), 1 constant c f32 (2, 3), 2 temporary tmp f32 (2, 3), 3 output
// out f32 (3).
constexpr int kAddWords = 21, kScaleWords = 11;
const std::vector<float> kConstant = {10, 20, 30, 40, 50, 60};

CudaProgram elementwise_program(const std::vector<std::string>& archs = {"sm_80", "sm_90"}) {
  CudaProgram p;
  p.kernels = {image("add_kernel.add_kernel", kAddWords, archs),
               image("scale_kernel.scale_kernel", kScaleWords, archs)};
  p.buffers = {buffer(CudaBuffer::Kind::kInput, 0, {2, 3}), buffer(CudaBuffer::Kind::kConstant, 0, {2, 3}),
               buffer(CudaBuffer::Kind::kTemporary, 0, {2, 3}), buffer(CudaBuffer::Kind::kOutput, 0, {3})};
  p.buffers[1].data.resize(24);
  std::memcpy(p.buffers[1].data.data(), kConstant.data(), 24);
  p.thunks = {launch_thunk("add_kernel.add_kernel", {2, 1, 1}, {32, 1, 1},
                           {memref(0, 0, {2, 3}, {3, 1}), memref(1, 0, {2, 3}, {3, 1}), memref(2, 0, {2, 3}, {3, 1})}),
              launch_thunk("scale_kernel.scale_kernel", {1, 1, 1}, {64, 2, 1},
                           {memref(2, 3, {3}, {1}), index_arg(7), memref(3, 0, {3}, {1})})};
  p.input_types = {{{2, 3}, DType::kF32}};
  p.output_types = {{{3}, DType::kF32}};
  return p;
}

/// Host bodies of the elementwise program's kernels, reading the descriptors.
void register_elementwise_kernels(testing::FakeCuda& fake) {
  fake.kernel_bodies["add_kernel"] = [](const std::vector<uint64_t>& w) {
    const View2 x = view2(w, 0), c = view2(w, 7), t = view2(w, 14);
    for (int64_t i = 0; i < t.sizes[0]; ++i) {
      for (int64_t j = 0; j < t.sizes[1]; ++j) t(i, j) = x(i, j) + c(i, j);
    }
  };
  fake.kernel_bodies["scale_kernel"] = [](const std::vector<uint64_t>& w) {
    const float* in = at<float>(w[1]) + w[2];
    const auto k = static_cast<float>(w[5]);
    float* out = at<float>(w[7]) + w[8];
    for (uint64_t i = 0; i < w[9]; ++i) out[i * w[10]] = in[i * w[4]] * k;
  };
}

Array to_device(CudaDevice& dev, const Array& host) {
  Array d = Array::empty(host.shape(), host.dtype(), &dev.device());
  dev.copy_async(host, d)->wait();
  return d;
}

Array to_host(CudaDevice& dev, const Array& on_dev) {
  Array h = Array::empty(on_dev.shape(), on_dev.dtype());
  dev.copy_async(on_dev, h)->wait();
  return h;
}

// ---------------------------------------------------------------------------------------------
// PTX per compute capability

TEST(CudaPtxArch, ExactThenNewestOlderArch) {
  const CudaKernelImage k = image("m.k", 1, {"sm_80", "sm_90"});
  EXPECT_EQ(select_cuda_ptx_arch(k, 9, 0), "sm_90");
  EXPECT_EQ(select_cuda_ptx_arch(k, 8, 0), "sm_80");
  EXPECT_EQ(select_cuda_ptx_arch(k, 8, 6), "sm_80");
  EXPECT_EQ(select_cuda_ptx_arch(k, 8, 9), "sm_80");
  EXPECT_EQ(select_cuda_ptx_arch(k, 10, 0), "sm_90");  // 100 >= 90 numerically, not as text
  EXPECT_EQ(select_cuda_ptx_arch(k, 12, 0), "sm_90");
  const CudaKernelImage k2 = image("m.k", 1, {"sm_86", "sm_80", "sm_100"});
  EXPECT_EQ(select_cuda_ptx_arch(k2, 8, 9), "sm_86");
  EXPECT_EQ(select_cuda_ptx_arch(k2, 9, 0), "sm_86");
  EXPECT_EQ(select_cuda_ptx_arch(k2, 10, 0), "sm_100");
  // Arch-specific PTX (sm_90a) is not forward compatible and never picked.
  const CudaKernelImage k3 = image("m.k", 1, {"sm_90a", "sm_80"});
  EXPECT_EQ(select_cuda_ptx_arch(k3, 9, 0), "sm_80");
}

TEST(CudaPtxArch, OlderDeviceIsAClearError) {
  const CudaKernelImage k = image("main_kernel.main_kernel", 1, {"sm_80", "sm_90"});
  expect_error([&] { select_cuda_ptx_arch(k, 7, 5); }, ErrorCode::kNotFound,
               {"kernel 'main_kernel.main_kernel' has PTX for [sm_80, sm_90]", "compute capability 7.5 (sm_75)",
                "compile for sm_75 or an older architecture"});
  expect_error([&] { select_cuda_ptx_arch(k, 0, 0); }, ErrorCode::kInvalidArgument, {"0.0"});
  expect_error([&] { select_cuda_ptx_arch(k, 9, 10); }, ErrorCode::kInvalidArgument, {"9.10"});
}

// ---------------------------------------------------------------------------------------------
// Launch parameter words

TEST(CudaLaunchWords, DescriptorAbiByHand) {
  CudaLaunch l;
  l.kernel = "m.k";
  l.args = {memref(1, 5, {2, 3}, {4, 1}), index_arg(-3), memref(0, 0, {}, {}), memref(2, 7, {6}, {2})};
  const std::vector<uint64_t> addresses = {0x1000, 0x2000, 0x3000};
  const std::vector<uint64_t> expected = {0x2000,
                                          0x2000,
                                          5,
                                          2,
                                          3,
                                          4,
                                          1,  // rank 2: the pointer is NOT advanced by the offset
                                          static_cast<uint64_t>(int64_t{-3}),  // index
                                          0x1000,
                                          0x1000,
                                          0,  // rank 0: pointers and offset only
                                          0x3000,
                                          0x3000,
                                          7,
                                          6,
                                          2};  // rank 1
  EXPECT_EQ(cuda_launch_words(l, addresses), expected);
}

TEST(CudaLaunchWords, EveryLaunchOfAProgramInOrder) {
  const CudaProgram p = elementwise_program();
  const std::vector<uint64_t> a = {100, 200, 300, 400};
  const auto words = cuda_launch_parameter_words(p, a);
  ASSERT_EQ(words.size(), 2u);
  EXPECT_EQ(words[0],
            (std::vector<uint64_t>{100, 100, 0, 2, 3, 3, 1, 200, 200, 0, 2, 3, 3, 1, 300, 300, 0, 2, 3, 3, 1}));
  EXPECT_EQ(words[1], (std::vector<uint64_t>{300, 300, 3, 3, 1, 7, 400, 400, 0, 3, 1}));
}

TEST(CudaLaunchWords, BadBufferIndexOrViewIsAnError) {
  CudaLaunch l;
  l.kernel = "m.k";
  l.args = {memref(3, 0, {2}, {1})};
  const std::vector<uint64_t> a = {1, 2, 3};
  expect_error([&] { cuda_launch_words(l, a); }, ErrorCode::kOutOfRange,
               {"launch of 'm.k', argument 0", "buffer index 3 is outside the 3 buffer addresses"});
  l.args = {memref(0, 0, {2, 2}, {1})};
  expect_error([&] { cuda_launch_words(l, a); }, ErrorCode::kInvalidArgument, {"2 sizes but 1 strides"});
}

// ---------------------------------------------------------------------------------------------
// The column-major GEMM call

CudaGemm gemm(DType dt, int64_t m, int64_t n, int64_t k, bool ta, bool tb, CudaKernelArg a, CudaKernelArg b,
              CudaKernelArg c) {
  CudaGemm g;
  g.dtype = dt;
  g.m = m;
  g.n = n;
  g.k = k;
  g.trans_a = ta;
  g.trans_b = tb;
  g.a = std::move(a);
  g.b = std::move(b);
  g.c = std::move(c);
  return g;
}

TEST(CudaColumnMajorGemm, SwapsOperandsAndAddsOffsets) {
  const std::vector<uint64_t> addr = {0x1000, 0x2000, 0x3000};
  // C (2 x 5) = A (2 x 3) B (3 x 5), no transposes: gemm(N, N, n=5, m=2, k=3, B, ldb=5, A, lda=3, C, 5).
  CudaBlasGemm c = column_major_gemm(gemm(DType::kF32, 2, 5, 3, false, false, memref(0, 4, {2, 3}, {3, 1}),
                                          memref(1, 0, {3, 5}, {5, 1}), memref(2, 10, {2, 5}, {5, 1})),
                                     addr);
  EXPECT_EQ(c.dtype, DType::kF32);
  EXPECT_FALSE(c.trans_a);
  EXPECT_FALSE(c.trans_b);
  EXPECT_EQ(c.m, 5);
  EXPECT_EQ(c.n, 2);
  EXPECT_EQ(c.k, 3);
  EXPECT_EQ(c.a, 0x2000u);
  EXPECT_EQ(c.lda, 5);
  EXPECT_EQ(c.b, 0x1000u + 4 * 4);
  EXPECT_EQ(c.ldb, 3);
  EXPECT_EQ(c.c, 0x3000u + 10 * 4);
  EXPECT_EQ(c.ldc, 5);
  // f64, A stored (k, m) = (3, 2) and B stored (n, k) = (5, 3): the first operand is B with
  // trans_b, the second A with trans_a.
  c = column_major_gemm(gemm(DType::kF64, 2, 5, 3, true, true, memref(0, 1, {3, 2}, {2, 1}),
                             memref(1, 2, {5, 3}, {3, 1}), memref(2, 0, {2, 5}, {5, 1})),
                        addr);
  EXPECT_TRUE(c.trans_a);
  EXPECT_TRUE(c.trans_b);
  EXPECT_EQ(c.a, 0x2000u + 2 * 8);
  EXPECT_EQ(c.lda, 3);
  EXPECT_EQ(c.b, 0x1000u + 1 * 8);
  EXPECT_EQ(c.ldb, 2);
  EXPECT_EQ(c.ldc, 5);
  expect_error([&] { column_major_gemm(gemm(DType::kI32, 1, 1, 1, false, false, {}, {}, {}), addr); },
               ErrorCode::kInvalidArgument, {"i32 is not f32, f64, f16 or bf16"});
}

TEST(CudaColumnMajorGemm, HalfGemmsMapAsF32WithTwoByteElements) {
  const std::vector<uint64_t> addr = {0x1000, 0x2000, 0x3000};
  // bf16 C (2 x 5) = A (2 x 3) B^T, B stored (n, k) = (5, 3) at element 7, A at element 4, C at 10:
  // gemmEx(T, N, m = 5, n = 2, k = 3, B, lda = 3, A, ldb = 3, C, ldc = 5), offsets in 2-byte elements.
  CudaBlasGemm c = column_major_gemm(gemm(DType::kBF16, 2, 5, 3, false, true, memref(0, 4, {2, 3}, {3, 1}),
                                          memref(1, 7, {5, 3}, {3, 1}), memref(2, 10, {2, 5}, {5, 1})),
                                     addr);
  EXPECT_EQ(c.dtype, DType::kBF16);
  EXPECT_TRUE(c.trans_a);
  EXPECT_FALSE(c.trans_b);
  EXPECT_EQ(c.m, 5);
  EXPECT_EQ(c.n, 2);
  EXPECT_EQ(c.k, 3);
  EXPECT_EQ(c.a, 0x2000u + 7 * 2);
  EXPECT_EQ(c.lda, 3);
  EXPECT_EQ(c.b, 0x1000u + 4 * 2);
  EXPECT_EQ(c.ldb, 3);
  EXPECT_EQ(c.c, 0x3000u + 10 * 2);
  EXPECT_EQ(c.ldc, 5);
  EXPECT_EQ(c.batch, 1);
  // f16, batched: 4 products C[i] (3 x 2) = A[i]^T (A stored (k, m) = (5, 3)) B[i] (5 x 2), strides
  // in elements, A's and B's swapped with the operands.
  CudaGemm g = gemm(DType::kF16, 3, 2, 5, true, false, memref(0, 0, {4, 5, 3}, {15, 3, 1}),
                    memref(1, 2, {4, 5, 2}, {12, 2, 1}), memref(2, 0, {4, 3, 2}, {6, 2, 1}));
  g.batched = true;
  g.batch = 4;
  c = column_major_gemm(g, addr);
  EXPECT_EQ(c.dtype, DType::kF16);
  EXPECT_FALSE(c.trans_a);
  EXPECT_TRUE(c.trans_b);
  EXPECT_EQ(c.a, 0x2000u + 2 * 2);
  EXPECT_EQ(c.lda, 2);
  EXPECT_EQ(c.ldb, 3);
  EXPECT_EQ(c.batch, 4);
  EXPECT_EQ(c.stride_a, 12);
  EXPECT_EQ(c.stride_b, 15);
  EXPECT_EQ(c.stride_c, 6);
  EXPECT_TRUE(is_blas_gemm_dtype(DType::kF16));
  EXPECT_TRUE(is_blas_gemm_dtype(DType::kBF16));
  EXPECT_FALSE(is_blas_gemm_dtype(DType::kI32));
}

TEST(CudaColumnMajorGemm, BatchedViewsBecomeOneStridedBatchedCall) {
  const std::vector<uint64_t> addr = {0x1000, 0x2000, 0x3000};
  // 3 products C[i] (2 x 5) = A[i] (2 x 3) B[i] (3 x 5); A's matrices 8 elements apart (padded),
  // B's 15, C's 10; A starts at element 4, C at element 1.
  CudaGemm g = gemm(DType::kF32, 2, 5, 3, false, false, memref(0, 4, {3, 2, 3}, {8, 3, 1}),
                    memref(1, 0, {3, 3, 5}, {15, 5, 1}), memref(2, 1, {3, 2, 5}, {10, 5, 1}));
  g.batched = true;
  g.batch = 3;
  const std::vector<CudaBlasGemm> calls = cuda_blas_calls(g, addr);
  ASSERT_EQ(calls.size(), 1u);
  const CudaBlasGemm& c = calls[0];
  EXPECT_EQ(c.batch, 3);
  EXPECT_EQ(c.stride_a, 15);  // the first column-major operand is B
  EXPECT_EQ(c.stride_b, 8);
  EXPECT_EQ(c.stride_c, 10);
  EXPECT_EQ(c.m, 5);
  EXPECT_EQ(c.n, 2);
  EXPECT_EQ(c.k, 3);
  EXPECT_EQ(c.a, 0x2000u);
  EXPECT_EQ(c.lda, 5);
  EXPECT_EQ(c.b, 0x1000u + 4 * 4);
  EXPECT_EQ(c.ldb, 3);
  EXPECT_EQ(c.c, 0x3000u + 1 * 4);
  EXPECT_EQ(c.ldc, 5);
  // A plain GEMM is one call of batch 1.
  const CudaGemm plain = gemm(DType::kF32, 2, 5, 3, false, false, memref(0, 0, {2, 3}, {3, 1}),
                              memref(1, 0, {3, 5}, {5, 1}), memref(2, 0, {2, 5}, {5, 1}));
  EXPECT_EQ(cuda_blas_calls(plain, addr).at(0).batch, 1);
  // C's matrices overlap (batch stride 0): one call per element, in order, each of batch 1.
  g.c = memref(2, 1, {3, 2, 5}, {0, 5, 1});
  const std::vector<CudaBlasGemm> serial = cuda_blas_calls(g, addr);
  ASSERT_EQ(serial.size(), 3u);
  EXPECT_EQ(serial[2].batch, 1);
  EXPECT_EQ(serial[2].a, 0x2000u + 2 * 15 * 4);
  EXPECT_EQ(serial[2].b, 0x1000u + (4 + 2 * 8) * 4);
  EXPECT_EQ(serial[2].c, 0x3000u + 1 * 4);
  g.c = memref(2, 1, {2, 5}, {5, 1});
  expect_error([&] { column_major_gemm(g, addr); }, ErrorCode::kInvalidArgument,
               {"a batched GEMM operand view has rank 2"});
  g.c = memref(2, 1, {3, 2, 5}, {10, 5, 1});
  g.batch = 0;
  expect_error([&] { column_major_gemm(g, addr); }, ErrorCode::kInvalidArgument, {"batch = 0 must be >= 1"});
}

// ---------------------------------------------------------------------------------------------
// Program validation

TEST(CudaProgramValidation, MalformedProgramsNameTheProblem) {
  EXPECT_NO_THROW(validate_cuda_program(elementwise_program()));
  CudaProgram p = elementwise_program();
  p.thunks[0].launch.kernel = "nope.nope";
  expect_error([&] { validate_cuda_program(p); }, ErrorCode::kNotFound, {"thunk 0", "no kernel 'nope.nope'"});
  p = elementwise_program();
  p.thunks[1].launch.args[0] = memref(2, 4, {3}, {1});  // elements 4..6 of a 6-element buffer
  expect_error([&] { validate_cuda_program(p); }, ErrorCode::kOutOfRange,
               {"thunk 1 (scale_kernel.scale_kernel) argument 0", "reaches element 6 of a buffer of 6 elements"});
  p = elementwise_program();
  p.thunks[0].launch.block = {2048, 1, 1};
  expect_error([&] { validate_cuda_program(p); }, ErrorCode::kInvalidArgument, {"block (2048, 1, 1)"});
  p = elementwise_program();
  p.buffers[1].data.resize(8);
  expect_error([&] { validate_cuda_program(p); }, ErrorCode::kInvalidArgument,
               {"buffer 1: a constant of 24 bytes has 8 bytes of data"});
  p = elementwise_program();
  p.buffers[0].shape = {3, 2};
  expect_error([&] { validate_cuda_program(p); }, ErrorCode::kShapeMismatch, {"input 0 is (2, 3) f32"});
  p = elementwise_program();
  p.buffers[3].kind = CudaBuffer::Kind::kTemporary;
  expect_error([&] { validate_cuda_program(p); }, ErrorCode::kInvalidArgument, {"output 0 has 0 buffers"});
  // Donated pairs: in range, of one type (input (2, 3) and output (3) are not), each index once.
  p = elementwise_program();
  p.donated = {{1, 0}};
  expect_error([&] { validate_cuda_program(p); }, ErrorCode::kOutOfRange, {"pair (input 1, output 0)"});
  p.donated = {{0, 0}};
  expect_error([&] { validate_cuda_program(p); }, ErrorCode::kShapeMismatch, {"input 0 and output 0 differ in type"});
  p.output_types[0] = p.input_types[0];
  p.buffers[3].shape = {2, 3};
  p.buffers[3].bytes = 24;
  p.donated = {{0, 0}, {0, 0}};
  expect_error([&] { validate_cuda_program(p); }, ErrorCode::kInvalidArgument, {"appears in two pairs"});
}

// ---------------------------------------------------------------------------------------------
// Runs on the fake driver

TEST(CudaExecutableFake, LaunchRecordsAndResults) {
  FakeCudaScope fake;
  register_elementwise_kernels(fake.state());
  auto dev = CudaDevice::open(fake.driver(), 0);
  auto exe = CudaExecutable::create(elementwise_program(), *dev);
  EXPECT_EQ(exe->kernel_archs(), (std::vector<std::string>{"sm_90", "sm_90"}));
  ASSERT_EQ(fake.state().loaded_ptx.size(), 2u);
  EXPECT_EQ(fake.state().loaded_ptx[0], fake_ptx("sm_90", "add_kernel", kAddWords));
  EXPECT_EQ(fake.state().live_modules, 2);

  const Array x = to_device(*dev, Array::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  const Array out = Array::empty({3}, DType::kF32, &dev->device());
  const std::vector<Array> inputs = {x}, outputs = {out};
  exe->run(inputs, outputs)->wait();

  const auto& launches = fake.state().launches;
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].kernel, "add_kernel");
  EXPECT_EQ(launches[0].grid, (std::array<unsigned, 3>{2, 1, 1}));
  EXPECT_EQ(launches[0].block, (std::array<unsigned, 3>{32, 1, 1}));
  EXPECT_EQ(launches[1].kernel, "scale_kernel");
  EXPECT_EQ(launches[1].grid, (std::array<unsigned, 3>{1, 1, 1}));
  EXPECT_EQ(launches[1].block, (std::array<unsigned, 3>{64, 2, 1}));
  // The constant and the temporary live where the executable put them; read their addresses from
  // the words and check everything else by hand.
  ASSERT_EQ(launches[0].params.size(), static_cast<size_t>(kAddWords));
  const uint64_t c = launches[0].params[7], t = launches[0].params[14];
  EXPECT_NE(c, t);
  EXPECT_EQ(launches[0].params,
            (std::vector<uint64_t>{address(x), address(x), 0, 2, 3, 3, 1, c, c, 0, 2, 3, 3, 1, t, t, 0, 2, 3, 3, 1}));
  EXPECT_EQ(launches[1].params, (std::vector<uint64_t>{t, t, 3, 3, 1, 7, address(out), address(out), 0, 3, 1}));
  EXPECT_EQ(std::vector<float>(at<float>(c), at<float>(c) + 6), kConstant);  // uploaded once, before the run
  // out = (x[1, :] + c[1, :]) * 7
  EXPECT_EQ(to_host(*dev, out).to_vector<float>(), (std::vector<float>{44 * 7, 55 * 7, 66 * 7}));

  // A second run with other data reuses the modules and the constant.
  const Array x2 = to_device(*dev, Array::from_vector<float>({0, 0, 0, -1, -2, -3}, {2, 3}));
  const std::vector<Array> inputs2 = {x2};
  const std::vector<Array> out2 = exe->run(inputs2);
  ASSERT_EQ(out2.size(), 1u);
  EXPECT_EQ(to_host(*dev, out2[0]).to_vector<float>(), (std::vector<float>{39 * 7, 48 * 7, 57 * 7}));
  EXPECT_EQ(fake.state().launches[2].params[7], c);
  EXPECT_EQ(fake.state().loaded_ptx.size(), 2u);
}

TEST(CudaExecutableFake, TemporariesAreReleasedAndModulesUnloaded) {
  FakeCudaScope fake;
  register_elementwise_kernels(fake.state());
  auto dev = CudaDevice::open(fake.driver(), 0);
  const Array x = to_device(*dev, Array::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  const Array out = Array::empty({3}, DType::kF32, &dev->device());
  const int64_t before = dev->allocator().stats().bytes_in_use;
  {
    auto exe = CudaExecutable::create(elementwise_program(), *dev);
    const int64_t with_constants = dev->allocator().stats().bytes_in_use;
    EXPECT_EQ(with_constants - before, 24);  // the constant
    const std::vector<Array> inputs = {x}, outputs = {out};
    exe->run(inputs, outputs)->wait();
    EXPECT_EQ(dev->allocator().stats().bytes_in_use, with_constants);            // the temporary went back
    EXPECT_EQ(dev->allocator().stats().peak_bytes_in_use - with_constants, 24);  // tmp
  }
  EXPECT_EQ(dev->allocator().stats().bytes_in_use, before);
  EXPECT_EQ(fake.state().live_modules, 0);
  EXPECT_TRUE(fake.state().calls_without_context.empty());
}

TEST(CudaExecutableFake, PtxChosenPerComputeCapability) {
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  fake.state().compute_major = 8;
  fake.state().compute_minor = 6;
  {
    auto exe = CudaExecutable::create(elementwise_program(), *dev);
    EXPECT_EQ(exe->kernel_archs(), (std::vector<std::string>{"sm_80", "sm_80"}));
    ASSERT_EQ(fake.state().loaded_ptx.size(), 2u);
    EXPECT_NE(fake.state().loaded_ptx[1].find(".target sm_80"), std::string::npos);
  }
  fake.state().compute_major = 7;
  fake.state().compute_minor = 5;
  const int64_t before = dev->allocator().stats().bytes_in_use;
  expect_error([&] { CudaExecutable::create(elementwise_program(), *dev); }, ErrorCode::kNotFound,
               {"kernel 'add_kernel.add_kernel' has PTX for [sm_80, sm_90]", "7.5 (sm_75)"});
  EXPECT_EQ(fake.state().loaded_ptx.size(), 2u);  // nothing more was loaded
  EXPECT_EQ(fake.state().live_modules, 0);
  EXPECT_EQ(dev->allocator().stats().bytes_in_use, before);
}

TEST(CudaExecutableFake, MissingEntryOrBadPtxNamesTheKernel) {
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  CudaProgram p = elementwise_program();
  p.kernels[1].ptx["sm_90"] = fake_ptx("sm_90", "other_name", kScaleWords);
  expect_error([&] { CudaExecutable::create(p, *dev); }, ErrorCode::kFailedPrecondition,
               {"cuModuleGetFunction failed while loading kernel 'scale_kernel.scale_kernel' (sm_90 PTX) on cuda:0 "
                "(entry 'scale_kernel')",
                "CUDA_ERROR_NOT_FOUND"});
  EXPECT_EQ(fake.state().live_modules, 0);  // the first kernel's module was unloaded again
  p = elementwise_program();
  p.kernels[0].ptx["sm_90"] = "not ptx";
  expect_error([&] { CudaExecutable::create(p, *dev); }, ErrorCode::kFailedPrecondition,
               {"cuModuleLoadDataEx failed while loading kernel 'add_kernel.add_kernel'", "CUDA_ERROR_INVALID_PTX",
                "the driver's JIT log: fake ptxas: no .entry in the module", "update the NVIDIA driver"});
}

TEST(CudaExecutableFake, ADriverTooOldForThePtxIsOneClearError) {
  FakeCudaScope fake;
  fake.state().driver_version = 12040;  // CUDA 12.4
  auto dev = CudaDevice::open(fake.driver(), 0);
  CudaProgram p = elementwise_program();
  EXPECT_NO_THROW(CudaExecutable::create(p, *dev));  // the fake PTX is ISA 8.0: CUDA 12.0 is enough
  for (auto& [arch, ptx] : p.kernels[0].ptx) ptx.replace(ptx.find(".version 8.0"), 12, ".version 9.0");
  expect_error([&] { CudaExecutable::create(p, *dev); }, ErrorCode::kFailedPrecondition,
               {"loading kernel 'add_kernel.add_kernel'", "PTX is ISA 9.0", "needs a driver for CUDA 13.0",
                "this driver supports CUDA 12.4", "driver 580"});
  EXPECT_EQ(fake.state().live_modules, 0);
}

TEST(CudaExecutableFake, WrongArgumentsLaunchNothing) {
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  auto exe = CudaExecutable::create(elementwise_program(), *dev);
  Device& d = dev->device();
  const Array x = Array::empty({2, 3}, DType::kF32, &d), out = Array::empty({3}, DType::kF32, &d);
  auto run = [&](std::vector<Array> in, std::vector<Array> o) { exe->run(in, o); };
  expect_error([&] { run({}, {out}); }, ErrorCode::kInvalidArgument, {"0 inputs given, the program takes 1"});
  expect_error([&] { run({x, x}, {out}); }, ErrorCode::kInvalidArgument, {"2 inputs given"});
  expect_error([&] { run({x}, {}); }, ErrorCode::kInvalidArgument, {"0 outputs given, the program takes 1"});
  expect_error([&] { run({Array::empty({3, 2}, DType::kF32, &d)}, {out}); }, ErrorCode::kShapeMismatch,
               {"input 0 has shape (3, 2), the program expects (2, 3)"});
  expect_error([&] { run({Array::empty({2, 3}, DType::kF64, &d)}, {out}); }, ErrorCode::kDTypeMismatch,
               {"input 0 has dtype f64, the program expects f32"});
  expect_error([&] { run({x}, {Array::empty({4}, DType::kF32, &d)}); }, ErrorCode::kShapeMismatch,
               {"output 0 has shape (4,)"});
  expect_error([&] { run({Array::empty({2, 3}, DType::kF32)}, {out}); }, ErrorCode::kInvalidArgument,
               {"input 0 is on cpu:0, not an array on cuda:0"});
  expect_error([&] { run({Array()}, {out}); }, ErrorCode::kInvalidArgument, {"input 0 is invalid"});
  const Array alias = Array::from_buffer({3}, DType::kF32, x.buffer());
  expect_error([&] { run({x}, {alias}); }, ErrorCode::kInvalidArgument, {"output 0 shares its buffer with an input"});
  EXPECT_TRUE(fake.state().launches.empty());
}

// ---------------------------------------------------------------------------------------------
// GEMM thunks through a host BLAS on the fake stream

/// Reference column-major ?gemm (BLAS sgemm.f with alpha = 1, beta = 0), enqueued on the fake
/// stream so it runs after the work queued before it. f16/bf16 as cublasGemmEx with
/// CUBLAS_COMPUTE_32F: products summed in f32, rounded to the dtype once.
class HostBlas final : public CudaBlas {
 public:
  void gemm(const CudaBlasGemm& c, const CudaStream& stream) override {
    calls.push_back(c);
    testing::fake_cuda::enqueue(stream.handle(), [c] {
      if (c.dtype == DType::kF32)
        run<float>(c);
      else if (c.dtype == DType::kF16)
        run<f16>(c);
      else if (c.dtype == DType::kBF16)
        run<bf16>(c);
      else
        run<double>(c);
    });
  }
  std::vector<CudaBlasGemm> calls;

 private:
  template <typename T>
  static void run(const CudaBlasGemm& c) {
    for (int64_t p = 0; p < c.batch; ++p) run_one<T>(c, p);
  }

  /// Product `p` of a strided-batched call, then the epilogue as cuBLASLt defines it (cublasLt.h:
  /// the bias, one element per row of the column-major D, added to every column; then max(x, 0)).
  template <typename T>
  static void run_one(const CudaBlasGemm& c, int64_t p) {
    const T* a = at<T>(c.a) + p * c.stride_a;
    const T* b = at<T>(c.b) + p * c.stride_b;
    T* out = at<T>(c.c) + p * c.stride_c;
    using Acc = typename compute_type<T>::type;
    for (int64_t j = 0; j < c.n; ++j) {
      for (int64_t i = 0; i < c.m; ++i) {
        Acc sum = 0;
        for (int64_t l = 0; l < c.k; ++l) {
          const Acc av = c.trans_a ? a[l + i * c.lda] : a[i + l * c.lda];
          const Acc bv = c.trans_b ? b[j + l * c.ldb] : b[l + j * c.ldb];
          sum += av * bv;
        }
        if (c.epilogue != CudaGemm::Epilogue::kNone) sum += at<T>(c.bias)[i];
        if (c.epilogue == CudaGemm::Epilogue::kBiasRelu) sum = std::max(sum, Acc{0});
        out[i + j * c.ldc] = T(sum);
      }
    }
  }
};

/// Row-major C (m x n) = op(A) op(B) on the host, the oracle.
std::vector<double> matmul(const std::vector<double>& a, const std::vector<double>& b, int64_t m, int64_t n, int64_t k,
                           bool ta, bool tb) {
  std::vector<double> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t l = 0; l < k; ++l) {
        s += (ta ? a[static_cast<size_t>(l * m + i)] : a[static_cast<size_t>(i * k + l)]) *
             (tb ? b[static_cast<size_t>(j * k + l)] : b[static_cast<size_t>(l * n + j)]);
      }
      c[static_cast<size_t>(i * n + j)] = s;
    }
  }
  return c;
}

std::vector<double> iota(int64_t n, double scale, double shift) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = scale * static_cast<double>(i) + shift;
  return v;
}

std::vector<double> slice(const std::vector<double>& v, int64_t offset, int64_t n) {
  return {v.begin() + offset, v.begin() + offset + n};
}

TEST(CudaExecutableFake, GemmProgramMatchesHostMatmul) {
  // Input 0 "packed" f32 (40): A stored (k, m) = (3, 2) at element 4 (trans_a), B stored (k, n) =
  // (3, 4) at element 12. Input 1 W f32 (5, 4), used transposed. Constant bias (2, 4).
  //   T (2, 4)  = A^T B                     gemm 1 (temporary T)
  //   T2 (2, 4) = bias (a kernel: T2 = T + bias)
  //   C (2, 5)  = T2 W^T                     gemm 2, into output 0 (15) at element 5
  const int64_t m = 2, n = 4, k = 3, n2 = 5;
  CudaProgram p;
  p.kernels = {image("add_kernel.add_kernel", kAddWords, {"sm_90"})};
  p.buffers = {buffer(CudaBuffer::Kind::kInput, 0, {40}),       buffer(CudaBuffer::Kind::kInput, 1, {n2, n}),
               buffer(CudaBuffer::Kind::kTemporary, 0, {m, n}), buffer(CudaBuffer::Kind::kConstant, 0, {m, n}),
               buffer(CudaBuffer::Kind::kTemporary, 0, {m, n}), buffer(CudaBuffer::Kind::kOutput, 0, {15})};
  const std::vector<double> bias = iota(m * n, -0.5, 1.0);
  const std::vector<float> bias_f(bias.begin(), bias.end());
  p.buffers[3].data.resize(bias_f.size() * 4);
  std::memcpy(p.buffers[3].data.data(), bias_f.data(), p.buffers[3].data.size());
  CudaThunk g1, g2;
  g1.kind = g2.kind = CudaThunk::Kind::kGemm;
  g1.gemm = gemm(DType::kF32, m, n, k, true, false, memref(0, 4, {k, m}, {m, 1}), memref(0, 12, {k, n}, {n, 1}),
                 memref(2, 0, {m, n}, {n, 1}));
  g2.gemm = gemm(DType::kF32, m, n2, n, false, true, memref(4, 0, {m, n}, {n, 1}), memref(1, 0, {n2, n}, {n, 1}),
                 memref(5, 5, {m, n2}, {n2, 1}));
  p.thunks = {g1,
              launch_thunk("add_kernel.add_kernel", {1, 1, 1}, {32, 1, 1},
                           {memref(2, 0, {m, n}, {n, 1}), memref(3, 0, {m, n}, {n, 1}), memref(4, 0, {m, n}, {n, 1})}),
              g2};
  p.input_types = {{{40}, DType::kF32}, {{n2, n}, DType::kF32}};
  p.output_types = {{{15}, DType::kF32}};

  FakeCudaScope fake;
  register_elementwise_kernels(fake.state());
  auto dev = CudaDevice::open(fake.driver(), 0);
  auto blas = std::make_shared<HostBlas>();
  auto exe = CudaExecutable::create(p, *dev, blas);
  const std::vector<double> packed = iota(40, 0.25, -3.0), w = iota(n2 * n, -0.125, 2.0);
  const Array in0 = to_device(*dev, Array::from_doubles(packed, {40}, DType::kF32));
  const Array in1 = to_device(*dev, Array::from_doubles(w, {n2, n}, DType::kF32));
  const Array out = to_device(*dev, Array::full({15}, 99.0, DType::kF32));
  const std::vector<Array> inputs = {in0, in1}, outputs = {out};
  exe->run(inputs, outputs)->wait();

  std::vector<double> t = matmul(slice(packed, 4, k * m), slice(packed, 12, k * n), m, n, k, true, false);
  for (size_t i = 0; i < t.size(); ++i) t[i] += bias[i];
  const std::vector<double> c = matmul(t, w, m, n2, n, false, true);
  const std::vector<float> got = to_host(*dev, out).to_vector<float>();
  for (int64_t i = 0; i < 15; ++i) {
    const double expected = i < 5 ? 99.0 : c[static_cast<size_t>(i - 5)];  // elements 0..4 untouched
    EXPECT_NEAR(got[static_cast<size_t>(i)], expected, 1e-4 * (1 + std::abs(expected))) << "element " << i;
  }
  ASSERT_EQ(blas->calls.size(), 2u);
  EXPECT_EQ(blas->calls[0].b, address(in0) + 4 * 4);  // the view offsets are in the pointers
  EXPECT_EQ(blas->calls[0].a, address(in0) + 12 * 4);
  EXPECT_EQ(blas->calls[1].c, address(out) + 5 * 4);
  EXPECT_EQ(fake.state().launches.size(), 1u);
}

TEST(CudaExecutableFake, BatchedGemmIsOneStridedBatchedCall) {
  // Input 0 A (3, 2, 4) used transposed per batch element (op(A[i]) = A[i]^T (4, 2)... as (k, m)
  // storage: m = 4, k = 2), input 1 B (3, 2, 5), output C (3, 4, 5) = A[i]^T B[i].
  const int64_t batch = 3, m = 4, n = 5, k = 2;
  CudaProgram p;
  p.buffers = {buffer(CudaBuffer::Kind::kInput, 0, {batch, k, m}), buffer(CudaBuffer::Kind::kInput, 1, {batch, k, n}),
               buffer(CudaBuffer::Kind::kOutput, 0, {batch, m, n})};
  CudaThunk t;
  t.kind = CudaThunk::Kind::kGemm;
  t.gemm = gemm(DType::kF32, m, n, k, true, false, memref(0, 0, {batch, k, m}, {k * m, m, 1}),
                memref(1, 0, {batch, k, n}, {k * n, n, 1}), memref(2, 0, {batch, m, n}, {m * n, n, 1}));
  t.gemm.batch = batch;
  t.gemm.batched = true;
  p.thunks = {t};
  p.input_types = {{{batch, k, m}, DType::kF32}, {{batch, k, n}, DType::kF32}};
  p.output_types = {{{batch, m, n}, DType::kF32}};
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  auto blas = std::make_shared<HostBlas>();
  auto exe = CudaExecutable::create(p, *dev, blas);
  const std::vector<double> a = iota(batch * k * m, 0.5, -2.0), b = iota(batch * k * n, -0.25, 1.5);
  const Array in0 = to_device(*dev, Array::from_doubles(a, {batch, k, m}, DType::kF32));
  const Array in1 = to_device(*dev, Array::from_doubles(b, {batch, k, n}, DType::kF32));
  const Array out = to_device(*dev, Array::zeros({batch, m, n}, DType::kF32));
  const std::vector<Array> inputs = {in0, in1}, outputs = {out};
  exe->run(inputs, outputs)->wait();
  const std::vector<float> got = to_host(*dev, out).to_vector<float>();
  for (int64_t i = 0; i < batch; ++i) {
    const std::vector<double> c = matmul(slice(a, i * k * m, k * m), slice(b, i * k * n, k * n), m, n, k, true, false);
    for (int64_t j = 0; j < m * n; ++j) {
      EXPECT_NEAR(got[static_cast<size_t>(i * m * n + j)], c[static_cast<size_t>(j)],
                  1e-4 * (1 + std::abs(c[static_cast<size_t>(j)])))
          << "batch " << i << " element " << j;
    }
  }
  ASSERT_EQ(blas->calls.size(), 1u);  // one cublasSgemmStridedBatched
  EXPECT_EQ(blas->calls[0].batch, batch);
  EXPECT_EQ(blas->calls[0].stride_c, m * n);
  EXPECT_EQ(blas->calls[0].c, address(out));
}

TEST(CudaExecutableFake, F64GemmAndBadGemmOperands) {
  const int64_t m = 3, n = 2, k = 4;
  CudaProgram p;
  p.buffers = {buffer(CudaBuffer::Kind::kInput, 0, {m, k}, DType::kF64),
               buffer(CudaBuffer::Kind::kInput, 1, {n, k}, DType::kF64),
               buffer(CudaBuffer::Kind::kOutput, 0, {m, n}, DType::kF64)};
  CudaThunk g;
  g.kind = CudaThunk::Kind::kGemm;
  g.gemm = gemm(DType::kF64, m, n, k, false, true, memref(0, 0, {m, k}, {k, 1}), memref(1, 0, {n, k}, {k, 1}),
                memref(2, 0, {m, n}, {n, 1}));
  p.thunks = {g};
  p.input_types = {{{m, k}, DType::kF64}, {{n, k}, DType::kF64}};
  p.output_types = {{{m, n}, DType::kF64}};

  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  auto exe = CudaExecutable::create(p, *dev, std::make_shared<HostBlas>());
  const std::vector<double> a = iota(m * k, 0.5, -1.0), b = iota(n * k, -0.25, 3.0);
  const Array da = to_device(*dev, Array::from_vector(a, {m, k})), db = to_device(*dev, Array::from_vector(b, {n, k}));
  const std::vector<Array> inputs = {da, db};
  const std::vector<Array> out = exe->run(inputs);
  EXPECT_EQ(to_host(*dev, out[0]).to_vector<double>(), matmul(a, b, m, n, k, false, true));

  CudaProgram bad = p;
  bad.thunks[0].gemm.b = memref(1, 0, {k, n}, {n, 1});  // B not stored (n, k) although trans_b
  expect_error([&] { CudaExecutable::create(bad, *dev, std::make_shared<HostBlas>()); }, ErrorCode::kInvalidArgument,
               {"thunk 0 (GEMM) operand B", "not the contiguous (2, 4) matrix"});
  bad = p;
  bad.buffers[1].dtype = DType::kF32;
  bad.buffers[1].bytes = n * k * 4;
  bad.input_types[1].second = DType::kF32;
  expect_error([&] { CudaExecutable::create(bad, *dev, std::make_shared<HostBlas>()); }, ErrorCode::kDTypeMismatch,
               {"operand B: buffer 1 has dtype f32 but the GEMM is f64"});
}

/// x (m, k) . W (k, n) + b (n), then relu when `relu`: a one-GEMM program with an epilogue, the
/// output a view at element 3 of a larger output buffer.
CudaProgram dense_program(int64_t m, int64_t n, int64_t k, CudaGemm::Epilogue epilogue) {
  CudaProgram p;
  p.buffers = {buffer(CudaBuffer::Kind::kInput, 0, {m, k}), buffer(CudaBuffer::Kind::kInput, 1, {k, n}),
               buffer(CudaBuffer::Kind::kInput, 2, {n}), buffer(CudaBuffer::Kind::kOutput, 0, {m * n + 3})};
  CudaThunk t;
  t.kind = CudaThunk::Kind::kGemm;
  t.gemm = gemm(DType::kF32, m, n, k, false, false, memref(0, 0, {m, k}, {k, 1}), memref(1, 0, {k, n}, {n, 1}),
                memref(3, 3, {m, n}, {n, 1}));
  t.gemm.epilogue = epilogue;
  t.gemm.bias = memref(2, 0, {n}, {1});
  p.thunks = {t};
  p.input_types = {{{m, k}, DType::kF32}, {{k, n}, DType::kF32}, {{n}, DType::kF32}};
  p.output_types = {{{m * n + 3}, DType::kF32}};
  return p;
}

TEST(CudaColumnMajorGemm, TheEpiloguesBiasIsAPointerAlongTheColumnMajorRows) {
  const std::vector<uint64_t> addr = {0x1000, 0x2000, 0x3000, 0x4000};
  CudaGemm g = dense_program(4, 5, 3, CudaGemm::Epilogue::kBiasRelu).thunks[0].gemm;
  g.bias.offset = 2;
  const CudaBlasGemm c = column_major_gemm(g, addr);
  EXPECT_EQ(c.epilogue, CudaGemm::Epilogue::kBiasRelu);
  EXPECT_EQ(c.bias, 0x3000u + 2 * 4);
  EXPECT_EQ(c.m, 5);  // the bias's length: the rows of the column-major C^T
  EXPECT_EQ(column_major_gemm(dense_program(4, 5, 3, CudaGemm::Epilogue::kNone).thunks[0].gemm, addr).bias, 0u);
}

TEST(CudaColumnMajorGemm, AlignmentsAsCublasLtPreferencesTakeThem) {
  EXPECT_EQ(blas_alignment_bytes(0x7f0000001000), 256u);
  EXPECT_EQ(blas_alignment_bytes(0x7f0000001000 + 4 * 3), 4u);
  EXPECT_EQ(blas_alignment_bytes(0x7f0000001000 + 4 * 4), 16u);
  EXPECT_EQ(blas_alignment_bytes(0x7f0000001000 + 128), 128u);
  EXPECT_EQ(blas_alignment_bytes(0x7f0000001000 + 8 * 3), 8u);
  EXPECT_EQ(blas_alignment_bytes(1), 1u);
  EXPECT_EQ(blas_alignment_bytes(0), 256u);
}

TEST(CudaExecutableFake, BiasAndBiasReluEpiloguesMatchTheHostDenseLayer) {
  const int64_t m = 4, n = 5, k = 3;
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  const std::vector<double> x = iota(m * k, 0.5, -2.5), w = iota(k * n, -0.25, 1.0), b = iota(n, 0.75, -1.5);
  const Array dx = to_device(*dev, Array::from_doubles(x, {m, k}, DType::kF32));
  const Array dw = to_device(*dev, Array::from_doubles(w, {k, n}, DType::kF32));
  const Array db = to_device(*dev, Array::from_doubles(b, {n}, DType::kF32));
  const std::vector<double> product = matmul(x, w, m, n, k, false, false);
  for (const CudaGemm::Epilogue e : {CudaGemm::Epilogue::kBias, CudaGemm::Epilogue::kBiasRelu}) {
    SCOPED_TRACE(epilogue_name(e));
    auto blas = std::make_shared<HostBlas>();
    auto exe = CudaExecutable::create(dense_program(m, n, k, e), *dev, blas);
    const Array out = to_device(*dev, Array::full({m * n + 3}, 7.0, DType::kF32));
    const std::vector<Array> inputs = {dx, dw, db}, outputs = {out};
    exe->run(inputs, outputs)->wait();
    const std::vector<float> got = to_host(*dev, out).to_vector<float>();
    int64_t clamped = 0;
    for (int64_t i = 0; i < m * n; ++i) {
      double want = product[static_cast<size_t>(i)] + b[static_cast<size_t>(i % n)];
      if (e == CudaGemm::Epilogue::kBiasRelu && want < 0) {
        want = 0;
        ++clamped;
      }
      EXPECT_NEAR(got[static_cast<size_t>(i + 3)], want, 1e-5 * (1 + std::abs(want))) << "element " << i;
    }
    EXPECT_EQ(got[2], 7.0f);  // before the view: untouched
    if (e == CudaGemm::Epilogue::kBiasRelu) {
      EXPECT_GT(clamped, 0);  // the data exercises the relu
    }
    ASSERT_EQ(blas->calls.size(), 1u);
    EXPECT_EQ(blas->calls[0].bias, address(db));
  }
}

TEST(CudaProgramValidation, AnEpiloguesBiasIsNContiguousF32) {
  const int64_t m = 4, n = 5, k = 3;
  EXPECT_NO_THROW(validate_cuda_program(dense_program(m, n, k, CudaGemm::Epilogue::kBias)));
  CudaProgram p = dense_program(m, n, k, CudaGemm::Epilogue::kBias);
  p.thunks[0].gemm.bias = memref(2, 0, {n - 1}, {1});
  expect_error([&] { validate_cuda_program(p); }, ErrorCode::kInvalidArgument,
               {"thunk 0 (GEMM) (epilogue bias)", "is not 5 contiguous elements (n)"});
  p = dense_program(m, n, k, CudaGemm::Epilogue::kBiasRelu);
  p.thunks[0].gemm.bias = memref(2, 1, {n}, {1});  // elements 1..5 of 5
  expect_error([&] { validate_cuda_program(p); }, ErrorCode::kOutOfRange, {"bias", "reaches element 5"});
  p = dense_program(m, n, k, CudaGemm::Epilogue::kBias);
  p.thunks[0].gemm.bias = memref(9, 0, {n}, {1});
  expect_error([&] { validate_cuda_program(p); }, ErrorCode::kOutOfRange, {"bias: buffer index 9"});
  p = dense_program(m, n, k, CudaGemm::Epilogue::kBias);
  p.buffers[2].dtype = DType::kI32;
  p.input_types[2].second = DType::kI32;
  expect_error([&] { validate_cuda_program(p); }, ErrorCode::kDTypeMismatch,
               {"the bias's buffer 2 has dtype i32 but the GEMM is f32"});
  p = dense_program(m, n, k, CudaGemm::Epilogue::kBias);
  p.buffers[2] = buffer(CudaBuffer::Kind::kInput, 2, {n + 2});
  p.input_types[2].first = {n + 2};
  p.thunks[0].gemm.bias = memref(2, 2, {n}, {1});  // 8 bytes into a buffer: cuBLASLt wants 16
  expect_error([&] { validate_cuda_program(p); }, ErrorCode::kInvalidArgument,
               {"the bias starts at element 2, not a multiple of 4 (16 bytes)"});
  p.thunks[0].gemm.bias = memref(2, 0, {n}, {1});
  EXPECT_NO_THROW(validate_cuda_program(p));
  p = dense_program(m, n, k, CudaGemm::Epilogue::kBias);
  p.thunks[0].gemm.batched = true;
  expect_error([&] { validate_cuda_program(p); }, ErrorCode::kInvalidArgument,
               {"epilogues run on f32 GEMMs without batch, not a f32 batched GEMM"});
}

/// `dense_program` (no epilogue) with every buffer, type and GEMM in `dtype`.
CudaProgram half_dense_program(int64_t m, int64_t n, int64_t k, DType dtype) {
  CudaProgram p = dense_program(m, n, k, CudaGemm::Epilogue::kNone);
  for (CudaBuffer& b : p.buffers) {
    b.dtype = dtype;
    b.bytes = num_elements(b.shape) * dtype_size(dtype);
  }
  for (auto& t : p.input_types) t.second = dtype;
  for (auto& t : p.output_types) t.second = dtype;
  p.thunks[0].gemm.dtype = dtype;
  return p;
}

TEST(CudaProgramValidation, HalfGemmsAreValidButNotWithEpilogues) {
  for (const DType dt : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dt));
    CudaProgram p = half_dense_program(4, 5, 3, dt);
    EXPECT_NO_THROW(validate_cuda_program(p));
    p.thunks[0].gemm.epilogue = CudaGemm::Epilogue::kBias;  // cuBLASLt epilogues are folded on f32 only
    expect_error([&] { validate_cuda_program(p); }, ErrorCode::kInvalidArgument,
                 {fmt::format("epilogues run on f32 GEMMs without batch, not a {} GEMM", dtype_name(dt))});
  }
  CudaProgram p = half_dense_program(4, 5, 3, DType::kI32);
  expect_error([&] { validate_cuda_program(p); }, ErrorCode::kInvalidArgument,
               {"dtype i32 is not f32, f64, f16 or bf16"});
}

// ---------------------------------------------------------------------------------------------
// cuBLAS through dlopen

TEST(CublasLibrary, MissingOrWrongLibraryIsUnavailableWithReason) {
  auto missing = CublasLibrary::load("libingot_no_such_cublas.so.13");
  EXPECT_FALSE(missing->available());
  EXPECT_NE(missing->unavailable_reason().find("libingot_no_such_cublas.so.13 could not be loaded"), std::string::npos)
      << missing->unavailable_reason();
  auto wrong = CublasLibrary::load("libm.so.6");
  EXPECT_FALSE(wrong->available());
  EXPECT_NE(wrong->unavailable_reason().find("libm.so.6 is not a usable cuBLAS: it lacks cublasCreate_v2"),
            std::string::npos)
      << wrong->unavailable_reason();
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  expect_error([&] { missing->create(*dev); }, ErrorCode::kFailedPrecondition,
               {"cannot run GEMMs on cuda:0", "could not be loaded", "LD_LIBRARY_PATH"});
}

TEST(CublasLibrary, AMissingOrWrongCublasLtIsUnavailableWithReason) {
  const std::string path = "/usr/local/cuda/lib64/libcublas.so.13";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is not installed on this machine";
  auto missing = CublasLibrary::load(path, "libingot_no_such_cublasLt.so.13");
  EXPECT_FALSE(missing->available());
  EXPECT_NE(missing->unavailable_reason().find("cuBLASLt library libingot_no_such_cublasLt.so.13 could not be loaded"),
            std::string::npos)
      << missing->unavailable_reason();
  auto wrong = CublasLibrary::load(path, "libm.so.6");
  EXPECT_FALSE(wrong->available());
  EXPECT_NE(wrong->unavailable_reason().find("libm.so.6 is not a usable cuBLASLt: it lacks cublasLtCreate"),
            std::string::npos)
      << wrong->unavailable_reason();
}

#if defined(INGOT_FAKE_CUBLAS)
/// cuBLAS's CudaBlas (CublasLibrary::create) on the fake driver, with the fake cuBLAS + cuBLASLt
/// module (fake_cublas.cpp) loaded for both libraries: the real call sequences -- plain,
/// strided-batched, and cuBLASLt matmuls with descriptors, layouts, heuristic and epilogue --
/// against host results. The fake checks the layouts agree with the transposes and that the
/// heuristic's algorithm is used; it runs each call when made (the test waits for its uploads).
class FakeCublas : public ::testing::Test {
 protected:
  void SetUp() override {
    library_ = CublasLibrary::load(INGOT_FAKE_CUBLAS, INGOT_FAKE_CUBLAS);
    ASSERT_TRUE(library_->available()) << library_->unavailable_reason();
    module_ = dlopen(INGOT_FAKE_CUBLAS, RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(module_, nullptr);
    log_ = reinterpret_cast<const FakeCublasLog* (*)()>(dlsym(module_, "ingot_fake_cublas_log"))();
    reinterpret_cast<void (*)()>(dlsym(module_, "ingot_fake_cublas_reset_log"))();
  }
  void TearDown() override {
    if (module_ != nullptr) dlclose(module_);  // the reference taken by RTLD_NOLOAD
  }

  std::shared_ptr<CublasLibrary> library_;
  void* module_ = nullptr;
  const FakeCublasLog* log_ = nullptr;
};

TEST_F(FakeCublas, EpilogueGemmsAreCublasLtMatmulsWithTheHeuristicsAlgorithm) {
  const int64_t m = 6, n = 5, k = 4;
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  std::shared_ptr<CudaBlas> blas = library_->create(*dev);
  const std::vector<double> x = iota(m * k, 0.5, -3.0), w = iota(k * n, -0.25, 1.0), b = iota(n, 0.75, -1.5);
  const Array dx = to_device(*dev, Array::from_doubles(x, {m, k}, DType::kF32));
  const Array dw = to_device(*dev, Array::from_doubles(w, {k, n}, DType::kF32));
  const Array db = to_device(*dev, Array::from_doubles(b, {n}, DType::kF32));
  const std::vector<double> product = matmul(x, w, m, n, k, false, false);
  int64_t runs = 0;
  for (const CudaGemm::Epilogue e : {CudaGemm::Epilogue::kBias, CudaGemm::Epilogue::kBiasRelu}) {
    SCOPED_TRACE(epilogue_name(e));
    auto exe = CudaExecutable::create(dense_program(m, n, k, e), *dev, blas);
    const Array out = to_device(*dev, Array::full({m * n + 3}, 7.0, DType::kF32));
    const std::vector<Array> inputs = {dx, dw, db}, outputs = {out};
    exe->run(inputs, outputs)->wait();
    ++runs;
    const std::vector<float> got = to_host(*dev, out).to_vector<float>();
    int64_t clamped = 0;
    for (int64_t i = 0; i < m * n; ++i) {
      double want = product[static_cast<size_t>(i)] + b[static_cast<size_t>(i % n)];
      if (e == CudaGemm::Epilogue::kBiasRelu && want < 0) {
        want = 0;
        ++clamped;
      }
      EXPECT_NEAR(got[static_cast<size_t>(i + 3)], want, 1e-5 * (1 + std::abs(want))) << "element " << i;
    }
    EXPECT_EQ(got[2], 7.0f);
    if (e == CudaGemm::Epilogue::kBiasRelu) {
      EXPECT_GT(clamped, 0);
    }
    EXPECT_EQ(log_->lt_matmul_calls, runs);
    EXPECT_EQ(log_->gemm_calls, 0);
    EXPECT_EQ(log_->last_epilogue, static_cast<uint32_t>(e == CudaGemm::Epilogue::kBias ? 4 : 6));  // BIAS, RELU_BIAS
    // The column-major call's A is the row-major B (w), its B is x; C = D is 3 elements into `out`.
    EXPECT_EQ(log_->last_alignment[0], blas_alignment_bytes(address(dw)));
    EXPECT_EQ(log_->last_alignment[1], blas_alignment_bytes(address(dx)));
    EXPECT_EQ(log_->last_alignment[2], 4u);
    EXPECT_EQ(log_->last_alignment[3], 4u);
    EXPECT_GT(log_->last_workspace, 0u);  // the handle's cuBLASLt workspace (CublasLibrary::create)
  }
}

TEST_F(FakeCublas, TransposedEpilogueGemmsAndNoAlgorithmIsANamedError) {
  // C (m, n) = x^T W^T + b with x stored (k, m) and W stored (n, k), relu.
  const int64_t m = 5, n = 3, k = 4;
  CudaProgram p = dense_program(m, n, k, CudaGemm::Epilogue::kBiasRelu);
  p.buffers[0] = buffer(CudaBuffer::Kind::kInput, 0, {k, m});
  p.buffers[1] = buffer(CudaBuffer::Kind::kInput, 1, {n, k});
  p.input_types[0].first = {k, m};
  p.input_types[1].first = {n, k};
  p.thunks[0].gemm.trans_a = p.thunks[0].gemm.trans_b = true;
  p.thunks[0].gemm.a = memref(0, 0, {k, m}, {m, 1});
  p.thunks[0].gemm.b = memref(1, 0, {n, k}, {k, 1});
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  std::shared_ptr<CudaBlas> blas = library_->create(*dev);
  auto exe = CudaExecutable::create(p, *dev, blas);
  const std::vector<double> x = iota(k * m, 0.5, -4.0), w = iota(n * k, -0.25, 1.0), b = iota(n, 0.5, -0.5);
  const std::vector<Array> inputs = {to_device(*dev, Array::from_doubles(x, {k, m}, DType::kF32)),
                                     to_device(*dev, Array::from_doubles(w, {n, k}, DType::kF32)),
                                     to_device(*dev, Array::from_doubles(b, {n}, DType::kF32))};
  const Array out = to_device(*dev, Array::zeros({m * n + 3}, DType::kF32));
  const std::vector<Array> outputs = {out};
  exe->run(inputs, outputs)->wait();
  const std::vector<double> product = matmul(x, w, m, n, k, true, true);
  std::vector<double> want(3, 0.0);
  for (int64_t i = 0; i < m * n; ++i)
    want.push_back(std::max(0.0, product[static_cast<size_t>(i)] + b[static_cast<size_t>(i % n)]));
  testing::expect_values(to_host(*dev, out), want, 1e-5);
  EXPECT_EQ(log_->lt_matmul_calls, 1);
  // A configuration cuBLASLt has no kernel for: kUnimplemented naming the switch, nothing run.
  reinterpret_cast<void (*)(bool)>(dlsym(module_, "ingot_fake_cublas_set_no_algorithm"))(true);
  expect_error([&] { exe->run(inputs, outputs); }, ErrorCode::kUnimplemented,
               {"cuBLASLt has no kernel for", "bias_relu epilogue", "trans_a = true", "found no algorithm",
                "CudaCompileOptions::gemm_epilogues = false"});
  EXPECT_EQ(log_->lt_matmul_calls, 1);
}

TEST_F(FakeCublas, CreateLoadsCublasFromItsLibrarySearch) {
  namespace fs = std::filesystem;
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  const fs::path venv = fs::path(::testing::TempDir()) / "ingot_create_venv";
  const fs::path lib_dir = venv / "lib/python3.12/site-packages/nvidia/cublas/lib";
  fs::remove_all(venv);
  fs::create_directories(lib_dir);
  fs::copy_file(INGOT_FAKE_CUBLAS, lib_dir / "libcublas.so.13");
  fs::copy_file(INGOT_FAKE_CUBLAS, lib_dir / "libcublasLt.so.13");
  const CudaProgram p = dense_program(3, 4, 5, CudaGemm::Epilogue::kNone);
  EXPECT_NO_THROW(CudaExecutable::create(
      p, *dev, nullptr, std::nullopt,
      {.libraries = {.toolkit_root = "", .loader_path = false, .python_prefixes = {venv.string()}}}));
  expect_error(
      [&] {
        CudaExecutable::create(p, *dev, nullptr, std::nullopt,
                               {.libraries = {.toolkit_root = "", .loader_path = false}});
      },
      ErrorCode::kFailedPrecondition, {"cannot run GEMMs on cuda:0", "libcublas.so.13 was not found"});
}

TEST_F(FakeCublas, PlainAndStridedBatchedGemmsAreCublasCalls) {
  const int64_t m = 3, n = 4, k = 5, batch = 3;
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  std::shared_ptr<CudaBlas> blas = library_->create(*dev);
  // Plain: the dense program without an epilogue (one cublasSgemm_v2).
  const std::vector<double> x = iota(m * k, 0.5, -2.0), w = iota(k * n, -0.25, 1.0);
  auto plain = CudaExecutable::create(dense_program(m, n, k, CudaGemm::Epilogue::kNone), *dev, blas);
  const Array dx = to_device(*dev, Array::from_doubles(x, {m, k}, DType::kF32));
  const Array dw = to_device(*dev, Array::from_doubles(w, {k, n}, DType::kF32));
  const Array db = to_device(*dev, Array::zeros({n}, DType::kF32));
  const Array out = to_device(*dev, Array::zeros({m * n + 3}, DType::kF32));
  std::vector<Array> inputs = {dx, dw, db}, outputs = {out};
  plain->run(inputs, outputs)->wait();
  const std::vector<double> c = matmul(x, w, m, n, k, false, false);
  testing::expect_values(
      to_host(*dev, out),
      [&] {
        std::vector<double> v(3, 0.0);
        v.insert(v.end(), c.begin(), c.end());
        return v;
      }(),
      1e-5);
  EXPECT_EQ(log_->gemm_calls, 1);
  // Strided-batched: C[i] (m, n) = A[i]^T B[i], A stored (batch, k, m).
  CudaProgram p;
  p.buffers = {buffer(CudaBuffer::Kind::kInput, 0, {batch, k, m}), buffer(CudaBuffer::Kind::kInput, 1, {batch, k, n}),
               buffer(CudaBuffer::Kind::kOutput, 0, {batch, m, n})};
  CudaThunk t;
  t.kind = CudaThunk::Kind::kGemm;
  t.gemm = gemm(DType::kF32, m, n, k, true, false, memref(0, 0, {batch, k, m}, {k * m, m, 1}),
                memref(1, 0, {batch, k, n}, {k * n, n, 1}), memref(2, 0, {batch, m, n}, {m * n, n, 1}));
  t.gemm.batched = true;
  t.gemm.batch = batch;
  p.thunks = {t};
  p.input_types = {{{batch, k, m}, DType::kF32}, {{batch, k, n}, DType::kF32}};
  p.output_types = {{{batch, m, n}, DType::kF32}};
  auto batched = CudaExecutable::create(p, *dev, blas);
  const std::vector<double> a = iota(batch * k * m, 0.5, -2.0), bb = iota(batch * k * n, -0.25, 1.5);
  inputs = {to_device(*dev, Array::from_doubles(a, {batch, k, m}, DType::kF32)),
            to_device(*dev, Array::from_doubles(bb, {batch, k, n}, DType::kF32))};
  const std::vector<Array> got = batched->run(inputs);
  std::vector<double> want;
  for (int64_t i = 0; i < batch; ++i) {
    const std::vector<double> ci =
        matmul(slice(a, i * k * m, k * m), slice(bb, i * k * n, k * n), m, n, k, true, false);
    want.insert(want.end(), ci.begin(), ci.end());
  }
  testing::expect_values(to_host(*dev, got[0]), want, 1e-5);
  EXPECT_EQ(log_->strided_calls, 1);
  EXPECT_EQ(log_->last_batch, batch);
  EXPECT_EQ(log_->gemm_calls, 1);  // still only the plain one
}
/// Row-major C (m x n) = op(A) op(B) of `dtype` values as cublasGemmEx with CUBLAS_COMPUTE_32F
/// defines it: the exact product of the (already rounded) inputs, rounded to `dtype` once. The
/// tests' inputs are multiples of 1/4 small enough that the f32 sums are exact, so this is the
/// bit-exact answer.
std::vector<double> half_matmul(const std::vector<double>& a, const std::vector<double>& b, int64_t m, int64_t n,
                                int64_t k, bool ta, bool tb, DType dtype) {
  std::vector<double> c = matmul(a, b, m, n, k, ta, tb);
  for (double& v : c) {
    v = dtype == DType::kF16 ? static_cast<float>(f16(static_cast<float>(v)))
                             : static_cast<float>(bf16(static_cast<float>(v)));
  }
  return c;
}

TEST_F(FakeCublas, HalfGemmsAreGemmExCallsWithF32Compute) {
  const int64_t m = 3, n = 4, k = 6, batch = 3;
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  std::shared_ptr<CudaBlas> blas = library_->create(*dev);
  int64_t plain = 0, strided = 0;
  for (const DType dt : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(dtype_name(dt));
    // Plain: x (m, k) . W (k, n) into `out` at element 3 (one cublasGemmEx). Sums of 6 products
    // up to ~100 need more than bf16's 8 significant bits: the result is rounded.
    const std::vector<double> x = iota(m * k, 0.75, -5.0), w = iota(k * n, -0.5, 4.25);
    auto exe = CudaExecutable::create(half_dense_program(m, n, k, dt), *dev, blas);
    const Array out = to_device(*dev, Array::full({m * n + 3}, 7.0, dt));
    std::vector<Array> inputs = {to_device(*dev, Array::from_doubles(x, {m, k}, dt)),
                                 to_device(*dev, Array::from_doubles(w, {k, n}, dt)),
                                 to_device(*dev, Array::zeros({n}, dt))};
    const std::vector<Array> outputs = {out};
    exe->run(inputs, outputs)->wait();
    std::vector<double> want = {7.0, 7.0, 7.0};
    const std::vector<double> c = half_matmul(x, w, m, n, k, false, false, dt);
    want.insert(want.end(), c.begin(), c.end());
    EXPECT_EQ(to_host(*dev, out).to_doubles(), want);
    EXPECT_EQ(log_->gemm_ex_calls, ++plain);
    // library_types.h: CUDA_R_16F = 2, CUDA_R_16BF = 14; cublas_api.h: CUBLAS_COMPUTE_32F = 68.
    EXPECT_EQ(log_->last_ex_type, dt == DType::kF16 ? 2 : 14);
    EXPECT_EQ(log_->last_ex_compute, 68);
    // The test's host BLAS computes the same bits (the runtime tests' oracle for half GEMMs).
    const Array host_out = to_device(*dev, Array::full({m * n + 3}, 7.0, dt));
    const std::vector<Array> host_outputs = {host_out};
    CudaExecutable::create(half_dense_program(m, n, k, dt), *dev, std::make_shared<HostBlas>())
        ->run(inputs, host_outputs)
        ->wait();
    EXPECT_EQ(to_host(*dev, host_out).to_doubles(), want);
    // Strided-batched: C[i] (m, n) = A[i]^T B[i]^T, A stored (batch, k, m), B (batch, n, k).
    CudaProgram p;
    p.buffers = {buffer(CudaBuffer::Kind::kInput, 0, {batch, k, m}, dt),
                 buffer(CudaBuffer::Kind::kInput, 1, {batch, n, k}, dt),
                 buffer(CudaBuffer::Kind::kOutput, 0, {batch, m, n}, dt)};
    CudaThunk t;
    t.kind = CudaThunk::Kind::kGemm;
    t.gemm = gemm(dt, m, n, k, true, true, memref(0, 0, {batch, k, m}, {k * m, m, 1}),
                  memref(1, 0, {batch, n, k}, {n * k, k, 1}), memref(2, 0, {batch, m, n}, {m * n, n, 1}));
    t.gemm.batched = true;
    t.gemm.batch = batch;
    p.thunks = {t};
    p.input_types = {{{batch, k, m}, dt}, {{batch, n, k}, dt}};
    p.output_types = {{{batch, m, n}, dt}};
    const std::vector<double> a = iota(batch * k * m, 0.25, -6.0), b = iota(batch * n * k, -0.75, 9.5);
    inputs = {to_device(*dev, Array::from_doubles(a, {batch, k, m}, dt)),
              to_device(*dev, Array::from_doubles(b, {batch, n, k}, dt))};
    const std::vector<Array> got = CudaExecutable::create(p, *dev, blas)->run(inputs);
    std::vector<double> bwant;
    for (int64_t i = 0; i < batch; ++i) {
      const std::vector<double> ci =
          half_matmul(slice(a, i * k * m, k * m), slice(b, i * n * k, n * k), m, n, k, true, true, dt);
      bwant.insert(bwant.end(), ci.begin(), ci.end());
    }
    EXPECT_EQ(to_host(*dev, got[0]).to_doubles(), bwant);
    EXPECT_EQ(log_->strided_ex_calls, ++strided);
    EXPECT_EQ(log_->last_batch, batch);
  }
  EXPECT_EQ(log_->gemm_calls + log_->strided_calls + log_->lt_matmul_calls, 0);  // no f32 path taken
}

TEST_F(FakeCublas, AHalfGemmCublasHasNoKernelForIsUnimplementedNamingTheWayOut) {
  const int64_t m = 2, n = 3, k = 4;
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  auto exe = CudaExecutable::create(half_dense_program(m, n, k, DType::kBF16), *dev, library_->create(*dev));
  const Array out = to_device(*dev, Array::full({m * n + 3}, 7.0, DType::kBF16));
  const std::vector<Array> inputs = {to_device(*dev, Array::full({m, k}, 1.0, DType::kBF16)),
                                     to_device(*dev, Array::full({k, n}, 2.0, DType::kBF16)),
                                     to_device(*dev, Array::zeros({n}, DType::kBF16))},
                           outputs = {out};
  reinterpret_cast<void (*)(bool)>(dlsym(module_, "ingot_fake_cublas_set_ex_unsupported"))(true);
  expect_error([&] { exe->run(inputs, outputs); }, ErrorCode::kUnimplemented,
               {"cublasGemmEx has no bf16 kernel with f32 compute on cuda:0", "CUBLAS_STATUS_NOT_SUPPORTED",
                "compute capability 8.0", "float32 dtype policy"});
  EXPECT_EQ(to_host(*dev, out).to_doubles(), std::vector<double>(m * n + 3, 7.0));  // nothing written
  reinterpret_cast<void (*)(bool)>(dlsym(module_, "ingot_fake_cublas_set_ex_unsupported"))(false);
  exe->run(inputs, outputs)->wait();
  std::vector<double> want(3, 7.0);
  want.resize(m * n + 3, 8.0);  // sum of 4 products 1 * 2
  EXPECT_EQ(to_host(*dev, out).to_doubles(), want);
}
#endif  // INGOT_FAKE_CUBLAS

TEST(CublasLibrary, FoundInTheToolkitByTheSearch) {
  if (!std::filesystem::exists("/usr/local/cuda/lib64/libcublas.so.13")) {
    GTEST_SKIP() << "/usr/local/cuda/lib64/libcublas.so.13 is not installed on this machine";
  }
  auto lib = CublasLibrary::load(LibrarySearch{.toolkit_root = "/usr/local/cuda", .loader_path = false});
  EXPECT_TRUE(lib->available()) << lib->unavailable_reason();
  EXPECT_EQ(lib->source(), "CUDA toolkit");
  EXPECT_NE(lib->path().find("libcublas.so.13"), std::string::npos) << lib->path();
  EXPECT_NE(lib->lt_path().find("libcublasLt.so.13"), std::string::npos) << lib->lt_path();
}

TEST(CublasLibrary, NotFoundAnywhereListsEveryPlaceTried) {
  auto lib =
      CublasLibrary::load(LibrarySearch{.dirs = {"/nonexistent-ingot-dir"}, .toolkit_root = "", .loader_path = false});
  EXPECT_FALSE(lib->available());
  EXPECT_NE(lib->unavailable_reason().find("libcublas.so.13 was not found; tried"), std::string::npos)
      << lib->unavailable_reason();
  auto nccl = NcclLibrary::load(LibrarySearch{.toolkit_root = "", .loader_path = false});
  EXPECT_FALSE(nccl->available());
  EXPECT_NE(nccl->unavailable_reason().find("libnccl.so.2 was not found"), std::string::npos);
}

#if defined(INGOT_FAKE_CUBLAS)
TEST(CublasLibrary, FoundInAPythonEnvironmentsNvidiaFolders) {
  // pip's nvidia-cublas wheel unpacks into <venv>/lib/python3.X/site-packages/nvidia/cublas/lib,
  // which the loader does not search; the fake cuBLAS module stands in for both libraries.
  namespace fs = std::filesystem;
  const fs::path venv = fs::path(::testing::TempDir()) / "ingot_cublas_venv";
  const fs::path lib_dir = venv / "lib/python3.11/site-packages/nvidia/cublas/lib";
  fs::remove_all(venv);
  fs::create_directories(lib_dir);
  fs::copy_file(INGOT_FAKE_CUBLAS, lib_dir / "libcublas.so.13");
  fs::copy_file(INGOT_FAKE_CUBLAS, lib_dir / "libcublasLt.so.13");
  auto lib =
      CublasLibrary::load(LibrarySearch{.toolkit_root = "", .loader_path = false, .python_prefixes = {venv.string()}});
  EXPECT_TRUE(lib->available()) << lib->unavailable_reason();
  EXPECT_EQ(lib->source(), "Python environment");
  EXPECT_EQ(fs::path(lib->path()), lib_dir / "libcublas.so.13");
  EXPECT_EQ(fs::path(lib->lt_path()), lib_dir / "libcublasLt.so.13");
}
#endif  // INGOT_FAKE_CUBLAS

TEST(CublasLibrary, TheToolkitsCublasHasEveryEntryPoint) {
  // The soname of CUDA 13's cuBLAS, by path (this machine's loader may not search lib64).
  const std::string path = "/usr/local/cuda/lib64/libcublas.so.13";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is not installed on this machine";
  auto lib = CublasLibrary::load(path);
  EXPECT_TRUE(lib->available()) << lib->unavailable_reason();
}

}  // namespace
}  // namespace ingot

#endif  // INGOT_HAVE_CUDA_TOOLKIT
