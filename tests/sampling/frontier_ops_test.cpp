// Frontier routing ops: the CPU twins against hand-worked results (stable bucketing by owner and
// flag, answers put back in frontier order, lookups, gathers, scatters, per-segment sums), and
// the CUDA twins against the CPU twins on random inputs and on the shapes their kernels treat
// apart (skipped without a GPU).
#include "tessel/core/error.hpp"
#include "tessel/sampling/frontier_ops.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <utility>

using namespace tessel;
using namespace tessel::sampling;

namespace {

Tensor i64(const std::vector<std::int64_t>& v) {
  return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())});
}

// i64 [k, 2] from k (begin, end) pairs written one after the other.
Tensor ranges(const std::vector<std::int64_t>& pairs) {
  return Tensor::from_vector(pairs, {static_cast<std::int64_t>(pairs.size()) / 2, 2});
}

std::vector<std::int64_t> values(const Tensor& t) {
  const Tensor h = t.to(Device::cpu());
  return std::vector<std::int64_t>(h.data<std::int64_t>(), h.data<std::int64_t>() + h.numel());
}

} // namespace

TEST(FrontierOps, RouteIsStableByOwnerThenFlag) {
  // Parts own [0, 10), [10, 20), [20, 30).
  const Tensor offsets = i64({0, 10, 20, 30});
  const Tensor ids = i64({25, 3, 12, 21, 4, 15, 29});
  const Tensor known = i64({-1, 0, -1, 2, 1, 4, 5}); // flagged: 25 (part 2), 12 (part 1)
  const FrontierRoute pairs = route_frontier(ids, offsets, known, RouteKeys::owner_then_flag);
  // Part 0: 3, 4; part 1: 15, then flagged 12; part 2: 21, 29, then flagged 25.
  EXPECT_EQ(values(pairs.order), (std::vector<std::int64_t>{1, 4, 5, 2, 3, 6, 0}));
  EXPECT_EQ(pairs.counts, (std::vector<std::int64_t>{2, 0, 1, 1, 2, 1}));
  const FrontierRoute flagged = route_frontier(ids, offsets, known, RouteKeys::flagged_only);
  EXPECT_EQ(values(flagged.order), (std::vector<std::int64_t>{2, 0, 1, 3, 4, 5, 6}));
  EXPECT_EQ(flagged.counts, (std::vector<std::int64_t>{0, 1, 1, 5}));
  EXPECT_THROW(route_frontier(i64({30}), offsets, i64({0}), RouteKeys::flagged_only), InputError);
  const FrontierRoute none = route_frontier(i64({}), offsets, i64({}), RouteKeys::owner_then_flag);
  EXPECT_EQ(none.order.numel(), 0);
  EXPECT_EQ(none.counts, (std::vector<std::int64_t>(6, 0)));
}

TEST(FrontierOps, UnrouteRestoresFrontierOrder) {
  // Routed position k belongs to frontier position order[k] and answered lengths[k] values.
  const Tensor order = i64({2, 0, 1});
  const Tensor lengths = i64({1, 3, 0});
  const Tensor answers = i64({20, 0, 1, 2});
  Tensor offsets, out;
  unroute_segments(order, lengths, answers, offsets, out);
  EXPECT_EQ(values(offsets), (std::vector<std::int64_t>{0, 3, 3, 4}));
  EXPECT_EQ(values(out), (std::vector<std::int64_t>{0, 1, 2, 20}));
  EXPECT_THROW(unroute_segments(order, i64({1, 1, 1}), answers, offsets, out), InputError);
}

TEST(FrontierOps, LookupsGathersAndScatters) {
  const Tensor keys = i64({2, 5, 9, 40});
  EXPECT_EQ(values(find_sorted(keys, i64({9, 3, 40, 2, 41}))),
            (std::vector<std::int64_t>{2, -1, 3, 0, -1}));
  EXPECT_EQ(values(take(i64({7, 8, 9}), i64({2, -1, 0}))), (std::vector<std::int64_t>{9, -1, 7}));
  EXPECT_THROW(take(i64({7}), i64({1})), InputError);
  Tensor out = i64({0, 0, 0, 0});
  scatter(i64({5, 6}), i64({3, 1}), out);
  EXPECT_EQ(values(out), (std::vector<std::int64_t>{0, 6, 0, 5}));
  EXPECT_THROW(scatter(i64({5}), i64({4}), out), InputError);
  EXPECT_EQ(values(segment_lengths(i64({0, 2, 2, 7}))), (std::vector<std::int64_t>{2, 0, 5}));
  EXPECT_EQ(sum(i64({4, -1, 10})), 13);
  EXPECT_EQ(sum(i64({})), 0);
}

TEST(FrontierOps, SegmentSums) {
  // Ranges [1, 3), [3, 3) (empty), [3, 6) of two columns; values outside them are left out.
  const Tensor a = i64({100, 1, 2, 3, 4, 5, 200});
  const Tensor b = i64({0, -1, -1, 7, 0, 1, 0});
  EXPECT_EQ(values(segment_sums({a, b}, ranges({1, 3, 3, 3, 3, 6}))),
            (std::vector<std::int64_t>{3, 0, 12, -2, 0, 8}));
  // With gaps between them: this rank's own requests left out of the other ranks' sum.
  EXPECT_EQ(values(segment_sums({a}, ranges({0, 1, 4, 5, 6, 7}))),
            (std::vector<std::int64_t>{100, 4, 200}));
  EXPECT_EQ(segment_sums({a}, ranges({})).numel(), 0);
  EXPECT_EQ(values(segment_sums({i64({})}, ranges({0, 0}))), (std::vector<std::int64_t>{0}));
  EXPECT_THROW(segment_sums({a}, ranges({3, 2})), InputError);           // descending
  EXPECT_THROW(segment_sums({a}, ranges({0, 3, 2, 4})), InputError);     // overlapping
  EXPECT_THROW(segment_sums({a}, ranges({2, 3, 0, 1})), InputError);     // out of order
  EXPECT_THROW(segment_sums({a}, ranges({0, 8})), InputError);           // past the end
  EXPECT_THROW(segment_sums({a}, ranges({-1, 2})), InputError);          // before the start
  EXPECT_THROW(segment_sums({a, i64({1})}, ranges({0, 1})), InputError); // ragged columns
  EXPECT_THROW(segment_sums({}, ranges({0, 1})), InputError);
  EXPECT_THROW(segment_sums({a}, i64({0, 1})), InputError); // not [k, 2]
}

// Segments longer than a warp, a block and a copy tile, runs of empty segments, and one segment
// holding everything put back in frontier order by the CPU twin as a plain loop would.
TEST(FrontierOps, UnrouteLongAndEmptySegments) {
  std::mt19937_64 rng(3);
  for (const std::vector<std::int64_t>& lengths :
       {std::vector<std::int64_t>{0, 0, 0}, std::vector<std::int64_t>{5000},
        std::vector<std::int64_t>{33, 0, 0, 257, 1, 0, 1025, 31, 0}}) {
    const auto n = static_cast<std::int64_t>(lengths.size());
    std::vector<std::int64_t> order(lengths.size()), answers;
    std::iota(order.begin(), order.end(), std::int64_t{0});
    std::shuffle(order.begin(), order.end(), rng);
    for (const std::int64_t l : lengths)
      for (std::int64_t j = 0; j < l; ++j)
        answers.push_back(static_cast<std::int64_t>(answers.size()));
    std::vector<std::vector<std::int64_t>> by_frontier(lengths.size());
    for (std::int64_t k = 0, at = 0; k < n; at += lengths[k], ++k)
      by_frontier[order[k]].assign(answers.begin() + at, answers.begin() + at + lengths[k]);
    std::vector<std::int64_t> want_offsets{0}, want;
    for (const auto& seg : by_frontier) {
      want.insert(want.end(), seg.begin(), seg.end());
      want_offsets.push_back(static_cast<std::int64_t>(want.size()));
    }
    Tensor offsets, out;
    unroute_segments(i64(order), i64(lengths), i64(answers), offsets, out);
    EXPECT_EQ(values(offsets), want_offsets);
    EXPECT_EQ(values(out), want);
  }
}

// The CUDA twins give the CPU twins' results on a frontier of a few thousand random nodes over
// 5 parts (buckets of every size, repeated ids, an empty part).
TEST(FrontierOps, CudaTwinsMatchTheCpu) {
  if (!device_memory::cuda_available())
    GTEST_SKIP() << "no GPU visible: CUDA frontier ops not compared";
  const Device gpu = Device::cuda(0);
  std::mt19937_64 rng(7);
  const std::vector<std::int64_t> parts = {0, 1000, 1000, 2500, 2600, 4000};
  const std::int64_t n = 5000;
  std::vector<std::int64_t> ids(n), known(n), keys;
  for (std::int64_t i = 0; i < n; ++i) {
    ids[i] = static_cast<std::int64_t>(rng() % 4000);
    known[i] = rng() % 3 == 0 ? -1 : static_cast<std::int64_t>(rng() % 100);
  }
  for (std::int64_t k = 0; k < 4000; k += 1 + static_cast<std::int64_t>(rng() % 4))
    keys.push_back(k);
  const Tensor c_ids = i64(ids), c_known = i64(known), c_parts = i64(parts), c_keys = i64(keys);
  const Tensor g_ids = c_ids.to(gpu), g_known = c_known.to(gpu), g_parts = c_parts.to(gpu),
               g_keys = c_keys.to(gpu);
  for (const RouteKeys mode : {RouteKeys::owner_then_flag, RouteKeys::flagged_only}) {
    const FrontierRoute c = route_frontier(c_ids, c_parts, c_known, mode);
    const FrontierRoute g = route_frontier(g_ids, g_parts, g_known, mode);
    EXPECT_EQ(g.counts, c.counts);
    EXPECT_EQ(values(g.order), values(c.order));
  }
  EXPECT_THROW(
      route_frontier(i64({4000}).to(gpu), g_parts, i64({0}).to(gpu), RouteKeys::flagged_only),
      InputError);
  EXPECT_EQ(values(find_sorted(g_keys, g_ids)), values(find_sorted(c_keys, c_ids)));
  const Tensor c_pos = find_sorted(c_keys, c_ids);
  EXPECT_EQ(values(take(g_ids, c_pos.to(gpu))), values(take(c_ids, c_pos)));
  // A permutation to scatter through, and answers of random lengths to put back.
  std::vector<std::int64_t> perm(n), lengths(n), offsets(n + 1, 0);
  for (std::int64_t i = 0; i < n; ++i)
    perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  for (std::int64_t i = 0; i < n; ++i) {
    lengths[i] = static_cast<std::int64_t>(rng() % 7);
    offsets[i + 1] = offsets[i] + lengths[i];
  }
  std::vector<std::int64_t> answers(offsets[n]);
  for (auto& a : answers)
    a = static_cast<std::int64_t>(rng() % 100000);
  Tensor c_out = Tensor::zeros({n}, DType::i64), g_out = Tensor::zeros({n}, DType::i64, gpu);
  scatter(c_ids, i64(perm), c_out);
  scatter(g_ids, i64(perm).to(gpu), g_out);
  EXPECT_EQ(values(g_out), values(c_out));
  EXPECT_EQ(values(segment_lengths(i64(offsets).to(gpu))), lengths);
  EXPECT_EQ(sum(i64(lengths).to(gpu)), offsets[n]);
  Tensor c_off, c_vals, g_off, g_vals;
  unroute_segments(i64(perm), i64(lengths), i64(answers), c_off, c_vals);
  unroute_segments(i64(perm).to(gpu), i64(lengths).to(gpu), i64(answers).to(gpu), g_off, g_vals);
  EXPECT_EQ(values(g_off), values(c_off));
  EXPECT_EQ(values(g_vals), values(c_vals));
}

namespace {

// The CUDA route of (ids, known) over `parts` equal id ranges of [0, range) is the CPU's, in
// both key modes.
void expect_route_parity(const std::vector<std::int64_t>& ids,
                         const std::vector<std::int64_t>& known, std::int64_t parts,
                         std::int64_t range, const std::string& what) {
  const Device gpu = Device::cuda(0);
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(parts) + 1);
  for (std::int64_t p = 0; p <= parts; ++p)
    offsets[p] = range * p / parts;
  for (const RouteKeys mode : {RouteKeys::owner_then_flag, RouteKeys::flagged_only}) {
    const FrontierRoute c = route_frontier(i64(ids), i64(offsets), i64(known), mode);
    const FrontierRoute g =
        route_frontier(i64(ids).to(gpu), i64(offsets).to(gpu), i64(known).to(gpu), mode);
    EXPECT_EQ(g.counts, c.counts) << what << ", P = " << parts;
    EXPECT_EQ(values(g.order), values(c.order)) << what << ", P = " << parts;
  }
}

// The CUDA twin puts the answers of `lengths` (routed through `order`) back as the CPU's does.
void expect_unroute_parity(const std::vector<std::int64_t>& order,
                           const std::vector<std::int64_t>& lengths, const std::string& what) {
  const Device gpu = Device::cuda(0);
  std::int64_t total = 0;
  for (const std::int64_t l : lengths)
    total += l;
  std::vector<std::int64_t> answers(static_cast<std::size_t>(total));
  for (std::int64_t d = 0; d < total; ++d)
    answers[d] = d * 7 + 3;
  Tensor c_off, c_vals, g_off, g_vals;
  unroute_segments(i64(order), i64(lengths), i64(answers), c_off, c_vals);
  unroute_segments(i64(order).to(gpu), i64(lengths).to(gpu), i64(answers).to(gpu), g_off, g_vals);
  EXPECT_EQ(values(g_off), values(c_off)) << what;
  EXPECT_EQ(values(g_vals), values(c_vals)) << what;
}

// pairs: (begin, end) of each range, one after the other.
void expect_sums_parity(const std::vector<std::vector<std::int64_t>>& columns,
                        const std::vector<std::int64_t>& pairs, const std::string& what) {
  const Device gpu = Device::cuda(0);
  std::vector<Tensor> c_cols, g_cols;
  for (const auto& col : columns) {
    c_cols.push_back(i64(col));
    g_cols.push_back(i64(col).to(gpu));
  }
  const Tensor c = segment_sums(c_cols, ranges(pairs));
  const Tensor g = segment_sums(g_cols, ranges(pairs).to(gpu));
  EXPECT_EQ(g.shape(), c.shape()) << what;
  EXPECT_EQ(values(g.reshape({g.numel()})), values(c.reshape({c.numel()}))) << what;
}

} // namespace

// The shapes the CUDA kernels treat apart: routing with one bucket, with up to 8 parts, with
// more buckets than a block counts in shared memory, frontiers of 0, 1, a warp +- 1 and over a
// million nodes (several blocks' tiles, the last one partial); answers with segments longer than
// a warp, a block and a copy tile, runs of empty segments (a tile spanning thousands of
// segments), a hub of 300k values, nothing at all; segment sums over 1, 2, 8 and more ranges than
// a block keeps in shared memory, adjacent or with gaps, empty ones, values outside every range.
TEST(FrontierOps, CudaTwinsMatchTheCpuOnEdgeShapes) {
  if (!device_memory::cuda_available())
    GTEST_SKIP() << "no GPU visible: CUDA frontier ops not compared";
  std::mt19937_64 rng(11);
  const auto random_frontier = [&](std::int64_t n, std::int64_t range, int flag_one_in) {
    std::vector<std::int64_t> ids(static_cast<std::size_t>(n)), known(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      ids[i] = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(range));
      known[i] = flag_one_in > 0 && rng() % static_cast<std::uint64_t>(flag_one_in) == 0 ? -1 : i;
    }
    return std::pair{ids, known};
  };
  for (const std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{31}, std::int64_t{33},
                               std::int64_t{2049}, std::int64_t{(1 << 20) + 7}})
    for (const std::int64_t parts : {1, 2, 3, 8}) {
      const auto [ids, known] = random_frontier(n, 100000, 3);
      expect_route_parity(ids, known, parts, 100000, "n = " + std::to_string(n));
    }
  {
    // One bucket: every node in part 0 and known; every node flagged in one part.
    const auto [ids, known] = random_frontier(70000, 1000, 0);
    expect_route_parity(ids, known, 4, 4000, "one bucket");
    std::vector<std::int64_t> flagged(ids.size(), -1);
    expect_route_parity(ids, flagged, 4, 4000, "one flagged bucket");
  }
  for (const std::int64_t parts : {2047, 2048, 2049, 3000}) {
    // 2 * parts buckets: shared-memory histograms up to 4096 buckets, global counters past them.
    const auto [ids, known] = random_frontier(300000, 3000000, 2);
    expect_route_parity(ids, known, parts, 3000000, "many buckets");
  }
  EXPECT_THROW(route_frontier(i64({5, 100}).to(Device::cuda(0)), i64({0, 50}).to(Device::cuda(0)),
                              i64({0, 0}).to(Device::cuda(0)), RouteKeys::owner_then_flag),
               InputError);

  const auto shuffled = [&](std::size_t n) {
    std::vector<std::int64_t> order(n);
    std::iota(order.begin(), order.end(), std::int64_t{0});
    std::shuffle(order.begin(), order.end(), rng);
    return order;
  };
  expect_unroute_parity({}, {}, "empty frontier");
  expect_unroute_parity(shuffled(5), {0, 0, 0, 0, 0}, "no answers");
  expect_unroute_parity({0}, {300000}, "one hub");
  expect_unroute_parity(shuffled(9), {33, 0, 0, 257, 1, 0, 1025, 31, 2048},
                        "longer than a warp, a block and a tile");
  {
    // Thousands of empty segments between answers: tiles that span many segments.
    std::vector<std::int64_t> lengths(20000, 0);
    for (std::size_t k = 0; k < lengths.size(); k += 1 + rng() % 3000)
      lengths[k] = static_cast<std::int64_t>(rng() % 3000);
    expect_unroute_parity(shuffled(lengths.size()), lengths, "runs of empty segments");
  }
  {
    // Power-law lengths (fanout -1 over hubs) and fanout-15 lengths over 300k nodes.
    std::vector<std::int64_t> whole(300000), capped(300000);
    for (std::size_t k = 0; k < whole.size(); ++k) {
      const double u = 1.0 - static_cast<double>(rng() % 1000000) / 1e6;
      whole[k] = std::min<std::int64_t>(50000, static_cast<std::int64_t>(std::pow(u, -1.0 / 1.1)));
      capped[k] = std::min<std::int64_t>(15, whole[k]);
    }
    expect_unroute_parity(shuffled(whole.size()), whole, "power-law whole rows");
    expect_unroute_parity(shuffled(capped.size()), capped, "fanout 15");
  }

  std::vector<std::int64_t> column(1 << 20), other(1 << 20);
  for (std::size_t i = 0; i < column.size(); ++i) {
    column[i] = static_cast<std::int64_t>(rng() % 1000) - 100;
    other[i] = static_cast<std::int64_t>(rng() % 50000);
  }
  const auto n = static_cast<std::int64_t>(column.size());
  expect_sums_parity({column, other}, {0, n}, "one range");
  expect_sums_parity({column}, {0, 0}, "one empty range");
  expect_sums_parity({column, other}, {0, 400000, 600000, n}, "a hop's two ranges of other ranks");
  expect_sums_parity({column, other},
                     {5, 5, 5, 1000, 1000, 1000, 1001, 300000, 300000, 300000, 300001, 999999,
                      999999, 999999, 1000000, n - 100},
                     "8 ranges, some empty, gaps and ends left out");
  expect_sums_parity({std::vector<std::int64_t>{}}, {0, 0, 0, 0}, "no values");
  for (const std::int64_t segments : {4096, 4097, 10000}) {
    // Adjacent ranges, then as many with a gap after each.
    std::vector<std::int64_t> adjacent, gapped;
    for (std::int64_t s = 0; s < segments; ++s) {
      adjacent.insert(adjacent.end(), {n * s / segments, n * (s + 1) / segments});
      gapped.insert(gapped.end(), {n * s / segments, n * s / segments + (n / segments) / 2});
    }
    expect_sums_parity({column, other}, adjacent, std::to_string(segments) + " adjacent ranges");
    expect_sums_parity({column}, gapped, std::to_string(segments) + " ranges with gaps");
  }
}
