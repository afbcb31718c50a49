// Whole-model files (save_model / load_model): a run saved after 2 epochs and loaded into a new
// model made by the same code continues bitwise like an uninterrupted run; the metadata and the
// architecture description hold the hand-computed values; every foreign, damaged or mismatched
// file is a clear error that changes neither the weights nor the optimizer state.
#include "ingot/trainer/model_io.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "ingot/trainer/model.h"
#include "ingot/trainer/safetensors.h"
#include "resume_util.h"
#include "test_util.h"

namespace ingot {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;

using Data = testing::ResumeData;
using testing::make_model;

FitOptions fit_options(const Data& d, int64_t epochs, int64_t initial_epoch = 0) {
  return {
      .x = d.x, .y = d.y, .batch_size = 8, .epochs = epochs, .verbose = 0, .seed = 5, .initial_epoch = initial_epoch};
}

std::vector<std::vector<double>> doubles(const std::vector<Array>& arrays) {
  std::vector<std::vector<double>> out;
  for (const Array& a : arrays) out.push_back(a.to_doubles());
  return out;
}

/// A fresh directory per test, removed afterwards.
class ModelIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("ingot_model_io_test_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(ModelIoTest, ALoadedModelResumesBitwiseLikeAnUninterruptedRun) {
  const Data d;
  auto straight = make_model();
  auto full = straight->fit(fit_options(d, 3));

  auto first = make_model();
  first->fit(fit_options(d, 2));
  save_model(*first, path("run.safetensors"));
  const SafetensorsFile file = load_safetensors(path("run.safetensors"));
  EXPECT_EQ(file.metadata.at("format"), "ingot-model-1");
  EXPECT_EQ(file.metadata.at("model"), "sequential");
  EXPECT_EQ(file.metadata.at("model_class"), "Sequential");
  EXPECT_EQ(file.metadata.at("input_shape"), "[8,4]");  // built by fit for batches of 8
  EXPECT_EQ(file.metadata.at("input_dtype"), "f32");
  EXPECT_EQ(file.metadata.at("optimizer"), "Adam");
  // Adam with a schedule: iterations + momentum and velocity of 4 trainable variables.
  EXPECT_EQ(file.metadata.at("optimizer_variables"), "9");
  EXPECT_EQ(file.metadata.at("iterations"), "10");  // 2 epochs of 40 / 8 steps
  EXPECT_EQ(file.at("__optimizer__/0000").to_doubles(), std::vector<double>{10});

  // A new process: the same code makes and compiles the model (not built); load_model builds it.
  auto second = make_model();
  load_model(*second, path("run.safetensors"));
  ASSERT_TRUE(second->input_type().has_value());
  EXPECT_EQ(second->input_type()->shape, (Shape{8, 4}));
  EXPECT_EQ(doubles(second->get_weights()), doubles(first->get_weights()));
  auto resumed = second->fit(fit_options(d, 3, /*initial_epoch=*/2));
  EXPECT_EQ(resumed->epochs(), std::vector<int64_t>{2});
  EXPECT_EQ(resumed->values("loss"), std::vector<double>{full->values("loss")[2]});
  EXPECT_EQ(doubles(second->get_weights()), doubles(straight->get_weights()));

  // Without the optimizer state (a fresh Adam at iteration 0) the third epoch differs.
  auto weights_only = make_model();
  weights_only->build_model({8, 4});
  weights_only->load_weights(path("run.safetensors"));  // a whole-model file holds the weights too
  weights_only->fit(fit_options(d, 3, 2));
  EXPECT_NE(doubles(weights_only->get_weights()), doubles(straight->get_weights()));
}

TEST_F(ModelIoTest, TheArchitectureListsLayersAndVariables) {
  auto m = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Layer>>{std::make_shared<Dense>(DenseOptions{.units = 2})},
      ModelOptions{.name = "tiny"});
  m->build_model({1, 3});
  EXPECT_EQ(model_architecture(*m),
            R"({"class":"Sequential","layers":[{"class":"Dense","layers":[],"name":"dense","variables":[)"
            R"({"dtype":"f32","name":"dense/kernel","shape":[3,2],"trainable":true},)"
            R"({"dtype":"f32","name":"dense/bias","shape":[2],"trainable":true}]}],"name":"tiny"})");

  // Uncompiled: no optimizer state, no iteration count; loading into a compiled model sets the
  // weights and leaves its fresh optimizer state alone.
  m->set_weights({testing::f32({1, 2, 3, 4, 5, 6}, {3, 2}), testing::f32({-1, -2}, {2})});
  save_model(*m, path("tiny.safetensors"));
  const SafetensorsFile file = load_safetensors(path("tiny.safetensors"));
  EXPECT_EQ(file.metadata.at("optimizer"), "");
  EXPECT_EQ(file.metadata.at("optimizer_variables"), "0");
  EXPECT_EQ(file.metadata.count("iterations"), 0u);
  EXPECT_EQ(file.names(), (std::vector<std::string>{"dense/bias", "dense/kernel"}));

  auto target = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Layer>>{std::make_shared<Dense>(DenseOptions{.units = 2})},
      ModelOptions{.name = "tiny"});
  target->compile({.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.momentum = 0.5}),
                   .loss = std::make_shared<losses::MeanSquaredError>()});
  load_model(*target, path("tiny.safetensors"));
  EXPECT_EQ(doubles(target->get_weights()), (std::vector<std::vector<double>>{{1, 2, 3, 4, 5, 6}, {-1, -2}}));
  // SGD with momentum, constant rate: iterations 0, learning rate 0.01, two momentum slots of zeros.
  const std::vector<Array> state = target->training_state()->get_optimizer_state();
  ASSERT_EQ(state.size(), 4u);
  EXPECT_EQ(state[0].to_doubles(), std::vector<double>{0});
  EXPECT_EQ(state[2].to_doubles(), std::vector<double>(6, 0.0));

  auto unbuilt = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Layer>>{std::make_shared<Dense>(DenseOptions{.units = 2})});
  expect_error([&] { save_model(*unbuilt, path("never.safetensors")); }, ErrorCode::kFailedPrecondition,
               {"save_model", "not built"});
  EXPECT_FALSE(fs::exists(path("never.safetensors")));
}

/// A trained target whose weights and optimizer state every failed load must leave as they are.
struct Target {
  std::shared_ptr<Sequential> model;
  std::vector<std::vector<double>> weights, state;

  explicit Target(std::shared_ptr<Sequential> m, const Data& d) : model(std::move(m)) {
    model->fit(fit_options(d, 1));
    weights = doubles(model->get_weights());
    state = doubles(model->training_state()->get_optimizer_state());
  }
  void expect_unchanged() const {
    EXPECT_EQ(doubles(model->get_weights()), weights);
    EXPECT_EQ(doubles(model->training_state()->get_optimizer_state()), state);
  }
};

TEST_F(ModelIoTest, ForeignDamagedAndMismatchedFilesAreErrorsThatChangeNothing) {
  const Data d;
  auto source = make_model();
  source->fit(fit_options(d, 2));
  const std::string good = path("good.safetensors");
  save_model(*source, good);

  const Target target(make_model(), d);
  const auto fails = [&](const Target& t, const std::string& file, ErrorCode code, std::vector<std::string> needles) {
    expect_error([&] { load_model(*t.model, file); }, code, needles);
    t.expect_unchanged();
  };

  // Not a whole-model file.
  source->save_weights(path("weights.safetensors"));
  fails(target, path("weights.safetensors"), ErrorCode::kParseError, {"holds weights only", "load_weights"});
  save_safetensors(path("backup.safetensors"), {{"x", testing::f32({1}, {1})}}, {{"format", "ingot-backup-1"}});
  fails(target, path("backup.safetensors"), ErrorCode::kParseError, {"BackupAndRestore backup"});
  fails(target, path("missing.safetensors"), ErrorCode::kNotFound, {"missing.safetensors"});

  // A truncated file, and metadata that does not parse.
  fs::copy_file(good, path("cut.safetensors"));
  fs::resize_file(path("cut.safetensors"), fs::file_size(good) / 2);
  fails(target, path("cut.safetensors"), ErrorCode::kParseError, {"cut.safetensors"});
  SafetensorsFile file = load_safetensors(good);
  std::map<std::string, std::string> meta = file.metadata;
  meta["architecture"] = R"({"class":"Sequential","layers":[{"name":"dense"}]})";
  save_safetensors(path("bad_meta.safetensors"), file.tensors, meta);
  fails(target, path("bad_meta.safetensors"), ErrorCode::kParseError, {"malformed 'architecture'"});
  meta = file.metadata;
  meta.erase("input_shape");
  save_safetensors(path("no_shape.safetensors"), file.tensors, meta);
  fails(target, path("no_shape.safetensors"), ErrorCode::kParseError, {"no metadata 'input_shape'"});
  meta = file.metadata;
  meta["iterations"] = "abc";
  save_safetensors(path("bad_iterations.safetensors"), file.tensors, meta);
  fails(target, path("bad_iterations.safetensors"), ErrorCode::kParseError, {"malformed 'iterations'"});

  // Another model class.
  auto in = Input({4});
  auto functional = std::make_shared<Functional>(in, (*std::make_shared<Dense>(DenseOptions{.units = 3}))(in));
  functional->compile(
      {.optimizer = std::make_shared<optimizers::Adam>(), .loss = std::make_shared<losses::MeanSquaredError>()});
  expect_error([&] { load_model(*functional, good); }, ErrorCode::kInvalidArgument,
               {"holds a Sequential model ('sequential')", "is a Functional"});
  EXPECT_FALSE(functional->input_type().has_value());  // refused before building

  // Another layer, another shape, another input, another optimizer class or configuration.
  fails(Target(make_model(nullptr, std::make_shared<LayerNormalization>()), d), good, ErrorCode::kInvalidArgument,
        {"layer 1 is 'dropout' (Dropout) in the file, 'layer_normalization' (LayerNormalization) in the model"});
  fails(Target(make_model(nullptr, nullptr, 9), d), good, ErrorCode::kShapeMismatch,
        {"variable 'dense/kernel' is f32 (4, 8) in the file, f32 (4, 9) in the model"});
  auto short_model = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Layer>>{std::make_shared<Dense>(DenseOptions{.units = 8, .activation = "relu"}),
                                          std::make_shared<Dropout>(DropoutOptions{.rate = 0.25})});
  short_model->build_model({8, 4});
  const std::vector<std::vector<double>> short_before = doubles(short_model->get_weights());
  expect_error([&] { load_model(*short_model, good); }, ErrorCode::kNotFound,
               {"the file's layer 'dense_1' (Dense) is missing from the model"});
  EXPECT_EQ(doubles(short_model->get_weights()), short_before);
  auto wide = make_model();
  wide->build_model({8, 5});
  expect_error([&] { load_model(*wide, good); }, ErrorCode::kShapeMismatch, {"inputs f32 (8, 4)", "takes f32 (8, 5)"});
  fails(Target(make_model(std::make_shared<optimizers::SGD>()), d), good, ErrorCode::kInvalidArgument,
        {"holds the state of the optimizer Adam", "is compiled with SGD"});
  fails(Target(make_model(std::make_shared<optimizers::Adam>()), d), good, ErrorCode::kInvalidArgument,
        {"holds 9 Adam optimizer variables, model 'sequential' has 10"});

  // The good file still loads into the target.
  load_model(*target.model, good);
  EXPECT_EQ(doubles(target.model->get_weights()), doubles(source->get_weights()));
  EXPECT_EQ(doubles(target.model->training_state()->get_optimizer_state()),
            doubles(source->training_state()->get_optimizer_state()));
}

}  // namespace
}  // namespace ingot
