// The transposition of the dynamic mode between its snapshot layout (a rank holds a block of
// snapshots, all vertices) and its vertex layout (a rank holds a vertex range of every
// snapshot): one alltoallv each way, of the rows that change owner.
#include "tessel/dist/transposition.hpp"

#include "tessel/core/error.hpp"

#include <algorithm>
#include <vector>

namespace tessel::dist {

namespace {


// The rows rank r exchanges with each other rank q in a transposition: of r's snapshots below
// t_end for q's vertices (`snapshot_side`), and of q's snapshots for r's vertices
// (`vertex_side`); 0 for q = r, whose rows do not travel. Snapshots -> vertices sends the
// snapshot side and receives the vertex side; vertices -> snapshots the other way round.
struct ExchangeRows {
  std::vector<std::int64_t> snapshot_side, vertex_side;
  std::int64_t snapshot_total = 0, vertex_total = 0;
};

ExchangeRows exchange_rows(const TemporalLayout& layout, int r, std::int64_t t_end) {
  const int P = static_cast<int>(layout.vertex_offsets.size()) - 1;
  const std::int64_t own_snapshots = owned_snapshots(layout, r, t_end).size();
  ExchangeRows rows{std::vector<std::int64_t>(static_cast<std::size_t>(P), 0),
                    std::vector<std::int64_t>(static_cast<std::size_t>(P), 0)};
  for (int q = 0; q < P; ++q) {
    if (q == r) continue;
    rows.snapshot_side[q] = own_snapshots * vertex_count(layout, q);
    rows.vertex_side[q] = owned_snapshots(layout, q, t_end).size() * vertex_count(layout, r);
    rows.snapshot_total += rows.snapshot_side[q];
    rows.vertex_total += rows.vertex_side[q];
  }
  return rows;
}

// Calls f(block, rows) for each other rank q and each of this rank's snapshot tensors, in the
// order of the snapshot side of an exchange buffer (rank by rank, snapshots in order): `rows`
// are q's vertex rows of the snapshot, `block` their place in `buffer`. Snapshots -> vertices
// packs them into its send buffer; vertices -> snapshots unpacks its receive buffer into them.
template <class F>
void for_each_snapshot_side_block(const TemporalLayout& layout, int r,
                                  const std::vector<Tensor>& snapshots, const Tensor& buffer,
                                  F&& f) {
  const int P = static_cast<int>(layout.vertex_offsets.size()) - 1;
  std::int64_t at = 0;
  for (int q = 0; q < P; ++q) {
    if (q == r) continue;
    const std::int64_t n = vertex_count(layout, q);
    for (const Tensor& g : snapshots) {
      f(buffer.rows_slice(at, at + n),
        g.rows_slice(layout.vertex_offsets[q], layout.vertex_offsets[q + 1]));
      at += n;
    }
  }
}

// An exchange buffer of [rows, cols] f32 on `device`: the leading rows of `*kept` when it is
// large enough (kept across calls, see TranspositionBuffers), else a new one, kept when `kept`
// is given.
Tensor exchange_buffer(Tensor* kept, std::int64_t rows, std::int64_t cols, Device device) {
  if (kept && kept->defined() && kept->cols() == cols && kept->rows() >= rows &&
      kept->device() == device)
    return kept->rows_slice(0, rows);
  // The smaller buffer goes back first, so that both are not held at once (unless the results
  // of an earlier call still view it).
  if (kept) *kept = Tensor();
  Tensor fresh = Tensor::empty({rows, cols}, DType::f32, device);
  if (kept) *kept = fresh;
  return fresh;
}

}  // namespace

std::vector<Tensor> snapshots_to_vertices(comm::Communicator& comm, const TemporalLayout& layout,
                                          const std::vector<Tensor>& by_snapshot,
                                          std::int64_t t_end, std::int64_t cols, Device device,
                                          TranspositionBuffers* buffers, DeviceStream stream) {
  const device_memory::StreamScope on_stream(device, device_memory::resolve(device, stream));
  const int P = comm.size(), r = comm.rank();
  const Block mine = owned_snapshots(layout, r, t_end);
  TESSEL_ASSERT(static_cast<std::int64_t>(by_snapshot.size()) == mine.size(),
                "snapshots_to_vertices: {} tensors for {} owned snapshots", by_snapshot.size(),
                mine.size());
  const std::int64_t n_own = vertex_count(layout, r);
  const std::int64_t v0 = layout.vertex_offsets[r], v1 = layout.vertex_offsets[r + 1];
  // This rank's rows of its own snapshots stay where they are (views of the inputs): only the
  // other ranks' rows are packed and exchanged, so at P = 1 nothing is copied at all.
  const ExchangeRows rows = exchange_rows(layout, r, t_end);
  Tensor recv;
  if (P > 1) {
    // Rank q's rows of each owned snapshot, in snapshot order, one block per other rank.
    Tensor send = exchange_buffer(buffers ? &buffers->snapshot_side : nullptr, rows.snapshot_total,
                                  cols, device);
    for_each_snapshot_side_block(layout, r, by_snapshot, send,
                                 [](Tensor block, const Tensor& g) { block.copy_from(g); });
    recv = exchange_buffer(buffers ? &buffers->received : nullptr, rows.vertex_total, cols, device);
    comm.alltoallv(send, rows.snapshot_side, recv, rows.vertex_side, stream);
  }
  // The received blocks arrive in snapshot order (rank q's snapshots precede rank q+1's): each
  // other rank's snapshot is a view of the receive buffer, each own one a view of its input.
  std::vector<Tensor> out;
  out.reserve(static_cast<std::size_t>(t_end));
  std::int64_t at = 0;
  for (int q = 0; q < P; ++q) {
    const Block theirs = owned_snapshots(layout, q, t_end);
    for (std::int64_t t = theirs.begin; t < theirs.end; ++t) {
      if (q == r) {
        out.push_back(by_snapshot[static_cast<std::size_t>(t - mine.begin)].rows_slice(v0, v1));
        continue;
      }
      out.push_back(recv.rows_slice(at, at + n_own));
      at += n_own;
    }
  }
  TESSEL_ASSERT(static_cast<std::int64_t>(out.size()) == t_end,
                "snapshots_to_vertices: the snapshot blocks do not cover [0, {})", t_end);
  return out;
}

std::vector<Tensor> vertices_to_snapshots(comm::Communicator& comm, const TemporalLayout& layout,
                                          const std::vector<Tensor>& by_vertex, std::int64_t t_end,
                                          std::int64_t cols, Device device,
                                          TranspositionBuffers* buffers, DeviceStream stream) {
  const device_memory::StreamScope on_stream(device, device_memory::resolve(device, stream));
  const int P = comm.size(), r = comm.rank();
  TESSEL_ASSERT(static_cast<std::int64_t>(by_vertex.size()) == t_end,
                "vertices_to_snapshots: {} tensors for {} snapshots", by_vertex.size(), t_end);
  const Block mine = owned_snapshots(layout, r, t_end);
  const std::int64_t n_own = vertex_count(layout, r);
  const std::int64_t N = layout.vertex_offsets.back();
  const std::int64_t v0 = layout.vertex_offsets[r], v1 = layout.vertex_offsets[r + 1];
  // As in snapshots_to_vertices, this rank's own rows do not travel: they are copied straight
  // into its snapshots, or, when it holds every vertex (P = 1), its inputs are the result.
  const ExchangeRows rows = exchange_rows(layout, r, t_end);
  Tensor recv;
  if (P > 1) {
    Tensor send =
        exchange_buffer(buffers ? &buffers->sent : nullptr, rows.vertex_total, cols, device);
    std::int64_t at = 0;
    for (int q = 0; q < P; ++q) {
      if (q == r) continue;
      const Block theirs = owned_snapshots(layout, q, t_end);
      for (std::int64_t t = theirs.begin; t < theirs.end; ++t) {
        send.rows_slice(at, at + n_own).copy_from(by_vertex[t]);
        at += n_own;
      }
    }
    recv = exchange_buffer(buffers ? &buffers->snapshot_side : nullptr, rows.snapshot_total, cols,
                           device);
    comm.alltoallv(send, rows.vertex_side, recv, rows.snapshot_side, stream);
  }
  std::vector<Tensor> out;
  out.reserve(static_cast<std::size_t>(mine.size()));
  for (std::int64_t t = mine.begin; t < mine.end; ++t) {
    if (n_own == N) {
      out.push_back(by_vertex[t]);
      continue;
    }
    Tensor g = Tensor::empty({N, cols}, DType::f32, device);
    g.rows_slice(v0, v1).copy_from(by_vertex[t]);
    out.push_back(std::move(g));
  }
  for_each_snapshot_side_block(layout, r, out, recv,
                               [](const Tensor& block, Tensor g) { g.copy_from(block); });
  return out;
}

std::int64_t transposition_bytes(const TemporalLayout& layout, std::int64_t t_end,
                                 std::int64_t cols) {
  const int P = static_cast<int>(layout.vertex_offsets.size()) - 1;
  const std::int64_t N = layout.vertex_offsets.back();
  std::int64_t rows = 0;
  for (int r = 0; r < P; ++r) rows += owned_snapshots(layout, r, t_end).size() * (N - vertex_count(layout, r));
  return rows * cols * static_cast<std::int64_t>(sizeof(float));
}

}  // namespace tessel::dist
