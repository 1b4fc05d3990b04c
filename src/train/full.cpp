// Full-batch mode: every layer aggregates over the whole partition with a halo exchange;
// the loss is the mean over all training nodes of the whole graph.
#include "full_aggregator.hpp"
#include "trainer.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/nn/loss.hpp"
#include "tessel/train/halo.hpp"

#include <cmath>


namespace tessel::train {

LocalCsr weighted_adjacency(const LocalCsr& adj, std::span<const std::int64_t> degree, nn::Norm norm) {
  const bool gcn = norm == nn::Norm::gcn;
  TESSEL_ASSERT(static_cast<std::int64_t>(degree.size()) >= adj.num_cols,
                "weighted_adjacency: {} degrees for {} columns", degree.size(), adj.num_cols);
  LocalCsr w;
  w.num_rows = adj.num_rows;
  w.num_cols = adj.num_cols;
  w.indptr.resize(adj.indptr.size());
  w.indptr[0] = 0;
  for (std::int64_t v = 0; v < adj.num_rows; ++v)
    w.indptr[v + 1] = w.indptr[v] + adj.degree(v) + (gcn ? 1 : 0);
  w.indices.resize(static_cast<std::size_t>(w.indptr.back()));
  w.values.resize(w.indices.size());
#pragma omp parallel for schedule(dynamic, 512)
  for (std::int64_t v = 0; v < adj.num_rows; ++v) {
    EdgeId out = w.indptr[v];
    const EdgeId b = adj.indptr[v], e = adj.indptr[v + 1];
    const auto sampled = static_cast<double>(e - b);
    if (gcn) {
      const double dv = static_cast<double>(degree[v]) + 1.0;
      const double scale = sampled > 0 ? static_cast<double>(degree[v]) / sampled : 0.0;
      w.indices[out] = static_cast<LocalId>(v);
      w.values[out++] = static_cast<float>(1.0 / dv);
      for (EdgeId i = b; i < e; ++i) {
        const LocalId u = adj.indices[i];
        const double du = static_cast<double>(degree[u]) + 1.0;
        w.indices[out] = u;
        w.values[out++] = static_cast<float>(scale / std::sqrt(du * dv));
      }
    } else {
      const float inv = e > b ? static_cast<float>(1.0 / sampled) : 0.0f;
      for (EdgeId i = b; i < e; ++i) {
        w.indices[out] = adj.indices[i];
        w.values[out++] = inv;
      }
    }
  }
  return w;
}

namespace {

class FullTrainer final : public Trainer {
 public:
  explicit FullTrainer(TrainerContext ctx)
      : comm_(ctx.comm),
        options_(ctx.options),
        manifest_(ctx.manifest),
        part_(ctx.part),
        aggregator_(ctx.part, ctx.comm),
        model_(ctx.options.model),
        optimizer_(nn::make_optimizer(ctx.options.optimizer)) {
    features_ = Tensor::empty({part_.num_owned, part_.feature_dim}, DType::f32);
    std::copy(part_.features.begin(), part_.features.end(), features_.data<float>());
    split_labels_ = split_labels(part_);
    layer_aggregators_.assign(static_cast<std::size_t>(options_.model.layers), &aggregator_);
  }

  nn::Model& model() override { return model_; }
  nn::Optimizer& optimizer() override { return *optimizer_; }

  double train_epoch(int epoch, PhaseTimes& phases, nlohmann::json& extra) override {
    aggregator_.set_phases(&phases);
    Stopwatch compute;
    model_.zero_grad();
    const rng::Key dropout_key{options_.seed, rng::Stream::dropout,
                               static_cast<std::uint32_t>(epoch), 0, 0};
    Tensor logits = model_.forward(features_, layer_aggregators_, dropout_key, true);
    const nn::LossResult loss =
        nn::softmax_cross_entropy(logits, part_.train, split_labels_[0],
                                  1.0 / static_cast<double>(manifest_.num_train));
    model_.backward(loss.grad);
    // Dense work is what forward/backward spent outside aggregation and halo exchange.
    phases.add("dense", compute.seconds() - phases.get("aggregate") - phases.get("communicate"));
    {
      ScopedPhase t(phases, "communicate");
      allreduce_gradients(comm_, model_);
    }
    {
      ScopedPhase t(phases, "dense");
      optimizer_->step(model_.parameters());
    }
    extra["halo_rows_sent"] = comm_.allreduce_value<std::int64_t>(aggregator_.halo().rows_sent());
    const double loss_sum = comm_.allreduce_value(loss.loss_sum);
    return loss_sum / static_cast<double>(manifest_.num_train);
  }

  Accuracy evaluate(PhaseTimes& phases) override {
    PhaseTimes eval_phases;
    aggregator_.set_phases(&eval_phases);
    Stopwatch watch;
    logits_ = model_.forward(features_, layer_aggregators_, rng::Key{}, false);
    const Accuracy accuracy = split_accuracy(comm_, logits_, part_, manifest_, split_labels_);
    phases.add("eval", watch.seconds());
    return accuracy;
  }

  void write_predictions(const std::filesystem::path& path) override {
    PhaseTimes ignored;
    aggregator_.set_phases(&ignored);
    Tensor logits = model_.forward(features_, layer_aggregators_, rng::Key{}, false);
    write_predictions_file(comm_, part_, logits, path);
  }

 private:
  comm::Communicator& comm_;
  const TrainOptions& options_;
  const partition::Manifest& manifest_;
  partition::Part& part_;
  FullAggregator aggregator_;
  nn::Model model_;
  std::unique_ptr<nn::Optimizer> optimizer_;
  Tensor features_;
  Tensor logits_;
  std::vector<std::vector<std::int64_t>> split_labels_;
  std::vector<nn::Aggregator*> layer_aggregators_;
};

}  // namespace

std::unique_ptr<Trainer> make_full_trainer(TrainerContext context) {
  return std::make_unique<FullTrainer>(context);
}

}  // namespace tessel::train
