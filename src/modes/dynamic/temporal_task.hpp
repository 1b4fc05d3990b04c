// The dynamic mode's tasks: node regression and node classification over the node phase's
// outputs, and link prediction (the edges of snapshot t + 1 against sampled negatives, scored
// from the embeddings of snapshot t), each with its loss, gradient and metrics by split.
#pragma once

#include "tessel/dist/transposition.hpp"

#include "tessel/comm/communicator.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/datasets/temporal.hpp"
#include "tessel/nn/temporal.hpp"
#include "tessel/train/train.hpp"
#include "tessel/modes/dynamic.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessel::train {

struct Losses {
  double sum[3] = {0, 0, 0};         // train, valid, test: squared error or cross-entropy
  std::int64_t count[3] = {0, 0, 0}; // targets, or (link prediction) scored pairs
  std::int64_t correct[3] = {0, 0, 0};
  // Link prediction: AUC over all pairs of the split, sum of reciprocal ranks and positives.
  double auc[3] = {0.5, 0.5, 0.5};
  double rr_sum[3] = {0, 0, 0};
  std::int64_t positives[3] = {0, 0, 0};
};

// Where this rank's node-phase blocks are: by vertex, block t is this rank's vertices
// [v0, v0 + n_own) at snapshot t; else block i is the whole snapshot first_snapshot + i.
struct NodePhase {
  bool by_vertex = true;
  std::int64_t first_snapshot = 0;
  NodeId v0 = 0;
  std::int64_t n_own = 0, num_nodes = 0, num_snapshots = 0;
  // Which (snapshot, first row) block i is.
  std::pair<std::int64_t, NodeId> block(std::size_t i) const {
    if (by_vertex) return {static_cast<std::int64_t>(i), v0};
    return {first_snapshot + static_cast<std::int64_t>(i), 0};
  }
  // The rows of block i: this rank's vertices, or every node.
  NodeId row_begin() const { return by_vertex ? v0 : 0; }
  NodeId row_end() const { return by_vertex ? v0 + n_own : num_nodes; }
};

// What a task needs to know of the run.
struct TaskContext {
  comm::Communicator& comm;
  comm::Communicator& data;
  Device device;
  const TrainOptions& options;
  const dist::TemporalLayout& layout;
  const datasets::TemporalStoreInfo& info;
  NodePhase phase;
  const std::vector<NodeId>& orig_ids; // relabeled node -> source id
  std::filesystem::path store;         // the temporal store
};

class TemporalTask {
public:
  virtual ~TemporalTask() = default;
  // The loss over the node phase's outputs (one per block); `training`: the training split as
  // trained (link prediction: the training negatives of `epoch`), else every split as evaluated
  // (metrics all-reduced by the caller; link prediction's AUC is complete here). With `grad`,
  // d(mean training loss) / d out per block. Collective.
  virtual std::vector<Tensor> loss(const std::vector<Tensor>& out, Losses& l, bool training,
                                   bool grad, std::uint32_t epoch) = 0;
  // Whether the model's head runs before the loss (the node tasks) or inside it (link
  // prediction scores pairs of head inputs).
  virtual bool applies_head() const = 0;
};

// The task of --task, its targets or link rows read from `reader`. `model`: the link head's
// parameters.
std::unique_ptr<TemporalTask> make_temporal_task(const TaskContext& context,
                                                 datasets::TemporalStoreReader& reader,
                                                 nn::TemporalGcn& model);

// Rows of the node phase's blocks (`width` columns each), gathered on rank 0 into source node
// order and written there as `dataset` of a `format` file at `path`. Collective.
void write_snapshot_rows(const TaskContext& context, const std::vector<Tensor>& blocks,
                         std::int64_t width, const std::filesystem::path& path,
                         const std::string& format, const std::string& dataset,
                         const std::string& description);

} // namespace tessel::train
