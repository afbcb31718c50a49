// ModelCheckpoint and PathTemplate: the filepath formatter against Python's str.format, which
// epochs' files save_best_only writes on constructed log sequences (and that each file holds the
// weights of its epoch), initial_value_threshold, batch-frequency saves in a real fit, reuse
// across fits (best is kept, as Keras keeps it), and every bad option.
#include "ingot/trainer/callbacks_checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ingot/runtime/error.h"
#include "ingot/trainer/model.h"
#include "ingot/trainer/model_io.h"
#include "ingot/trainer/safetensors.h"
#include "linear_model.h"
#include "test_util.h"

namespace ingot::callbacks {
namespace {

namespace fs = std::filesystem;
using ::ingot::testing::expect_error;

using testing::linear;

/// (w, b) of a checkpoint file, read back through Model::load_weights.
std::vector<float> weights_in(const std::string& path) {
  auto model = linear(-1, -1);
  model->load_weights(path);
  const std::vector<Array> w = model->get_weights();
  return {w[0].to_vector<float>()[0], w[1].to_vector<float>()[0]};
}

std::vector<float> weights_of(Model& model) {
  const std::vector<Array> w = model.get_weights();
  return {w[0].to_vector<float>()[0], w[1].to_vector<float>()[0]};
}

/// A fresh directory per test, removed afterwards.
class ModelCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("ingot_checkpoint_test_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::vector<std::string> listing() const {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir_)) {
      if (e.is_regular_file()) out.push_back(fs::relative(e.path(), dir_).string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path dir_;
};

/// Runs the epoch hooks of one fit with the given val_loss values; before each epoch end the
/// model's weights are set to (10 + epoch, -epoch), so every epoch has its own weights.
void run_epochs(CallbackList& list, Model& model, const std::vector<double>& val_loss) {
  list.on_train_begin({});
  for (size_t e = 0; e < val_loss.size(); ++e) {
    const auto epoch = static_cast<int64_t>(e);
    list.on_epoch_begin(epoch, {});
    model.set_weights(
        {testing::f32({10.0f + static_cast<float>(e)}, {1, 1}), testing::f32({-static_cast<float>(e)}, {1})});
    list.on_epoch_end(epoch, {{"loss", 2.0 * val_loss[e]}, {"val_loss", val_loss[e]}});
  }
  list.on_train_end({});
}

TEST(PathTemplate, FormatsLikePythonStrFormat) {
  const Logs logs{{"loss", 0.5}, {"val_loss", 0.123456}, {"val_accuracy", 0.875}};
  // Expected strings are what Python's str.format gives for the same arguments.
  EXPECT_EQ(PathTemplate("w-{epoch:02d}-{val_loss:.4f}.safetensors").format(3, std::nullopt, logs),
            "w-03-0.1235.safetensors");
  EXPECT_EQ(PathTemplate("{epoch}/{loss}").format(12, std::nullopt, logs), "12/0.5");
  EXPECT_EQ(PathTemplate("{epoch:3}|{epoch:03}|{epoch:.1f}").format(7, std::nullopt, logs), "  7|007|7.0");
  EXPECT_EQ(PathTemplate("{val_accuracy:.2e}_{val_loss:g}").format(1, std::nullopt, logs), "8.75e-01_0.123456");
  EXPECT_EQ(PathTemplate("{loss:6}|{loss:06}").format(1, std::nullopt, logs), "   0.5|0000.5");
  EXPECT_EQ(PathTemplate("e{epoch}-b{batch:04d}").format(2, 17, logs), "e2-b0017");
  EXPECT_EQ(PathTemplate("{{epoch}}-{epoch}}}").format(5, std::nullopt, logs), "{epoch}-5}");
  EXPECT_TRUE(PathTemplate("{batch}").uses_batch());
  EXPECT_FALSE(PathTemplate("{epoch}").uses_batch());
}

TEST(PathTemplate, RejectsMalformedPatternsAndUnknownFields) {
  const auto bad = [](const std::string& pattern, const std::string& needle) {
    expect_error([&] { PathTemplate t(pattern); }, ErrorCode::kInvalidArgument, {pattern, needle});
  };
  bad("w-{epoch", "never closed");
  bad("w-}", "single '}'");
  bad("w-{}", "empty field name");
  bad("{epoch!r}", "conversions");
  bad("{epoch:x}", "unsupported format spec ':x'");
  bad("{epoch:>5}", "unsupported format spec");
  bad("{val_loss:d}", "needs f, e or g");
  bad("{val_loss:.3}", "needs a type");
  bad("{epoch:.2d}", "has a precision");
  bad("{loss:.f}", "without a precision");
  expect_error([] { PathTemplate("{val_acc:.2f}").format(1, std::nullopt, {{"loss", 1.0}, {"val_loss", 2.0}}); },
               ErrorCode::kInvalidArgument, {"no field 'val_acc'"});
  try {
    PathTemplate("{batch}").format(1, std::nullopt, {{"loss", 1.0}});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no field 'batch'"), std::string::npos);
    EXPECT_EQ(e.hint(), "available: epoch, loss");
  }
}

TEST_F(ModelCheckpointTest, SaveBestOnlyWritesExactlyTheImprovingEpochs) {
  auto model = linear(0, 0);
  std::ostringstream out;
  auto ckpt = std::make_shared<ModelCheckpoint>(
      ModelCheckpointOptions{.filepath = path("ckpt/w-{epoch:02d}-{val_loss:.2f}.safetensors"),
                             .verbose = 1,
                             .save_best_only = true,
                             .stream = &out});
  CallbackList list({ckpt}, {.params = {.epochs = 5, .verbose = 0}, .model = model.get()});
  run_epochs(list, *model, {1.0, 0.8, 0.9, 0.7, 0.7});
  // Epochs 1, 2 and 4 (1-based) improve; an equal value (epoch 5) does not. The folder was made.
  EXPECT_EQ(listing(), (std::vector<std::string>{"ckpt/w-01-1.00.safetensors", "ckpt/w-02-0.80.safetensors",
                                                 "ckpt/w-04-0.70.safetensors"}));
  EXPECT_EQ(weights_in(path("ckpt/w-01-1.00.safetensors")), (std::vector<float>{10, 0}));
  EXPECT_EQ(weights_in(path("ckpt/w-02-0.80.safetensors")), (std::vector<float>{11, -1}));
  EXPECT_EQ(weights_in(path("ckpt/w-04-0.70.safetensors")), (std::vector<float>{13, -3}));
  EXPECT_DOUBLE_EQ(ckpt->best(), 0.7);
  const std::string p1 = path("ckpt/w-01-1.00.safetensors"), p2 = path("ckpt/w-02-0.80.safetensors"),
                    p4 = path("ckpt/w-04-0.70.safetensors");
  EXPECT_EQ(out.str(), "\nEpoch 1: val_loss improved from inf to 1.00000, saving model to " + p1 + "\n" +
                           "\nEpoch 2: val_loss improved from 1.00000 to 0.80000, saving model to " + p2 + "\n" +
                           "\nEpoch 3: val_loss did not improve from 0.80000\n" +
                           "\nEpoch 4: val_loss improved from 0.80000 to 0.70000, saving model to " + p4 + "\n" +
                           "\nEpoch 5: val_loss did not improve from 0.70000\n");

  // Reused in a second fit: best is kept (Keras), so only a value below 0.7 is saved again.
  run_epochs(list, *model, {0.75, 0.65});
  EXPECT_EQ(ckpt->saved().size(), 4u);
  EXPECT_EQ(ckpt->saved().back(), path("ckpt/w-02-0.65.safetensors"));
  EXPECT_EQ(weights_in(ckpt->saved().back()), (std::vector<float>{11, -1}));
}

TEST_F(ModelCheckpointTest, ThresholdMaxModeOneFileAndMissingMonitor) {
  auto model = linear(0, 0);
  // One fixed file: overwritten by each better epoch; accuracy is maximized; 0.6 must be beaten.
  auto ckpt = std::make_shared<ModelCheckpoint>(ModelCheckpointOptions{.filepath = path("best.safetensors"),
                                                                       .monitor = "val_loss",
                                                                       .save_best_only = true,
                                                                       .mode = MonitorMode::kMax,
                                                                       .initial_value_threshold = 0.6});
  CallbackList list({ckpt}, {.params = {.verbose = 0}, .model = model.get()});
  run_epochs(list, *model, {0.5, 0.55, 0.9, 0.7});
  EXPECT_EQ(ckpt->saved(), (std::vector<std::string>{path("best.safetensors")}));
  EXPECT_EQ(weights_in(path("best.safetensors")), (std::vector<float>{12, -2}));

  std::ostringstream warnings;
  auto missing = std::make_shared<ModelCheckpoint>(ModelCheckpointOptions{
      .filepath = path("m.safetensors"), .monitor = "val_accuracy", .save_best_only = true, .warnings = &warnings});
  CallbackList list2({missing}, {.params = {.verbose = 0}, .model = model.get()});
  run_epochs(list2, *model, {0.5});
  EXPECT_FALSE(fs::exists(path("m.safetensors")));
  EXPECT_EQ(warnings.str(), "Warning: Can save best model only with val_accuracy available, skipping.\n");

  // Without save_best_only every epoch saves (and an unknown monitor name is fine).
  std::ostringstream out;
  auto every = std::make_shared<ModelCheckpoint>(ModelCheckpointOptions{
      .filepath = path("e{epoch}.safetensors"), .monitor = "custom", .verbose = 1, .stream = &out});
  CallbackList list3({every}, {.params = {.verbose = 0}, .model = model.get()});
  run_epochs(list3, *model, {0.5, 0.6});
  EXPECT_EQ(weights_in(path("e1.safetensors")), (std::vector<float>{10, 0}));
  EXPECT_EQ(weights_in(path("e2.safetensors")), (std::vector<float>{11, -1}));
  EXPECT_EQ(out.str(), "\nEpoch 1: saving model to " + path("e1.safetensors") + "\n" + "\nEpoch 2: saving model to " +
                           path("e2.safetensors") + "\n");
}

TEST_F(ModelCheckpointTest, InARealFitEachFileHoldsTheWeightsAfterItsEpoch) {
  auto model = linear(0, 0);
  model->compile({.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.1}),
                  .loss = std::make_shared<losses::MeanSquaredError>()});
  std::vector<std::vector<float>> at_epoch_end;
  auto record = std::make_shared<LambdaCallback>(
      LambdaCallbackOptions{.on_epoch_end = [&](int64_t, const Logs&) { at_epoch_end.push_back(weights_of(*model)); }});
  auto ckpt = std::make_shared<ModelCheckpoint>(
      ModelCheckpointOptions{.filepath = path("fit-{epoch}.safetensors"), .monitor = "loss", .save_best_only = true});
  const Array x = testing::f32({1, 2}, {2, 1}), y = testing::f32({3, 5}, {2, 1});
  model->fit(
      {.x = x, .y = y, .batch_size = 2, .epochs = 2, .verbose = 0, .callbacks = {record, ckpt}, .shuffle = false});
  // The loss falls (17, then 1.685): both epochs save; fit_test.cpp's trajectory: (1.3, 0.8), (1.71, 1.05).
  EXPECT_EQ(listing(), (std::vector<std::string>{"fit-1.safetensors", "fit-2.safetensors"}));
  ASSERT_EQ(at_epoch_end.size(), 2u);
  EXPECT_NEAR(at_epoch_end[0][0], 1.3, 1e-6);
  EXPECT_EQ(weights_in(path("fit-1.safetensors")), at_epoch_end[0]);
  EXPECT_EQ(weights_in(path("fit-2.safetensors")), at_epoch_end[1]);
  EXPECT_NEAR(ckpt->best(), 1.685, 1e-5);
}

TEST_F(ModelCheckpointTest, WholeModelFilesResumeAndSaveWeightsOnlyWritesWeights) {
  // SGD with momentum: resuming needs the momentum and the iteration count from the file.
  const auto compiled = [] {
    auto model = linear(0, 0);
    model->compile(
        {.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.1, .momentum = 0.9}),
         .loss = std::make_shared<losses::MeanSquaredError>()});
    return model;
  };
  const Array x = testing::f32({1, 2}, {2, 1}), y = testing::f32({3, 5}, {2, 1});
  const FitOptions fit{.x = x, .y = y, .batch_size = 2, .epochs = 2, .verbose = 0, .shuffle = false};
  auto model = compiled();
  auto whole = std::make_shared<ModelCheckpoint>(ModelCheckpointOptions{.filepath = path("m-{epoch}.safetensors")});
  auto weights = std::make_shared<ModelCheckpoint>(
      ModelCheckpointOptions{.filepath = path("w-{epoch}.safetensors"), .save_weights_only = true});
  FitOptions with_callbacks = fit;
  with_callbacks.callbacks = {whole, weights};
  model->fit(with_callbacks);

  // Default (Keras's save_weights_only=False): whole-model files, one step per epoch.
  const SafetensorsFile m1 = load_safetensors(path("m-1.safetensors"));
  EXPECT_EQ(m1.metadata.at("format"), "ingot-model-1");
  EXPECT_EQ(m1.metadata.at("optimizer"), "SGD");
  EXPECT_EQ(m1.metadata.at("iterations"), "1");
  EXPECT_EQ(load_safetensors(path("m-2.safetensors")).metadata.at("iterations"), "2");
  // Epoch 1's step from (0, 0): MSE gradients (dw, db) = (-13, -8), lr 0.1, momentum still 0:
  // w = 1.3, b = 0.8.
  EXPECT_NEAR(weights_in(path("m-1.safetensors"))[0], 1.3, 1e-6);
  EXPECT_NEAR(weights_in(path("m-1.safetensors"))[1], 0.8, 1e-6);
  EXPECT_EQ(weights_in(path("m-1.safetensors")), weights_in(path("w-1.safetensors")));

  // Weights only: the weights, no optimizer state; load_model refuses it.
  const SafetensorsFile w1 = load_safetensors(path("w-1.safetensors"));
  EXPECT_EQ(w1.metadata.at("format"), "ingot");
  EXPECT_EQ(w1.names(), (std::vector<std::string>{"dense/bias", "dense/kernel"}));
  auto refused = compiled();
  expect_error([&] { load_model(*refused, path("w-1.safetensors")); }, ErrorCode::kParseError, {"holds weights only"});

  // Epoch 1's whole-model file in a new model, one more epoch: exactly epoch 2's file.
  auto resumed = compiled();
  load_model(*resumed, path("m-1.safetensors"));
  FitOptions rest = fit;
  rest.initial_epoch = 1;
  resumed->fit(rest);
  EXPECT_EQ(weights_of(*resumed), weights_in(path("m-2.safetensors")));
  EXPECT_EQ(weights_of(*resumed), weights_of(*model));
}

TEST_F(ModelCheckpointTest, SaveFreqCountsBatchesInARealFit) {
  // 4 samples, batch 1: 4 steps per epoch; save_freq 3 counts across epochs as Keras does:
  // saves after steps 3 (epoch 1, batch 3) and 6 (epoch 2, batch 2).
  auto model = linear(0, 0);
  model->compile({.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.01}),
                  .loss = std::make_shared<losses::MeanSquaredError>()});
  std::vector<std::vector<float>> after_batch;
  auto record = std::make_shared<LambdaCallback>(LambdaCallbackOptions{
      .on_train_batch_end = [&](int64_t, const Logs&) { after_batch.push_back(weights_of(*model)); }});
  auto ckpt = std::make_shared<ModelCheckpoint>(
      ModelCheckpointOptions{.filepath = path("e{epoch}-b{batch}.safetensors"), .save_freq = 3});
  const Array x = testing::f32({1, 2, 3, 4}, {4, 1}), y = testing::f32({3, 5, 7, 9}, {4, 1});
  model->fit(
      {.x = x, .y = y, .batch_size = 1, .epochs = 2, .verbose = 0, .callbacks = {record, ckpt}, .shuffle = false});
  EXPECT_EQ(listing(), (std::vector<std::string>{"e1-b3.safetensors", "e2-b2.safetensors"}));
  ASSERT_EQ(after_batch.size(), 8u);
  EXPECT_EQ(weights_in(path("e1-b3.safetensors")), after_batch[2]);
  EXPECT_EQ(weights_in(path("e2-b2.safetensors")), after_batch[5]);
  EXPECT_NE(after_batch[2], after_batch[5]);
}

TEST_F(ModelCheckpointTest, SaveFreqCountsTheBatchesTrainedAtEveryStepsPerExecution) {
  // 20 batches an epoch, 2 epochs, save_freq 4. Keras 3 counts the batches between the indices
  // on_train_batch_end gets (the last step of each call; an index not above the last starts a
  // new epoch), so with several steps per call it saves after the call that reaches 4 batches.
  // Expected saves ("e<epoch>-b<batch>", both 1-based) follow Keras's ModelCheckpoint count.
  const std::map<int64_t, std::vector<std::string>> want = {
      {1, {"e1-b4", "e1-b8", "e1-b12", "e1-b16", "e1-b20", "e2-b4", "e2-b8", "e2-b12", "e2-b16", "e2-b20"}},
      {3, {"e1-b6", "e1-b12", "e1-b18", "e2-b3", "e2-b9", "e2-b15", "e2-b20"}},
      {16, {"e1-b16", "e1-b20", "e2-b16", "e2-b20"}},
  };
  std::vector<float> xs, ys;
  for (int i = 0; i < 20; ++i) {
    xs.push_back(0.1f * static_cast<float>(i));
    ys.push_back(2.0f * xs.back() + 1.0f);
  }
  const Array x = testing::f32(xs, {20, 1}), y = testing::f32(ys, {20, 1});
  for (const auto& [spe, names] : want) {
    SCOPED_TRACE("steps_per_execution " + std::to_string(spe));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto model = linear(0, 0);
    model->compile({.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.01}),
                    .loss = std::make_shared<losses::MeanSquaredError>(),
                    .steps_per_execution = spe});
    auto ckpt = std::make_shared<ModelCheckpoint>(
        ModelCheckpointOptions{.filepath = path("e{epoch}-b{batch}.safetensors"), .save_freq = 4});
    model->fit({.x = x, .y = y, .batch_size = 1, .epochs = 2, .verbose = 0, .callbacks = {ckpt}, .shuffle = false});
    std::vector<std::string> expected;
    for (const std::string& n : names) expected.push_back(n + ".safetensors");
    std::vector<std::string> got = listing();
    std::sort(got.begin(), got.end());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(got, expected);
  }
}

TEST_F(ModelCheckpointTest, RejectsBadOptionsAndPaths) {
  const auto bad = [](ModelCheckpointOptions o, const std::string& needle) {
    expect_error([&] { ModelCheckpoint c(o); }, ErrorCode::kInvalidArgument, {"ModelCheckpoint", needle});
  };
  bad({.filepath = ""}, "filepath is empty");
  bad({.filepath = "w.safetensors", .monitor = ""}, "monitor is empty");
  bad({.filepath = "w.safetensors", .verbose = -1}, "verbose = -1");
  bad({.filepath = "w.safetensors", .save_freq = 0}, "save_freq = 0");
  bad({.filepath = "w.safetensors", .save_freq = -3}, "save_freq = -3");
  bad({.filepath = "w.safetensors", .initial_value_threshold = std::numeric_limits<double>::infinity()},
      "initial_value_threshold = inf");
  bad({.filepath = "w-{batch}.safetensors"}, "{batch}");
  bad({.filepath = "w-{epoch"}, "never closed");
  bad({.filepath = "w.safetensors", .monitor = "val_custom", .save_best_only = true}, "val_custom");

  // No model: a clear error before training.
  CallbackList no_model({std::make_shared<ModelCheckpoint>(ModelCheckpointOptions{.filepath = path("w.safetensors")})},
                        {.params = {.verbose = 0}});
  expect_error([&] { no_model.on_train_begin({}); }, ErrorCode::kFailedPrecondition, {"no model"});

  // An unknown field fails at the first save; an existing directory is refused; nothing written.
  auto model = linear(1, 2);
  CallbackList unknown(
      {std::make_shared<ModelCheckpoint>(ModelCheckpointOptions{.filepath = path("w-{val_acc:.2f}.safetensors")})},
      {.params = {.verbose = 0}, .model = model.get()});
  unknown.on_train_begin({});
  expect_error([&] { unknown.on_epoch_end(0, {{"loss", 1.0}}); }, ErrorCode::kInvalidArgument, {"no field 'val_acc'"});
  fs::create_directories(path("taken"));
  auto to_dir = std::make_shared<ModelCheckpoint>(ModelCheckpointOptions{.filepath = path("taken")});
  CallbackList dir_list({to_dir}, {.params = {.verbose = 0}, .model = model.get()});
  dir_list.on_train_begin({});
  expect_error([&] { dir_list.on_epoch_end(0, {{"loss", 1.0}}); }, ErrorCode::kInvalidArgument,
               {"is an existing directory"});
  EXPECT_TRUE(to_dir->saved().empty());
  EXPECT_EQ(listing(), std::vector<std::string>{});
}

}  // namespace
}  // namespace ingot::callbacks
