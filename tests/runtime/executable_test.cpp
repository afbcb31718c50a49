// Executable: thunks run in order over a slot table; run() checks arguments, allocates the
// non-input slots on the requested device and returns the output slots.
#include "ingot/runtime/executable.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "ingot/runtime/gloo.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;
using testing::f32;

/// A thunk that writes out[0][i] = in[0][i] * factor + offset (f32), logging its name.
Thunk scale_thunk(std::string name, size_t in, size_t out, float factor, float offset, std::vector<std::string>* log) {
  Thunk t;
  t.name = name;
  t.input_slots = {in};
  t.output_slots = {out};
  t.run = [name, factor, offset, log](std::span<const Array> inputs, std::span<Array> outputs) {
    log->push_back(name);
    const float* x = inputs[0].data<float>();
    float* y = outputs[0].data<float>();
    for (int64_t i = 0; i < inputs[0].size(); ++i) y[i] = x[i] * factor + offset;
  };
  return t;
}

using Slots = std::vector<std::pair<Shape, DType>>;

TEST(Executable, RunsThunksInListOrderOverTemporaries) {
  // slot 0: input; slot 1 = 2 * x; slot 2 = slot1 + 1; slot 3 = 10 * slot2 (output).
  std::vector<std::string> log;
  std::vector<Thunk> thunks;
  thunks.push_back(scale_thunk("double", 0, 1, 2, 0, &log));
  thunks.push_back(scale_thunk("plus-one", 1, 2, 1, 1, &log));
  thunks.push_back(scale_thunk("times-ten", 2, 3, 10, 0, &log));
  const Slots slots(4, {Shape{3}, DType::kF32});
  Executable exe(slots, 1, std::move(thunks), {3});
  EXPECT_EQ(exe.num_inputs(), 1u);
  ASSERT_EQ(exe.thunks().size(), 3u);
  EXPECT_EQ(exe.thunks()[1].name, "plus-one");
  EXPECT_EQ(exe.slot_types(), slots);

  std::vector<Array> out = exe.run({f32({1, -2, 0.5f})});
  EXPECT_EQ(log, (std::vector<std::string>{"double", "plus-one", "times-ten"}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{30, -30, 20}));
  // Each run starts over: the thunks run again, in the same order, on fresh slots.
  out = exe.run({f32({0, 0, 0})});
  EXPECT_EQ(log.size(), 6u);
  EXPECT_EQ(log[3], "double");
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{10, 10, 10}));
}

TEST(Executable, AllocatesNonInputSlotsWithTheirTypesOnTheDevice) {
  Device device(DeviceKind::kCpu, 7, std::make_unique<HostAllocator>());
  const Array input = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  std::vector<std::pair<Shape, DType>> seen;  // types of the arrays the thunk was given
  std::vector<const void*> seen_ptrs;
  Thunk t;
  t.name = "inspect";
  t.input_slots = {0};
  t.output_slots = {1, 2};
  t.run = [&](std::span<const Array> in, std::span<Array> out) {
    for (const Array& a : in) seen.emplace_back(a.shape(), a.dtype()), seen_ptrs.push_back(a.raw_data());
    for (Array& a : out) seen.emplace_back(a.shape(), a.dtype()), seen_ptrs.push_back(a.raw_data());
    out[0].data<int32_t>()[0] = 42;
    auto* bits = static_cast<uint8_t*>(out[1].raw_data());  // bools are one byte each
    for (int i = 0; i < 4; ++i) bits[i] = static_cast<uint8_t>(i % 2);
  };
  Executable exe({{{2, 3}, DType::kF32}, {{}, DType::kI32}, {{2, 2}, DType::kBool}}, 1, {t}, {1, 2, 0});
  const int64_t before = device.allocator().stats().num_allocations;
  std::vector<Array> out = exe.run({input}, &device);

  EXPECT_EQ(seen,
            (std::vector<std::pair<Shape, DType>>{{{2, 3}, DType::kF32}, {{}, DType::kI32}, {{2, 2}, DType::kBool}}));
  // The input slot is the caller's array itself (no copy); the two others were allocated on
  // `device`, once each.
  EXPECT_EQ(seen_ptrs[0], input.raw_data());
  EXPECT_EQ(device.allocator().stats().num_allocations - before, 2);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(&out[0].device(), &device);
  EXPECT_EQ(&out[1].device(), &device);
  EXPECT_EQ(out[0].raw_data(), seen_ptrs[1]);
  EXPECT_EQ(out[0].to_vector<int32_t>(), std::vector<int32_t>{42});
  EXPECT_EQ(out[1].to_vector<bool>(), (std::vector<bool>{false, true, false, true}));
  // An input listed as an output is returned as the caller's array.
  EXPECT_EQ(out[2].raw_data(), input.raw_data());
  // Without a device the slots go to cpu:0.
  out = exe.run({input});
  EXPECT_EQ(&out[0].device(), &default_cpu_device());
}

TEST(Executable, ASlotWrittenTwiceKeepsItsBufferAndEmptySlotsWork) {
  // Thunk 2 updates slot 1 in place (reads and writes it): slot 1 is allocated once.
  std::vector<std::string> log;
  std::vector<Thunk> thunks;
  thunks.push_back(scale_thunk("init", 0, 1, 1, 0, &log));
  thunks.push_back(scale_thunk("update", 1, 1, 3, -1, &log));
  Executable exe({{{2}, DType::kF32}, {{2}, DType::kF32}}, 1, std::move(thunks), {1});
  EXPECT_EQ(exe.run({f32({1, 2})})[0].to_vector<float>(), (std::vector<float>{2, 5}));

  // Size-0 slots are allocated and passed like any other.
  log.clear();
  Executable empty({{{0, 3}, DType::kF32}, {{0, 3}, DType::kF32}}, 1, {scale_thunk("noop", 0, 1, 2, 0, &log)}, {1});
  std::vector<Array> out = empty.run({Array::zeros({0, 3}, DType::kF32)});
  EXPECT_EQ(log, std::vector<std::string>{"noop"});
  EXPECT_EQ(out[0].shape(), (Shape{0, 3}));
  EXPECT_EQ(out[0].size(), 0);
}

TEST(Executable, AnOutputReturnedTwiceIsOneArray) {
  std::vector<std::string> log;
  Executable exe({{{2}, DType::kF32}, {{2}, DType::kF32}}, 1, {scale_thunk("neg", 0, 1, -1, 0, &log)}, {1, 0, 1});
  std::vector<Array> out = exe.run({f32({3, 4})});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].raw_data(), out[2].raw_data());
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{-3, -4}));
  // Same buffer: writing through one is visible through the other.
  out[0].data<float>()[0] = 9;
  EXPECT_EQ(out[2].to_vector<float>(), (std::vector<float>{9, -4}));
  EXPECT_NE(out[1].raw_data(), out[0].raw_data());
}

TEST(Executable, ADonatedInputSlotIsUpdatedInPlace) {
  // x <- 2x in the donated slot 0; slot 1 = x + 1 computed from the updated value.
  std::vector<std::string> log;
  std::vector<Thunk> thunks;
  thunks.push_back(scale_thunk("double-in-place", 0, 0, 2, 0, &log));
  thunks.push_back(scale_thunk("plus-one", 0, 1, 1, 1, &log));
  Executable exe({{{2}, DType::kF32}, {{2}, DType::kF32}}, 1, std::move(thunks), {0, 1}, {0}, "inplace");
  EXPECT_EQ(exe.donated_inputs(), std::vector<size_t>{0});
  EXPECT_EQ(exe.name(), "inplace");
  Array x = f32({1, -3});
  const void* data = x.raw_data();
  std::vector<Array> out = exe.run({x});
  EXPECT_EQ(out[0].raw_data(), data);  // the caller's memory, now owned by the result
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{2, -6}));
  EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{3, -5}));
  EXPECT_TRUE(x.donated());
  expect_error([&] { x.to_vector<float>(); }, ErrorCode::kFailedPrecondition, {"donated to 'inplace'"});
  expect_error([&] { Executable({{{2}, DType::kF32}}, 1, {}, {}, {1}); }, ErrorCode::kInvalidArgument,
               {"donated input 1", "not an input"});
}

TEST(Executable, NoThunksReturnsInputs) {
  Executable exe({{{1}, DType::kI64}}, 1, {}, {0, 0});
  const Array x = Array::from_vector<int64_t>({-5}, {1});
  std::vector<Array> out = exe.run({x});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].raw_data(), x.raw_data());
  EXPECT_EQ(out[1].to_vector<int64_t>(), std::vector<int64_t>{-5});
  // No outputs at all is fine too.
  EXPECT_TRUE(Executable({{{1}, DType::kI64}}, 1, {}, {}).run({x}).empty());
}

TEST(Executable, ArgumentErrorsNameTheIndexAndTypes) {
  std::vector<std::string> log;
  Executable exe({{{2, 2}, DType::kF32}, {{3}, DType::kI32}, {{2, 2}, DType::kF32}}, 2,
                 {scale_thunk("copy", 0, 2, 1, 0, &log)}, {2});
  const Array good0 = Array::zeros({2, 2}, DType::kF32);
  const Array good1 = Array::zeros({3}, DType::kI32);
  expect_error([&] { exe.run({good0}); }, ErrorCode::kInvalidArgument,
               {"Executable::run", "1 arguments given", "takes 2"});
  expect_error([&] { exe.run({good0, good1, good1}); }, ErrorCode::kInvalidArgument, {"3 arguments given", "takes 2"});
  expect_error([&] { exe.run({good0, Array()}); }, ErrorCode::kInvalidArgument, {"argument 1", "invalid Array"});
  expect_error([&] { exe.run({good0, Array::zeros({3}, DType::kI64)}); }, ErrorCode::kDTypeMismatch,
               {"argument 1", "i64", "expected i32"});
  expect_error([&] { exe.run({Array::zeros({2, 2}, DType::kF16), good1}); }, ErrorCode::kDTypeMismatch,
               {"argument 0", "f16", "expected f32"});
  expect_error([&] { exe.run({Array::zeros({4}, DType::kF32), good1}); }, ErrorCode::kShapeMismatch,
               {"argument 0", "(4,)", "expected (2, 2)"});
  expect_error([&] { exe.run({good0, Array::zeros({1, 3}, DType::kI32)}); }, ErrorCode::kShapeMismatch,
               {"argument 1", "(1, 3)", "expected (3,)"});
  // Nothing ran for any of them.
  EXPECT_TRUE(log.empty());
  exe.run({good0, good1});
  EXPECT_EQ(log.size(), 1u);
}

TEST(Executable, ThunkErrorsPropagate) {
  Thunk t;
  t.name = "fails";
  t.output_slots = {0};
  t.run = [](std::span<const Array>, std::span<Array>) { throw Error(ErrorCode::kInternal, "thunk 'fails' broke"); };
  Executable exe({{{1}, DType::kF32}}, 0, {t}, {0});
  expect_error([&] { exe.run({}); }, ErrorCode::kInternal, {"thunk 'fails' broke"});
}

TEST(Executable, ConstructionChecksTheSlotTable) {
  std::vector<std::string> log;
  const Slots two(2, {Shape{2}, DType::kF32});
  expect_error([&] { Executable(two, 1, {scale_thunk("far", 0, 5, 1, 0, &log)}, {1}); }, ErrorCode::kInvalidArgument,
               {"thunk 'far'", "slot 5", "2 slots"});
  expect_error([&] { Executable(two, 1, {scale_thunk("t", 0, 1, 1, 0, &log)}, {2}); }, ErrorCode::kInvalidArgument,
               {"output list", "slot 2"});
  expect_error([&] { Executable(two, 3, {}, {}); }, ErrorCode::kInvalidArgument, {"3 inputs", "2 slots"});
  // Reading a slot no one has written yet, writing an input, returning a slot no one writes.
  const Slots three(3, {Shape{2}, DType::kF32});
  std::vector<Thunk> backwards;
  backwards.push_back(scale_thunk("reader", 2, 1, 1, 0, &log));
  backwards.push_back(scale_thunk("writer", 0, 2, 1, 0, &log));
  expect_error([&] { Executable(three, 1, backwards, {1}); }, ErrorCode::kInvalidArgument,
               {"thunk 'reader'", "reads slot 2", "before"});
  expect_error([&] { Executable(three, 1, {scale_thunk("clobber", 0, 0, 1, 0, &log)}, {0}); },
               ErrorCode::kInvalidArgument, {"thunk 'clobber'", "writes input slot 0", "not donated"});
  expect_error([&] { Executable(three, 1, {scale_thunk("t", 0, 1, 1, 0, &log)}, {1, 2}); }, ErrorCode::kInvalidArgument,
               {"output slot 2", "neither an input nor written"});
}

/// An asynchronous "collective" that copies in[0] into out[0] after `sleep_ms`, logging its start
/// and end (it ignores the communicator), or throws `error` when not empty.
Thunk async_copy(std::string name, size_t in, size_t out, int sleep_ms, std::vector<std::string>* log, std::mutex* mu,
                 std::string error = {}) {
  Thunk t;
  t.name = name;
  t.input_slots = {in};
  t.output_slots = {out};
  t.async = true;
  t.collective = [=](Communicator&, std::span<const Array> inputs, std::span<Array> outputs) {
    {
      std::lock_guard<std::mutex> lock(*mu);
      log->push_back(name + " start");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    if (!error.empty()) throw Error(ErrorCode::kFailedPrecondition, error);
    std::memcpy(outputs[0].raw_data(), inputs[0].raw_data(), static_cast<size_t>(inputs[0].nbytes()));
    std::lock_guard<std::mutex> lock(*mu);
    log->push_back(name + " end");
  };
  return t;
}

Thunk wait_thunk(size_t k) {
  Thunk t;
  t.name = "wait";
  t.wait_for = k;
  return t;
}

TEST(Executable, AsyncCollectivesRunInOrderWhileComputeRunsAndAreWaitedFor) {
  // slot 1 = copy(x) (async, slow), slot 2 = copy(x) (async, after the first), slot 3 = 2 x
  // meanwhile; outputs after the waits.
  std::vector<std::string> log;
  std::mutex mu;
  std::vector<Thunk> thunks;
  thunks.push_back(async_copy("first", 0, 1, 50, &log, &mu));
  thunks.push_back(async_copy("second", 0, 2, 0, &log, &mu));
  thunks.push_back(scale_thunk("compute", 0, 3, 2, 0, &log));
  thunks.push_back(wait_thunk(0));
  thunks.push_back(wait_thunk(1));
  Executable exe(Slots(4, {Shape{2}, DType::kF32}), 1, std::move(thunks), {1, 2, 3});
  std::vector<std::unique_ptr<Communicator>> one = make_local_gloo_group(1);
  const std::vector<Array> out = exe.run({f32({1, -2})}, nullptr, one[0].get());
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{1, -2}));
  EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{1, -2}));
  EXPECT_EQ(out[2].to_vector<float>(), (std::vector<float>{2, -4}));
  // The compute ran while the first collective slept; the second started after the first ended.
  ASSERT_EQ(log.size(), 5u);
  const auto at = [&](const std::string& what) { return std::find(log.begin(), log.end(), what) - log.begin(); };
  EXPECT_LT(at("compute"), at("first end"));
  EXPECT_LT(at("first end"), at("second start"));
}

TEST(Executable, AnAsyncCollectivesErrorIsThrownAtItsWait) {
  std::vector<std::string> log;
  std::mutex mu;
  std::vector<Thunk> thunks;
  thunks.push_back(async_copy("broken", 0, 1, 0, &log, &mu, "peer went away"));
  thunks.push_back(scale_thunk("compute", 0, 2, 2, 0, &log));
  thunks.push_back(wait_thunk(0));
  Executable exe(Slots(3, {Shape{2}, DType::kF32}), 1, std::move(thunks), {1, 2});
  std::vector<std::unique_ptr<Communicator>> one = make_local_gloo_group(1);
  expect_error([&] { exe.run({f32({1, 2})}, nullptr, one[0].get()); }, ErrorCode::kFailedPrecondition,
               {"peer went away"});
  EXPECT_EQ(std::count(log.begin(), log.end(), "compute"), 1);
}

TEST(Executable, AsyncCollectivesAndWaitsAreChecked) {
  std::vector<std::string> log;
  std::mutex mu;
  const Slots slots(3, {Shape{2}, DType::kF32});
  // Reading the output before the wait.
  std::vector<Thunk> early = {async_copy("c", 0, 1, 0, &log, &mu), scale_thunk("reader", 1, 2, 1, 0, &log),
                              wait_thunk(0)};
  expect_error([&] { Executable(slots, 1, early, {2}); }, ErrorCode::kInvalidArgument,
               {"thunk 'reader' reads slot 1 before"});
  // Never waited for; waited twice; waiting for a plain thunk or a later one; a wait with work.
  expect_error([&] { Executable(slots, 1, {async_copy("c", 0, 1, 0, &log, &mu)}, {0}); }, ErrorCode::kInvalidArgument,
               {"'c' (thunk 0) is never waited for"});
  std::vector<Thunk> twice = {async_copy("c", 0, 1, 0, &log, &mu), wait_thunk(0), wait_thunk(0)};
  expect_error([&] { Executable(slots, 1, twice, {1}); }, ErrorCode::kInvalidArgument, {"waited for already"});
  std::vector<Thunk> plain = {scale_thunk("t", 0, 1, 1, 0, &log), wait_thunk(0)};
  expect_error([&] { Executable(slots, 1, plain, {1}); }, ErrorCode::kInvalidArgument,
               {"not an asynchronous collective"});
  std::vector<Thunk> later = {wait_thunk(1), async_copy("c", 0, 1, 0, &log, &mu)};
  expect_error([&] { Executable(slots, 1, later, {0}); }, ErrorCode::kInvalidArgument, {"not before it"});
  Thunk busy = wait_thunk(0);
  busy.input_slots = {0};
  std::vector<Thunk> with_slots = {async_copy("c", 0, 1, 0, &log, &mu), busy};
  expect_error([&] { Executable(slots, 1, with_slots, {1}); }, ErrorCode::kInvalidArgument, {"also has work or slots"});
  Thunk not_collective = scale_thunk("t", 0, 1, 1, 0, &log);
  not_collective.async = true;
  expect_error([&] { Executable(slots, 1, {not_collective}, {1}); }, ErrorCode::kInvalidArgument,
               {"'t' is async but not a collective"});
}

}  // namespace
}  // namespace ingot
