// Pipeline mode: where the training and evaluation rows go. Each row's features are sent once to
// its data-parallel group's first stage and its label to the last stage, in a fixed shuffled order
// cut into mini-batches.
#include "pipeline_trainer.hpp"

#include "tessel/core/error.hpp"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace tessel::train::pipeline_mode {
namespace {

// Each rank's list gathered on every rank, in rank order.
template <class T> std::vector<T> gather_all(comm::Communicator& comm, const std::vector<T>& mine) {
  std::vector<std::int64_t> counts(static_cast<std::size_t>(comm.size()),
                                   static_cast<std::int64_t>(mine.size()));
  std::vector<T> send;
  send.reserve(mine.size() * counts.size());
  for (std::size_t q = 0; q < counts.size(); ++q)
    send.insert(send.end(), mine.begin(), mine.end());
  return comm.alltoallv<T>(send, counts);
}

// A fixed random order of n positions (a Fisher-Yates shuffle keyed by the run's seed).
std::vector<std::int64_t> shuffled_positions(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  const rng::Key key{seed, rng::Stream::shuffle, 0, 0, 0};
  for (std::int64_t i = n - 1; i > 0; --i)
    std::swap(perm[i],
              perm[key.below(static_cast<std::uint64_t>(i), 0, static_cast<std::uint64_t>(i) + 1)]);
  return perm;
}

// Sorts evaluation rows by (source id, split), keeping ids and splits paired.
void sort_by_id_and_split(std::vector<NodeId>& eval_ids, std::vector<std::uint8_t>& eval_split) {
  std::vector<std::int64_t> idx(eval_ids.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](auto a, auto b) {
    return std::tie(eval_ids[a], eval_split[a]) < std::tie(eval_ids[b], eval_split[b]);
  });
  std::vector<NodeId> ids2;
  std::vector<std::uint8_t> split2;
  for (auto i : idx) {
    ids2.push_back(eval_ids[i]);
    split2.push_back(eval_split[i]);
  }
  eval_ids = std::move(ids2);
  eval_split = std::move(split2);
}

// Per-rank lists concatenated in rank order, with each rank's count (in `unit`s) in `counts`.
template <class T>
std::vector<T> flatten_per_rank(const std::vector<std::vector<T>>& per_rank,
                                std::vector<std::int64_t>& counts, std::int64_t unit) {
  std::vector<T> flat;
  const auto ranks = per_rank.size();
  counts.assign(ranks, 0);
  for (std::size_t q = 0; q < ranks; ++q) {
    counts[q] = static_cast<std::int64_t>(per_rank[q].size()) / unit;
    flat.insert(flat.end(), per_rank[q].begin(), per_rank[q].end());
  }
  return flat;
}

} // namespace

void PipelineTrainer::distribute_rows() {
  const std::int64_t width = model_.block_in_dim(0);
  // Every split node of the graph by source id: the order does not depend on the partition.
  std::vector<NodeId> my_train, my_eval;
  std::vector<std::uint8_t> my_eval_split;
  for (LocalId v : part_.train)
    my_train.push_back(part_.orig_id[v]);
  const auto lists = split_lists();
  for (int s = 0; s < 3; ++s)
    for (LocalId v : *lists[s]) {
      my_eval.push_back(part_.orig_id[v]);
      my_eval_split.push_back(static_cast<std::uint8_t>(s));
    }
  std::vector<NodeId> train_ids = gather_all(comm_, my_train);
  std::sort(train_ids.begin(), train_ids.end());
  num_train_ = static_cast<std::int64_t>(train_ids.size());
  TESSEL_EXPECTS(num_train_ > 0, "pipeline: no training nodes");
  const TrainPlacement train = place_train_rows(std::move(train_ids));
  const EvalPlacement eval = place_eval_rows(my_eval, my_eval_split);

  const int first_rank = schedule_.stage_rank.front(), last_rank = schedule_.stage_rank.back();
  const RowsToSend out = rows_to_send(train, eval, width);
  std::vector<std::int64_t> counts;
  auto flat_slots = flatten_per_rank(out.slot_to, counts, 1);
  const auto slots = comm_.alltoallv<std::int64_t>(flat_slots, counts);
  auto flat_feats = flatten_per_rank(out.feat_to, counts, 1);
  const auto feats = comm_.alltoallv<float>(flat_feats, counts);
  auto flat_label_slots = flatten_per_rank(out.label_slot_to, counts, 1);
  const auto label_slots = comm_.alltoallv<std::int64_t>(flat_label_slots, counts);
  auto flat_labels = flatten_per_rank(out.label_to, counts, 1);
  const auto labels = comm_.alltoallv<std::int64_t>(flat_labels, counts);

  const bool first = pipe_rank_ == first_rank, last = pipe_rank_ == last_rank;
  const std::int64_t eval_n = eval.end - eval_begin_;
  if (first) store_input_rows(slots, feats, train.shard, eval_n, width);
  if (last) store_labels(label_slots, labels, train.shard, eval_n);
}

PipelineTrainer::TrainPlacement PipelineTrainer::place_train_rows(std::vector<NodeId> train_ids) {
  const int D = popts_.data_parallel;
  const std::vector<std::int64_t> perm = shuffled_positions(num_train_, options_.seed);
  const std::int64_t B = popts_.batch_size;
  num_batches_ = static_cast<int>((num_train_ + B - 1) / B);
  batch_rows_.resize(static_cast<std::size_t>(num_batches_));
  batch_begin_.resize(static_cast<std::size_t>(num_batches_));
  TrainPlacement train;
  train.group_of_position.resize(static_cast<std::size_t>(num_train_));
  train.local_of_position.resize(static_cast<std::size_t>(num_train_));
  std::vector<std::int64_t> group_size(static_cast<std::size_t>(D), 0);
  for (int b = 0; b < num_batches_; ++b) {
    batch_rows_[b] = std::min(B, num_train_ - static_cast<std::int64_t>(b) * B);
    for (int g = 0; g < D; ++g) {
      const auto [lo, hi] = batch_share(b, g);
      if (g == group_) batch_begin_[b] = group_size[g];
      for (std::int64_t p = lo; p < hi; ++p) {
        train.group_of_position[p] = g;
        train.local_of_position[p] = group_size[g]++;
      }
    }
  }
  shard_ids_.resize(static_cast<std::size_t>(group_size[group_]));
  for (std::int64_t p = 0; p < num_train_; ++p)
    if (train.group_of_position[p] == group_)
      shard_ids_[train.local_of_position[p]] = train_ids[perm[p]];
  train.position_of_sorted.resize(static_cast<std::size_t>(num_train_));
  for (std::int64_t p = 0; p < num_train_; ++p)
    train.position_of_sorted[perm[p]] = p;
  train.shard = group_size[group_];
  train.ids = std::move(train_ids);
  return train;
}

PipelineTrainer::EvalPlacement
PipelineTrainer::place_eval_rows(const std::vector<NodeId>& my_eval,
                                 const std::vector<std::uint8_t>& my_eval_split) {
  const int D = popts_.data_parallel;
  EvalPlacement eval;
  eval.ids = gather_all(comm_, my_eval);
  eval.split = gather_all(comm_, my_eval_split);
  sort_by_id_and_split(eval.ids, eval.split);
  const auto num_eval = static_cast<std::int64_t>(eval.ids.size());
  for (int s = 0; s < 3; ++s)
    split_sizes_[s] = std::count(eval.split.begin(), eval.split.end(), s);
  eval_begin_ = num_eval * group_ / D;
  eval.end = num_eval * (group_ + 1) / D;
  eval_ids_.assign(eval.ids.begin() + eval_begin_, eval.ids.begin() + eval.end);
  // Evaluation keeps no activations for a backward: larger batches, fewer messages.
  eval_batch_ = std::max<std::int64_t>(popts_.batch_size, kEvalBatchRows);
  eval_batches_ = static_cast<int>((eval.end - eval_begin_ + eval_batch_ - 1) / eval_batch_);
  return eval;
}

void PipelineTrainer::add_row(RowsToSend& out, LocalId v, int g, std::int64_t slot,
                              int split) const {
  const int S = popts_.stages;
  const std::int64_t width = out.width;
  const int dst = g * S + out.first_rank, lab = g * S + out.last_rank;
  out.slot_to[dst].push_back(slot);
  out.feat_to[dst].insert(out.feat_to[dst].end(), hop_features_.begin() + v * width,
                          hop_features_.begin() + (v + 1) * width);
  out.label_slot_to[lab].push_back(slot);
  out.label_to[lab].push_back((part_.labels[v] + 1) * 4 + split);
}

PipelineTrainer::RowsToSend PipelineTrainer::rows_to_send(const TrainPlacement& train,
                                                          const EvalPlacement& eval,
                                                          std::int64_t width) const {
  const int D = popts_.data_parallel;
  RowsToSend out(comm_.size(), width, schedule_.stage_rank.front(), schedule_.stage_rank.back());
  for (LocalId v : part_.train) {
    const auto sorted =
        std::lower_bound(train.ids.begin(), train.ids.end(), part_.orig_id[v]) - train.ids.begin();
    const std::int64_t p = train.position_of_sorted[sorted];
    add_row(out, v, train.group_of_position[p], train.local_of_position[p], 0);
  }
  const auto num_eval = static_cast<std::int64_t>(eval.ids.size());
  const auto lists = split_lists();
  for (int s = 0; s < 3; ++s)
    for (LocalId v : *lists[s]) {
      const std::pair<NodeId, std::uint8_t> key_here{part_.orig_id[v],
                                                     static_cast<std::uint8_t>(s)};
      std::int64_t lo = 0, hi = num_eval;
      while (lo < hi) { // position of (id, split) in the sorted evaluation list
        const std::int64_t mid = (lo + hi) / 2;
        if (std::pair{eval.ids[mid], eval.split[mid]} < key_here)
          lo = mid + 1;
        else
          hi = mid;
      }
      int g = 0;
      while (g + 1 < D && lo >= num_eval * (g + 1) / D)
        ++g;
      add_row(out, v, g, -1 - (lo - num_eval * g / D), s);
    }
  return out;
}

void PipelineTrainer::store_input_rows(std::span<const std::int64_t> slots,
                                       std::span<const float> feats, std::int64_t shard,
                                       std::int64_t eval_n, std::int64_t width) {
  train_x_ = Tensor::empty({shard, width}, DType::f32);
  eval_x_ = Tensor::empty({eval_n, width}, DType::f32);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const std::int64_t slot = slots[i];
    float* row = slot >= 0 ? train_x_.data<float>() + slot * width
                           : eval_x_.data<float>() + (-1 - slot) * width;
    std::copy_n(feats.data() + i * width, width, row);
  }
  TESSEL_ASSERT(static_cast<std::int64_t>(slots.size()) == shard + eval_n,
                "pipeline: first stage got {} rows, expected {}", slots.size(), shard + eval_n);
}

void PipelineTrainer::store_labels(std::span<const std::int64_t> label_slots,
                                   std::span<const std::int64_t> labels, std::int64_t shard,
                                   std::int64_t eval_n) {
  train_labels_.assign(static_cast<std::size_t>(shard), -1);
  eval_labels_.assign(static_cast<std::size_t>(eval_n), -1);
  eval_split_.assign(static_cast<std::size_t>(eval_n), 0);
  for (std::size_t i = 0; i < label_slots.size(); ++i) {
    const std::int64_t slot = label_slots[i];
    const std::int64_t label = labels[i] / 4 - 1;
    if (slot >= 0) {
      train_labels_[slot] = label;
    } else {
      eval_labels_[-1 - slot] = label;
      eval_split_[-1 - slot] = static_cast<std::uint8_t>(labels[i] % 4);
    }
  }
  for (std::int64_t l : train_labels_)
    TESSEL_EXPECTS(l >= 0 && l < manifest_.num_classes,
                   "{}: a training node has label {}, expected 0..{}", options_.part_dir.string(),
                   l, manifest_.num_classes - 1);
}

} // namespace tessel::train::pipeline_mode
