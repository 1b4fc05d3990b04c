// The snapshot <-> vertex transposition of the dynamic mode (SC'21): rank r's block of snapshots
// becomes every snapshot's rows of rank r's vertices, in one all-to-all, and back.
#pragma once

#include "tessel/comm/communicator.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/core/types.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tessel::dist {

// Who owns what: rank r owns vertices [vertex_offsets[r], vertex_offsets[r+1]) in the vertex
// layout and snapshots [snapshot_offsets[r], snapshot_offsets[r+1]) in the snapshot layout.
struct TemporalLayout {
  std::vector<NodeId> vertex_offsets;
  std::vector<std::int64_t> snapshot_offsets;
};

// A range of snapshots [begin, end).
struct Block {
  std::int64_t begin = 0, end = 0;  // owned snapshots of a rank below t_end
  std::int64_t size() const { return std::max<std::int64_t>(0, end - begin); }
};

inline Block owned_snapshots(const TemporalLayout& layout, int rank, std::int64_t t_end) {
  return {layout.snapshot_offsets[rank], std::min(layout.snapshot_offsets[rank + 1], t_end)};
}

inline std::int64_t vertex_count(const TemporalLayout& layout, int rank) {
  return layout.vertex_offsets[rank + 1] - layout.vertex_offsets[rank];
}

// Exchange buffers a trainer keeps across transpositions. The send and receive buffers of one
// transposition are hundreds of MB at a few ranks; allocated per call they are the largest
// blocks the host block cache holds, so it frees them first and every epoch faults them in again
// (fresh pages, in the kernel). Kept here, each is allocated once, at the largest size asked
// (evaluation's t_end), and the smaller calls use its leading rows. The snapshot side serves as
// the forward send and the backward receive buffer (both are done with when the call returns);
// the forward receive buffer holds the rows the results view, so the backward sends from its
// own. Results of snapshots_to_vertices that view `received` stay valid until the next
// snapshots_to_vertices with the same buffers.
struct TranspositionBuffers {
  Tensor snapshot_side; // forward send, backward receive
  Tensor received;      // forward receive (viewed by the results)
  Tensor sent;          // backward send
};

// The transposition of the snapshot layout. by_snapshot holds, for each snapshot t this rank
// owns with t < t_end (ascending), an f32 [N, cols] tensor on `device`; the result holds, for
// every t < t_end, the rows of this rank's vertices [n_own, cols] on `device`: views of one
// receive buffer for the other ranks' snapshots, views of the inputs for this rank's own (its
// rows do not travel; at P = 1 nothing is copied). One alltoallv of the data plane `comm` over
// the other ranks' rows (device tensors travel as the data plane sends them: NCCL, or staged
// through pinned host memory, on `stream`); none at P = 1. Collective. Without `buffers` the
// exchange buffers are allocated for the call. Its copies and buffers run on `stream` too (a
// device_memory::StreamScope opened on it for the call, as the halo exchange does).
std::vector<Tensor> snapshots_to_vertices(comm::Communicator& comm, const TemporalLayout& layout,
                                          const std::vector<Tensor>& by_snapshot,
                                          std::int64_t t_end, std::int64_t cols,
                                          Device device = Device::cpu(),
                                          TranspositionBuffers* buffers = nullptr,
                                          DeviceStream stream = DeviceStream::main());
// The inverse (the backward pass of the transposition).
std::vector<Tensor> vertices_to_snapshots(comm::Communicator& comm, const TemporalLayout& layout,
                                          const std::vector<Tensor>& by_vertex, std::int64_t t_end,
                                          std::int64_t cols, Device device = Device::cpu(),
                                          TranspositionBuffers* buffers = nullptr,
                                          DeviceStream stream = DeviceStream::main());
// Bytes all ranks together send in one transposition (either direction): f32 rows leaving
// their rank, sum over r of |own snapshots of r below t_end| * (N - n_own(r)) * cols * 4.
std::int64_t transposition_bytes(const TemporalLayout& layout, std::int64_t t_end,
                                 std::int64_t cols);

}  // namespace tessel::dist
