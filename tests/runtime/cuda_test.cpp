// CUDA devices, events, transfers and NCCL. Three kinds of tests:
//   - the real driver on this machine: without libcuda (or a GPU) it is unavailable with a
//     reason and asking for cuda:0 is a clear error;
//   - the runtime code against a fake driver in host memory (fake_cuda_driver.h) with deferred
//     streams, so staging, stream ordering, events, errors and cleanup are checked anywhere;
//   - GPU tests (CudaGpu.*, NcclGpu.*) that skip with the driver's reason when there is no GPU.
#if INGOT_HAVE_CUDA_TOOLKIT

#include "ingot/runtime/cuda.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <numeric>
#include <regex>
#include <thread>

#include "fake_cuda_driver.h"
#include "ingot/runtime/nccl.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;
using testing::FakeCudaScope;

constexpr int64_t kMiB = 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// The real driver on this machine

TEST(CudaDriver, RealDriverIsAvailableOrSaysWhy) {
  std::shared_ptr<CudaDriver> d = CudaDriver::load();
  EXPECT_EQ(d->source(), "libcuda.so.1");
  if (d->available()) {
    EXPECT_TRUE(d->unavailable_reason().empty());
    EXPECT_GT(d->device_count(), 0);
    EXPECT_GE(d->driver_version(), 12000);
    EXPECT_FALSE(d->device_name(0).empty());
  } else {
    EXPECT_EQ(d->device_count(), 0);
    EXPECT_FALSE(d->unavailable_reason().empty());
  }
}

TEST(CudaDriver, RequestingCuda0WithoutAGpuIsAClearError) {
  std::shared_ptr<CudaDriver> d = CudaDriver::load();
  if (d->available()) GTEST_SKIP() << "this machine has a CUDA device";
  expect_error([&] { CudaDevice::open(d, 0); }, ErrorCode::kNotFound,
               {"cannot use device cuda:0", d->unavailable_reason(), "hint:"});
}

TEST(CudaDriver, MissingLibraryIsUnavailableWithReason) {
  std::shared_ptr<CudaDriver> d = CudaDriver::load("libingot_no_such_cuda.so.1");
  EXPECT_FALSE(d->available());
  EXPECT_EQ(d->device_count(), 0);
  EXPECT_EQ(d->driver_version(), 0);
  EXPECT_NE(d->unavailable_reason().find("libingot_no_such_cuda.so.1 could not be loaded"), std::string::npos)
      << d->unavailable_reason();
  expect_error([&] { d->check_device(0); }, ErrorCode::kNotFound,
               {"cannot use device cuda:0", "could not be loaded", "install the NVIDIA driver"});
  expect_error([&] { CudaDevice::open(d, 3); }, ErrorCode::kNotFound, {"cuda:3"});
  expect_error([&] { d->device_name(0); }, ErrorCode::kNotFound, {"cuda:0"});
}

TEST(CudaDriver, LibraryWithoutTheDriverApiIsUnavailable) {
  std::shared_ptr<CudaDriver> d = CudaDriver::load("libm.so.6");
  EXPECT_FALSE(d->available());
  EXPECT_NE(d->unavailable_reason().find("libm.so.6 is not a usable CUDA driver: it lacks cuInit, "
                                         "cuDriverGetVersion"),
            std::string::npos)
      << d->unavailable_reason();
}

// ---------------------------------------------------------------------------------------------
// The fake driver: availability and device errors

TEST(CudaFake, InitFailureIsTheReason) {
  FakeCudaScope fake;
  fake.state().init_result = testing::kCudaErrorNoDevice;
  auto d = fake.driver();
  EXPECT_FALSE(d->available());
  EXPECT_EQ(d->unavailable_reason(), "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)");
  expect_error([&] { CudaDevice::open(d, 0); }, ErrorCode::kNotFound,
               {"cannot use device cuda:0: cuInit failed: CUDA_ERROR_NO_DEVICE", "install the NVIDIA driver"});
}

TEST(CudaFake, NoDeviceIsTheReason) {
  FakeCudaScope fake;
  fake.state().device_count = 0;
  auto d = fake.driver();
  EXPECT_FALSE(d->available());
  EXPECT_EQ(d->driver_version(), 13000);  // the driver itself initialised
  expect_error([&] { CudaDevice::open(d, 0); }, ErrorCode::kNotFound,
               {"cuda:0", "reports no device (cuDeviceGetCount = 0)", "nvidia-smi"});
}

TEST(CudaFake, MissingEntryPointIsTheReason) {
  FakeCudaScope fake;
  auto d = fake.driver("cuLaunchHostFunc");
  EXPECT_FALSE(d->available());
  EXPECT_EQ(d->unavailable_reason(),
            "fake libcuda is not a usable CUDA driver: it lacks cuLaunchHostFunc (needs a driver "
            "for CUDA 12 or newer)");
}

TEST(CudaFake, IndexOutOfRangeNamesTheDeviceAndTheCount) {
  FakeCudaScope fake;
  auto d = fake.driver();
  ASSERT_TRUE(d->available()) << d->unavailable_reason();
  EXPECT_EQ(d->device_count(), 2);
  expect_error(
      [&] { CudaDevice::open(d, 2); }, ErrorCode::kOutOfRange,
      {"cannot use device cuda:2: index out of range", "2 CUDA devices (cuda:0 to cuda:1)", "CUDA_VISIBLE_DEVICES"});
  expect_error([&] { CudaDevice::open(d, -1); }, ErrorCode::kOutOfRange, {"cuda:-1"});
  expect_error([&] { CudaDevice::open(nullptr, 0); }, ErrorCode::kInvalidArgument, {"driver is null"});
  expect_error([&] { CudaDevice::open(d, 0, CudaDeviceOptions{0, 2}); }, ErrorCode::kInvalidArgument,
               {"staging_buffer_bytes = 0"});
  expect_error([&] { CudaDevice::open(d, 0, CudaDeviceOptions{1024, 0}); }, ErrorCode::kInvalidArgument,
               {"num_staging_buffers = 0"});
  EXPECT_EQ(fake.context_references(), 0);  // nothing was retained by the failed opens
}

TEST(CudaFake, OpenGivesACudaDeviceAndReleasesEverything) {
  FakeCudaScope fake;
  {
    auto d = fake.driver();
    auto dev = CudaDevice::open(d, 1, CudaDeviceOptions{4096, 3});
    EXPECT_EQ(dev->name(), "cuda:1");
    EXPECT_EQ(dev->product_name(), "Fake GPU 1");
    EXPECT_EQ(dev->device().kind(), DeviceKind::kCuda);
    EXPECT_EQ(dev->device().id(), 1);
    EXPECT_EQ(dev->device().name(), "cuda:1");
    EXPECT_EQ(&dev->device().allocator(), &dev->allocator());
    EXPECT_NE(dev->compute_stream().handle(), dev->copy_stream().handle());
    EXPECT_EQ(dev->compute_stream().name(), "cuda:1 compute");
    EXPECT_EQ(dev->copy_stream().name(), "cuda:1 copy");
    EXPECT_EQ(d->device_total_memory(1), 64 * kMiB);
    DeviceMemoryInfo info = dev->memory_info();
    EXPECT_EQ(info.total_bytes, 64 * kMiB);
    EXPECT_EQ(info.free_bytes, 64 * kMiB);
    EXPECT_EQ(fake.state().pinned, 3);
    EXPECT_EQ(fake.state().live_streams, 2);
    EXPECT_EQ(fake.context_references(), 1);
    Array a = Array::empty({1000}, DType::kF32, &dev->device());
    EXPECT_EQ(fake.state().used, 2 * kMiB);  // one small segment from cuMemAlloc
    EXPECT_EQ(dev->memory_info().free_bytes, 62 * kMiB);
    EXPECT_EQ(dev->device().allocator().stats().bytes_in_use, 4000);
  }
  EXPECT_EQ(fake.state().used, 0);
  EXPECT_TRUE(fake.state().allocations.empty());
  EXPECT_EQ(fake.state().pinned, 0);
  EXPECT_EQ(fake.state().live_streams, 0);
  EXPECT_EQ(fake.state().live_events, 0);
  EXPECT_EQ(fake.context_references(), 0);
  EXPECT_TRUE(fake.state().calls_without_context.empty());
}

// ---------------------------------------------------------------------------------------------
// The fake driver: transfers

std::vector<float> iota_floats(size_t n, float start) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(CudaFake, RoundTripThroughDeviceWithEvents) {
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  Array host = Array::from_vector<float>(iota_floats(1000, 0.5f), {10, 100});
  Array on_dev = Array::empty({10, 100}, DType::kF32, &dev->device());
  std::shared_ptr<CudaEvent> up = dev->copy_async(host, on_dev);
  EXPECT_FALSE(up->ready());  // the fake runs stream work only when someone waits
  up->wait();
  EXPECT_TRUE(up->ready());
  // The fake's device memory is host memory: the data is there.
  EXPECT_EQ(std::memcmp(on_dev.raw_data(), host.raw_data(), 4000), 0);
  Array back = Array::zeros({10, 100}, DType::kF32);
  std::shared_ptr<CudaEvent> down = dev->copy_async(on_dev, back);
  EXPECT_FALSE(down->ready());
  EXPECT_EQ(back.to_vector<float>()[7], 0.0f);  // not copied until the stream ran
  down->wait();
  EXPECT_EQ(back.to_vector<float>(), host.to_vector<float>());
  EXPECT_EQ(fake.state().host_functions_run, 1);
  EXPECT_TRUE(fake.state().calls_without_context.empty());
}

TEST(CudaFake, LargeCopiesCycleThroughTheStagingBuffers) {
  FakeCudaScope fake;
  // Two 4 KiB staging buffers: a 100 KiB + 123 byte copy takes 26 chunks, so each buffer is
  // refilled 12 times; refilling before the previous chunk's copy ran would corrupt the data.
  auto dev = CudaDevice::open(fake.driver(), 0, CudaDeviceOptions{4096, 2});
  const int64_t n = 100 * 1024 + 123;
  std::vector<unsigned char> src(static_cast<size_t>(n)), back(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < n; ++i) src[static_cast<size_t>(i)] = static_cast<unsigned char>(i * 7 + i / 4096);
  void* d = dev->allocator().allocate(n, 256);
  std::shared_ptr<CudaEvent> up = dev->copy_to_device_async(src.data(), d, n);
  // The caller's buffer may be reused as soon as the call returns.
  std::fill(src.begin(), src.end(), 0);
  up->wait();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(static_cast<unsigned char*>(d)[i], static_cast<unsigned char>(i * 7 + i / 4096)) << "byte " << i;
  }
  std::shared_ptr<CudaEvent> down = dev->copy_to_host_async(d, back.data(), n);
  down->wait();
  EXPECT_EQ(std::memcmp(back.data(), d, static_cast<size_t>(n)), 0);
  EXPECT_EQ(fake.state().host_functions_run, 26);
  dev->allocator().deallocate(d, n);
}

TEST(CudaFake, ZeroByteCopiesGiveReadyEvents) {
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  std::shared_ptr<CudaEvent> e = dev->copy_to_device_async(nullptr, nullptr, 0);
  e->wait();
  EXPECT_TRUE(e->ready());
  dev->copy_to_host_async(nullptr, nullptr, 0)->wait();
}

/// Queues a "kernel" on the compute stream (the fake's streams are plain queues).
void enqueue_compute(CudaDevice& dev, std::function<void()> kernel) {
  dev.compute_stream().handle()->pending.push_back(std::move(kernel));
}

TEST(CudaFake, DeviceToHostCopyWaitsForQueuedCompute) {
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  Array on_dev = Array::empty({4}, DType::kI32, &dev->device());
  auto* p = static_cast<int32_t*>(on_dev.raw_data());
  enqueue_compute(*dev, [p] {
    for (int i = 0; i < 4; ++i) p[i] = 10 * i + 1;
  });
  Array host = Array::zeros({4}, DType::kI32);
  dev->copy_async(on_dev, host)->wait();
  EXPECT_EQ(host.to_vector<int32_t>(), (std::vector<int32_t>{1, 11, 21, 31}));
}

TEST(CudaFake, HostToDeviceCopyOrderAgainstQueuedCompute) {
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  Array dst = Array::empty({2}, DType::kI32, &dev->device());
  auto* p = static_cast<int32_t*>(dst.raw_data());
  p[0] = 5;
  p[1] = 6;
  Array host = Array::from_vector<int32_t>({7, 8}, {2});
  for (CopyOrder order : {CopyOrder::kAfterQueuedCompute, CopyOrder::kImmediate}) {
    p[0] = 5;
    int32_t seen = -1;
    enqueue_compute(*dev, [p, &seen] { seen = p[0]; });  // queued work still reading dst
    dev->copy_async(host, dst, order)->wait();
    dev->compute_stream().synchronize();
    if (order == CopyOrder::kAfterQueuedCompute) {
      EXPECT_EQ(seen, 5) << "the copy overwrote memory queued compute work still reads";
    } else {
      EXPECT_EQ(seen, 7) << "kImmediate should not wait for queued compute";
    }
    EXPECT_EQ(p[0], 7);
  }
}

TEST(CudaFake, ComputeStreamCanWaitForACopy) {
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  Array dst = Array::empty({1}, DType::kI32, &dev->device());
  auto* p = static_cast<int32_t*>(dst.raw_data());
  *p = 0;
  Array host = Array::from_vector<int32_t>({42}, {1});
  std::shared_ptr<CudaEvent> up = dev->copy_async(host, dst, CopyOrder::kImmediate);
  dev->compute_stream().wait(*up);
  int32_t seen = -1;
  enqueue_compute(*dev, [p, &seen] { seen = *p; });
  dev->compute_stream().synchronize();  // runs the wait (and so the copy) before the kernel
  EXPECT_EQ(seen, 42);
  std::shared_ptr<CudaEvent> marker = dev->compute_stream().record();
  marker->wait();
  EXPECT_TRUE(marker->ready());
}

TEST(CudaFake, EventsCanBeWaitedForFromAnotherThread) {
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  Array host = Array::from_vector<float>({1, 2, 3}, {3});
  Array on_dev = Array::empty({3}, DType::kF32, &dev->device());
  std::shared_ptr<CudaEvent> up = dev->copy_async(host, on_dev);
  bool ok = false;
  std::string error;
  std::thread t([&] {
    try {
      up->wait();  // a fresh thread has no current context: the event must set it
      ok = up->ready();
    } catch (const Error& e) {
      error = e.what();
    }
  });
  t.join();
  EXPECT_EQ(error, "");
  EXPECT_TRUE(ok);
  EXPECT_TRUE(fake.state().calls_without_context.empty());
}

TEST(CudaFake, FailedCopySurfacesAtEveryWait) {
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  Array host = Array::from_vector<float>({1, 2}, {2});
  Array on_dev = Array::empty({2}, DType::kF32, &dev->device());
  fake.state().fail_next_copy = true;
  std::shared_ptr<CudaEvent> up = dev->copy_async(host, on_dev);
  for (int i = 0; i < 2; ++i) {
    expect_error([&] { up->wait(); }, ErrorCode::kFailedPrecondition,
                 {"cuEventSynchronize failed while waiting for work on cuda:0 copy",
                  "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)", "CUDA_LAUNCH_BLOCKING=1"});
  }
  EXPECT_TRUE(up->ready());  // done, with an error
  expect_error([&] { dev->synchronize(); }, ErrorCode::kFailedPrecondition,
               {"cuStreamSynchronize failed while synchronizing stream cuda:0 compute"});
}

TEST(CudaFake, CopyArgumentsAreChecked) {
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  Array h2 = Array::zeros({2}, DType::kF32);
  Array h3 = Array::zeros({3}, DType::kF32);
  Array hi = Array::zeros({2}, DType::kI32);
  Array d2 = Array::empty({2}, DType::kF32, &dev->device());
  expect_error([&] { dev->copy_async(h3, d2); }, ErrorCode::kShapeMismatch,
               {"src has shape (3,) but dst has shape (2,)"});
  expect_error([&] { dev->copy_async(hi, d2); }, ErrorCode::kDTypeMismatch,
               {"src has dtype i32 but dst has dtype f32"});
  Array h2b = Array::zeros({2}, DType::kF32);
  expect_error([&] { dev->copy_async(h2, h2b); }, ErrorCode::kInvalidArgument,
               {"copies from cpu:0 to cpu:0 are neither between the host and this device nor within it"});
  expect_error([&] { dev->copy_to_device_async(h2.raw_data(), d2.raw_data(), -4); }, ErrorCode::kInvalidArgument,
               {"bytes = -4 is negative"});
  expect_error([&] { dev->copy_to_host_async(nullptr, h2.raw_data(), 8); }, ErrorCode::kInvalidArgument,
               {"src is null for a copy of 8 bytes"});
  // An array of another CUDA device is not this device's either.
  auto other = CudaDevice::open(fake.driver(), 1);
  Array o2 = Array::empty({2}, DType::kF32, &other->device());
  expect_error([&] { dev->copy_async(h2, o2); }, ErrorCode::kInvalidArgument,
               {"CudaDevice::copy_async on cuda:0: copies from cpu:0 to cuda:1"});
}

TEST(CudaFake, CopiesWithinADeviceRunOnTheComputeStreamInOrder) {
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  const Array host = Array::from_vector<float>({1, 2, 3}, {3});
  Array a = Array::empty({3}, DType::kF32, &dev->device());
  Array b = Array::empty({3}, DType::kF32, &dev->device());
  dev->copy_async(host, a)->wait();
  std::shared_ptr<CudaEvent> copied = dev->copy_async(a, b);  // device to device
  Array back = Array::empty({3}, DType::kF32);
  dev->copy_async(b, back)->wait();  // the download waits for the compute stream, so for the copy
  EXPECT_TRUE(copied->ready());
  EXPECT_EQ(back.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  Array empty_a = Array::empty({0}, DType::kF32, &dev->device());
  Array empty_b = Array::empty({0}, DType::kF32, &dev->device());
  EXPECT_NO_THROW(dev->copy_async(empty_a, empty_b)->wait());
  expect_error([&] { dev->copy_within_device_async(nullptr, b.raw_data(), 4); }, ErrorCode::kInvalidArgument,
               {"copy_within_device_async: src is null for a copy of 4 bytes"});
}

TEST(CudaFake, AllocatorOutOfMemoryReportsTheDevicesFreeBytes) {
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  Array big = Array::empty({60 * kMiB}, DType::kU8, &dev->device());  // a 60 MiB segment
  Array small = Array::empty({1000}, DType::kU8, &dev->device());     // a 2 MiB segment
  expect_error(
      [&] { Array::empty({10 * kMiB}, DType::kU8, &dev->device()); }, ErrorCode::kOutOfMemory,
      {"cuda:0 out of memory: tried to allocate 10485760 bytes (10.00 MiB)",
       "2097152 bytes (2.00 MiB) free of 67108864 bytes (64.00 MiB) total", "65011712 bytes (62.00 MiB) reserved"});
  CachingAllocatorStats s = dev->allocator().caching_stats();
  EXPECT_EQ(s.num_ooms, 1);
  EXPECT_EQ(s.num_segments, 2);
  // Freed, the big array's 60 MiB segment stays cached: too small for 61 MiB, it is returned
  // to the driver when cuMemAlloc fails, and the retry succeeds.
  big = Array();
  Array again = Array::empty({61 * kMiB}, DType::kU8, &dev->device());
  s = dev->allocator().caching_stats();
  EXPECT_EQ(s.num_alloc_retries, 2);
  EXPECT_EQ(s.num_segment_frees, 1);
  EXPECT_EQ(s.reserved_bytes, 2 * kMiB + 62 * kMiB);
  EXPECT_EQ(fake.state().used, 64 * kMiB);
}

TEST(CudaFake, DestroyingTheDeviceFinishesPendingCopies) {
  FakeCudaScope fake;
  std::vector<float> back(3, 0.0f);
  {
    auto dev = CudaDevice::open(fake.driver(), 0);
    Array host = Array::from_vector<float>({1, 2, 3}, {3});
    Array on_dev = Array::empty({3}, DType::kF32, &dev->device());
    dev->copy_async(host, on_dev);                                // never waited for
    dev->copy_to_host_async(on_dev.raw_data(), back.data(), 12);  // nor this one
    on_dev = Array();
  }
  EXPECT_EQ(back, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(fake.state().live_streams, 0);
  EXPECT_EQ(fake.state().used, 0);
  EXPECT_EQ(fake.context_references(), 0);
}

// ---------------------------------------------------------------------------------------------
// NCCL library (loads without a GPU)

TEST(NcclLibrary, LoadsOrSaysWhy) {
  std::shared_ptr<NcclLibrary> nccl = NcclLibrary::load();
  if (!nccl->available()) {
    EXPECT_FALSE(nccl->unavailable_reason().empty());
    EXPECT_EQ(nccl->version(), 0);
    GTEST_SKIP() << "libnccl.so.2 not loadable here: " << nccl->unavailable_reason();
  }
  EXPECT_GE(nccl->version(), 21300);
  const std::string v = nccl->version_string();
  EXPECT_TRUE(std::regex_match(v, std::regex("2\\.[0-9]+\\.[0-9]+"))) << v;
  EXPECT_EQ(v, fmt::format("2.{}.{}", nccl->version() % 10000 / 100, nccl->version() % 100));
}

TEST(NcclLibrary, MissingOrWrongLibraryIsUnavailable) {
  auto missing = NcclLibrary::load("libingot_no_such_nccl.so.2");
  EXPECT_FALSE(missing->available());
  EXPECT_EQ(missing->version_string(), "");
  expect_error([&] { missing->unique_id(); }, ErrorCode::kNotFound,
               {"NcclLibrary::unique_id: NCCL is not available", "libingot_no_such_nccl.so.2 could not be loaded",
                "or use Gloo"});
  auto wrong = NcclLibrary::load("libm.so.6");
  EXPECT_FALSE(wrong->available());
  EXPECT_NE(wrong->unavailable_reason().find("libm.so.6 is not a usable NCCL: it lacks "
                                             "ncclGetVersion"),
            std::string::npos)
      << wrong->unavailable_reason();
  expect_error([&] { NcclCommunicator::create_all(missing, {}); }, ErrorCode::kNotFound,
               {"NcclCommunicator::create_all: NCCL is not available"});
}

// ---------------------------------------------------------------------------------------------
// GPU tests: run where a CUDA driver and device exist, skip with the reason elsewhere.

#define INGOT_REQUIRE_GPU(driver)                                           \
  std::shared_ptr<CudaDriver> driver = CudaDriver::load();                  \
  if (!driver->available()) {                                               \
    GTEST_SKIP() << "no CUDA driver/GPU: " << driver->unavailable_reason(); \
  }

TEST(CudaGpu, DeviceAllocationAndRoundTrip) {
  INGOT_REQUIRE_GPU(driver);
  auto dev = CudaDevice::open(driver, 0);
  EXPECT_FALSE(dev->product_name().empty());
  Array host = Array::from_vector<float>(iota_floats(4096, -100.0f), {64, 64});
  Array on_dev = Array::empty({64, 64}, DType::kF32, &dev->device());
  EXPECT_EQ(dev->allocator().caching_stats().reserved_bytes, 2 * kMiB);
  dev->copy_async(host, on_dev)->wait();
  Array back = Array::zeros({64, 64}, DType::kF32);
  std::shared_ptr<CudaEvent> down = dev->copy_async(on_dev, back);
  down->wait();
  EXPECT_TRUE(down->ready());
  EXPECT_TRUE(back.bitwise_equal(host));
}

TEST(CudaGpu, LargeRoundTripThroughSmallStagingBuffers) {
  INGOT_REQUIRE_GPU(driver);
  auto dev = CudaDevice::open(driver, 0, CudaDeviceOptions{64 * 1024, 2});
  const size_t n = 3 * 1000 * 1000 + 17;  // ~12 MB of floats: 184 chunks of 64 KiB
  Array host = Array::from_vector<float>(iota_floats(n, 1.0f), {static_cast<int64_t>(n)});
  Array on_dev = Array::empty({static_cast<int64_t>(n)}, DType::kF32, &dev->device());
  dev->copy_async(host, on_dev)->wait();
  Array back = Array::zeros({static_cast<int64_t>(n)}, DType::kF32);
  dev->copy_async(on_dev, back)->wait();
  EXPECT_TRUE(back.bitwise_equal(host));
}

TEST(CudaGpu, EventsFromAnotherThreadAndComputeWaitsForCopy) {
  INGOT_REQUIRE_GPU(driver);
  auto dev = CudaDevice::open(driver, 0);
  Array host = Array::from_vector<int32_t>({1, 2, 3, 4}, {4});
  Array on_dev = Array::empty({4}, DType::kI32, &dev->device());
  std::shared_ptr<CudaEvent> up = dev->copy_async(host, on_dev, CopyOrder::kImmediate);
  dev->compute_stream().wait(*up);
  std::string error;
  std::thread t([&] {
    try {
      up->wait();
    } catch (const Error& e) {
      error = e.what();
    }
  });
  t.join();
  EXPECT_EQ(error, "");
  EXPECT_TRUE(up->ready());
  Array back = Array::zeros({4}, DType::kI32);
  dev->copy_async(on_dev, back)->wait();
  EXPECT_EQ(back.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4}));
}

TEST(CudaGpu, OutOfMemoryNamesRequestedAndFreeBytes) {
  INGOT_REQUIRE_GPU(driver);
  auto dev = CudaDevice::open(driver, 0);
  const int64_t total = dev->memory_info().total_bytes;
  expect_error([&] { Array::empty({total + kMiB}, DType::kU8, &dev->device()); }, ErrorCode::kOutOfMemory,
               {"cuda:0 out of memory: tried to allocate " + std::to_string(total + kMiB),
                "free of " + std::to_string(total) + " bytes"});
  // The device stays usable.
  Array ok = Array::empty({1024}, DType::kF32, &dev->device());
  EXPECT_EQ(dev->allocator().caching_stats().num_ooms, 1);
}

/// Opens every local GPU and one NCCL communicator per GPU.
struct NcclGroup {
  std::vector<std::unique_ptr<CudaDevice>> devices;
  std::vector<std::unique_ptr<NcclCommunicator>> comms;
  int size() const { return static_cast<int>(comms.size()); }
  /// Runs fn(rank) on one thread per rank (NCCL ranks of one process run concurrently).
  void run(const std::function<void(int)>& fn) {
    std::vector<std::thread> threads;
    std::vector<std::string> errors(static_cast<size_t>(size()));
    for (int r = 0; r < size(); ++r) {
      threads.emplace_back([&, r] {
        try {
          fn(r);
        } catch (const std::exception& e) {
          errors[static_cast<size_t>(r)] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < size(); ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
  }
  /// Host values -> a new array on rank r's device.
  Array upload(int r, const Array& host) {
    CudaDevice& dev = *devices[static_cast<size_t>(r)];
    Array a = Array::empty(host.shape(), host.dtype(), &dev.device());
    dev.copy_async(host, a)->wait();
    return a;
  }
  Array download(int r, const Array& a) {
    Array host = Array::empty(a.shape(), a.dtype());
    devices[static_cast<size_t>(r)]->copy_async(a, host)->wait();
    return host;
  }
};

#define INGOT_REQUIRE_NCCL_GROUP(group)                                    \
  INGOT_REQUIRE_GPU(driver_for_##group);                                   \
  std::shared_ptr<NcclLibrary> nccl_for_##group = NcclLibrary::load();     \
  if (!nccl_for_##group->available()) {                                    \
    GTEST_SKIP() << "no NCCL: " << nccl_for_##group->unavailable_reason(); \
  }                                                                        \
  NcclGroup group;                                                         \
  for (int i = 0; i < driver_for_##group->device_count(); ++i) {           \
    group.devices.push_back(CudaDevice::open(driver_for_##group, i));      \
  }                                                                        \
  {                                                                        \
    std::vector<CudaDevice*> raw;                                          \
    for (auto& d : group.devices) raw.push_back(d.get());                  \
    group.comms = NcclCommunicator::create_all(nccl_for_##group, raw);     \
  }

TEST(NcclGpu, AllReduceOnAllLocalGpus) {
  INGOT_REQUIRE_NCCL_GROUP(g);
  const int n = g.size();
  g.run([&](int r) {
    NcclCommunicator& c = *g.comms[static_cast<size_t>(r)];
    EXPECT_EQ(c.rank(), r);
    EXPECT_EQ(c.size(), n);
    EXPECT_EQ(c.backend(), "nccl");
    // Integers, exactly: rank r holds {r + 1, -(r + 1) * 3, 7 * r}.
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin}) {
      Array a = g.upload(r, Array::from_vector<int32_t>({r + 1, -(r + 1) * 3, 7 * r}, {3}));
      c.all_reduce(a, op);
      std::vector<int32_t> got = g.download(r, a).to_vector<int32_t>();
      int32_t s0 = 0, s1 = 0, s2 = 0;
      for (int q = 0; q < n; ++q) {
        s0 += q + 1;
        s1 += -(q + 1) * 3;
        s2 += 7 * q;
      }
      std::vector<int32_t> want;
      switch (op) {
        case ReduceOp::kSum:
          want = {s0, s1, s2};
          break;
        case ReduceOp::kMean:
          want = {s0 / n, s1 / n, s2 / n};
          break;  // truncating
        case ReduceOp::kMax:
          want = {n, -3, 7 * (n - 1)};
          break;
        case ReduceOp::kMin:
          want = {1, -3 * n, 0};
          break;
      }
      EXPECT_EQ(got, want) << reduce_op_name(op) << " on rank " << r;
    }
    // Floats, to tolerance: the mean of 0.1 * (q + 1) over ranks.
    Array f = g.upload(r, Array::from_vector<float>({0.1f * static_cast<float>(r + 1), 2.5f}, {2}));
    c.all_reduce(f, ReduceOp::kMean);
    std::vector<float> got = g.download(r, f).to_vector<float>();
    EXPECT_NEAR(got[0], 0.1f * static_cast<float>(n + 1) / 2.0f, 1e-6);
    EXPECT_NEAR(got[1], 2.5f, 1e-6);
    Array d = g.upload(r, Array::from_vector<double>({1.0 * r}, {1}));
    c.all_reduce(d, ReduceOp::kSum);
    EXPECT_EQ(g.download(r, d).to_vector<double>()[0], n * (n - 1) / 2.0);
  });
}

TEST(NcclGpu, AllGatherReduceScatterBroadcastBarrier) {
  INGOT_REQUIRE_NCCL_GROUP(g);
  const int n = g.size();
  g.run([&](int r) {
    NcclCommunicator& c = *g.comms[static_cast<size_t>(r)];
    Array in = g.upload(r, Array::from_vector<int64_t>({10 * r, 10 * r + 1}, {1, 2}));
    Array out = Array::empty({n, 2}, DType::kI64, &g.devices[static_cast<size_t>(r)]->device());
    c.all_gather(in, out);
    std::vector<int64_t> want;
    for (int q = 0; q < n; ++q) {
      want.push_back(10 * q);
      want.push_back(10 * q + 1);
    }
    EXPECT_EQ(g.download(r, out).to_vector<int64_t>(), want);

    // reduce_scatter: rank r contributes r + i at index i; block r of the sum is rank r's.
    std::vector<int32_t> contrib(static_cast<size_t>(2 * n));
    for (int i = 0; i < 2 * n; ++i) contrib[static_cast<size_t>(i)] = r + i;
    Array rs_in = g.upload(r, Array::from_vector<int32_t>(contrib, {2 * n}));
    Array rs_out = Array::empty({2}, DType::kI32, &g.devices[static_cast<size_t>(r)]->device());
    c.reduce_scatter(rs_in, rs_out, ReduceOp::kSum);
    const int ranks_sum = n * (n - 1) / 2;
    EXPECT_EQ(g.download(r, rs_out).to_vector<int32_t>(),
              (std::vector<int32_t>{ranks_sum + n * (2 * r), ranks_sum + n * (2 * r + 1)}));

    Array b = g.upload(r, Array::from_vector<float>({static_cast<float>(r) + 0.25f}, {1}));
    c.broadcast(b, n - 1);
    EXPECT_EQ(g.download(r, b).to_vector<float>()[0], static_cast<float>(n - 1) + 0.25f);
    c.barrier();
  });
}

TEST(NcclGpu, ArgumentErrors) {
  INGOT_REQUIRE_NCCL_GROUP(g);
  NcclCommunicator& c = *g.comms[0];
  Array host = Array::zeros({2}, DType::kF32);
  expect_error([&] { c.all_reduce(host, ReduceOp::kSum); }, ErrorCode::kInvalidArgument,
               {"all_reduce: inout lives on cpu:0, not on cuda:0"});
  Array bf = Array::empty({2}, DType::kBF16, &g.devices[0]->device());
  expect_error([&] { c.all_reduce(bf, ReduceOp::kSum); }, ErrorCode::kInvalidArgument, {"dtype bf16 is not supported"});
  Array in = Array::empty({2, 3}, DType::kF32, &g.devices[0]->device());
  Array out = Array::empty({2 * g.size() + 1, 3}, DType::kF32, &g.devices[0]->device());
  expect_error([&] { c.all_gather(in, out); }, ErrorCode::kShapeMismatch, {"(2, 3)"});
  expect_error([&] { c.broadcast(in, g.size()); }, ErrorCode::kInvalidArgument, {"root = " + std::to_string(g.size())});
}

TEST(NcclGpu, UniqueIdGroupOfOne) {
  INGOT_REQUIRE_GPU(driver);
  std::shared_ptr<NcclLibrary> nccl = NcclLibrary::load();
  if (!nccl->available()) GTEST_SKIP() << "no NCCL: " << nccl->unavailable_reason();
  auto dev = CudaDevice::open(driver, 0);
  auto comm = NcclCommunicator::create(nccl, *dev, nccl->unique_id(), 0, 1);
  Array a = Array::empty({3}, DType::kI64, &dev->device());
  Array h = Array::from_vector<int64_t>({-7, 0, 9}, {3});
  dev->copy_async(h, a)->wait();
  comm->all_reduce(a, ReduceOp::kMean);
  Array back = Array::zeros({3}, DType::kI64);
  dev->copy_async(a, back)->wait();
  EXPECT_EQ(back.to_vector<int64_t>(), (std::vector<int64_t>{-7, 0, 9}));
  expect_error([&] { NcclCommunicator::create(nccl, *dev, nccl->unique_id(), 1, 1); }, ErrorCode::kInvalidArgument,
               {"rank = 1 is not in [0, size = 1)"});
}

}  // namespace
}  // namespace ingot

#endif  // INGOT_HAVE_CUDA_TOOLKIT
