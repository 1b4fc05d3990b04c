// Shared model/optimizer/sampling flags of `tessel train` and `tessel bench`.
#include "train_options.hpp"

#include "tessel/core/error.hpp"

#include <charconv>

namespace tessel::cli {

void add_model_flags(CLI::App& app, train::TrainOptions& o, std::string& fanouts) {
  app.add_option("--model", o.model.kind,
                 "gcn or sage; with --mode dynamic: gcn-gru, gcn-lstm or evolvegcn-o; with --mode "
                 "pipeline: sign-mlp (the default there)")
      ->check(CLI::IsMember({"gcn", "sage", "gcn-gru", "gcn-lstm", "evolvegcn-o", "sign-mlp"}))
      ->capture_default_str();
  app.add_option("--layers", o.model.layers, "number of GNN layers")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  app.add_option("--hidden", o.model.hidden, "hidden feature size")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--dropout", o.model.dropout, "dropout probability on each layer's input")
      ->check(CLI::Range(0.0, 0.95))
      ->capture_default_str();
  app.add_option("--optimizer", o.optimizer.kind, "adam or sgd")
      ->check(CLI::IsMember({"adam", "sgd"}))
      ->capture_default_str();
  app.add_option("--lr", o.optimizer.lr, "learning rate")->capture_default_str();
  app.add_option("--weight-decay", o.optimizer.weight_decay, "L2 weight decay")
      ->capture_default_str();
  app.add_option("--momentum", o.optimizer.momentum, "SGD momentum")->capture_default_str();
  app.add_option("--seed", o.seed, "seed for initialization, dropout and sampling")
      ->capture_default_str();
  app.add_option("--threads", o.threads,
                 "OpenMP threads per rank, GEMM included (default: OMP_NUM_THREADS if set, else cores of the node / ranks on it)");
  app.add_option("--normalize-features", o.normalize_features,
                 "input feature normalization: none or row (each row divided by the sum of the "
                 "absolute values of its entries; all-zero rows stay zero)")
      ->check(CLI::IsMember({"none", "row"}))
      ->capture_default_str();
  app.add_option("--eval-every", o.eval_every, "evaluate valid/test accuracy every N epochs")
      ->capture_default_str();
  // Dynamic mode.
  app.add_option("--temporal-partition", o.dynamic.partition,
                 "dynamic mode: snapshot (each rank a block of snapshots, all-to-all to vertices "
                 "for the recurrence) or vertex (each rank a vertex range, halo exchange per "
                 "snapshot)")
      ->check(CLI::IsMember({"snapshot", "vertex"}))
      ->capture_default_str();
  app.add_option("--task", o.dynamic.task,
                 "dynamic mode: node-regression (MSE) or node-classification")
      ->check(CLI::IsMember({"node-regression", "node-classification"}))
      ->capture_default_str();
  // Sampled mode.
  app.add_option("--fanouts", fanouts,
                 "sampled mode: neighbors per layer, input layer first, -1 = all (e.g. 15,10,5; default 10 per layer)");
  app.add_option("--batch-size", o.sampled.batch_size,
                 "sampled mode: seeds per rank per step; pipeline mode: training rows per "
                 "optimizer step, whole job")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--cache-policy", o.sampled.cache_policy,
                 "sampled mode: remote feature cache ranking: degree, presample or none")
      ->check(CLI::IsMember({"degree", "presample", "none"}))
      ->capture_default_str();
  app.add_option("--cache-size-mb", o.sampled.cache_size_mb,
                 "sampled mode: feature cache budget per rank in MiB");
  app.add_option("--cache-ratio", o.sampled.cache_ratio,
                 "sampled mode: cache this fraction of the remote rows a rank may need")
      ->check(CLI::Range(0.0, 1.0));
  // Pipeline mode.
  auto& p = o.pipeline;
  app.add_option("--hops", p.hops, "pipeline mode: propagated hops K of the SIGN features")
      ->check(CLI::Range(0, 16))
      ->capture_default_str();
  app.add_option("--operator", p.op, "pipeline mode: propagation operator, gcn or mean")
      ->check(CLI::IsMember({"gcn", "mean"}))
      ->capture_default_str();
  app.add_option("--mlp-layers", p.mlp_layers,
                 "pipeline mode: linear layers after the per-hop maps (the last gives logits)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--stages", p.stages, "pipeline mode: pipeline ranks per data-parallel group")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--data-parallel", p.data_parallel,
                 "pipeline mode: data-parallel groups (ranks = data-parallel x stages)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--micro-batches", p.micro_batches,
                 "pipeline mode: micro-batches per mini-batch")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--schedule", p.schedule,
                 "pipeline mode: gpipe, 1f1b or wave (two stages per rank, down and back up)")
      ->check(CLI::IsMember({"gpipe", "1f1b", "wave"}))
      ->capture_default_str();
  app.add_option("--split", p.split,
                 "pipeline mode: auto (balance measured block times) or blocks per stage, e.g. "
                 "2,3 (blocks: the hop maps, then each MLP layer)")
      ->capture_default_str();
  app.add_option("--max-batches", p.max_batches,
                 "pipeline mode: train at most N mini-batches per epoch (0 = all; for benchmarks)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--features", p.features_dir,
                 "pipeline mode: folder of precomputed SIGN features (default: "
                 "DIR/sign-<operator>-k<K>[-row], computed there when missing)");
}

void finish_train_options(train::TrainOptions& o, const std::string& fanouts) {
  if (!fanouts.empty()) {
    o.sampled.fanouts.clear();
    std::size_t start = 0;
    while (start <= fanouts.size()) {
      const auto comma = fanouts.find(',', start);
      const std::string item =
          fanouts.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      int value = 0;
      const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
      TESSEL_EXPECTS(ec == std::errc() && ptr == item.data() + item.size() &&
                         (value > 0 || value == -1),
                     "--fanouts {}: '{}' is not a positive integer or -1", fanouts, item);
      o.sampled.fanouts.push_back(value);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    TESSEL_EXPECTS(static_cast<int>(o.sampled.fanouts.size()) == o.model.layers,
                   "--fanouts {} has {} entries, but the model has {} layers (--layers)", fanouts,
                   o.sampled.fanouts.size(), o.model.layers);
  } else {
    o.sampled.fanouts.assign(static_cast<std::size_t>(o.model.layers), 10);
  }
  TESSEL_EXPECTS(o.optimizer.lr > 0, "--lr must be positive, got {}", o.optimizer.lr);
  if (o.mode == "pipeline") {
    // The graph models have no place in the pipeline: its model is the SIGN MLP.
    if (o.model.kind == "gcn") o.model.kind = "sign-mlp";
    TESSEL_EXPECTS(o.model.kind == "sign-mlp", "--mode pipeline trains --model sign-mlp, not {}",
                   o.model.kind);
    o.pipeline.batch_size = o.sampled.batch_size;
  } else {
    TESSEL_EXPECTS(o.model.kind != "sign-mlp",
                   "--model sign-mlp runs in --mode pipeline, not --mode {}", o.mode);
  }
  TESSEL_EXPECTS(o.optimizer.weight_decay >= 0, "--weight-decay must be >= 0, got {}",
                 o.optimizer.weight_decay);
}

}  // namespace tessel::cli
