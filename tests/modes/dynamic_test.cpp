// Dynamic mode under MPI: the all-to-all transposition round-trips exactly and moves the analytic
// volume; P ranks train to the same losses as one rank for every model, both partitionings and
// all three tasks, with dropout too; whole-model gradients match finite differences; a resumed
// run reports the best epoch of the whole run; later passes take no new host blocks.
#include "tessel/comm/mpi_communicator.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/datasets/temporal.hpp"
#include "tessel/nn/model.hpp"
#include "tessel/partition/temporal.hpp"
#include "tessel/modes/dynamic.hpp"
#include "tessel/modes/modes.hpp"

#include "test_support.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <numeric>

using namespace tessel;
namespace fs = std::filesystem;

namespace {

std::unique_ptr<comm::Communicator> world() { return comm::make_mpi_communicator(); }

// A folder every rank sees, made by rank 0 and emptied first.
fs::path shared_dir(comm::Communicator& comm, const std::string& name) {
  const fs::path dir = fs::path(TESSEL_BINARY_DIR) / "test-tmp" /
                       (name + "-np" + std::to_string(comm.size()));
  if (comm.rank() == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  comm.barrier();
  return dir;
}

TEST(DynamicTranspose, RoundTripsExactlyWithTheAnalyticVolume) {
  auto comm = world();
  const int P = comm->size(), r = comm->rank();
  const std::int64_t N = 37, T = 9, H = 5;
  dist::TemporalLayout layout;
  // Uneven vertex ranges; even snapshot blocks, and blocks balanced over a training range
  // [0, 4) (at P = 4 each rank has one training snapshot and the last one the rest).
  layout.vertex_offsets = {0};
  for (int q = 1; q <= P; ++q) layout.vertex_offsets.push_back(q == P ? N : N * q * q / (P * P));
  auto value = [](std::int64_t t, std::int64_t v, std::int64_t c) {
    return static_cast<float>(t * 1000 + v) + static_cast<float>(c) / 8.0f;
  };
  const std::vector<std::vector<std::int64_t>> block_choices = {
      partition::snapshot_blocks(T, P), partition::balanced_snapshot_blocks(T, 4, P, 0.0)};
  for (const auto& blocks : block_choices) {
    layout.snapshot_offsets = blocks;
    for (std::int64_t t_end : {T, T - 3, std::int64_t{4}}) {
      // The analytic volume, counted here from the blocks: every row of a rank's snapshots below
      // t_end that another rank owns, H floats.
      std::int64_t expected_rows = 0;
      for (int q = 0; q < P; ++q)
        expected_rows += std::max<std::int64_t>(0, std::min(t_end, blocks[q + 1]) - blocks[q]) *
                         (N - (layout.vertex_offsets[q + 1] - layout.vertex_offsets[q]));
      EXPECT_EQ(dist::transposition_bytes(layout, t_end, H), expected_rows * H * 4);
      std::vector<Tensor> by_snapshot;
      for (std::int64_t t = layout.snapshot_offsets[r];
           t < std::min(t_end, layout.snapshot_offsets[r + 1]); ++t) {
        Tensor x = Tensor::empty({N, H}, DType::f32);
        for (std::int64_t v = 0; v < N; ++v)
          for (std::int64_t c = 0; c < H; ++c)
            x.data<float>()[v * H + c] = value(t, v, c);
        by_snapshot.push_back(x);
      }
      comm->reset_bytes_sent();
      const auto by_vertex = dist::snapshots_to_vertices(*comm, layout, by_snapshot, t_end, H);
      const std::int64_t sent = comm->allreduce_value(comm->bytes_sent());
      EXPECT_EQ(sent, dist::transposition_bytes(layout, t_end, H));
      if (P > 1) {
        EXPECT_GT(sent, 0);
      }
      ASSERT_EQ(static_cast<std::int64_t>(by_vertex.size()), t_end);
      const NodeId v0 = layout.vertex_offsets[r];
      for (std::int64_t t = 0; t < t_end; ++t)
        for (std::int64_t i = 0; i < by_vertex[t].rows(); ++i)
          for (std::int64_t c = 0; c < H; ++c)
            ASSERT_EQ(by_vertex[t].data<float>()[i * H + c], value(t, v0 + i, c));
      // This rank's rows of its own snapshots do not travel or get copied: they are views of
      // its inputs (at P = 1 the whole transposition is).
      const std::int64_t own_begin = layout.snapshot_offsets[r];
      for (std::size_t i = 0; i < by_snapshot.size(); ++i)
        EXPECT_EQ(by_vertex[own_begin + static_cast<std::int64_t>(i)].data<float>(),
                  by_snapshot[i].data<float>() + v0 * H);
      const auto back = dist::vertices_to_snapshots(*comm, layout, by_vertex, t_end, H);
      ASSERT_EQ(back.size(), by_snapshot.size());
      if (P == 1) {
        for (std::size_t i = 0; i < back.size(); ++i)
          EXPECT_EQ(back[i].data<float>(), by_vertex[i].data<float>());
      }
      for (std::size_t i = 0; i < back.size(); ++i)
        for (std::int64_t k = 0; k < N * H; ++k)
          ASSERT_EQ(back[i].data<float>()[k], by_snapshot[i].data<float>()[k]);
    }
  }
}

// Exchange buffers kept across calls (as the trainer keeps them every epoch and direction): each
// grows once, to the largest t_end, smaller calls use its leading rows, and every call's rows are
// its own inputs', not a previous call's.
TEST(DynamicTranspose, KeptBuffersAreReusedAndGiveEachCallsRows) {
  auto comm = world();
  const int P = comm->size(), r = comm->rank();
  const std::int64_t N = 29, T = 7, H = 3;
  dist::TemporalLayout layout;
  layout.vertex_offsets = {0};
  for (int q = 1; q <= P; ++q)
    layout.vertex_offsets.push_back(N * q / P);
  layout.snapshot_offsets = partition::snapshot_blocks(T, P);
  const NodeId v0 = layout.vertex_offsets[r];
  dist::TranspositionBuffers buffers;
  const void* grown[3] = {nullptr, nullptr, nullptr};
  int call = 0;
  for (std::int64_t t_end : {std::int64_t{3}, T, std::int64_t{3}, T - 1, T}) {
    ++call;
    auto value = [call](std::int64_t t, std::int64_t v, std::int64_t c) {
      return static_cast<float>(call * 100000 + t * 1000 + v) + static_cast<float>(c) / 4.0f;
    };
    std::vector<Tensor> by_snapshot;
    for (std::int64_t t = layout.snapshot_offsets[r];
         t < std::min(t_end, layout.snapshot_offsets[r + 1]); ++t) {
      Tensor x = Tensor::empty({N, H}, DType::f32);
      for (std::int64_t v = 0; v < N; ++v)
        for (std::int64_t c = 0; c < H; ++c)
          x.data<float>()[v * H + c] = value(t, v, c);
      by_snapshot.push_back(x);
    }
    const auto by_vertex =
        dist::snapshots_to_vertices(*comm, layout, by_snapshot, t_end, H, Device::cpu(), &buffers);
    ASSERT_EQ(static_cast<std::int64_t>(by_vertex.size()), t_end);
    for (std::int64_t t = 0; t < t_end; ++t)
      for (std::int64_t i = 0; i < by_vertex[t].rows(); ++i)
        for (std::int64_t c = 0; c < H; ++c)
          ASSERT_EQ(by_vertex[t].data<float>()[i * H + c], value(t, v0 + i, c)) << "call " << call;
    const auto back =
        dist::vertices_to_snapshots(*comm, layout, by_vertex, t_end, H, Device::cpu(), &buffers);
    ASSERT_EQ(back.size(), by_snapshot.size());
    for (std::size_t i = 0; i < back.size(); ++i)
      for (std::int64_t k = 0; k < N * H; ++k)
        ASSERT_EQ(back[i].data<float>()[k], by_snapshot[i].data<float>()[k]) << "call " << call;
    const Tensor* kept[3] = {&buffers.snapshot_side, &buffers.received, &buffers.sent};
    for (int b = 0; b < 3; ++b) {
      // At P = 1 nothing travels, so nothing is allocated.
      EXPECT_EQ(kept[b]->defined(), P > 1);
      if (P == 1) continue;
      // Grown at the second call (t_end = T), the same storage from then on.
      if (call == 2) grown[b] = kept[b]->raw();
      if (call > 2) {
        EXPECT_EQ(kept[b]->raw(), grown[b]) << "buffer " << b << ", call " << call;
      }
    }
  }
}

// A small synthetic temporal store (regression) and its class version (3 classes by target
// value, some unlabeled), partitioned into P parts and into 1 part.
struct Stores {
  fs::path regression_p, regression_1, classes_p, classes_1;
};

Stores make_stores(comm::Communicator& comm) {
  const fs::path dir = shared_dir(comm, "dynamic");
  Stores s{dir / "reg-p", dir / "reg-1", dir / "cls-p", dir / "cls-1"};
  if (comm.rank() == 0) {
    datasets::SyntheticTemporalOptions o;
    o.num_nodes = 90;
    o.num_snapshots = 9;
    o.avg_degree = 5;
    o.feature_dim = 3;
    o.seed = 3;
    datasets::TemporalDataset d = datasets::make_synthetic_temporal(o);
    datasets::write_temporal_store(d, dir / "reg.h5");
    d.num_classes = 3;
    for (std::size_t i = 0; i < d.targets.size(); ++i)
      d.targets[i] = i % 7 == 0 ? -1.0f : d.targets[i] < -0.3f ? 0.0f : d.targets[i] < 0.3f ? 1.0f : 2.0f;
    datasets::write_temporal_store(d, dir / "cls.h5");
    for (const auto& [store, p, one] : {std::tuple{"reg.h5", s.regression_p, s.regression_1},
                                        std::tuple{"cls.h5", s.classes_p, s.classes_1}}) {
      partition::partition_temporal_store(dir / store, p, comm.size(), partition::Method::metis, 0, false);
      partition::partition_temporal_store(dir / store, one, 1, partition::Method::metis, 0, false);
    }
  }
  comm.barrier();
  return s;
}

train::TrainOptions options(const fs::path& dir, const std::string& model, const std::string& layout) {
  train::TrainOptions o;
  o.part_dir = dir;
  o.mode = "dynamic";
  o.device = train::DeviceChoice::cpu;  // the CPU path (gpu_dynamic_test compares it with CUDA)
  o.model.kind = option_value<nn::ModelKind>(model);
  o.model.hidden = 6;
  o.model.layers = 2;
  o.epochs = 3;
  o.seed = 11;
  o.quiet = true;
  o.optimizer.lr = 0.02f;
  o.model.dropout = 0;
  o.mode_options.edit<train::DynamicOptions>().partition = option_value<train::TemporalPartition>(layout);
  return o;
}

void expect_same(const train::TrainResult& a, const train::TrainResult& b, const std::string& what) {
  ASSERT_EQ(a.epochs.size(), b.epochs.size()) << what;
  for (std::size_t e = 0; e < a.epochs.size(); ++e) {
    EXPECT_NEAR(a.epochs[e].loss, b.epochs[e].loss, 1e-5 * std::fabs(b.epochs[e].loss))
        << what << " epoch " << e;
    for (const char* key : {"test_mse", "train_mse"})
      if (b.epochs[e].extra.contains(key)) {
        EXPECT_NEAR(a.epochs[e].extra[key].get<double>(), b.epochs[e].extra[key].get<double>(),
                    1e-5 * b.epochs[e].extra[key].get<double>())
            << what << " " << key;
      }
    // Ranking metrics are step functions of the scores: two scores within float round-off of
    // each other may swap between rank counts, moving AUC and MRR by a few pairs' worth.
    for (const char* key : {"test_auc", "valid_auc", "test_mrr"})
      if (b.epochs[e].extra.contains(key)) {
        EXPECT_NEAR(a.epochs[e].extra[key].get<double>(), b.epochs[e].extra[key].get<double>(),
                    2e-3)
            << what << " " << key;
      }
    EXPECT_EQ(a.epochs[e].test_acc, b.epochs[e].test_acc) << what;
  }
  // Training changed the losses (the comparison is not between two untrained models).
  EXPECT_NE(a.epochs.front().loss, a.epochs.back().loss) << what;
}

TEST(DynamicTraining, EveryRankCountMatchesOneRank) {
  auto comm = world();
  log::set_level(log::Level::warn);
  const Stores s = make_stores(*comm);
  auto self = comm->split(comm->rank(), 0);
  for (const std::string model : {"gcn-gru", "gcn-lstm", "evolvegcn-o"})
    for (const std::string layout : {"snapshot", "vertex"}) {
      const auto distributed = train::train_dynamic(*comm, options(s.regression_p, model, layout));
      const auto single = train::train_dynamic(*self, options(s.regression_1, model, "snapshot"));
      expect_same(distributed, single, model + " " + layout);
      if (layout == "snapshot" && model != "evolvegcn-o" && comm->size() > 1) {
        EXPECT_NEAR(distributed.summary["transpose_bytes_per_epoch"].get<double>(),
                    distributed.summary["analytic_transpose_bytes_per_epoch"].get<double>(), 0.5);
        EXPECT_GT(distributed.summary["transpose_bytes_per_epoch"].get<double>(), 0);
      }
      if (layout == "snapshot") {
        // The blocks balance the training range [0, 6) of the 9 snapshots, evaluating every
        // epoch: at P = 2, 3 training snapshots each ([0, 3) and [3, 9)), not [0, 4) and [4, 9).
        const auto blocks = distributed.summary["snapshot_blocks"].get<std::vector<std::int64_t>>();
        EXPECT_EQ(blocks, partition::balanced_snapshot_blocks(9, 6, comm->size(), 1.0)) << model;
        if (comm->size() == 2) {
          EXPECT_EQ(blocks, (std::vector<std::int64_t>{0, 3, 9})) << model;
        }
      }
    }
  for (const std::string layout : {"snapshot", "vertex"}) {
    auto o = options(s.classes_p, "gcn-gru", layout);
    o.task = train::DynamicTask::node_classification;
    auto o1 = options(s.classes_1, "gcn-gru", "snapshot");
    o1.task = train::DynamicTask::node_classification;
    expect_same(train::train_dynamic(*comm, o), train::train_dynamic(*self, o1),
                "classification " + layout);
  }
  // Link prediction: negatives are keyed by source node ids, so every partition scores the same
  // pairs; every model and layout (EvolveGCN's snapshot layout scores whole snapshots locally,
  // the others fetch source rows from their owners).
  for (const std::string model : {"gcn-gru", "gcn-lstm", "evolvegcn-o"})
    for (const std::string layout : {"snapshot", "vertex"}) {
      auto o = options(s.regression_p, model, layout);
      o.task = train::DynamicTask::link_prediction;
      o.negatives = 2;
      o.mode_options.edit<train::DynamicOptions>().eval_negatives = 4;
      auto o1 = options(s.regression_1, model, "snapshot");
      o1.task = o.task;
      o1.negatives = o.negatives;
      o1.mode_options = o.mode_options;
      o1.mode_options.edit<train::DynamicOptions>().partition = train::TemporalPartition::snapshot;
      const auto distributed = train::train_dynamic(*comm, o);
      expect_same(distributed, train::train_dynamic(*self, o1), "link " + model + " " + layout);
      const auto& last = distributed.epochs.back().extra;
      for (const char* key : {"train_auc", "valid_auc", "test_auc", "test_mrr"}) {
        ASSERT_TRUE(last.contains(key)) << key;
        EXPECT_GT(last[key].get<double>(), 0.0) << key;
        EXPECT_LE(last[key].get<double>(), 1.0) << key;
      }
    }
  // Dropout (keyed by epoch, snapshot, layer and source node id) gives the same losses at every
  // rank count, and changes them.
  for (const std::string task : {"node-regression", "link-prediction"}) {
    auto o = options(s.regression_p, "gcn-gru", "vertex");
    o.task = option_value<train::DynamicTask>(task);
    o.model.dropout = 0.4f;
    auto o1 = options(s.regression_1, "gcn-gru", "snapshot");
    o1.task = option_value<train::DynamicTask>(task);
    o1.model.dropout = 0.4f;
    const auto dropped = train::train_dynamic(*comm, o);
    expect_same(dropped, train::train_dynamic(*self, o1), "dropout " + task);
    o.model.dropout = 0;
    EXPECT_GT(std::fabs(train::train_dynamic(*comm, o).epochs[0].loss - dropped.epochs[0].loss),
              1e-4)
        << task;
  }
}

// A diverging run stops with one error every rank raises alike, naming the epoch, instead of
// training on with a NaN loss.
TEST(DynamicTraining, StopsWhenTheLossIsNoLongerFinite) {
  auto comm = world();
  log::set_level(log::Level::warn);
  const Stores s = make_stores(*comm);
  auto o = options(s.regression_p, "gcn-gru", "vertex");
  o.optimizer.kind = nn::OptimizerKind::sgd;
  o.optimizer.lr = 1e30f;
  o.epochs = 4;
  try {
    train::train_dynamic(*comm, o);
    ADD_FAILURE() << "training with --lr 1e30 did not stop";
  } catch (const AgreedInputError& e) {
    EXPECT_NE(std::string(e.what()).find("training diverged at epoch"), std::string::npos)
        << e.what();
  }
}

// train_dynamic() is called as a library function too: it refuses the options every mode
// refuses, with the command line's message, before any setup (a negative --eval-every, or
// --patience without evaluation).
TEST(DynamicTraining, RefusesTheOptionsEveryModeRefuses) {
  auto comm = world();
  log::set_level(log::Level::warn);
  const Stores s = make_stores(*comm);
  auto o = options(s.regression_p, "gcn-gru", "snapshot");
  o.eval_every = -1;
  try {
    train::train_dynamic(*comm, o);
    ADD_FAILURE() << "--eval-every -1 was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--eval-every must be >= 0"), std::string::npos)
        << e.what();
  }
  o = options(s.regression_p, "gcn-gru", "snapshot");
  o.eval_every = 0;
  o.patience = 5;
  try {
    train::train_dynamic(*comm, o);
    ADD_FAILURE() << "--eval-every 0 with --patience 5 was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--patience 5 needs evaluation"), std::string::npos)
        << e.what();
  }
  o = options(s.regression_p, "gcn-gru", "snapshot");
  o.epochs = 0;
  EXPECT_THROW(train::train_dynamic(*comm, o), InputError);
}

// Evaluation runs without dropout: an untrained model evaluates alike with and without it.
TEST(DynamicTraining, DropoutIsOffInEvaluation) {
  auto comm = world();
  log::set_level(log::Level::warn);
  const Stores s = make_stores(*comm);
  for (const std::string task : {"node-regression", "link-prediction"}) {
    auto o = options(s.regression_p, "gcn-lstm", "snapshot");
    o.task = option_value<train::DynamicTask>(task);
    train::DynamicModelProbe plain(*comm, o);
    o.model.dropout = 0.5f;
    train::DynamicModelProbe dropped(*comm, o);
    EXPECT_EQ(plain.evaluation_loss(), dropped.evaluation_loss()) << task;
    EXPECT_NE(plain.loss(false), dropped.loss(false)) << task;
  }
}

// Later passes reuse the host blocks of the earlier ones: with the host block cache keeping no
// idle block, the trainer raises its cap to what a pass holds, so that a third pass takes no
// block from the system (no fresh pages to fault in) and gives the first pass's loss and
// gradients bit for bit. Without that, every tensor of 1 MiB or more would be a new block.
TEST(DynamicTraining, LaterPassesTakeNoNewHostBlocks) {
  auto comm = world();
  log::set_level(log::Level::warn);
  const fs::path dir = shared_dir(*comm, "dynamic-host-blocks");
  if (comm->rank() == 0) {
    // [4096, 128] f32 activations are 2 MiB: large enough for the block cache.
    datasets::SyntheticTemporalOptions o;
    o.num_nodes = 4096;
    o.num_snapshots = 5;
    o.avg_degree = 4;
    o.seed = 5;
    datasets::write_temporal_store(datasets::make_synthetic_temporal(o), dir / "store.h5");
    partition::partition_temporal_store(dir / "store.h5", dir / "p", comm->size(),
                                        partition::Method::metis, 0, false);
  }
  comm->barrier();
  const std::size_t cap = device_memory::host_cache_limit();
  for (const std::string layout : {"snapshot", "vertex"}) {
    device_memory::host_cache_set_limit(1);
    auto o = options(dir / "p", "gcn-gru", layout);
    o.model.hidden = 128;
    o.model.layers = 1;
    train::DynamicModelProbe probe(*comm, o);
    const double first = probe.loss(true);
    std::vector<Tensor> first_grads;
    for (const nn::Parameter* p : probe.parameters()) first_grads.push_back(p->grad.clone());
    probe.loss(true);
    const auto before = device_memory::host_stats();
    EXPECT_EQ(probe.loss(true), first) << layout;
    const auto after = device_memory::host_stats();
    EXPECT_EQ(after.device_allocations, before.device_allocations) << layout;
    EXPECT_GT(after.cache_hits, before.cache_hits) << layout;
    const auto params = probe.parameters();
    for (std::size_t i = 0; i < params.size(); ++i)
      for (std::int64_t k = 0; k < params[i]->grad.numel(); ++k)
        ASSERT_EQ(params[i]->grad.data<float>()[k], first_grads[i].data<float>()[k])
            << layout << " " << params[i]->name;
  }
  device_memory::host_cache_set_limit(cap);
}

// A run checkpointed after epoch 3 and resumed to epoch 6 reports the best epoch of the whole
// run: here the resumed epochs train with a learning rate large enough to make every later
// validation metric worse (the optimizer settings other than its kind may change on resume), so
// the best epoch is one before the checkpoint, and only the checkpoint can tell the resumed run.
TEST(DynamicTraining, ResumeCarriesTheBestSoFar) {
  auto comm = world();
  log::set_level(log::Level::warn);
  const Stores s = make_stores(*comm);
  const fs::path ck = shared_dir(*comm, "dynamic-resume");
  for (const std::string task : {"node-regression", "link-prediction"}) {
    const bool link = task == "link-prediction";
    const std::string metric = link ? "auc" : "mse";
    auto o = options(s.regression_p, "gcn-gru", "snapshot");
    o.task = option_value<train::DynamicTask>(task);
    o.optimizer.lr = link ? 1.0f : 0.3f;
    o.epochs = 3;
    o.checkpoint_dir = ck / task;
    const auto first = train::train_dynamic(*comm, o);
    ASSERT_GE(first.best_epoch, 1) << task;
    o.epochs = 6;
    o.optimizer.lr = 30.0f;
    o.checkpoint_dir.clear();
    o.resume_dir = ck / task;
    const auto resumed = train::train_dynamic(*comm, o);
    ASSERT_EQ(resumed.epochs.size(), 3u);
    const double best = first.summary["valid_" + metric].get<double>();
    for (const auto& m : resumed.epochs) {
      const double valid = m.extra["valid_" + metric].get<double>();
      EXPECT_TRUE(link ? valid < best : valid > best)
          << task << " epoch " << m.epoch << ": " << valid << " against " << best;
    }
    EXPECT_EQ(resumed.best_epoch, first.best_epoch) << task;
    for (const std::string& key : {std::string("best_epoch"), "valid_" + metric, "test_" + metric})
      EXPECT_EQ(resumed.summary[key], first.summary[key]) << task << " " << key;
    if (link) {
      EXPECT_EQ(resumed.summary["test_mrr"], first.summary["test_mrr"]);
    }
  }
}

// --patience stops a run whose validation MSE has not improved for that many epochs, at the same
// epoch on every rank count; the best epoch is then before the last, and the same as a run
// without patience finds over those epochs (stopping changes nothing before it).
TEST(DynamicTraining, PatienceStopsAfterTheBestEpochOnEveryRankCount) {
  auto comm = world();
  log::set_level(log::Level::warn);
  const Stores s = make_stores(*comm);
  auto self = comm->split(comm->rank(), 0);
  auto o = options(s.regression_p, "gcn-gru", "snapshot");
  o.optimizer.lr = 0.3f;  // large enough that the validation MSE soon worsens
  o.epochs = 40;
  o.patience = 3;
  auto o1 = options(s.regression_1, "gcn-gru", "snapshot");
  o1.optimizer.lr = o.optimizer.lr;
  o1.epochs = o.epochs;
  o1.patience = o.patience;
  const auto stopped = train::train_dynamic(*comm, o);
  expect_same(stopped, train::train_dynamic(*self, o1), "patience");
  ASSERT_TRUE(stopped.stopped_early);
  const int last = stopped.epochs.back().epoch;
  EXPECT_LT(last, o.epochs);
  EXPECT_EQ(last, stopped.best_epoch + o.patience);
  EXPECT_EQ(stopped.summary["best_epoch"], stopped.best_epoch);
  EXPECT_EQ(stopped.summary["test_mse"].get<double>(), stopped.test_acc_at_best);
  o.patience = 0;
  o.epochs = last;
  const auto full = train::train_dynamic(*comm, o);
  EXPECT_FALSE(full.stopped_early);
  EXPECT_EQ(full.best_epoch, stopped.best_epoch);
  EXPECT_EQ(full.epochs.back().loss, stopped.epochs.back().loss);
}

}  // namespace

namespace {

// Central differences of the whole model's mean training loss against its backward pass, for
// the entries with the largest analytic gradient of every parameter (each model, both layouts,
// at every rank count).
TEST(DynamicGradient, WholeModelsMatchFiniteDifferences) {
  auto comm = world();
  log::set_level(log::Level::warn);
  const Stores s = make_stores(*comm);
  struct Case {
    std::string model, layout, task;
    float dropout;
  };
  std::vector<Case> cases;
  for (const std::string model : {"gcn-gru", "gcn-lstm", "evolvegcn-o"})
    for (const std::string layout : {"snapshot", "vertex"})
      cases.push_back({model, layout, "node-regression", 0.0f});
  // Link prediction through the scoring head, the source-row fetch and its way back, with
  // dropout (the probe's masks are fixed) for one model.
  cases.push_back({"gcn-gru", "vertex", "link-prediction", 0.3f});
  cases.push_back({"evolvegcn-o", "snapshot", "link-prediction", 0.0f});
  cases.push_back({"gcn-lstm", "snapshot", "node-regression", 0.3f});
  for (const auto& [model, layout, task, dropout] : cases) {
    {
      auto o = options(s.regression_p, model, layout);
      o.model.hidden = 4;
      o.model.dropout = dropout;
      o.task = option_value<train::DynamicTask>(task);
      o.negatives = 2;
      train::DynamicModelProbe probe(*comm, o);
      // Biases start at zero, which puts rows whose input is all zero (a dead ReLU below) exactly
      // on the next ReLU's kink, where finite differences are meaningless: move them off it.
      for (nn::Parameter* p : probe.parameters())
        if (p->name.ends_with(".bias"))
          for (std::int64_t i = 0; i < p->value.numel(); ++i)
            p->value.data<float>()[i] += 0.05f + 0.02f * static_cast<float>(i % 3);
      probe.loss(true);
      // Copies first: every later loss() zeroes the gradients.
      std::vector<Tensor> grads;
      for (nn::Parameter* p : probe.parameters()) grads.push_back(p->grad.clone());
      std::size_t k = 0;
      for (nn::Parameter* p : probe.parameters()) {
        const Tensor analytic = grads[k++];
        std::vector<std::int64_t> order(static_cast<std::size_t>(analytic.numel()));
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](auto a, auto b) {
          return std::fabs(analytic.data<float>()[a]) > std::fabs(analytic.data<float>()[b]);
        });
        order.resize(std::min<std::size_t>(order.size(), 2));
        for (std::int64_t i : order) {
          float* value = p->value.data<float>() + i;
          const float saved = *value;
          // A small step: a bias moves every row at once, so a large one crosses ReLU kinks.
          const float step = 1e-3f;
          *value = saved + step;
          const double up = probe.loss(false);
          *value = saved - step;
          const double down = probe.loss(false);
          *value = saved;
          const double numeric = (up - down) / (2.0 * step);
          const double exact = analytic.data<float>()[i];
          EXPECT_NEAR(exact, numeric, 2e-4 + 0.03 * std::fabs(numeric))
              << model << " " << layout << " " << task << " dropout " << dropout << " "
              << p->name << "[" << i << "]";
        }
      }
    }
  }
}

}  // namespace
