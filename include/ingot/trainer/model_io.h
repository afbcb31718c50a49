// Whole-model checkpoints: Keras's model.save / keras.models.load_model and PyTorch's
// "checkpoint" dict, for models whose architecture is C++ code. Guide: docs/trainer-weights-io.md,
// "Whole-model files".
//
// A whole-model file is one safetensors file (safetensors.h) holding
//   - every model variable under its name ("<layer>/<weight>"), as Model::save_weights writes
//     them (so Model::load_weights reads a whole-model file too);
//   - the optimizer's variables (Optimizer::build's layout: iterations, learning rate, averages,
//     slots) as "__optimizer__/0000", "__optimizer__/0001", ...;
//   - metadata (all strings): "format" = kModelFileFormat, "model" (name), "model_class",
//     "input_shape" (JSON list, batch dim included), "input_dtype" (dtype_name) of the first input,
//     "input_types" (every input: JSON [{"shape": [...], "dtype": "f32"}, ...]), "architecture"
//     (JSON, see model_architecture), "optimizer" (class name, "" without one),
//     "optimizer_variables" (count) and "iterations" (the optimizer's step count; absent without
//     an optimizer).
// The architecture cannot be rebuilt from the file (it is code): load_model restores a file into
// a model made by the same code, after checking that its architecture is the recorded one.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ingot/trainer/callbacks.h"
#include "ingot/trainer/safetensors.h"

namespace ingot {

class Model;

/// The "format" metadata of a whole-model file.
inline constexpr const char* kModelFileFormat = "ingot-model-1";

/// The architecture description recorded by save_model, as compact JSON:
///   {"class": "Sequential", "name": "sequential", "layers": [LAYER, ...]}
/// with LAYER = {"name": "dense", "class": "Dense", "variables": [VAR, ...], "layers": [LAYER...]}
/// (the layers a layer tracks, in tracking order; "variables" are the layer's own, in creation
/// order) and VAR = {"name": "dense/kernel", "shape": [4, 8], "dtype": "f32", "trainable": true}.
/// Like Keras's get_config / the layer list of model.summary(). The model should be built
/// (an unbuilt model's layers have no variables yet).
std::string model_architecture(Model& model);

/// Keras's model.save(path): writes `model`'s variables, its optimizer's state and the metadata
/// described above to the safetensors file `path` (atomically: a temporary file renamed over it,
/// an existing file stays as it was on failure). Called from a callback during fit (as
/// ModelCheckpoint does), it saves the live state after the last finished step; outside a loop,
/// the variables. A built model compiled with an optimizer that has not trained yet saves the
/// optimizer's initial state (iterations 0).
///
/// Throws ingot::Error: kFailedPrecondition for an unbuilt model (naming it); what
/// save_safetensors throws (kNotFound for a missing directory, kInvalidArgument for other
/// file-system failures or a variable name used twice).
void save_model(Model& model, const std::string& path);

/// Keras's load_model, for a model made by the same code: restores what save_model wrote into
/// `model`, so that fit resumes exactly where the saved run stood (pass
/// FitOptions::initial_epoch for the epochs already done; the iteration count, learning-rate
/// schedule position and moments come back with the optimizer state).
///
/// In order: reads and validates the file (load_safetensors); checks the format tag and the
/// metadata; refuses another model class; builds `model` from the recorded input shape and dtype
/// if it is not built (else its per-sample input must be the recorded one); compares the
/// architecture and names the first difference (a missing or extra layer, another layer class,
/// a variable's name, shape or dtype); when `model` is compiled with an optimizer and the file
/// has optimizer state, the classes and variable counts must match; then every tensor is
/// checked (load_into) and only then are the weights and the optimizer state assigned. A model
/// compiled without an optimizer (or not compiled) gets the weights only; a file saved without
/// optimizer state leaves the model's optimizer as it is. During a loop (from a callback) the
/// live state is assigned.
///
/// Throws ingot::Error, changing nothing (except that an unbuilt model stays built, with its
/// initial weights, when a difference is found after building): what load_safetensors throws
/// (kNotFound for a missing file; kParseError for a corrupt or truncated file); kParseError for a
/// file that is not a whole-model file (a save_weights file: use Model::load_weights; a
/// BackupAndRestore backup) or has malformed metadata, naming the key; kInvalidArgument for
/// another model class, layer, or optimizer class or configuration (variable count);
/// kNotFound for a layer or variable missing from the model or the file; kShapeMismatch /
/// kDTypeMismatch for a variable or input of another shape or dtype (naming both).
void load_model(Model& model, const std::string& path);

namespace model_io {

/// The name under which optimizer variable `i` is stored: "__optimizer__/0000" for i = 0, ...
/// (model variables are "<layer>/<weight>": only a layer named "__optimizer__" could clash).
std::string optimizer_tensor_name(size_t i);

/// The training state as named tensors: every variable of `model` (by name, variables() order,
/// values from `access`: the live state during a loop) and, with `with_optimizer`, the
/// optimizer's variables from access.get_optimizer_state() (optimizer_tensor_name). Shared by
/// save_model and BackupAndRestore.
std::vector<std::pair<std::string, Array>> training_state_tensors(Model& model, callbacks::WeightsAccess& access,
                                                                  bool with_optimizer);

/// Restores the state training_state_tensors wrote: the model's variables by name and, with
/// `with_optimizer`, the optimizer variables, through `access`. Every tensor is checked first
/// (load_into: kNotFound for a missing name, kShapeMismatch / kDTypeMismatch naming both
/// types); on an error nothing has changed.
void restore_training_state(const SafetensorsFile& file, Model& model, callbacks::WeightsAccess& access,
                            bool with_optimizer);

}  // namespace model_io
}  // namespace ingot
