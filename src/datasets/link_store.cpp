// Link prediction splits: the store's /link group (writing, reading, checking) and the random
// edge split of `convert --edge-split`.
#include "store_writer.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/rng.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <unordered_set>

namespace tessel::datasets {

namespace {

bool has_edge(const Csr& graph, NodeId u, NodeId v) {
  // Row v lists the in-neighbours of v, ascending.
  const auto begin = graph.indices.begin() + graph.indptr[static_cast<std::size_t>(v)];
  const auto end = graph.indices.begin() + graph.indptr[static_cast<std::size_t>(v) + 1];
  return std::binary_search(begin, end, u);
}

std::uint64_t pair_key(NodeId u, NodeId v) {
  return (static_cast<std::uint64_t>(u) << 32) ^ static_cast<std::uint64_t>(v);
}

void check_ids(const std::string& what, const std::string& name, const std::vector<NodeId>& ids,
               std::int64_t width, std::int64_t num_nodes) {
  TESSEL_EXPECTS(width > 0 && static_cast<std::int64_t>(ids.size()) % width == 0,
                 "{}: /link/{} holds {} values, not rows of {}", what, name, ids.size(), width);
  for (std::size_t i = 0; i < ids.size(); ++i)
    TESSEL_EXPECTS(ids[i] >= 0 && ids[i] < num_nodes,
                   "{}: /link/{} row {}: node {} is not a node id ({} nodes)", what, name,
                   static_cast<std::int64_t>(i) / width, ids[i], num_nodes);
}

template <class T>
void check_aligned(const std::string& what, const std::string& name, const std::vector<T>& values,
                   std::int64_t rows) {
  TESSEL_EXPECTS(values.empty() || static_cast<std::int64_t>(values.size()) == rows,
                 "{}: /link/{} has {} rows, expected {} (one per positive edge)", what, name,
                 values.size(), rows);
}

bool known_metric(const std::string& metric) {
  if (metric == "auc" || metric == "mrr") return true;
  if (metric.rfind("hits@", 0) != 0 || metric.size() == 5) return false;
  return std::all_of(metric.begin() + 5, metric.end(), [](char c) { return c >= '0' && c <= '9'; });
}

const char* kLinkDescription =
    "Link prediction splits: {train,valid,test}_pos int64 [n, 2] (src, dst) positive edges; "
    "valid/test negatives as {valid,test}_neg int64 [m, 2] pairs or {valid,test}_neg_dst int64 "
    "[n, K] destinations per positive's source. /graph is the message-passing graph: with source "
    "random no valid or test positive is an edge of it (source ogb: as OGB gives the split). Attributes: source, metric, seed, fractions.";

} // namespace

void check_link_splits(const std::string& what, const LinkSplits& link, const Csr& graph,
                       bool directed, std::int64_t num_nodes) {
  TESSEL_EXPECTS(link.source == "random" || link.source == "ogb",
                 "{}: /link source is \"{}\", expected \"random\" or \"ogb\"", what, link.source);
  TESSEL_EXPECTS(known_metric(link.metric),
                 "{}: /link metric is \"{}\", expected auc, mrr or hits@K", what, link.metric);
  check_ids(what, "train_pos", link.train_pos, 2, num_nodes);
  check_ids(what, "valid_pos", link.valid_pos, 2, num_nodes);
  check_ids(what, "test_pos", link.test_pos, 2, num_nodes);
  const std::int64_t k = link.neg_per_source;
  if (k == 0) {
    TESSEL_EXPECTS(link.valid_neg_dst.empty() && link.test_neg_dst.empty(),
                   "{}: /link has per-source negatives without their width K", what);
    check_ids(what, "valid_neg", link.valid_neg, 2, num_nodes);
    check_ids(what, "test_neg", link.test_neg, 2, num_nodes);
  } else {
    TESSEL_EXPECTS(link.valid_neg.empty() && link.test_neg.empty(),
                   "{}: /link holds both per-pair (_neg) and per-source (_neg_dst) negatives; "
                   "expected one kind",
                   what);
    check_ids(what, "valid_neg_dst", link.valid_neg_dst, k, num_nodes);
    check_ids(what, "test_neg_dst", link.test_neg_dst, k, num_nodes);
    TESSEL_EXPECTS(static_cast<std::int64_t>(link.valid_neg_dst.size()) / k ==
                           LinkSplits::rows(link.valid_pos) &&
                       static_cast<std::int64_t>(link.test_neg_dst.size()) / k ==
                           LinkSplits::rows(link.test_pos),
                   "{}: /link/{{valid,test}}_neg_dst must have one row per positive edge", what);
  }
  check_aligned(what, "train_weight", link.train_weight, LinkSplits::rows(link.train_pos));
  check_aligned(what, "valid_weight", link.valid_weight, LinkSplits::rows(link.valid_pos));
  check_aligned(what, "test_weight", link.test_weight, LinkSplits::rows(link.test_pos));
  check_aligned(what, "train_year", link.train_year, LinkSplits::rows(link.train_pos));
  check_aligned(what, "valid_year", link.valid_year, LinkSplits::rows(link.valid_pos));
  check_aligned(what, "test_year", link.test_year, LinkSplits::rows(link.test_pos));
  // A random split removed its validation and test edges from the graph; an OGB split is kept as
  // OGB gives it (ogbl-collab's later years repeat earlier collaborations).
  if (graph.num_rows != num_nodes || link.source != "random") return;
  for (const auto* list : {&link.valid_pos, &link.test_pos}) {
    const char* name = list == &link.valid_pos ? "valid_pos" : "test_pos";
    for (std::int64_t r = 0; r < LinkSplits::rows(*list); ++r) {
      const NodeId u = (*list)[2 * r], v = (*list)[2 * r + 1];
      TESSEL_EXPECTS(!has_edge(graph, u, v) && (directed || !has_edge(graph, v, u)),
                     "{}: /link/{} row {}: edge {},{} is also an edge of /graph (validation and "
                     "test edges must be left out of the message-passing graph)",
                     what, name, r, u, v);
    }
  }
}

namespace detail {

void StoreWriter::write_link(const LinkSplits& link) {
  if (!link.present()) return;
  file_.create_group("/link");
  const auto pairs = [&](const std::string& name, const std::vector<NodeId>& ids,
                         std::int64_t width, const std::string& description) {
    file_.write("/link/" + name, ids.data(),
                {static_cast<std::int64_t>(ids.size()) / width, width}, description);
  };
  pairs("train_pos", link.train_pos, 2, "Training positive edges, int64 [n, 2] (src, dst).");
  pairs("valid_pos", link.valid_pos, 2, "Validation positive edges, int64 [n, 2] (src, dst).");
  pairs("test_pos", link.test_pos, 2, "Test positive edges, int64 [n, 2] (src, dst).");
  if (link.neg_per_source == 0) {
    pairs("valid_neg", link.valid_neg, 2, "Validation negative pairs, int64 [m, 2].");
    pairs("test_neg", link.test_neg, 2, "Test negative pairs, int64 [m, 2].");
  } else {
    const std::string d = "Negative destinations per positive edge, int64 [n, K]: row i for the "
                          "source of positive i.";
    pairs("valid_neg_dst", link.valid_neg_dst, link.neg_per_source, d);
    pairs("test_neg_dst", link.test_neg_dst, link.neg_per_source, d);
  }
  const std::pair<const char*, const std::vector<float>*> weights[] = {
      {"train_weight", &link.train_weight},
      {"valid_weight", &link.valid_weight},
      {"test_weight", &link.test_weight}};
  for (const auto& [name, values] : weights)
    if (!values->empty())
      file_.write(std::string("/link/") + name, *values,
                  "Edge weights, float32, one per positive edge.");
  const std::pair<const char*, const std::vector<std::int64_t>*> years[] = {
      {"train_year", &link.train_year}, {"valid_year", &link.valid_year}, {"test_year", &link.test_year}};
  for (const auto& [name, values] : years)
    if (!values->empty())
      file_.write(std::string("/link/") + name, *values, "Edge years, int64, one per positive edge.");
  file_.set_attr("source", link.source, "/link");
  file_.set_attr("metric", link.metric, "/link");
  file_.set_attr("seed", link.seed, "/link");
  file_.set_attr("fractions", link.fractions, "/link");
  file_.set_attr("description", std::string(kLinkDescription), "/link");
}

LinkSplits read_link(const h5::File& f, std::int64_t num_nodes) {
  LinkSplits link;
  if (!f.exists("/link")) return link;
  const std::string file = f.path().string();
  link.source = f.attr_string("source", "/link");
  link.metric = f.attr_string("metric", "/link");
  link.seed = f.has_attr("seed", "/link") ? f.attr_int("seed", "/link") : -1;
  link.fractions = f.has_attr("fractions", "/link") ? f.attr_string("fractions", "/link") : "";
  const auto pairs = [&](const std::string& name, std::int64_t width) {
    const std::string path = "/link/" + name;
    const auto dims = f.dims(path);
    TESSEL_EXPECTS(dims.size() == 2 && (width == 0 || dims[1] == width),
                   "{}: {} has shape [{}], expected [n, {}]", file, path,
                   fmt::join(dims, ", "), width == 0 ? std::string("K") : std::to_string(width));
    return std::make_pair(f.read<NodeId>(path), dims[1]);
  };
  link.train_pos = pairs("train_pos", 2).first;
  link.valid_pos = pairs("valid_pos", 2).first;
  link.test_pos = pairs("test_pos", 2).first;
  const bool per_pair = f.exists("/link/valid_neg") || f.exists("/link/test_neg");
  const bool per_source = f.exists("/link/valid_neg_dst") || f.exists("/link/test_neg_dst");
  TESSEL_EXPECTS(per_pair != per_source,
                 "{}: /link must hold valid_neg and test_neg, or valid_neg_dst and test_neg_dst "
                 "(one kind)",
                 file);
  if (per_pair) {
    link.valid_neg = pairs("valid_neg", 2).first;
    link.test_neg = pairs("test_neg", 2).first;
  } else {
    auto [valid, k] = pairs("valid_neg_dst", 0);
    TESSEL_EXPECTS(k >= 1, "{}: /link/valid_neg_dst has no columns", file);
    link.valid_neg_dst = std::move(valid);
    link.neg_per_source = k;
    link.test_neg_dst = pairs("test_neg_dst", k).first;
  }
  for (const char* split : {"train", "valid", "test"}) {
    const std::string w = std::string("/link/") + split + "_weight";
    const std::string y = std::string("/link/") + split + "_year";
    auto& weight = split[1] == 'r' ? link.train_weight : split[0] == 'v' ? link.valid_weight
                                                                          : link.test_weight;
    auto& year = split[1] == 'r' ? link.train_year : split[0] == 'v' ? link.valid_year
                                                                      : link.test_year;
    if (f.exists(w)) weight = f.read<float>(w);
    if (f.exists(y)) year = f.read<std::int64_t>(y);
  }
  (void)num_nodes;
  return link;
}

} // namespace detail

void random_link_split(Dataset& data, int train_pct, int valid_pct, int test_pct,
                       std::uint64_t seed) {
  TESSEL_EXPECTS(train_pct > 0 && valid_pct >= 0 && test_pct >= 0 &&
                     train_pct + valid_pct + test_pct == 100,
                 "--edge-split {},{},{}: expected three percentages summing to 100 with a "
                 "positive training share",
                 train_pct, valid_pct, test_pct);
  TESSEL_EXPECTS(!data.directed,
                 "--edge-split: dataset {} is directed; the random edge split splits undirected "
                 "edges (convert with --symmetrize)",
                 data.name);
  const std::int64_t n = data.num_nodes;
  TESSEL_EXPECTS(n >= 2 && n < (std::int64_t{1} << 31),
                 "--edge-split: dataset {} has {} nodes (2 to 2^31 - 1 supported)", data.name, n);
  // Every undirected edge once, u < v, in CSR order of the symmetrized graph (deterministic).
  const Csr full = symmetrize(data.graph);
  std::vector<NodeId> edges;  // [E, 2]
  for (NodeId v = 0; v < n; ++v)
    for (EdgeId e = full.indptr[v]; e < full.indptr[v + 1]; ++e)
      if (full.indices[e] < v) {
        edges.push_back(full.indices[e]);
        edges.push_back(v);
      }
  const std::int64_t num = static_cast<std::int64_t>(edges.size()) / 2;
  TESSEL_EXPECTS(num >= 3, "--edge-split: dataset {} has {} undirected edges, too few to split",
                 data.name, num);
  // A seeded Fisher-Yates permutation of the edges.
  std::vector<std::int64_t> perm(static_cast<std::size_t>(num));
  std::iota(perm.begin(), perm.end(), 0);
  rng::Sequence draw(rng::Key{seed, rng::Stream::link_split, 0, 0, 0}, 0);
  for (std::int64_t i = num - 1; i > 0; --i)
    std::swap(perm[static_cast<std::size_t>(i)],
              perm[static_cast<std::size_t>(draw.next_below(static_cast<std::uint64_t>(i + 1)))]);
  const std::int64_t num_valid = num * valid_pct / 100, num_test = num * test_pct / 100;
  LinkSplits link;
  link.source = "random";
  link.metric = "auc";
  link.seed = static_cast<std::int64_t>(seed);
  link.fractions = fmt::format("{},{},{}", train_pct, valid_pct, test_pct);
  const auto take = [&](std::int64_t begin, std::int64_t end, std::vector<NodeId>& out) {
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t e = perm[static_cast<std::size_t>(i)];
      out.push_back(edges[2 * e]);
      out.push_back(edges[2 * e + 1]);
    }
  };
  take(0, num_valid, link.valid_pos);
  take(num_valid, num_valid + num_test, link.test_pos);
  take(num_valid + num_test, num, link.train_pos);
  // Negatives: uniform pairs that are no edge of the whole graph and not drawn before.
  TESSEL_EXPECTS(num_valid + num_test + num < n * (n - 1) / 2,
                 "--edge-split: dataset {} is too dense to draw {} negative pairs", data.name,
                 num_valid + num_test);
  std::unordered_set<std::uint64_t> taken;
  rng::Sequence neg(rng::Key{seed, rng::Stream::link_split, 0, 0, 1}, 0);
  const auto draw_negatives = [&](std::int64_t count, std::vector<NodeId>& out) {
    while (static_cast<std::int64_t>(out.size()) < 2 * count) {
      NodeId u = static_cast<NodeId>(neg.next_below(static_cast<std::uint64_t>(n)));
      NodeId v = static_cast<NodeId>(neg.next_below(static_cast<std::uint64_t>(n)));
      if (u == v || has_edge(full, u, v)) continue;
      if (!taken.insert(pair_key(std::min(u, v), std::max(u, v))).second) continue;
      out.push_back(u);
      out.push_back(v);
    }
  };
  draw_negatives(num_valid, link.valid_neg);
  draw_negatives(num_test, link.test_neg);
  // The message-passing graph: the training edges, each once as u -> v (u < v).
  std::vector<NodeId> src, dst;
  for (std::int64_t r = 0; r < LinkSplits::rows(link.train_pos); ++r) {
    src.push_back(link.train_pos[2 * r]);
    dst.push_back(link.train_pos[2 * r + 1]);
  }
  Csr graph = Csr::from_edges(n, n, src, dst);
  graph.sort_rows();
  data.graph = std::move(graph);
  data.link = std::move(link);
}

} // namespace tessel::datasets
