// Pieces every training mode shares: split labels, accuracies, gradient all-reduce, predictions;
// the graph modes' trainer base.
#include "tessel/train/graph_mode.hpp"
#include "tessel/train/trainer.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/progress.hpp"
#include "tessel/datasets/atomic_output.hpp"
#include "tessel/datasets/h5.hpp"
#include "tessel/nn/loss.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace tessel::train {
namespace fs = std::filesystem;

std::vector<std::vector<std::int64_t>> split_labels(const partition::Part& part) {
  std::vector<std::vector<std::int64_t>> out;
  for (const auto* list : {&part.train, &part.valid, &part.test}) {
    std::vector<std::int64_t> labels;
    labels.reserve(list->size());
    for (LocalId v : *list) labels.push_back(part.labels[v]);
    out.push_back(std::move(labels));
  }
  return out;
}

Accuracy split_accuracy(comm::Communicator& comm, const Tensor& logits,
                        const partition::Part& part, const partition::Manifest& manifest,
                        const std::vector<std::vector<std::int64_t>>& labels) {
  std::int64_t correct[3];
  const std::vector<LocalId>* lists[3] = {&part.train, &part.valid, &part.test};
  for (int s = 0; s < 3; ++s) correct[s] = nn::count_correct(logits, *lists[s], labels[s]);
  comm.allreduce(std::span<std::int64_t>(correct, 3));
  auto ratio = [](std::int64_t c, std::int64_t n) {
    return n > 0 ? static_cast<double>(c) / static_cast<double>(n) : 0.0;
  };
  return {ratio(correct[0], manifest.num_train), ratio(correct[1], manifest.num_valid),
          ratio(correct[2], manifest.num_test)};
}

Tensor infer_all_nodes(nn::Model& model, const Tensor& features,
                       std::span<nn::Aggregator* const> aggregators, Tensor* last_hidden) {
  ProgressLine progress("evaluate: layer", static_cast<std::int64_t>(aggregators.size()));
  return model.infer(features, aggregators, [&](int layer) { progress.update(layer + 1); },
                     last_hidden);
}

void allreduce_gradients(comm::Communicator& comm, nn::Model& model) {
  if (comm.size() == 1) return;
  // The backward pass runs on the device's main stream, and so does its all-reduce.
  comm.allreduce(model.flat_gradients(), DeviceStream::main());
}

GraphModeTrainer::GraphModeTrainer(const TrainerContext& ctx)
    : comm_(ctx.comm),
      data_(ctx.runtime.data ? *ctx.runtime.data : ctx.comm),
      device_(ctx.runtime.device),
      options_(ctx.options),
      manifest_(ctx.manifest),
      part_(ctx.part),
      aggregator_(ctx.part, ctx.comm, &data_, ctx.runtime.device),
      layer_aggregators_(static_cast<std::size_t>(ctx.options.model.layers), &aggregator_),
      model_([&] {
        nn::ModelConfig config = ctx.options.model;
        config.device = ctx.runtime.device;
        return config;
      }()),
      optimizer_(nn::make_optimizer(ctx.options.optimizer)),
      split_labels_(split_labels(ctx.part)) {
  // Features go to the device once; every epoch step then stays there. Read from the part file
  // (out of core), they are read for each evaluation instead (eval_features()).
  feature_rows_ = ctx.loaded.feature_rows;
  if (feature_rows_) return;
  features_ = Tensor::empty({part_.num_owned, part_.feature_dim}, DType::f32);
  std::copy(part_.features.begin(), part_.features.end(), features_.data<float>());
  if (device_.is_cuda()) features_ = features_.to(device_);
}

bool GraphModeTrainer::infers_in_blocks() const {
  return blocks_inference_ && device_.is_cpu() && model_.infer_blocks_possible();
}

Tensor GraphModeTrainer::infer_logits(Tensor* last_hidden) {
  if (!infers_in_blocks())
    return infer_all_nodes(model_, eval_features(), layer_aggregators_, last_hidden);
  // Layer 0 reads the owned rows in blocks of a size set by the feature width alone, from
  // memory or through the out-of-core reader: the same GEMM shapes either way, so the same bits
  // at any --feature-memory. The whole [N, F] input is never held.
  const std::int64_t width = part_.feature_dim;
  const std::int64_t block_rows = std::max<std::int64_t>(1, kInferBlockElements / std::max<std::int64_t>(width, 1));
  auto rows = [&](std::int64_t begin, std::int64_t end, Tensor& block) {
    if (feature_rows_)
      feature_rows_->read_block(begin, end, block.data<float>());
    else
      std::copy_n(features_.data<float>() + begin * width, (end - begin) * width,
                  block.data<float>());
  };
  ProgressLine progress("evaluate: layer", static_cast<std::int64_t>(layer_aggregators_.size()));
  return model_.infer_blocks(rows, part_.num_owned, block_rows, layer_aggregators_,
                             [&](int layer) { progress.update(layer + 1); }, last_hidden);
}

Tensor GraphModeTrainer::eval_features() {
  if (!feature_rows_) return features_;
  // Every owned row, read in blocks in order: held only while the evaluation runs (models
  // without inference over row blocks, GAT).
  Tensor all = Tensor::empty({part_.num_owned, part_.feature_dim}, DType::f32);
  constexpr std::int64_t kBlockRows = 1 << 16;
  for (std::int64_t begin = 0; begin < part_.num_owned; begin += kBlockRows) {
    const std::int64_t end = std::min(part_.num_owned, begin + kBlockRows);
    feature_rows_->read_block(begin, end, all.data<float>() + begin * part_.feature_dim);
  }
  return all;
}

Accuracy GraphModeTrainer::evaluate(PhaseTimes& phases) {
  // The aggregation's phases are not the epoch's: evaluation counts as "eval" as a whole.
  PhaseTimes eval_phases;
  aggregator_.set_phases(&eval_phases);
  Stopwatch watch;
  const Tensor logits = infer_logits(nullptr);
  const Accuracy accuracy = split_accuracy(comm_, logits, part_, manifest_, split_labels_);
  phases.add("eval", watch.seconds());
  return accuracy;
}

void GraphModeTrainer::write_outputs(const OutputFiles& files) {
  PhaseTimes ignored;
  aggregator_.set_phases(&ignored);
  Tensor hidden;
  const Tensor logits = infer_logits(files.embeddings.empty() ? nullptr : &hidden);
  if (!files.predictions.empty()) write_predictions_file(comm_, part_, logits, files.predictions);
  if (!files.embeddings.empty()) {
    TESSEL_EXPECTS(hidden.defined(), "--embeddings: a {}-layer model has no hidden layer",
                   options_.model.layers);
    write_embeddings_file(comm_, part_, hidden,
                          fmt::format("GNN layer {} (layers 0..{}), after its ReLU",
                                      options_.model.layers - 2, options_.model.layers - 1),
                          files.embeddings);
  }
}

namespace {

// Rows of the owned nodes (the first part.num_owned rows of `rows`), gathered at rank 0 in
// ascending source node id; empty on the other ranks. Collective.
struct GatheredRows {
  std::vector<std::int64_t> node_id;
  std::vector<float> rows;
  std::int64_t cols = 0;
};

GatheredRows gather_by_node_id(comm::Communicator& comm, const partition::Part& part,
                               const Tensor& rows_any) {
  const Tensor host = rows_any.device().is_cpu() ? rows_any : rows_any.to(Device::cpu());
  const std::int64_t cols = host.cols();
  const std::int64_t n = part.num_owned;
  TESSEL_EXPECTS(host.rows() >= n, "outputs: {} rows for {} owned nodes", host.rows(), n);
  std::vector<std::int64_t> to_root_ids(static_cast<std::size_t>(comm.size()), 0);
  std::vector<std::int64_t> to_root_rows(static_cast<std::size_t>(comm.size()), 0);
  to_root_ids[0] = n;
  to_root_rows[0] = n * cols;
  std::vector<std::int64_t> ids(part.orig_id.begin(), part.orig_id.begin() + n);
  std::vector<float> rows(host.data<float>(), host.data<float>() + n * cols);
  const auto all_ids = comm.alltoallv<std::int64_t>(ids, to_root_ids);
  const auto all_rows = comm.alltoallv<float>(rows, to_root_rows);
  GatheredRows out;
  out.cols = cols;
  if (comm.rank() != 0) return out;
  const auto total = static_cast<std::int64_t>(all_ids.size());
  std::vector<std::int64_t> order(static_cast<std::size_t>(total));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return all_ids[a] < all_ids[b]; });
  out.node_id.resize(order.size());
  out.rows.resize(all_rows.size());
  for (std::int64_t i = 0; i < total; ++i) {
    out.node_id[i] = all_ids[order[i]];
    std::copy_n(&all_rows[order[i] * cols], cols, &out.rows[i * cols]);
  }
  return out;
}

}  // namespace

void write_predictions_file(comm::Communicator& comm, const partition::Part& part,
                            const Tensor& logits_owned, const fs::path& path) {
  const GatheredRows g = gather_by_node_id(comm, part, logits_owned);
  if (comm.rank() != 0) return;
  const std::int64_t classes = g.cols;
  const auto total = static_cast<std::int64_t>(g.node_id.size());
  std::vector<std::int64_t> predicted(g.node_id.size());
  for (std::int64_t i = 0; i < total; ++i) {
    const float* row = &g.rows[i * classes];
    predicted[i] = std::max_element(row, row + classes) - row;
  }
  datasets::make_parent_folders(path, "--predictions");
  datasets::AtomicOutput output(path);
  {
    h5::File file = h5::File::create(output.temp_path());
    file.set_attr("format", std::string("tessel-predictions"));
    file.set_attr("version", std::int64_t{1});
    file.set_attr("num_nodes", total);
    file.set_attr("num_classes", classes);
    file.write("/node_id", g.node_id, "node id in the source dataset, ascending");
    file.write("/predicted", predicted, "predicted class (argmax of logits)");
    file.write("/logits", g.rows.data(), {total, classes},
               "model output before softmax, one row per node_id");
    file.close();
  }
  output.commit();
}

void write_embeddings_file(comm::Communicator& comm, const partition::Part& part,
                           const Tensor& rows_owned, const std::string& layer,
                           const fs::path& path) {
  const GatheredRows g = gather_by_node_id(comm, part, rows_owned);
  if (comm.rank() != 0) return;
  const auto total = static_cast<std::int64_t>(g.node_id.size());
  datasets::make_parent_folders(path, "--embeddings");
  datasets::AtomicOutput output(path);
  {
    h5::File file = h5::File::create(output.temp_path());
    file.set_attr("format", std::string("tessel-embeddings"));
    file.set_attr("version", std::int64_t{1});
    file.set_attr("num_nodes", total);
    file.set_attr("dim", g.cols);
    file.set_attr("layer", layer);
    file.write("/node_id", g.node_id, "node id in the source dataset, ascending");
    file.write("/embedding", g.rows.data(), {total, g.cols},
               "float32 [num_nodes, dim]: the last hidden layer's output, one row per node_id");
    file.close();
  }
  output.commit();
}

}  // namespace tessel::train
