// Shared model/optimizer/sampling flags of `tessel train` and `tessel bench`.
#include "train_options.hpp"

#include "tessel/core/error.hpp"

#include <charconv>

namespace tessel::cli {

void add_model_flags(CLI::App& app, train::TrainOptions& o, std::string& fanouts) {
  app.add_option("--model", o.model.kind,
                 "gcn or sage; with --mode dynamic: gcn-gru, gcn-lstm or evolvegcn-o")
      ->check(CLI::IsMember({"gcn", "sage", "gcn-gru", "gcn-lstm", "evolvegcn-o"}))
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
  app.add_option("--batch-size", o.sampled.batch_size, "sampled mode: seeds per rank per step")
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
  TESSEL_EXPECTS(o.optimizer.weight_decay >= 0, "--weight-decay must be >= 0, got {}",
                 o.optimizer.weight_decay);
}

}  // namespace tessel::cli
