// Full-batch link prediction on a static graph (--task link): the GNN encodes every node over
// the message-passing graph, a decoder (nn::LinkDecoder: dot product or MLP) scores (src, dst)
// pairs, and binary cross-entropy trains on each rank's training edges against corrupted
// negatives (sampling::NegativeSampler: uniform or degree-biased destinations). LinkScorer, at
// the end of this file, holds the decoder and the negatives and is shared with sampled mode.
//
// The scores of an edge need both endpoints' embeddings, and an endpoint may be owned by another
// rank: every rank holds the whole embedding table, [N, H] indexed by source node id, assembled
// by one all-reduce of each rank's owned rows (exact: the other ranks add zeros), and the
// table's gradient is all-reduced back before each rank takes its owned rows. That costs N x H
// floats per rank and per exchange, which suits graphs whose embedding table fits every rank.
#include "mode_entries.hpp"
#include "link_task.hpp"
#include "tessel/train/graph_mode.hpp"
#include "tessel/modes/full.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/rng.hpp"
#include "tessel/datasets/atomic_output.hpp"
#include "tessel/datasets/h5.hpp"
#include "tessel/nn/link.hpp"
#include "tessel/nn/link_decoder.hpp"
#include "tessel/sampling/negatives.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <fstream>
#include <string>
#include <vector>

namespace tessel::train {

namespace {

using partition::PartLinks;

// The validation metric of the store ("auc", "mrr" or "hits@K"): its K (0 otherwise).
std::int64_t hits_k(const std::string& metric) {
  if (metric.rfind("hits@", 0) != 0) return 0;
  std::int64_t k = 0;
  std::from_chars(metric.data() + 5, metric.data() + metric.size(), k);
  return k;
}

using SplitScores = LinkSplitScores;

// The edge predictions file (format tessel-link-predictions, version 1; docs/formats.md):
// /pos_edge int64 [n, 2] (src, dst in source ids) and /pos_score float32 [n], in the store's
// order; then the negatives, per pair (/neg_edge [m, 2], /neg_score [m]) or per source
// (/neg_dst [n, K], /neg_score [n, K]: row i scores (pos_edge[i, 0], neg_dst[i, k])). Scores are
// the decoder's logits.
void write_edge_predictions(const std::filesystem::path& path, const SplitScores& scores,
                            std::int64_t neg_per_source, std::int64_t num_nodes,
                            const std::string& metric, const std::string& split = "test") {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  const auto n = static_cast<std::int64_t>(scores.pos.size());
  const auto m = static_cast<std::int64_t>(scores.neg.size());
  const std::int64_t* pairs = scores.pairs.data();
  datasets::AtomicOutput output(path);
  {
    h5::File file = h5::File::create(output.temp_path());
    file.set_attr("format", std::string("tessel-link-predictions"));
    file.set_attr("version", std::int64_t{1});
    file.set_attr("split", split);
    file.set_attr("metric", metric);
    file.set_attr("num_nodes", num_nodes);
    file.write("/pos_edge", pairs, {n, 2},
               split == "given" ? "(src, dst) in source node ids: the given pairs, in their order"
                                : "(src, dst) in source node ids: the test positives");
    file.write("/pos_score", scores.pos, "decoder output before the sigmoid");
    if (split == "given") {
      // Pairs given by the user: no negatives.
    } else if (neg_per_source > 0) {
      std::vector<std::int64_t> neg_dst(static_cast<std::size_t>(m));
      for (std::int64_t i = 0; i < m; ++i)
        neg_dst[static_cast<std::size_t>(i)] = pairs[2 * (n + i) + 1];
      file.write("/neg_dst", neg_dst.data(), {n, neg_per_source},
                 "row i: the negative targets of source pos_edge[i, 0]");
      file.write("/neg_score", scores.neg.data(), {n, neg_per_source},
                 "decoder output before the sigmoid, row i for source pos_edge[i, 0]");
    } else {
      file.write("/neg_edge", pairs + 2 * n, {m, 2}, "(src, dst): the test negatives");
      file.write("/neg_score", scores.neg, "decoder output before the sigmoid");
    }
    file.close();
  }
  output.commit();
}

// `tessel predict --edges`: (src, dst) pairs, one per line, `src dst` or `src,dst` (spaces or
// tabs around either), in source node ids; a first line that starts with a letter is a header
// and skipped; blank lines are skipped. A bad row or an id outside [0, num_nodes) is refused with
// the file and its line. Flat: src, dst, src, dst, ...
std::vector<std::int64_t> read_pairs(const std::filesystem::path& path, std::int64_t num_nodes) {
  std::ifstream in(path);
  TESSEL_EXPECTS(in.good(), "--edges {}: cannot open", path.string());
  std::vector<std::int64_t> pairs;
  std::string line;
  std::int64_t row = 0;
  bool header_allowed = true;
  while (std::getline(in, line)) {
    ++row;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    // Two integers separated by blanks or by one comma between optional blanks.
    std::int64_t id[2] = {0, 0};
    const char* p = line.data();
    const char* end = p + line.size();
    auto blanks = [&] {
      while (p < end && (*p == ' ' || *p == '\t')) ++p;
    };
    bool ok = true;
    for (int f = 0; f < 2 && ok; ++f) {
      blanks();
      if (f == 1 && p < end && *p == ',') {
        ++p;
        blanks();
      }
      const auto [next, ec] = std::from_chars(p, end, id[f]);
      ok = ec == std::errc() && next != p;
      if (ok && next < end && *next != ' ' && *next != '\t' && *next != ',') ok = false;
      p = next;
    }
    blanks();
    ok = ok && p == end;
    // A header names its columns: a first line starting with a letter.
    const char first = line[line.find_first_not_of(" \t")];
    if (!ok && header_allowed && std::isalpha(static_cast<unsigned char>(first))) {
      header_allowed = false;
      continue;
    }
    header_allowed = false;
    TESSEL_EXPECTS(ok, "--edges {} line {}: expected `src dst` or `src,dst` (two integer node ids), "
                   "got \"{}\"",
                   path.string(), row, line.size() > 80 ? line.substr(0, 80) + "..." : line);
    for (const std::int64_t v : id)
      TESSEL_EXPECTS(v >= 0 && v < num_nodes,
                     "--edges {} line {}: node id {} is outside [0, {}) (the graph's {} nodes)",
                     path.string(), row, v, num_nodes, num_nodes);
    pairs.push_back(id[0]);
    pairs.push_back(id[1]);
  }
  TESSEL_EXPECTS(!in.bad(), "--edges {}: read error", path.string());
  TESSEL_EXPECTS(!pairs.empty(), "--edges {}: holds no pairs", path.string());
  return pairs;
}

class LinkTrainer final : public GraphModeTrainer {
 public:
  explicit LinkTrainer(TrainerContext ctx)
      : GraphModeTrainer(ctx), scorer_(ctx.comm, ctx.options, ctx.manifest, ctx.part) {
    if (options_.model.kind == nn::ModelKind::gat) {
      (void)aggregator().attention_graph(device_);
    } else {
      aggregator().prepare(norm());
      aggregator().aggregate_halos(full().halo_aggregation, norm(), comm_);
    }
  }

  // The encoder's parameters, then the decoder's (none for the dot product).
  std::vector<nn::Parameter*> parameters() override {
    std::vector<nn::Parameter*> params = model_.parameters();
    for (nn::Parameter* p : scorer_.parameters()) params.push_back(p);
    return params;
  }

  double train_epoch(int epoch, PhaseTimes& phases, nlohmann::json& extra) override {
    aggregator().set_phases(&phases);
    // Training exchanges halos in --halo-dtype; evaluation (outside this scope) in f32.
    const auto exchange = aggregator().exchange_with({.codec = full().halo_dtype});
    dist::HaloExchange& halo = aggregator().halo();
    halo.begin_epoch();
    Stopwatch compute;
    zero_grad();
    const rng::Key dropout_key{options_.seed, rng::Stream::dropout,
                               static_cast<std::uint32_t>(epoch), 0, 0};
    Tensor z_owned = model_.forward(features_, layer_aggregators(), dropout_key, true);
    Tensor table = scorer_.embedding_table(z_owned, phases);
    // This rank's training pairs: its positives, then K corruptions of each (src kept, dst
    // drawn by the negative sampler), drawn by the edge's id so that the draws do not depend on
    // the rank count.
    const auto& pos = part_.link.pos[0];
    const auto& ids = part_.link.pos_id[0];
    const std::int64_t n = static_cast<std::int64_t>(ids.size());
    const std::int64_t k = options_.negatives;
    std::vector<LocalId> src, dst;
    src.reserve(static_cast<std::size_t>(n * (1 + k)));
    dst.reserve(src.capacity());
    for (std::int64_t i = 0; i < n; ++i) {
      src.push_back(static_cast<LocalId>(pos[2 * i]));
      dst.push_back(static_cast<LocalId>(pos[2 * i + 1]));
    }
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < k; ++j) {
        src.push_back(static_cast<LocalId>(pos[2 * i]));
        dst.push_back(static_cast<LocalId>(scorer_.negative_dst(epoch, ids[i], j)));
      }
    // Loss: mean BCE over the whole graph's positives plus mean over its negatives (GAE's).
    const double total = static_cast<double>(manifest_.link.pos[0]);
    Tensor grad_table = Tensor::zeros({manifest_.num_nodes, table.cols()}, DType::f32);
    const auto [pos_loss, neg_loss] = scorer_.loss(table, src, dst, n, k, total, grad_table);
    Tensor grad_owned = owned_rows_of(grad_table, phases);
    if (device_.is_cuda()) grad_owned = grad_owned.to(device_);
    model_.backward(grad_owned);
    phases.add("dense", compute.seconds() - phases.get("aggregate") - phases.get("communicate"));
    {
      ScopedPhase t(phases, "communicate");
      allreduce_gradients(data_, model_);
      scorer_.allreduce_gradients();
    }
    {
      ScopedPhase t(phases, "dense");
      optimizer_->step(parameters());
    }
    extra["task"] = "link";
    extra["negatives"] = k;
    double sums[2] = {pos_loss, neg_loss};
    comm_.allreduce(std::span<double>(sums, 2));
    return sums[0] / total + sums[1] / (total * static_cast<double>(k));
  }

  Accuracy evaluate(PhaseTimes& phases) override {
    PhaseTimes eval_phases;
    aggregator().set_phases(&eval_phases);
    Stopwatch watch;
    const Tensor z_owned = infer_all_nodes(model_, eval_features(), layer_aggregators());
    const Accuracy accuracy = scorer_.evaluate(z_owned, eval_phases);
    phases.add("eval", watch.seconds());
    return accuracy;
  }

  void end_epoch(EpochMetrics& m) override { scorer_.end_epoch(m); }

  std::string finish(comm::Communicator& comm, const Runtime& runtime, TrainResult& result,
                     nlohmann::json& summary) override {
    return scorer_.finish_line(result, Trainer::finish(comm, runtime, result, summary));
  }

  void write_outputs(const OutputFiles& files) override {
    if (files.predictions.empty() && files.embeddings.empty()) return;
    PhaseTimes ignored;
    aggregator().set_phases(&ignored);
    scorer_.write_outputs(files, infer_all_nodes(model_, eval_features(), layer_aggregators()));
  }

 private:
  const FullOptions& full() const { return options_.mode_options.get<FullOptions>(); }
  nn::Norm norm() const {
    return options_.model.kind == nn::ModelKind::gcn ? nn::Norm::gcn : nn::Norm::mean;
  }

  // Sums the table's gradient over ranks and returns this rank's owned rows, [owned, H].
  void zero_grad() {
    model_.zero_grad();
    scorer_.zero_grad();
  }

  Tensor owned_rows_of(Tensor& grad_table, PhaseTimes& phases) {
    {
      ScopedPhase t(phases, "communicate");
      if (comm_.size() > 1) comm_.allreduce(grad_table, DeviceStream::main());  // host tensor
    }
    const std::int64_t hidden = grad_table.cols();
    Tensor owned = Tensor::empty({part_.num_owned, hidden}, DType::f32);
    for (std::int64_t i = 0; i < part_.num_owned; ++i)
      std::copy_n(grad_table.data<float>() + part_.orig_id[static_cast<std::size_t>(i)] * hidden,
                  hidden, owned.data<float>() + i * hidden);
    return owned;
  }

  LinkScorer scorer_;
};

}  // namespace

LinkScorer::LinkScorer(comm::Communicator& comm, const TrainOptions& options,
                       const partition::Manifest& manifest, const partition::Part& part)
    : comm_(comm), options_(options), manifest_(manifest), part_(part) {
  TESSEL_EXPECTS(manifest_.link.present && part_.link.present,
                 "{}: --task link needs a partition of a link store (tessel convert ... "
                 "--edge-split, or an ogbl dataset)",
                 options_.part_dir.string());
  TESSEL_EXPECTS(manifest_.link.pos[0] > 0, "{}: the link store has no training edges",
                 options_.part_dir.string());
  hidden_ = options_.model.out_dim;
  decoder_.emplace(options_.link_decoder, hidden_, options_.seed);
  sampler_.emplace(negative_sampler());
}

// The training negatives' sampler: uniform, or by degree over the whole graph's training edges
// (each rank counts its own, summed over ranks: the same table at every rank count). Collective.
sampling::NegativeSampler LinkScorer::negative_sampler() {
  if (options_.link_negatives == sampling::NegativeSampling::uniform)
    return sampling::NegativeSampler::uniform(manifest_.num_nodes);
  std::vector<std::int64_t> degree(static_cast<std::size_t>(manifest_.num_nodes), 0);
  sampling::add_edge_degrees(part_.link.pos[0], degree);
  if (comm_.size() > 1) comm_.allreduce(std::span<std::int64_t>(degree));
  return sampling::NegativeSampler::by_degree(degree);
}

std::vector<nn::Parameter*> LinkScorer::parameters() { return decoder_->parameters(); }

void LinkScorer::zero_grad() { decoder_->zero_grad(); }

// Each rank's pairs' share of the decoder's gradient, summed (host tensors).
void LinkScorer::allreduce_gradients() {
  if (comm_.size() > 1)
    for (nn::Parameter* p : decoder_->parameters()) comm_.allreduce(p->grad, DeviceStream::main());  // host tensors
}

NodeId LinkScorer::negative_dst(int epoch, std::int64_t edge_id, std::int64_t j) const {
  const rng::Key key{options_.seed, rng::Stream::negatives, static_cast<std::uint32_t>(epoch), 0,
                     0};
  return static_cast<NodeId>(
      sampler_->draw(key, static_cast<std::uint64_t>(edge_id), static_cast<std::uint32_t>(j)));
}

std::array<double, 2> LinkScorer::loss(const Tensor& z, std::span<const LocalId> src,
                                       std::span<const LocalId> dst, std::int64_t n,
                                       std::int64_t k, double total, Tensor& grad_z) {
  std::vector<float> labels(static_cast<std::size_t>(n * (1 + k)), 0.0f);
  std::fill_n(labels.begin(), n, 1.0f);
  const Tensor scores = decoder_->forward(z, src, dst);
  Tensor grad_pos = Tensor::empty({n}, DType::f32), grad_neg = Tensor::empty({n * k}, DType::f32);
  const Tensor pos_scores = Tensor::from_vector(
      std::vector<float>(scores.data<float>(), scores.data<float>() + n), {n});
  const Tensor neg_scores = Tensor::from_vector(
      std::vector<float>(scores.data<float>() + n, scores.data<float>() + n * (1 + k)), {n * k});
  const double pos_loss = nn::binary_cross_entropy_sum(
      pos_scores, std::span<const float>(labels.data(), static_cast<std::size_t>(n)), 1.0 / total,
      &grad_pos);
  const double neg_loss = nn::binary_cross_entropy_sum(
      neg_scores, std::span<const float>(labels.data() + n, static_cast<std::size_t>(n * k)),
      1.0 / (total * static_cast<double>(k)), &grad_neg);
  Tensor grad_scores = Tensor::empty({n * (1 + k)}, DType::f32);
  std::copy_n(grad_pos.data<float>(), n, grad_scores.data<float>());
  std::copy_n(grad_neg.data<float>(), n * k, grad_scores.data<float>() + n);
  decoder_->backward(grad_scores, grad_z);
  return {pos_loss, neg_loss};
}

Accuracy LinkScorer::evaluate(const Tensor& z_owned, PhaseTimes& phases) {
  const Tensor table = embedding_table(z_owned, phases);
  const std::string& metric = manifest_.link.metric;
  std::array<double, 3> value{};
  for (int s = 0; s < 3; ++s) {
    const SplitScores scores = split_scores(table, s);
    const std::int64_t k = s == 0 ? train_negatives_per_source() : manifest_.link.neg_per_source;
    if (metric == "mrr")
      value[s] = nn::mean_reciprocal_rank(scores.pos, scores.neg, std::max<std::int64_t>(k, 1));
    else if (metric == "auc")
      value[s] = nn::roc_auc(scores.pos, scores.neg);
    else
      value[s] = nn::hits_at_k(scores.pos, scores.neg, hits_k(metric));
    ap_[s] = metric == "auc" ? nn::average_precision(scores.pos, scores.neg) : -1;
  }
  return {value[0], value[1], value[2]};
}

void LinkScorer::end_epoch(EpochMetrics& m) const {
  if (!m.evaluated || ap_[0] < 0) return;
  m.extra["train_ap"] = ap_[0];
  m.extra["valid_ap"] = ap_[1];
  m.extra["test_ap"] = ap_[2];
}

std::string LinkScorer::finish_line(TrainResult& result, const std::string& line) const {
  const auto ap = result.kept_at_best.find("test_ap");
  result.link = LinkFigures{
      .decoder = options_.link_decoder,
      .negative_sampling = options_.link_negatives,
      .negatives = options_.negatives,
      .train_edges = manifest_.link.pos[0],
      .test_ap_at_best = result.best_epoch > 0 && ap != result.kept_at_best.end()
                             ? std::optional<double>(ap->second)
                             : std::nullopt};
  if (result.best_epoch == 0) return line;
  const std::string& metric = manifest_.link.metric;
  return fmt::format("best valid {} {:.4f} at epoch {}, test {} there {:.4f}{}", metric,
                     result.best_valid_acc, result.best_epoch, metric, result.test_acc_at_best,
                     ap == result.kept_at_best.end() ? std::string()
                                                     : fmt::format(", test ap {:.4f}", ap->second));
}

// --embeddings: the encoder's output of every node (the rows the decoder scores);
// --predictions: the scores of the test positives and the test negatives. Written by rank 0.
void LinkScorer::write_outputs(const OutputFiles& files, const Tensor& z_owned) {
  if (!files.embeddings.empty())
    write_embeddings_file(comm_, part_, z_owned,
                          fmt::format("the encoder's output, GNN layer {} (layers 0..{}): the "
                                      "node embeddings the decoder scores",
                                      options_.model.layers - 1, options_.model.layers - 1),
                          files.embeddings);
  if (files.predictions.empty()) return;
  PhaseTimes ignored;
  const Tensor table = embedding_table(z_owned, ignored);
  if (!files.edges.empty()) {
    // Every rank holds the whole table: rank 0 scores the given pairs alone.
    const std::vector<std::int64_t> pairs = read_pairs(files.edges, manifest_.num_nodes);
    if (comm_.rank() != 0) return;
    std::vector<LocalId> src, dst;
    for (std::size_t i = 0; i < pairs.size(); i += 2) {
      src.push_back(static_cast<LocalId>(pairs[i]));
      dst.push_back(static_cast<LocalId>(pairs[i + 1]));
    }
    const Tensor scores = decoder_->forward(table, src, dst);
    SplitScores given;
    given.pos.assign(scores.data<float>(), scores.data<float>() + src.size());
    given.pairs = pairs;
    write_edge_predictions(files.predictions, given, 0, manifest_.num_nodes,
                           manifest_.link.metric, "given");
    return;
  }
  const SplitScores scores = split_scores(table, 2, true);
  if (comm_.rank() != 0) return;
  write_edge_predictions(files.predictions, scores, manifest_.link.neg_per_source,
                         manifest_.num_nodes, manifest_.link.metric);
}

// Every rank's owned rows, assembled by one all-reduce (exact: the other ranks add zeros).
Tensor LinkScorer::embedding_table(const Tensor& z_owned_any, PhaseTimes& phases) {
  const Tensor z_owned = z_owned_any.device().is_cpu() ? z_owned_any : z_owned_any.to(Device::cpu());
  Tensor table = Tensor::zeros({manifest_.num_nodes, hidden_}, DType::f32);
  for (std::int64_t i = 0; i < part_.num_owned; ++i)
    std::copy_n(z_owned.data<float>() + i * hidden_, hidden_,
                table.data<float>() + part_.orig_id[static_cast<std::size_t>(i)] * hidden_);
  ScopedPhase t(phases, "communicate");
  if (comm_.size() > 1) comm_.allreduce(table, DeviceStream::main());  // host tensor
  return table;
}

// The training split's evaluation negatives: fixed draws (epoch key ~0), one pair per
// positive, or K per source with per-source (mrr) stores.
std::int64_t LinkScorer::train_negatives_per_source() const {
  return manifest_.link.neg_per_source > 0 ? manifest_.link.neg_per_source : 1;
}

LinkSplitScores LinkScorer::split_scores(const Tensor& table, int s, bool with_pairs) {
  const PartLinks& l = part_.link;
  const std::int64_t total_pos = manifest_.link.pos[s];
  const bool per_source = s == 0 ? manifest_.link.neg_per_source > 0 : !l.neg_dst[s].empty() ||
                                                                         manifest_.link.neg_per_source > 0;
  const std::int64_t k = s == 0 ? train_negatives_per_source() : manifest_.link.neg_per_source;
  const std::int64_t total_neg = (s == 0 || per_source) ? total_pos * k : manifest_.link.neg[s];
  const auto n = static_cast<std::int64_t>(l.pos_id[s].size());
  std::vector<LocalId> src, dst;
  std::vector<std::int64_t> slot;  // where each score goes: [0, total_pos) then negatives
  for (std::int64_t i = 0; i < n; ++i) {
    src.push_back(static_cast<LocalId>(l.pos[s][2 * i]));
    dst.push_back(static_cast<LocalId>(l.pos[s][2 * i + 1]));
    slot.push_back(l.pos_id[s][i]);
  }
  const rng::Key fixed{options_.seed, rng::Stream::negatives, 0xFFFFFFFFu, 0, 0};
  if (s == 0) {
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < k; ++j) {
        src.push_back(static_cast<LocalId>(l.pos[0][2 * i]));
        dst.push_back(static_cast<LocalId>(fixed.below(static_cast<std::uint64_t>(l.pos_id[0][i]),
                                                       static_cast<std::uint32_t>(j),
                                                       static_cast<std::uint64_t>(manifest_.num_nodes))));
        slot.push_back(total_pos + l.pos_id[0][i] * k + j);
      }
  } else if (per_source) {
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < k; ++j) {
        src.push_back(static_cast<LocalId>(l.pos[s][2 * i]));
        dst.push_back(static_cast<LocalId>(l.neg_dst[s][static_cast<std::size_t>(i * k + j)]));
        slot.push_back(total_pos + l.pos_id[s][i] * k + j);
      }
  } else {
    for (std::size_t i = 0; i < l.neg_id[s].size(); ++i) {
      src.push_back(static_cast<LocalId>(l.neg[s][2 * i]));
      dst.push_back(static_cast<LocalId>(l.neg[s][2 * i + 1]));
      slot.push_back(total_pos + l.neg_id[s][i]);
    }
  }
  std::vector<float> all(static_cast<std::size_t>(total_pos + total_neg), 0.0f);
  if (!src.empty()) {
    const Tensor scores = decoder_->forward(table, src, dst);
    for (std::size_t i = 0; i < slot.size(); ++i)
      all[static_cast<std::size_t>(slot[i])] = scores.data<float>()[i];
  }
  if (comm_.size() > 1) comm_.allreduce(std::span<float>(all));
  SplitScores out;
  if (with_pairs) {
    out.pairs.assign(all.size() * 2, 0);
    for (std::size_t i = 0; i < slot.size(); ++i) {
      out.pairs[static_cast<std::size_t>(2 * slot[i])] = src[i];
      out.pairs[static_cast<std::size_t>(2 * slot[i] + 1)] = dst[i];
    }
    if (comm_.size() > 1) comm_.allreduce(std::span<std::int64_t>(out.pairs));
  }
  out.pos.assign(all.begin(), all.begin() + total_pos);
  out.neg.assign(all.begin() + total_pos, all.end());
  return out;
}

bool link_task(const TrainOptions& options) {
  return options.task == DynamicTask::link_prediction;
}

std::unique_ptr<Trainer> make_link_trainer(TrainerContext context) {
  return std::make_unique<LinkTrainer>(context);
}

void add_link_run_info(RunInfo& info, const TrainerContext& context) {
  if (!link_task(context.options)) return;
  info.metric.name = context.manifest.link.metric == "auc" ? "auc" : context.manifest.link.metric;
  if (info.metric.name == "auc") info.metric.kept_at_best = {"test_ap"};
  info.setup_line += fmt::format(
      ", link prediction ({} decoder, {} {} negatives per edge, metric {})",
      context.options.link_decoder, context.options.negatives,
      context.options.link_negatives, context.manifest.link.metric);
}

RunInfo full_run_info(const Trainer& trainer, const TrainerContext& context) {
  RunInfo info = graph_run_info(trainer, context);
  add_link_run_info(info, context);
  return info;
}

}  // namespace tessel::train
