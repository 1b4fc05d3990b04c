// Frontier routing ops: argument checks, the CPU twins, and dispatch to the CUDA twins.
#include "tessel/sampling/frontier_ops.hpp"

#include "cuda/frontier_ops_cuda.hpp"

#include "tessel/core/error.hpp"

#include <algorithm>
#include <numeric>

namespace tessel::sampling {
namespace {

void expect_i64_vector(const Tensor& t, const char* op, const char* what) {
  TESSEL_EXPECTS(t.defined() && t.dim() == 1 && t.dtype() == DType::i64,
                 "{}: {} is {}, expected i64 [n]", op, what, t.describe());
}

void expect_same_device(const Tensor& a, const Tensor& b, const char* op) {
  TESSEL_EXPECTS(a.device() == b.device(), "{}: tensors on {} and {}, expected one device", op,
                 a.device().str(), b.device().str());
}

#if !defined(TESSEL_WITH_CUDA)
[[noreturn]] void no_cuda(const char* op, Device device) {
  TESSEL_FAIL("{}: device {} is not supported in a build without CUDA", op, device.str());
}
#endif

} // namespace

Tensor find_sorted(const Tensor& sorted_keys, const Tensor& ids) {
  constexpr const char* kOp = "find_sorted";
  expect_i64_vector(sorted_keys, kOp, "sorted_keys");
  expect_i64_vector(ids, kOp, "ids");
  expect_same_device(sorted_keys, ids, kOp);
  Tensor pos = Tensor::empty({ids.numel()}, DType::i64, ids.device());
  if (ids.device().is_cpu()) {
    const std::int64_t* keys = sorted_keys.data<std::int64_t>();
    const std::int64_t* keys_end = keys + sorted_keys.numel();
    const std::int64_t* in = ids.data<std::int64_t>();
    std::int64_t* out = pos.data<std::int64_t>();
    for (std::int64_t i = 0; i < ids.numel(); ++i) {
      const std::int64_t* at = std::lower_bound(keys, keys_end, in[i]);
      out[i] = at != keys_end && *at == in[i] ? at - keys : -1;
    }
    return pos;
  }
#if defined(TESSEL_WITH_CUDA)
  cuda::find_sorted(sorted_keys, ids, pos);
  return pos;
#else
  no_cuda(kOp, ids.device());
#endif
}

Tensor take(const Tensor& values, const Tensor& index) {
  constexpr const char* kOp = "take";
  expect_i64_vector(values, kOp, "values");
  expect_i64_vector(index, kOp, "index");
  expect_same_device(values, index, kOp);
  Tensor out = Tensor::empty({index.numel()}, DType::i64, index.device());
  if (index.device().is_cpu()) {
    const std::int64_t* v = values.data<std::int64_t>();
    const std::int64_t* at = index.data<std::int64_t>();
    std::int64_t* o = out.data<std::int64_t>();
    for (std::int64_t k = 0; k < index.numel(); ++k) {
      TESSEL_EXPECTS(at[k] < values.numel(), "{}: index {} outside {} values", kOp, at[k],
                     values.numel());
      o[k] = at[k] >= 0 ? v[at[k]] : -1;
    }
    return out;
  }
#if defined(TESSEL_WITH_CUDA)
  cuda::take(values, index, out);
  return out;
#else
  no_cuda(kOp, index.device());
#endif
}

void scatter(const Tensor& values, const Tensor& index, Tensor& out) {
  constexpr const char* kOp = "scatter";
  expect_i64_vector(values, kOp, "values");
  expect_i64_vector(index, kOp, "index");
  expect_i64_vector(out, kOp, "out");
  expect_same_device(values, index, kOp);
  expect_same_device(values, out, kOp);
  TESSEL_EXPECTS(values.numel() == index.numel(), "{}: {} values for {} indices", kOp,
                 values.numel(), index.numel());
  if (out.device().is_cpu()) {
    const std::int64_t* v = values.data<std::int64_t>();
    const std::int64_t* at = index.data<std::int64_t>();
    std::int64_t* o = out.data<std::int64_t>();
    for (std::int64_t k = 0; k < index.numel(); ++k) {
      TESSEL_EXPECTS(at[k] >= 0 && at[k] < out.numel(), "{}: index {} outside [0, {})", kOp, at[k],
                     out.numel());
      o[at[k]] = v[k];
    }
    return;
  }
#if defined(TESSEL_WITH_CUDA)
  cuda::scatter(values, index, out);
#else
  no_cuda(kOp, out.device());
#endif
}

Tensor segment_lengths(const Tensor& offsets) {
  constexpr const char* kOp = "segment_lengths";
  expect_i64_vector(offsets, kOp, "offsets");
  TESSEL_EXPECTS(offsets.numel() >= 1, "{}: offsets are empty, expected [n + 1]", kOp);
  const std::int64_t n = offsets.numel() - 1;
  Tensor lengths = Tensor::empty({n}, DType::i64, offsets.device());
  if (offsets.device().is_cpu()) {
    const std::int64_t* o = offsets.data<std::int64_t>();
    std::int64_t* l = lengths.data<std::int64_t>();
    for (std::int64_t i = 0; i < n; ++i)
      l[i] = o[i + 1] - o[i];
    return lengths;
  }
#if defined(TESSEL_WITH_CUDA)
  cuda::segment_lengths(offsets, lengths);
  return lengths;
#else
  no_cuda(kOp, offsets.device());
#endif
}

std::int64_t sum(const Tensor& values) {
  constexpr const char* kOp = "sum";
  expect_i64_vector(values, kOp, "values");
  if (values.device().is_cpu()) {
    const std::int64_t* v = values.data<std::int64_t>();
    return std::accumulate(v, v + values.numel(), std::int64_t{0});
  }
#if defined(TESSEL_WITH_CUDA)
  return cuda::sum(values);
#else
  no_cuda(kOp, values.device());
#endif
}

Tensor segment_sums(const std::vector<Tensor>& columns, const Tensor& ranges) {
  constexpr const char* kOp = "segment_sums";
  TESSEL_EXPECTS(ranges.defined() && ranges.dim() == 2 && ranges.size(1) == 2 &&
                     ranges.dtype() == DType::i64,
                 "{}: ranges are {}, expected i64 [segments, 2]", kOp, ranges.describe());
  TESSEL_EXPECTS(!columns.empty(), "{}: no columns to sum", kOp);
  const std::int64_t n = columns.front().defined() ? columns.front().numel() : 0;
  for (const Tensor& column : columns) {
    expect_i64_vector(column, kOp, "a column");
    expect_same_device(column, ranges, kOp);
    TESSEL_EXPECTS(column.numel() == n, "{}: columns of {} and {} values", kOp, n, column.numel());
  }
  const std::int64_t segments = ranges.size(0);
  const auto num_columns = static_cast<std::int64_t>(columns.size());
  Tensor sums = Tensor::empty({num_columns, segments}, DType::i64, ranges.device());
  if (ranges.device().is_cpu()) {
    const std::int64_t* r = ranges.data<std::int64_t>();
    for (std::int64_t s = 0; s < segments; ++s)
      TESSEL_EXPECTS(r[2 * s] >= (s > 0 ? r[2 * s - 1] : 0) && r[2 * s] <= r[2 * s + 1] &&
                         r[2 * s + 1] <= n,
                     "{}: range {} is [{}, {}), expected ascending disjoint ranges within [0, {}]",
                     kOp, s, r[2 * s], r[2 * s + 1], n);
    std::int64_t* out = sums.data<std::int64_t>();
    for (std::int64_t c = 0; c < num_columns; ++c) {
      const std::int64_t* v = columns[static_cast<std::size_t>(c)].data<std::int64_t>();
      for (std::int64_t s = 0; s < segments; ++s)
        out[c * segments + s] = std::accumulate(v + r[2 * s], v + r[2 * s + 1], std::int64_t{0});
    }
    return sums;
  }
#if defined(TESSEL_WITH_CUDA)
  cuda::segment_sums(columns, ranges, sums);
  return sums;
#else
  no_cuda(kOp, ranges.device());
#endif
}

FrontierRoute route_frontier(const Tensor& ids, const Tensor& owner_offsets,
                             const Tensor& known_pos, RouteKeys keys) {
  constexpr const char* kOp = "route_frontier";
  expect_i64_vector(ids, kOp, "ids");
  expect_i64_vector(owner_offsets, kOp, "owner_offsets");
  expect_i64_vector(known_pos, kOp, "known_pos");
  expect_same_device(ids, owner_offsets, kOp);
  expect_same_device(ids, known_pos, kOp);
  TESSEL_EXPECTS(owner_offsets.numel() >= 2, "{}: owner_offsets are {}, expected [parts + 1]", kOp,
                 owner_offsets.describe());
  TESSEL_EXPECTS(known_pos.numel() == ids.numel(), "{}: {} known positions for {} ids", kOp,
                 known_pos.numel(), ids.numel());
  const std::int64_t parts = owner_offsets.numel() - 1;
  const bool pairs = keys == RouteKeys::owner_then_flag;
  const std::int64_t buckets = pairs ? 2 * parts : parts + 1;
  FrontierRoute route;
  route.order = Tensor::empty({ids.numel()}, DType::i64, ids.device());
  route.counts.assign(static_cast<std::size_t>(buckets), 0);
  if (ids.device().is_cpu()) {
    // A counting sort: bucket of each node, then a stable placement.
    const std::int64_t n = ids.numel();
    const std::int64_t* in = ids.data<std::int64_t>();
    const std::int64_t* offsets = owner_offsets.data<std::int64_t>();
    const std::int64_t* known = known_pos.data<std::int64_t>();
    std::vector<std::int64_t> bucket(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t* after = std::upper_bound(offsets, offsets + parts + 1, in[i]);
      const std::int64_t owner = (after - offsets) - 1;
      TESSEL_EXPECTS(owner >= 0 && owner < parts, "{}: node {} has no owner (ids [{}, {}))", kOp,
                     in[i], offsets[0], offsets[parts]);
      const bool flagged = known[i] < 0;
      bucket[i] = pairs ? 2 * owner + (flagged ? 1 : 0) : (flagged ? owner : parts);
      ++route.counts[static_cast<std::size_t>(bucket[i])];
    }
    std::vector<std::int64_t> next(static_cast<std::size_t>(buckets), 0);
    std::exclusive_scan(route.counts.begin(), route.counts.end(), next.begin(), std::int64_t{0});
    std::int64_t* order = route.order.data<std::int64_t>();
    for (std::int64_t i = 0; i < n; ++i)
      order[next[static_cast<std::size_t>(bucket[i])]++] = i;
    return route;
  }
#if defined(TESSEL_WITH_CUDA)
  TESSEL_EXPECTS(
      cuda::route_frontier(ids, owner_offsets, known_pos, pairs, route.order, route.counts),
      "{}: a node has no owner (ids outside the owners' ranges)", kOp);
  return route;
#else
  no_cuda(kOp, ids.device());
#endif
}

void unroute_segments(const Tensor& order, const Tensor& lengths, const Tensor& values,
                      Tensor& offsets, Tensor& out) {
  constexpr const char* kOp = "unroute_segments";
  expect_i64_vector(order, kOp, "order");
  expect_i64_vector(lengths, kOp, "lengths");
  expect_i64_vector(values, kOp, "values");
  expect_same_device(order, lengths, kOp);
  expect_same_device(order, values, kOp);
  TESSEL_EXPECTS(lengths.numel() == order.numel(), "{}: {} lengths for {} routed positions", kOp,
                 lengths.numel(), order.numel());
  const std::int64_t n = order.numel();
  const Device device = order.device();
  offsets = Tensor::empty({n + 1}, DType::i64, device);
  out = Tensor::empty({values.numel()}, DType::i64, device);
  if (device.is_cpu()) {
    const std::int64_t* at = order.data<std::int64_t>();
    const std::int64_t* len = lengths.data<std::int64_t>();
    const std::int64_t* v = values.data<std::int64_t>();
    std::int64_t* off = offsets.data<std::int64_t>();
    std::int64_t* o = out.data<std::int64_t>();
    std::vector<std::int64_t> routed_start(static_cast<std::size_t>(n) + 1, 0);
    std::fill(off, off + n + 1, 0);
    for (std::int64_t k = 0; k < n; ++k) {
      TESSEL_EXPECTS(at[k] >= 0 && at[k] < n && len[k] >= 0,
                     "{}: routed position {} names frontier position {} with {} values", kOp, k,
                     at[k], len[k]);
      off[at[k] + 1] = len[k];
      routed_start[k + 1] = routed_start[k] + len[k];
    }
    TESSEL_EXPECTS(routed_start[n] == values.numel(), "{}: lengths sum to {}, expected {}", kOp,
                   routed_start[n], values.numel());
    for (std::int64_t i = 0; i < n; ++i)
      off[i + 1] += off[i];
    for (std::int64_t k = 0; k < n; ++k)
      std::copy(v + routed_start[k], v + routed_start[k + 1], o + off[at[k]]);
    return;
  }
#if defined(TESSEL_WITH_CUDA)
  cuda::unroute_segments(order, lengths, values, offsets, out);
#else
  no_cuda(kOp, device);
#endif
}

} // namespace tessel::sampling
