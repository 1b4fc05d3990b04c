// `tessel predict CHECKPOINT DIR --predictions FILE --embeddings FILE`: inference with a saved model on a
// partition (the one it was trained on, or another graph with the same feature width), under
// mpirun with one rank per part. A link prediction model (--task link) scores the test split's
// edges, or with --edges PAIRS the pairs given.
#include "command.hpp"
#include "train_options.hpp"

#include "tessel/comm/mpi_communicator.hpp"
#include "tessel/core/error.hpp"
#include "tessel/datasets/h5.hpp"
#include "tessel/modes/pipeline.hpp"
#include "tessel/modes/sampled.hpp"
#include "tessel/train/train.hpp"
#include "tessel/modes/modes.hpp"

#include <nlohmann/json.hpp>

#include <memory>

namespace tessel::cli {
namespace {

namespace fs = std::filesystem;

// A checkpoint folder names its best.h5 when it has one, else its checkpoint.h5.
fs::path checkpoint_file(const fs::path& given) {
  std::error_code ec;
  if (!fs::is_directory(given, ec)) return given;
  for (const char* name : {"best.h5", "checkpoint.h5"})
    if (fs::is_regular_file(given / name, ec)) return given / name;
  TESSEL_FAIL("{}: holds neither best.h5 nor checkpoint.h5 (made by `tessel train --checkpoint`)",
              given.string());
}

// The value of the model description's word `key` (`fallback` when absent and given).
template <class E>
E model_word(const fs::path& path, const nlohmann::json& model, const char* key,
             const char* fallback = nullptr) {
  const std::string word = fallback ? model.value(key, std::string(fallback))
                                    : model.at(key).get<std::string>();
  try {
    return option_value<E>(word);
  } catch (const InputError& e) {
    TESSEL_FAIL("{}: the model attribute's {}: {}", path.string(), key, e.what());
  }
}

// The run's options from what the checkpoint records: mode, model (with the input's
// normalization) and seed.
void options_from_checkpoint(train::TrainOptions& o) {
  const fs::path& path = o.predict_from;
  h5::File file = h5::File::open_read(path);
  TESSEL_EXPECTS(file.has_attr("format") && file.attr_string("format") == "tessel-checkpoint",
                 "{}: not a Tessel checkpoint", path.string());
  o.mode = file.attr_string("mode");
  TESSEL_EXPECTS(!train::mode_traits(o.mode).temporal,
                 "{}: a --mode {} checkpoint; `tessel predict` serves the full, sampled and "
                 "pipeline modes (dynamic runs write their predictions with `tessel train "
                 "--predictions`)",
                 path.string(), o.mode);
  const std::int64_t seed = file.attr_int("seed");
  o.seed = static_cast<std::uint64_t>(seed);
  nlohmann::json model;
  try {
    model = nlohmann::json::parse(file.attr_string("model"));
    o.model.kind = model_word<nn::ModelKind>(path, model, "kind");
    o.model.hidden = model.at("hidden").get<int>();
    o.model.layers = model.at("layers").get<int>();
    // The mode's own options at their defaults for this model, as a command line without its
    // flags gives them (sampled: one fanout per layer, unused for whole-graph inference).
    {
      CLI::App scratch;
      train::ModeFlagValues values;
      train::add_mode_flags(scratch, o, values);
      train::finish_mode_flags(scratch, o, values);
      train::select_mode_options(o, values);
    }
    o.optimizer.kind = model_word<nn::OptimizerKind>(path, model, "optimizer");
    o.normalize_features =
        model_word<train::FeatureNormalization>(path, model, "normalize_features", "none");
    if (o.model.kind == nn::ModelKind::sign_mlp) {
      auto& pipeline = o.mode_options.edit<train::PipelineOptions>();
      pipeline.hops = model.at("hops").get<int>();
      pipeline.mlp_layers = model.at("mlp_layers").get<int>();
      pipeline.op = model_word<nn::Norm>(path, model, "operator");
    }
    if (o.model.kind == nn::ModelKind::gat) {
      o.model.heads = model.at("heads").get<int>();
      o.model.out_heads = model.at("out_heads").get<int>();
    }
    if (model.value("task", std::string()) == "link") {
      o.task = train::DynamicTask::link_prediction;
      o.link_out_dim = model.at("out_dim").get<std::int64_t>();
      o.link_decoder = model_word<nn::LinkDecoderKind>(path, model, "decoder", "dot");
    }
  } catch (const nlohmann::json::exception& e) {
    TESSEL_FAIL("{}: the model attribute is not a Tessel model description: {}", path.string(),
                e.what());
  }
}

std::function<void()> setup_predict(CLI::App& app) {
  auto options = std::make_shared<train::TrainOptions>();
  auto given = std::make_shared<fs::path>();
  app.add_option("CHECKPOINT", *given,
                 "a checkpoint file, or a --checkpoint folder (its best.h5, else checkpoint.h5)")
      ->required()
      ->check(CLI::ExistingPath);
  app.add_option("DIR", options->part_dir, "partition folder made by `tessel partition`")
      ->required()
      ->check(partition_folder());
  app.add_option("--predictions", options->predictions_path,
                 "write predicted classes and logits of every node to this HDF5 file (a link "
                 "prediction model: the scores of the test edges, or of the --edges pairs)");
  app.add_option("--edges", options->predict_edges,
                 "link prediction model: score these pairs, a text file of `src dst` (or CSV "
                 "`src,dst`) lines in source node ids, an optional header line first")
      ->check(CLI::ExistingFile);
  app.add_option("--embeddings", options->embeddings_path,
                 "write the last hidden layer's output of every node to this HDF5 file (a link "
                 "prediction model: the encoder's output, the rows the decoder scores)");
  app.add_option_function<std::string>(
         "--feature-memory",
         [options](const std::string& text) {
           options->feature_memory = train::parse_feature_memory(text);
         },
         "bytes of its part's feature rows a rank holds, all, or auto (as for tessel train): "
         "a sampled model on the CPU reads the rest from the part file in row blocks, with the "
         "same results")
      ->default_str("auto");
  add_choice(app, "--device", options->device, "auto, cpu or cuda (as for tessel train)");
  app.add_option("--threads", options->threads, "OpenMP threads per rank (default: cores / ranks)")
      ->check(CLI::Range(1, train::max_threads()));
  app.footer("Run with one rank per part: mpirun -np K tessel predict CK DIR --predictions P.h5\n"
             "[--embeddings E.h5].\n"
             "The model (kind, layers, hidden size, mode) comes from the checkpoint; the\n"
             "partition must have the feature width and class count it was trained with.\n"
             "On the training run's partition and rank count the predictions equal the\n"
             "training run's --predictions (and --embeddings) of the same epoch bit for bit.\n"
             "A --task link checkpoint: --predictions holds the test edges' scores, or with\n"
             "--edges PAIRS the given pairs' scores in their order (split `given`, no\n"
             "negatives; docs/formats.md).");
  app.final_callback([options, given] {
    TESSEL_EXPECTS(!options->predictions_path.empty() || !options->embeddings_path.empty(),
                   "tessel predict: give --predictions FILE, --embeddings FILE or both");
    options->predict_from = checkpoint_file(*given);
    options_from_checkpoint(*options);
    const bool link = options->task == train::DynamicTask::link_prediction;
    TESSEL_EXPECTS(options->predict_edges.empty() || link,
                   "{}: --edges needs a link prediction checkpoint (tessel train --task link); "
                   "this model predicts nodes",
                   options->predict_from.string());
    TESSEL_EXPECTS(options->predict_edges.empty() || !options->predictions_path.empty(),
                   "--edges {}: give --predictions FILE for the pairs' scores",
                   options->predict_edges.string());
    check_train_outputs(*options);
  });
  return [options] {
    auto comm = comm::make_mpi_communicator();
    // A SIGN MLP predicts without its pipeline: every rank a data-parallel group of one stage.
    if (options->mode_options.holds<train::PipelineOptions>()) {
      auto& pipeline = options->mode_options.edit<train::PipelineOptions>();
      pipeline.stages = 1;
      pipeline.data_parallel = comm->size();
    }
    train::train(*comm, *options);
  };
}

const Registrar registrar({"predict",
                           "Predict every node of a partition with a saved model, or score "
                           "edges with a link prediction model (run under mpirun).",
                           true, setup_predict, 32});

}  // namespace
}  // namespace tessel::cli
