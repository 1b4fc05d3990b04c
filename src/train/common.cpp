// Pieces every training mode shares: split labels, accuracies, gradient all-reduce, predictions;
// the graph modes' trainer base.
#include "graph_mode.hpp"
#include "trainer.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/progress.hpp"
#include "tessel/datasets/atomic_output.hpp"
#include "tessel/datasets/h5.hpp"
#include "tessel/nn/loss.hpp"

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
                       std::span<nn::Aggregator* const> aggregators) {
  ProgressLine progress("evaluate: layer", static_cast<std::int64_t>(aggregators.size()));
  return model.infer(features, aggregators, [&](int layer) { progress.update(layer + 1); });
}

void allreduce_gradients(comm::Communicator& comm, nn::Model& model) {
  if (comm.size() == 1) return;
  comm.allreduce(model.flat_gradients());
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
  // Features go to the device once; every epoch step then stays there.
  features_ = Tensor::empty({part_.num_owned, part_.feature_dim}, DType::f32);
  std::copy(part_.features.begin(), part_.features.end(), features_.data<float>());
  if (device_.is_cuda()) features_ = features_.to(device_);
}

Accuracy GraphModeTrainer::evaluate(PhaseTimes& phases) {
  // The aggregation's phases are not the epoch's: evaluation counts as "eval" as a whole.
  PhaseTimes eval_phases;
  aggregator_.set_phases(&eval_phases);
  Stopwatch watch;
  const Tensor logits = infer_all_nodes(model_, features_, layer_aggregators_);
  const Accuracy accuracy = split_accuracy(comm_, logits, part_, manifest_, split_labels_);
  phases.add("eval", watch.seconds());
  return accuracy;
}

void GraphModeTrainer::write_predictions(const fs::path& path) {
  PhaseTimes ignored;
  aggregator_.set_phases(&ignored);
  write_predictions_file(comm_, part_, infer_all_nodes(model_, features_, layer_aggregators_),
                         path);
}

void write_predictions_file(comm::Communicator& comm, const partition::Part& part,
                            const Tensor& logits_owned, const fs::path& path) {
  const Tensor logits = logits_owned.device().is_cpu() ? logits_owned : logits_owned.to(Device::cpu());
  const std::int64_t classes = logits.cols();
  const std::int64_t n = part.num_owned;
  std::vector<std::int64_t> to_root_ids(static_cast<std::size_t>(comm.size()), 0);
  std::vector<std::int64_t> to_root_rows(static_cast<std::size_t>(comm.size()), 0);
  to_root_ids[0] = n;
  to_root_rows[0] = n * classes;
  std::vector<std::int64_t> ids(part.orig_id.begin(), part.orig_id.begin() + n);
  std::vector<float> rows(logits.data<float>(), logits.data<float>() + n * classes);
  const auto all_ids = comm.alltoallv<std::int64_t>(ids, to_root_ids);
  const auto all_rows = comm.alltoallv<float>(rows, to_root_rows);
  if (comm.rank() != 0) return;

  const auto total = static_cast<std::int64_t>(all_ids.size());
  std::vector<std::int64_t> order(static_cast<std::size_t>(total));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return all_ids[a] < all_ids[b]; });
  std::vector<std::int64_t> node_id(order.size()), predicted(order.size());
  std::vector<float> sorted_logits(all_rows.size());
  for (std::int64_t i = 0; i < total; ++i) {
    const std::int64_t src = order[i];
    node_id[i] = all_ids[src];
    const float* row = &all_rows[src * classes];
    std::copy_n(row, classes, &sorted_logits[i * classes]);
    predicted[i] = std::max_element(row, row + classes) - row;
  }
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  datasets::AtomicOutput output(path);
  {
    h5::File file = h5::File::create(output.temp_path());
    file.set_attr("format", std::string("tessel-predictions"));
    file.set_attr("version", std::int64_t{1});
    file.set_attr("num_nodes", total);
    file.set_attr("num_classes", classes);
    file.write("/node_id", node_id, "node id in the source dataset, ascending");
    file.write("/predicted", predicted, "predicted class (argmax of logits)");
    file.write("/logits", sorted_logits.data(), {total, classes},
               "model output before softmax, one row per node_id");
    file.close();
  }
  output.commit();
}

}  // namespace tessel::train
