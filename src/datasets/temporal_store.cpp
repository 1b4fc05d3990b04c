// The temporal store: snapshots as a base graph plus per-step edge differences, features and
// targets chunked by snapshot; writing it atomically, reading and rebuilding snapshots.
#include "tessel/datasets/temporal.hpp"

#include "tessel/core/error.hpp"
#include "tessel/datasets/atomic_output.hpp"
#include "tessel/datasets/h5.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace tessel::datasets {
namespace fs = std::filesystem;

namespace {

// Csr::validate without its OpenMP loops: snapshots are many and small, and a parallel region
// per snapshot costs more than the check.
void check_snapshot(const Csr& s, const std::string& what) {
  TESSEL_EXPECTS(static_cast<std::int64_t>(s.indptr.size()) == s.num_rows + 1 && s.indptr[0] == 0,
                 "{}: indptr has {} entries starting at {}, expected {} from 0", what,
                 s.indptr.size(), s.indptr.empty() ? -1 : s.indptr[0], s.num_rows + 1);
  for (std::int64_t v = 0; v < s.num_rows; ++v)
    TESSEL_EXPECTS(s.indptr[v + 1] >= s.indptr[v], "{}: indptr is not monotone at row {}", what, v);
  TESSEL_EXPECTS(s.indptr.back() == s.num_edges(), "{}: indptr ends at {}, but there are {} edges",
                 what, s.indptr.back(), s.num_edges());
  for (std::int64_t e = 0; e < s.num_edges(); ++e)
    TESSEL_EXPECTS(s.indices[e] >= 0 && s.indices[e] < s.num_cols,
                   "{}: neighbor {} at position {} is outside [0, {})", what, s.indices[e], e,
                   s.num_cols);
  TESSEL_EXPECTS(s.values.empty() || static_cast<std::int64_t>(s.values.size()) == s.num_edges(),
                 "{}: {} weights for {} edges", what, s.values.size(), s.num_edges());
  // Also where the trainer reads snapshots (TemporalStoreReader): a negative weight was accepted
  // there while `info` and `partition` refused it.
  for (float w : s.values)
    TESSEL_EXPECTS(std::isfinite(w) && w >= 0, "{}: edge weight {} is not a finite value >= 0",
                   what, w);
}

}  // namespace

void TemporalDataset::validate(const std::string& what) const {
  const std::int64_t T = num_snapshots();
  TESSEL_EXPECTS(num_nodes > 0, "{}: the dataset has no nodes", what);
  TESSEL_EXPECTS(T > 0, "{}: the dataset has no snapshots", what);
  TESSEL_EXPECTS(feature_dim > 0, "{}: feature dimension is {}, expected > 0", what, feature_dim);
  for (std::int64_t t = 0; t < T; ++t) {
    const Csr& s = snapshots[static_cast<std::size_t>(t)];
    const std::string where = what + " snapshot " + std::to_string(t);
    TESSEL_EXPECTS(s.num_rows == num_nodes && s.num_cols == num_nodes,
                   "{}: shape {}x{}, expected {}x{}", where, s.num_rows, s.num_cols, num_nodes,
                   num_nodes);
    check_snapshot(s, where);
    TESSEL_EXPECTS(s.values.size() == s.indices.size(), "{}: {} weights for {} edges", where,
                   s.values.size(), s.indices.size());
    for (std::int64_t v = 0; v < num_nodes; ++v)
      for (EdgeId e = s.indptr[v] + 1; e < s.indptr[v + 1]; ++e)
        TESSEL_EXPECTS(s.indices[e - 1] < s.indices[e],
                       "{}: row {} is not sorted or repeats neighbor {}", where, v, s.indices[e]);
    for (float w : s.values)
      TESSEL_EXPECTS(std::isfinite(w) && w >= 0, "{}: edge weight {} is not a finite value >= 0",
                     where, w);
  }
  TESSEL_EXPECTS(static_cast<std::int64_t>(features.size()) == T * num_nodes * feature_dim,
                 "{}: {} feature values, expected {} snapshots x {} nodes x {}", what,
                 features.size(), T, num_nodes, feature_dim);
  TESSEL_EXPECTS(static_cast<std::int64_t>(targets.size()) == T * num_nodes,
                 "{}: {} targets, expected {} snapshots x {} nodes", what, targets.size(), T,
                 num_nodes);
  const std::int64_t F = std::max<std::int64_t>(feature_dim, 1), N = std::max<std::int64_t>(num_nodes, 1);
  for (std::size_t i = 0; i < features.size(); ++i)
    TESSEL_EXPECTS(std::isfinite(features[i]),
                   "{}: the feature of snapshot {}, node {}, column {} is {}, expected a finite "
                   "number",
                   what, static_cast<std::int64_t>(i) / F / N, static_cast<std::int64_t>(i) / F % N,
                   static_cast<std::int64_t>(i) % F, features[i]);
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const float y = targets[i];
    const std::int64_t t = static_cast<std::int64_t>(i) / N, v = static_cast<std::int64_t>(i) % N;
    if (num_classes > 0)
      TESSEL_EXPECTS(y == std::floor(y) && y >= -1 && y < static_cast<float>(num_classes),
                     "{}: the target of snapshot {}, node {} is {}, expected a class in [0, {}) "
                     "or -1",
                     what, t, v, y, num_classes);
    else
      TESSEL_EXPECTS(std::isfinite(y),
                     "{}: the target of snapshot {}, node {} is {}, expected a finite number",
                     what, t, v, y);
  }
  for (const auto& [name, r] : {std::pair{"train", train}, {"valid", valid}, {"test", test}})
    TESSEL_EXPECTS(r.begin >= 0 && r.begin <= r.end && r.end <= T,
                   "{}: {} snapshots [{}, {}) are not inside [0, {})", what, name, r.begin, r.end,
                   T);
  TESSEL_EXPECTS(train.size() > 0, "{}: no training snapshots", what);
  TESSEL_EXPECTS(orig_id.empty() || static_cast<std::int64_t>(orig_id.size()) == num_nodes,
                 "{}: {} source ids for {} nodes", what, orig_id.size(), num_nodes);
}

void canonicalize_snapshot(Csr& s) {
  if (s.values.empty()) s.values.assign(s.indices.size(), 1.0f);
  std::vector<EdgeId> new_indptr(s.indptr.size(), 0);
  EdgeId out = 0;
  std::vector<std::pair<NodeId, float>> row;
  for (std::int64_t v = 0; v < s.num_rows; ++v) {
    row.clear();
    for (EdgeId e = s.indptr[v]; e < s.indptr[v + 1]; ++e) row.emplace_back(s.indices[e], s.values[e]);
    std::sort(row.begin(), row.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (i > 0 && row[i].first == s.indices[out - 1]) {
        s.values[out - 1] += row[i].second;
        continue;
      }
      s.indices[out] = row[i].first;
      s.values[out] = row[i].second;
      ++out;
    }
    new_indptr[v + 1] = out;
  }
  s.indices.resize(static_cast<std::size_t>(out));
  s.values.resize(static_cast<std::size_t>(out));
  s.indptr = std::move(new_indptr);
}

SnapshotDelta snapshot_delta(const Csr& before, const Csr& after) {
  SnapshotDelta d;
  for (std::int64_t v = 0; v < after.num_rows; ++v) {
    EdgeId i = before.indptr[v], j = after.indptr[v];
    const EdgeId ie = before.indptr[v + 1], je = after.indptr[v + 1];
    auto remove = [&](EdgeId e) {
      d.removed_dst.push_back(v);
      d.removed_src.push_back(before.indices[e]);
    };
    auto add = [&](EdgeId e) {
      d.added_dst.push_back(v);
      d.added_src.push_back(after.indices[e]);
      d.added_weight.push_back(after.values[e]);
    };
    while (i < ie || j < je) {
      if (j == je || (i < ie && before.indices[i] < after.indices[j])) {
        remove(i++);
      } else if (i == ie || after.indices[j] < before.indices[i]) {
        add(j++);
      } else {
        if (before.values[i] != after.values[j]) {
          remove(i);
          add(j);
        }
        ++i;
        ++j;
      }
    }
  }
  return d;
}

Csr apply_delta(const Csr& before, const SnapshotDelta& d, const std::string& what) {
  Csr out;
  out.num_rows = before.num_rows;
  out.num_cols = before.num_cols;
  out.indptr.assign(static_cast<std::size_t>(before.num_rows + 1), 0);
  out.indices.reserve(before.indices.size() + d.added_src.size());
  out.values.reserve(out.indices.capacity());
  std::size_t a = 0, r = 0;
  const std::size_t na = d.added_src.size(), nr = d.removed_src.size();
  for (std::size_t i = 1; i < na; ++i)
    TESSEL_EXPECTS(std::pair(d.added_dst[i - 1], d.added_src[i - 1]) <
                       std::pair(d.added_dst[i], d.added_src[i]),
                   "{}: added edges are not in ascending (dst, src) order at {}", what, i);
  for (std::size_t i = 1; i < nr; ++i)
    TESSEL_EXPECTS(std::pair(d.removed_dst[i - 1], d.removed_src[i - 1]) <
                       std::pair(d.removed_dst[i], d.removed_src[i]),
                   "{}: removed edges are not in ascending (dst, src) order at {}", what, i);
  TESSEL_EXPECTS((na == 0 || (d.added_dst.front() >= 0 && d.added_dst.back() < before.num_rows)) &&
                     (nr == 0 || (d.removed_dst.front() >= 0 &&
                                  d.removed_dst.back() < before.num_rows)),
                 "{}: the difference names rows outside [0, {})", what, before.num_rows);
  for (std::int64_t v = 0; v < before.num_rows; ++v) {
    auto emit_added_below = [&](NodeId limit) {
      while (a < na && d.added_dst[a] == v && d.added_src[a] < limit) {
        out.indices.push_back(d.added_src[a]);
        out.values.push_back(d.added_weight[a++]);
      }
    };
    for (EdgeId i = before.indptr[v]; i < before.indptr[v + 1]; ++i) {
      const NodeId u = before.indices[i];
      TESSEL_EXPECTS(!(r < nr && d.removed_dst[r] == v && d.removed_src[r] < u),
                     "{}: removed edge {} -> {} is not present", what, d.removed_src[r], v);
      if (r < nr && d.removed_dst[r] == v && d.removed_src[r] == u) {
        ++r;  // dropped; an added edge with the same source (a new weight) is emitted below
        continue;
      }
      emit_added_below(u);
      TESSEL_EXPECTS(!(a < na && d.added_dst[a] == v && d.added_src[a] == u),
                     "{}: added edge {} -> {} is already present", what, u, v);
      out.indices.push_back(u);
      out.values.push_back(before.values[i]);
    }
    TESSEL_EXPECTS(!(r < nr && d.removed_dst[r] == v), "{}: removed edge {} -> {} is not present",
                   what, r < nr ? d.removed_src[r] : 0, v);
    emit_added_below(std::numeric_limits<NodeId>::max());
    out.indptr[v + 1] = static_cast<EdgeId>(out.indices.size());
  }
  return out;
}

namespace {

std::int64_t feature_chunk_rows(std::int64_t n, std::int64_t f) {
  return std::max<std::int64_t>(1, std::min<std::int64_t>(n, (std::int64_t{4} << 20) / f));
}

void write_range(h5::File& file, const std::string& name, const SnapshotRange& r) {
  const std::vector<std::int64_t> v = {r.begin, r.end};
  file.write(name, v, "snapshot range [begin, end), int64 [2]");
}

}  // namespace

void write_temporal_store(const TemporalDataset& data, const fs::path& path,
                          const TemporalWriteOptions& options) {
  data.validate(path.string());
  const std::int64_t T = data.num_snapshots(), N = data.num_nodes, F = data.feature_dim;
  AtomicOutput output(path);
  {
    h5::File file = h5::File::create(output.temp_path());
    file.set_attr("format", std::string(kTemporalFormat));
    file.set_attr("version", std::int64_t{kTemporalVersion});
    file.set_attr("name", data.name);
    file.set_attr("num_nodes", N);
    file.set_attr("num_snapshots", T);
    file.set_attr("feature_dim", F);
    file.set_attr("num_classes", data.num_classes);
    file.set_attr("full_snapshots", std::int64_t{options.full_snapshots ? 1 : 0});
    file.set_attr("description",
                  std::string("Tessel temporal store: T snapshots of one node set. Snapshot 0 is "
                              "/base (in-neighbor CSR with weights); snapshot t is snapshot t-1 "
                              "minus /delta/removed_* and plus /delta/added_* rows "
                              "[offsets[t], offsets[t+1]). /node/feat is [T*N, F], /node/target "
                              "[T, N]; /split/* are snapshot ranges [begin, end)."));
    const Csr& base = data.snapshots[0];
    file.create_group("/base");
    file.write("/base/indptr", base.indptr, "snapshot 0: in-neighbor CSR row pointers, int64 [N+1]");
    file.write("/base/indices", base.indices, "snapshot 0: sources of each row, ascending, int64");
    file.write("/base/weight", base.values, "snapshot 0: edge weights, float32");
    std::vector<std::int64_t> add_off(static_cast<std::size_t>(T + 1), 0), rem_off = add_off;
    std::vector<NodeId> add_dst, add_src, rem_dst, rem_src;
    std::vector<float> add_w;
    for (std::int64_t t = 1; t < T; ++t) {
      const SnapshotDelta d = snapshot_delta(data.snapshots[t - 1], data.snapshots[t]);
      add_dst.insert(add_dst.end(), d.added_dst.begin(), d.added_dst.end());
      add_src.insert(add_src.end(), d.added_src.begin(), d.added_src.end());
      add_w.insert(add_w.end(), d.added_weight.begin(), d.added_weight.end());
      rem_dst.insert(rem_dst.end(), d.removed_dst.begin(), d.removed_dst.end());
      rem_src.insert(rem_src.end(), d.removed_src.begin(), d.removed_src.end());
      add_off[t + 1] = static_cast<std::int64_t>(add_dst.size());
      rem_off[t + 1] = static_cast<std::int64_t>(rem_dst.size());
    }
    add_off[1] = 0;
    rem_off[1] = 0;
    file.create_group("/delta");
    file.write("/delta/added_offsets", add_off,
               "int64 [T+1]: edges added at step t are rows [offsets[t], offsets[t+1])");
    file.write("/delta/added_dst", add_dst, "int64: destination of each added edge");
    file.write("/delta/added_src", add_src, "int64: source of each added edge");
    file.write("/delta/added_weight", add_w, "float32: weight of each added edge");
    file.write("/delta/removed_offsets", rem_off,
               "int64 [T+1]: edges removed at step t are rows [offsets[t], offsets[t+1])");
    file.write("/delta/removed_dst", rem_dst, "int64: destination of each removed edge");
    file.write("/delta/removed_src", rem_src, "int64: source of each removed edge");
    if (options.full_snapshots) {
      std::vector<std::int64_t> edge_off(static_cast<std::size_t>(T + 1), 0);
      std::vector<std::int64_t> indptr;
      std::vector<NodeId> indices;
      std::vector<float> weight;
      for (std::int64_t t = 0; t < T; ++t) {
        const Csr& s = data.snapshots[t];
        indptr.insert(indptr.end(), s.indptr.begin(), s.indptr.end());
        indices.insert(indices.end(), s.indices.begin(), s.indices.end());
        weight.insert(weight.end(), s.values.begin(), s.values.end());
        edge_off[t + 1] = static_cast<std::int64_t>(indices.size());
      }
      file.create_group("/full");
      file.write("/full/edge_offsets", edge_off, "int64 [T+1]: snapshot t's edges");
      file.write("/full/indptr", indptr.data(), {T, N + 1},
                 "int64 [T, N+1]: each snapshot's row pointers (relative to its first edge)", 1);
      file.write("/full/indices", indices, "int64: every snapshot's sources, snapshot by snapshot");
      file.write("/full/weight", weight, "float32: every snapshot's edge weights");
    }
    file.create_group("/node");
    file.write("/node/feat", data.features.data(), {T * N, F},
               "float32 [T*N, F]: row t*N+v holds node v's features at snapshot t",
               feature_chunk_rows(N, F));
    file.write("/node/target", data.targets.data(), {T, N},
               "float32 [T, N]: node targets per snapshot (a class id or -1 when num_classes > 0)",
               1);
    if (!data.orig_id.empty())
      file.write("/node/orig_id", data.orig_id,
                 "int64 [N]: node v's id in the store this one was relabeled from");
    file.create_group("/split");
    write_range(file, "/split/train", data.train);
    write_range(file, "/split/valid", data.valid);
    write_range(file, "/split/test", data.test);
    file.close();
  }
  output.commit();
}

bool is_temporal_store(const fs::path& path) {
  if (!fs::is_regular_file(path)) return false;
  htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 <= 0) return false;
  const h5::File f = h5::File::open_read(path);
  return f.has_attr("format") && f.attr_string("format") == kTemporalFormat;
}

struct TemporalStoreReader::Impl {
  h5::File file;
  std::vector<std::int64_t> add_off, rem_off;
  // The last snapshot rebuilt, so consecutive requests do not start from the base again.
  std::int64_t cached_t = -1;
  Csr cached;
};

namespace {

SnapshotRange read_range(const h5::File& f, const std::string& name, std::int64_t T) {
  const auto v = f.read<std::int64_t>(name, {2});
  SnapshotRange r{v[0], v[1]};
  TESSEL_EXPECTS(r.begin >= 0 && r.begin <= r.end && r.end <= T,
                 "{}: {} = [{}, {}) is not inside [0, {})", f.path().string(), name, r.begin,
                 r.end, T);
  return r;
}

void check_offsets(const std::vector<std::int64_t>& off, std::int64_t total, const std::string& what) {
  TESSEL_EXPECTS(off.front() == 0 && off.back() == total, "{}: offsets span [{}, {}), expected [0, {})",
                 what, off.front(), off.back(), total);
  for (std::size_t i = 1; i < off.size(); ++i)
    TESSEL_EXPECTS(off[i] >= off[i - 1], "{}: offsets decrease at {}", what, i);
}

}  // namespace

TemporalStoreReader::TemporalStoreReader(fs::path path) : path_(std::move(path)), impl_(new Impl) {
  try {
    const std::string file = path_.string();
    TESSEL_EXPECTS(fs::is_regular_file(path_), "{}: no such file", file);
    impl_->file = h5::File::open_read(path_);
    const h5::File& f = impl_->file;
    TESSEL_EXPECTS(f.has_attr("format") && f.attr_string("format") == kTemporalFormat,
                   "{}: not a Tessel temporal store (format attribute is not \"{}\")", file,
                   kTemporalFormat);
    info_.version = static_cast<int>(f.attr_int("version"));
    TESSEL_EXPECTS(info_.version >= 1 && info_.version <= kTemporalVersion,
                   "{}: temporal store version {} is not supported (this Tessel reads {})", file,
                   info_.version, kTemporalVersion);
    info_.name = f.attr_string("name");
    info_.num_nodes = f.attr_int("num_nodes");
    info_.num_snapshots = f.attr_int("num_snapshots");
    info_.feature_dim = f.attr_int("feature_dim");
    info_.num_classes = f.attr_int("num_classes");
    info_.full_snapshots = f.attr_int("full_snapshots") != 0;
    const std::int64_t N = info_.num_nodes, T = info_.num_snapshots;
    TESSEL_EXPECTS(N > 0 && T > 0 && info_.feature_dim > 0 && info_.num_classes >= 0,
                   "{}: invalid sizes (nodes {}, snapshots {}, features {}, classes {})", file, N,
                   T, info_.feature_dim, info_.num_classes);
    info_.train = read_range(f, "/split/train", T);
    info_.valid = read_range(f, "/split/valid", T);
    info_.test = read_range(f, "/split/test", T);
    info_.base_edges = f.dims("/base/indices").at(0);
    impl_->add_off = f.read<std::int64_t>("/delta/added_offsets", {T + 1});
    impl_->rem_off = f.read<std::int64_t>("/delta/removed_offsets", {T + 1});
    info_.added_edges = f.dims("/delta/added_src").at(0);
    info_.removed_edges = f.dims("/delta/removed_src").at(0);
    check_offsets(impl_->add_off, info_.added_edges, file + " /delta/added_offsets");
    check_offsets(impl_->rem_off, info_.removed_edges, file + " /delta/removed_offsets");
    TESSEL_EXPECTS((f.dims("/node/feat") == std::vector<std::int64_t>{T * N, info_.feature_dim}),
                   "{}: /node/feat is not [{} x {}, {}]", file, T, N, info_.feature_dim);
    TESSEL_EXPECTS((f.dims("/node/target") == std::vector<std::int64_t>{T, N}),
                   "{}: /node/target is not [{}, {}]", file, T, N);
    // Edge counts follow from the differences: E_t = E_{t-1} + added_t - removed_t.
    std::int64_t e = info_.base_edges;
    info_.total_edges = e;
    for (std::int64_t t = 1; t < T; ++t) {
      e += (impl_->add_off[t + 1] - impl_->add_off[t]) - (impl_->rem_off[t + 1] - impl_->rem_off[t]);
      info_.total_edges += e;
    }
    info_.file_bytes = static_cast<std::int64_t>(fs::file_size(path_));
  } catch (...) {
    delete impl_;
    throw;
  }
}

TemporalStoreReader::~TemporalStoreReader() { delete impl_; }

std::vector<Csr> TemporalStoreReader::rebuild_snapshots(std::int64_t begin, std::int64_t end) {
  const std::int64_t N = info_.num_nodes, T = info_.num_snapshots;
  TESSEL_EXPECTS(0 <= begin && begin <= end && end <= T, "{}: snapshots [{}, {}) outside [0, {})",
                 path_.string(), begin, end, T);
  const std::string file = path_.string();
  const h5::File& f = impl_->file;
  std::vector<Csr> out;
  if (begin == end) return out;
  Csr current;
  std::int64_t t = 0;
  if (impl_->cached_t >= 0 && impl_->cached_t <= begin) {
    current = impl_->cached;
    t = impl_->cached_t;
  } else {
    current.num_rows = current.num_cols = N;
    current.indptr = f.read<std::int64_t>("/base/indptr", {N + 1});
    f.read_to("/base/indices", current.indices);
    current.values = f.read<float>("/base/weight", {info_.base_edges});
    check_snapshot(current, file + " /base");
    for (std::int64_t v = 0; v < N; ++v)
      for (EdgeId i = current.indptr[v] + 1; i < current.indptr[v + 1]; ++i)
        TESSEL_EXPECTS(current.indices[i - 1] < current.indices[i],
                       "{}: /base row {} is not sorted ascending without repeats", file, v);
  }
  while (true) {
    if (t >= begin) out.push_back(current);
    if (t + 1 >= end) break;
    ++t;
    SnapshotDelta d;
    const auto a0 = impl_->add_off[t], a1 = impl_->add_off[t + 1];
    const auto r0 = impl_->rem_off[t], r1 = impl_->rem_off[t + 1];
    f.read_rows("/delta/added_dst", a0, a1, d.added_dst);
    f.read_rows("/delta/added_src", a0, a1, d.added_src);
    f.read_rows("/delta/added_weight", a0, a1, d.added_weight);
    f.read_rows("/delta/removed_dst", r0, r1, d.removed_dst);
    f.read_rows("/delta/removed_src", r0, r1, d.removed_src);
    for (std::size_t i = 0; i < d.added_src.size(); ++i)
      TESSEL_EXPECTS(d.added_src[i] >= 0 && d.added_src[i] < N && d.added_dst[i] >= 0 &&
                         d.added_dst[i] < N,
                     "{}: added edge {} of step {} is out of range", file, i, t);
    for (std::size_t i = 0; i < d.added_weight.size(); ++i)
      TESSEL_EXPECTS(std::isfinite(d.added_weight[i]) && d.added_weight[i] >= 0,
                     "{}: added edge {} of step {} has weight {}, expected a finite value >= 0",
                     file, i, t, d.added_weight[i]);
    current = apply_delta(current, d, file + " step " + std::to_string(t));
  }
  impl_->cached = current;
  impl_->cached_t = end - 1;
  return out;
}

std::vector<Csr> TemporalStoreReader::snapshots(std::int64_t begin, std::int64_t end) {
  if (!info_.full_snapshots) return rebuild_snapshots(begin, end);
  const std::int64_t N = info_.num_nodes, T = info_.num_snapshots;
  TESSEL_EXPECTS(0 <= begin && begin <= end && end <= T, "{}: snapshots [{}, {}) outside [0, {})",
                 path_.string(), begin, end, T);
  const h5::File& f = impl_->file;
  const auto off = f.read<std::int64_t>("/full/edge_offsets", {T + 1});
  check_offsets(off, f.dims("/full/indices").at(0), path_.string() + " /full/edge_offsets");
  std::vector<Csr> out;
  for (std::int64_t t = begin; t < end; ++t) {
    Csr s;
    s.num_rows = s.num_cols = N;
    std::vector<std::int64_t> ptr;
    f.read_rows("/full/indptr", t, t + 1, ptr);
    s.indptr = std::move(ptr);
    std::vector<std::int64_t> indices;
    f.read_rows("/full/indices", off[t], off[t + 1], indices);
    s.indices.assign(indices.begin(), indices.end());
    f.read_rows("/full/weight", off[t], off[t + 1], s.values);
    check_snapshot(s, path_.string() + " /full snapshot " + std::to_string(t));
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<float> TemporalStoreReader::features(std::int64_t t, std::int64_t row_begin,
                                                 std::int64_t row_end) {
  const std::int64_t N = info_.num_nodes;
  TESSEL_ASSERT(0 <= t && t < info_.num_snapshots && 0 <= row_begin && row_begin <= row_end &&
                    row_end <= N,
                "feature rows [{}, {}) of snapshot {}", row_begin, row_end, t);
  std::vector<float> out;
  impl_->file.read_rows("/node/feat", t * N + row_begin, t * N + row_end, out);
  // Checked as read: a NaN would otherwise surface epochs later as a diverged loss.
  const std::int64_t F = std::max<std::int64_t>(info_.feature_dim, 1);
  const auto bad = std::find_if(out.begin(), out.end(), [](float x) { return !std::isfinite(x); });
  if (bad != out.end()) {
    const std::int64_t at = bad - out.begin();
    TESSEL_FAIL("{}: /node/feat row {} (snapshot {}, node {}), column {} is {}, expected a finite "
                "number",
                path_.string(), t * N + row_begin + at / F, t, row_begin + at / F, at % F, *bad);
  }
  return out;
}

std::vector<NodeId> TemporalStoreReader::orig_ids() {
  const std::int64_t N = info_.num_nodes;
  if (!impl_->file.exists("/node/orig_id")) {
    std::vector<NodeId> ids(static_cast<std::size_t>(N));
    std::iota(ids.begin(), ids.end(), NodeId{0});
    return ids;
  }
  auto ids = impl_->file.read<NodeId>("/node/orig_id", {N});
  for (NodeId id : ids)
    TESSEL_EXPECTS(id >= 0, "{}: /node/orig_id holds a negative id", path_.string());
  return ids;
}

std::vector<float> TemporalStoreReader::targets(std::int64_t t, std::int64_t row_begin,
                                                std::int64_t row_end) {
  std::vector<float> row;
  impl_->file.read_rows("/node/target", t, t + 1, row);
  for (std::int64_t v = row_begin; v < row_end; ++v)
    TESSEL_EXPECTS(std::isfinite(row[v]),
                   "{}: /node/target[{}, {}] (snapshot {}, node {}) is {}, expected a finite number",
                   path_.string(), t, v, t, v, row[v]);
  return {row.begin() + row_begin, row.begin() + row_end};
}

TemporalStoreInfo read_temporal_info(const fs::path& path) {
  TemporalStoreReader reader(path);
  return reader.info();
}

TemporalDataset read_temporal_store(const fs::path& path) {
  TemporalStoreReader reader(path);
  const auto& info = reader.info();
  TemporalDataset d;
  d.name = info.name;
  d.num_nodes = info.num_nodes;
  d.feature_dim = info.feature_dim;
  d.num_classes = info.num_classes;
  d.snapshots = reader.snapshots(0, info.num_snapshots);
  for (std::int64_t t = 0; t < info.num_snapshots; ++t) {
    auto f = reader.features(t, 0, info.num_nodes);
    d.features.insert(d.features.end(), f.begin(), f.end());
    auto y = reader.targets(t, 0, info.num_nodes);
    d.targets.insert(d.targets.end(), y.begin(), y.end());
  }
  d.train = info.train;
  d.valid = info.valid;
  d.test = info.test;
  {
    auto ids = reader.orig_ids();
    bool identity = true;
    for (std::size_t v = 0; v < ids.size(); ++v) identity = identity && ids[v] == static_cast<NodeId>(v);
    if (!identity) d.orig_id = std::move(ids);
  }
  d.validate(path.string());
  return d;
}

}  // namespace tessel::datasets
