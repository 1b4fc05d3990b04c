// Building one part in memory (owned nodes, halo, local CSR, labels, splits), gathering its
// feature rows, and the source checksums.
#include "steps.hpp"

#include "tessel/core/error.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>

namespace tessel::partition::detail {

namespace {

std::vector<LocalId> local_split(const std::vector<NodeId>& ids, const Relabeling& r, NodeId lo,
                                 NodeId hi) {
  std::vector<LocalId> local;
  for (const NodeId v : ids) {
    const NodeId g = r.new_id[v];
    if (g >= lo && g < hi) local.push_back(static_cast<LocalId>(g - lo));
  }
  std::sort(local.begin(), local.end());
  return local;
}

// The split edges whose source part p owns (per-pair negatives: whose first endpoint), with
// their rows in the store's lists; per-source negatives follow their positives.
void assign_links(int p, const Relabeling& r, const datasets::LinkSplits& link, PartLinks& out) {
  out.present = true;
  out.neg_per_source = link.neg_per_source;
  const std::vector<NodeId>* pos[3] = {&link.train_pos, &link.valid_pos, &link.test_pos};
  const std::vector<NodeId>* neg[3] = {nullptr, &link.valid_neg, &link.test_neg};
  const std::vector<NodeId>* neg_dst[3] = {nullptr, &link.valid_neg_dst, &link.test_neg_dst};
  const std::int64_t k = link.neg_per_source;
  for (int s = 0; s < 3; ++s) {
    for (std::int64_t i = 0; i < datasets::LinkSplits::rows(*pos[s]); ++i) {
      const NodeId u = (*pos[s])[2 * i];
      if (r.part[u] != p) continue;
      out.pos[s].push_back(u);
      out.pos[s].push_back((*pos[s])[2 * i + 1]);
      out.pos_id[s].push_back(i);
      if (s > 0 && k > 0)
        out.neg_dst[s].insert(out.neg_dst[s].end(), neg_dst[s]->begin() + i * k,
                              neg_dst[s]->begin() + (i + 1) * k);
    }
    if (s == 0) continue;
    for (std::int64_t i = 0; i < datasets::LinkSplits::rows(*neg[s]); ++i) {
      const NodeId u = (*neg[s])[2 * i];
      if (r.part[u] != p) continue;
      out.neg[s].push_back(u);
      out.neg[s].push_back((*neg[s])[2 * i + 1]);
      out.neg_id[s].push_back(i);
    }
  }
}

} // namespace

Part build_part(int p, const GraphCsr& graph, const Relabeling& r, const datasets::Dataset& data,
                BuildScratch& scratch) {
  const std::int64_t n = graph.num_rows;
  if (static_cast<std::int64_t>(scratch.is_halo.size()) != n) {
    scratch.is_halo.assign(static_cast<std::size_t>(n), 0);
    scratch.halo_local.assign(static_cast<std::size_t>(n), 0);
  }
  const NodeId lo = r.offsets[p], hi = r.offsets[p + 1];
  const std::int64_t num_owned = hi - lo;

  Part part;
  part.part_id = p;
  part.num_parts = r.num_parts;
  part.num_owned = num_owned;
  part.offset = lo;
  part.feature_dim = data.feature_dim;
  part.num_classes = data.num_classes;

  // Halo: in-neighbors of owned nodes owned elsewhere, flagged by relabeled id...
  auto& is_halo = scratch.is_halo;
#pragma omp parallel for schedule(dynamic, 1024)
  for (std::int64_t i = 0; i < num_owned; ++i) {
    const auto v = r.orig_of[lo + i];
    for (EdgeId e = graph.indptr[v]; e < graph.indptr[v + 1]; ++e) {
      const NodeId g = graph.indices[e];
      if (g < lo || g >= hi)
        std::atomic_ref<std::uint8_t>(is_halo[g]).store(1, std::memory_order_relaxed);
    }
  }
  // ...then listed in relabeled order, which groups them by owner (and clears the flags).
  std::vector<std::int32_t> halo;
  for (const auto& [begin, end] : {std::pair<NodeId, NodeId>{0, lo}, {hi, n}}) {
    for (NodeId g = begin; g < end; ++g) {
      if (!is_halo[g]) continue;
      is_halo[g] = 0;
      scratch.halo_local[g] =
          static_cast<std::int32_t>(num_owned + static_cast<std::int64_t>(halo.size()));
      halo.push_back(static_cast<std::int32_t>(g));
    }
  }
  part.num_halo = static_cast<std::int64_t>(halo.size());
  const std::int64_t num_local = part.num_local();

  part.orig_id.resize(static_cast<std::size_t>(num_local));
  part.degree.resize(static_cast<std::size_t>(num_local));
  for (std::int64_t i = 0; i < num_owned; ++i)
    part.orig_id[i] = r.orig_of[lo + i];
  part.halo_owner.resize(halo.size());
  part.halo_owner_local.resize(halo.size());
  for (std::size_t h = 0; h < halo.size(); ++h) {
    const std::int32_t v = r.orig_of[halo[h]];
    const std::int32_t owner = r.part[v];
    part.orig_id[num_owned + static_cast<std::int64_t>(h)] = v;
    part.halo_owner[h] = owner;
    part.halo_owner_local[h] = static_cast<std::int32_t>(halo[h] - r.offsets[owner]);
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t l = 0; l < num_local; ++l)
    part.degree[l] = graph.degree(part.orig_id[l]);

  LocalCsr& local = part.graph;
  local.num_rows = num_owned;
  local.num_cols = num_local;
  local.indptr.assign(static_cast<std::size_t>(num_owned) + 1, 0);
  for (std::int64_t i = 0; i < num_owned; ++i)
    local.indptr[i + 1] = local.indptr[i] + part.degree[i];
  local.indices.resize(static_cast<std::size_t>(local.indptr[num_owned]));
  const auto& halo_local = scratch.halo_local;
#pragma omp parallel for schedule(dynamic, 1024)
  for (std::int64_t i = 0; i < num_owned; ++i) {
    const auto v = r.orig_of[lo + i];
    EdgeId out = local.indptr[i];
    for (EdgeId e = graph.indptr[v]; e < graph.indptr[v + 1]; ++e) {
      const NodeId g = graph.indices[e];
      local.indices[out++] = (g >= lo && g < hi) ? static_cast<LocalId>(g - lo) : halo_local[g];
    }
    std::sort(local.indices.begin() + local.indptr[i], local.indices.begin() + out);
  }

  part.labels.assign(static_cast<std::size_t>(num_owned), -1);
  if (!data.labels.empty())
    for (std::int64_t i = 0; i < num_owned; ++i)
      part.labels[i] = data.labels[r.orig_of[lo + i]];
  part.train = local_split(data.train, r, lo, hi);
  part.valid = local_split(data.valid, r, lo, hi);
  part.test = local_split(data.test, r, lo, hi);
  if (data.link.present()) assign_links(p, r, data.link, part.link);
  return part;
}

PartStats part_stats(const Part& part) {
  PartStats s;
  s.owned = part.num_owned;
  s.halo = part.num_halo;
  s.edges = part.graph.num_edges();
  const auto owned = static_cast<LocalId>(part.num_owned);
  s.cut_edges = std::count_if(part.graph.indices.begin(), part.graph.indices.end(),
                              [owned](LocalId c) { return c >= owned; });
  s.train = static_cast<std::int64_t>(part.train.size());
  s.valid = static_cast<std::int64_t>(part.valid.size());
  s.test = static_cast<std::int64_t>(part.test.size());
  s.checksums = part_checksums(part, /*with_features=*/false);
  return s;
}

void FeatureSource::gather(std::span<const std::int32_t> ids, float* out) {
  const std::int64_t d = dim();
  if (d == 0 || ids.empty()) return;
  const auto count = static_cast<std::int64_t>(ids.size());
  const auto row_bytes = static_cast<std::size_t>(d) * sizeof(float);
  std::int64_t i = 0;
  while (i < count) {
    // Rows [ids[i], ids[j - 1]] lie within one block: read just that range.
    const std::int64_t first = ids[i];
    std::int64_t j = i;
    while (j < count && ids[j] < first + block_rows())
      ++j;
    const float* block = rows(first, ids[j - 1] + 1);
    for (std::int64_t x = i; x < j; ++x)
      std::memcpy(out + x * d, block + (ids[x] - first) * d, row_bytes);
    i = j;
  }
}

const float* StoreFeatures::rows(std::int64_t begin, std::int64_t end) {
  buffer_ = datasets::read_feature_rows(store_, begin, end);
  TESSEL_ASSERT(static_cast<std::int64_t>(buffer_.size()) == (end - begin) * dim_,
                "read_feature_rows returned {} values for rows [{}, {})", buffer_.size(), begin,
                end);
  return buffer_.data();
}

namespace {

// Writes rows [begin, begin + count) of a part's /node/feat as the file stores them (16-bit
// rows narrowed: exact for rows that came from a 16-bit store) and adds the stored bytes to the
// part's CRC.
void write_feature_block(h5::File& file, std::int64_t begin, const float* rows, std::int64_t count,
                         std::int64_t d, Crc32& crc, std::vector<std::uint16_t>& narrowed) {
  const auto dtype = file.feature_dtype("/node/feat");
  if (dtype == datasets::FeatureDtype::float32) {
    file.write_rows("/node/feat", begin, rows, count);
    crc.update(rows, static_cast<std::size_t>(count * d) * sizeof(float));
    return;
  }
  narrowed.resize(static_cast<std::size_t>(count * d));
  const std::int64_t bad = datasets::narrow_features(rows, narrowed.data(), count * d, dtype);
  if (bad >= 0)
    datasets::fail_not_representable(file.path().filename().string() + ": /node/feat",
                                     begin + bad / d, bad % d, rows[bad], dtype);
  file.write_rows_stored("/node/feat", begin, narrowed.data(), count);
  crc.update(narrowed.data(), narrowed.size() * sizeof(std::uint16_t));
}

// Reordered parts: local rows [a, a + window) of every part per pass over the source.
void write_windows(FeatureSource& features, const Relabeling& r, std::vector<h5::File>& files,
                   std::vector<Crc32>& crcs, std::int64_t window_bytes) {
  const std::int64_t d = features.dim();
  const auto n = static_cast<std::int64_t>(r.part.size());
  const int k = r.num_parts;
  const std::int64_t row_bytes = d * static_cast<std::int64_t>(sizeof(float));
  const std::int64_t window = std::max<std::int64_t>(1, window_bytes / (row_bytes * k));
  std::int64_t most_owned = 0;
  for (int p = 0; p < k; ++p)
    most_owned = std::max<std::int64_t>(most_owned, r.offsets[p + 1] - r.offsets[p]);
  const std::int64_t block = features.block_rows();
  std::vector<float> staging;
  std::vector<std::uint16_t> narrowed;
  std::vector<std::int64_t> count(static_cast<std::size_t>(k)), at(static_cast<std::size_t>(k));
  for (std::int64_t a = 0; a < most_owned; a += window) {
    std::int64_t total = 0;
    for (int p = 0; p < k; ++p) {
      const std::int64_t owned = r.offsets[p + 1] - r.offsets[p];
      count[p] = std::clamp<std::int64_t>(owned - a, 0, window);
      at[p] = total;
      total += count[p];
    }
    staging.resize(static_cast<std::size_t>(total * d));
    for (std::int64_t begin = 0; begin < n; begin += block) {
      const std::int64_t end = std::min(n, begin + block);
      const float* rows = features.rows(begin, end);
#pragma omp parallel for schedule(static) if ((end - begin) * d > (1 << 16))
      for (std::int64_t v = begin; v < end; ++v) {
        const std::int32_t p = r.part[v];
        const std::int64_t l = r.new_id[v] - r.offsets[p] - a;
        if (l < 0 || l >= count[p]) continue;
        std::memcpy(staging.data() + (at[p] + l) * d, rows + (v - begin) * d,
                    static_cast<std::size_t>(row_bytes));
      }
    }
    for (int p = 0; p < k; ++p) {
      if (count[p] == 0) continue;
      const float* part_rows = staging.data() + at[p] * d;
      write_feature_block(files[p], a, part_rows, count[p], d, crcs[p], narrowed);
    }
  }
}

} // namespace

std::vector<std::string> write_part_features(FeatureSource& features, const Relabeling& r,
                                             std::vector<h5::File>& files,
                                             std::int64_t window_bytes) {
  const std::int64_t d = features.dim();
  const auto n = static_cast<std::int64_t>(r.part.size());
  const int k = r.num_parts;
  // Each part's rows are written in order, so one running CRC per part covers its /node/feat.
  std::vector<Crc32> crcs(static_cast<std::size_t>(k));
  auto checksums = [&crcs] {
    std::vector<std::string> out;
    for (const auto& crc : crcs)
      out.push_back(crc.str());
    return out;
  };
  if (d == 0 || n == 0) return checksums();
  bool ascending = true;
  for (int p = 0; p < k && ascending; ++p)
    ascending = std::is_sorted(r.orig_of.begin() + r.offsets[p], r.orig_of.begin() + r.offsets[p + 1]);
  if (!ascending) {
    write_windows(features, r, files, crcs, window_bytes);
    return checksums();
  }
  const std::int64_t block = features.block_rows();
  // written[p]: rows of part p written so far. Part p's owned nodes ascend in original id, so
  // those inside one source block are the next rows of its feature matrix.
  std::vector<std::int64_t> written(static_cast<std::size_t>(k), 0);
  std::vector<float> staging;
  std::vector<std::uint16_t> narrowed;
  for (std::int64_t begin = 0; begin < n; begin += block) {
    const std::int64_t end = std::min(n, begin + block);
    const float* rows = features.rows(begin, end);
    for (int p = 0; p < k; ++p) {
      const NodeId lo = r.offsets[p], owned = r.offsets[p + 1] - lo;
      std::int64_t stop = written[p];
      while (stop < owned && r.orig_of[lo + stop] < end)
        ++stop;
      const std::int64_t count = stop - written[p];
      if (count == 0) continue;
      staging.resize(static_cast<std::size_t>(count * d));
      const std::int32_t* ids = r.orig_of.data() + lo + written[p];
#pragma omp parallel for schedule(static) if (count * d > (1 << 16))
      for (std::int64_t x = 0; x < count; ++x)
        std::memcpy(staging.data() + x * d, rows + (ids[x] - begin) * d,
                    static_cast<std::size_t>(d) * sizeof(float));
      write_feature_block(files[p], written[p], staging.data(), count, d, crcs[p], narrowed);
      written[p] = stop;
    }
  }
  for (int p = 0; p < k; ++p)
    TESSEL_ASSERT(written[p] == r.offsets[p + 1] - r.offsets[p],
                  "write_part_features: part {} got {} feature rows of {}", p, written[p],
                  r.offsets[p + 1] - r.offsets[p]);
  return checksums();
}

namespace {

void crc_update(uLong& crc, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const Bytef*>(data);
  while (bytes > 0) {
    const auto step = static_cast<uInt>(std::min<std::size_t>(bytes, std::size_t{1} << 30));
    crc = crc32(crc, p, step);
    p += step;
    bytes -= step;
  }
}

template <class T, class A> void crc_vector(uLong& crc, const std::vector<T, A>& v) {
  crc_update(crc, v.data(), v.size() * sizeof(T));
}

std::string crc_string(uLong crc) {
  return fmt::format("crc32:{:08x}", static_cast<std::uint32_t>(crc));
}

} // namespace

std::string file_checksum(const std::filesystem::path& file) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(file.c_str(), "rb"), &std::fclose);
  TESSEL_EXPECTS(f != nullptr, "{}: cannot open for reading", file.string());
  std::vector<unsigned char> buffer(std::size_t{4} << 20);
  uLong crc = crc32(0L, Z_NULL, 0);
  while (true) {
    const std::size_t got = std::fread(buffer.data(), 1, buffer.size(), f.get());
    crc_update(crc, buffer.data(), got);
    if (got < buffer.size()) break;
  }
  TESSEL_EXPECTS(!std::ferror(f.get()), "{}: read error while computing its checksum",
                 file.string());
  return crc_string(crc);
}

std::string content_checksum(const datasets::Dataset& data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  crc_vector(crc, data.graph.indptr);
  crc_vector(crc, data.graph.indices);
  crc_vector(crc, data.features);
  crc_vector(crc, data.labels);
  crc_vector(crc, data.train);
  crc_vector(crc, data.valid);
  crc_vector(crc, data.test);
  return crc_string(crc);
}

} // namespace tessel::partition::detail
