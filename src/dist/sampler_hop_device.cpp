// Data-centric distributed sampling: one hop with the frontier, the draws and the exchanged ids
// on the device (hop_device and its steps).
#include "tessel/dist/distributed_sampler.hpp"

#include "hop_route.hpp"
#include "sample_phase.hpp"
#include "tessel/core/error.hpp"
#include "tessel/sampling/frontier_ops.hpp"

#include <numeric>

namespace tessel::dist {

// One device hop's exchange as hop_device() goes through its steps. Per rank: requests sent and
// of them flagged; requests received and of them flagged; answer ids sent and received.
struct DistributedSampler::DeviceHopExchange {
  bool with_draws = false;
  int me = 0;
  std::size_t p = 0; // ranks
  Device device;
  DeviceStream stream; // the data plane's transfers run on it
  sampling::FrontierRoute route;
  Tensor requests; // the frontier in routed order
  std::vector<std::int64_t> send, flagged_to, recv, flagged_from;
  // Routed positions of the flagged requests, per owner: [flag_begin[r], flag_begin[r] +
  // flagged_to[r]).
  std::vector<std::int64_t> flag_begin;
  std::int64_t remote_requests = 0;
  Tensor incoming; // the requests this rank answers
  // The owner's side: the draw count and draws of every request, the original id and degree of
  // the flagged ones.
  Tensor lengths, answers, info_orig, info_degree;
  std::vector<std::int64_t> answers_to, answers_from;
  // What came back of them.
  Tensor back_lengths, back_answers, back_orig, back_degree;
};

// hop() with the frontier, the draws and the exchanged ids on the device: the same requests
// (every frontier node owned elsewhere, flagged where the part lacks its original id and degree;
// without draws only the flagged ones), the same replies and the same counters. Routing is a
// stable bucketing on the device, by owner and then flag, so the nodes a rank sends each owner
// are its unflagged ones, then its flagged ones, in frontier order; only the per-rank counts
// come to the host (the control plane exchanges them), the ids travel over the data plane. A
// rank's own frontier nodes go through the exchange to itself (a copy; they are not counted as
// traffic), so one call draws every row this rank answers. The host reads values back from the
// device (and waits for it) once per hop without draws (the route's counts) and three times per
// hop with draws: the route's counts, the draw total (DeviceGraph::sample), and the answer counts
// together with the degree sums of the remote_adjacency statistic.
void DistributedSampler::hop_device(const Tensor& frontier, int fanout, const rng::Key& key,
                                    PhaseTimes& phases, Tensor* offsets, Tensor* draws,
                                    Tensor& frontier_orig, Tensor& frontier_degree,
                                    DeviceStream stream) {
  DeviceHopExchange x;
  x.stream = stream;
  x.with_draws = draws != nullptr;
  x.me = comm_.rank();
  x.p = static_cast<std::size_t>(comm_.size());
  x.device = frontier.device();
  x.send.assign(x.p, 0);
  x.flagged_to.assign(x.p, 0);
  x.recv.assign(x.p, 0);
  x.flagged_from.assign(x.p, 0);
  x.flag_begin.assign(x.p, 0);
  {
    SamplePhase t(phases, sample_cpu_seconds_);
    route_device(x, frontier, frontier_orig, frontier_degree);
  }
  for (std::size_t r = 0; r < x.p; ++r)
    x.remote_requests += static_cast<int>(r) == x.me ? 0 : x.send[r];
  counters_.remote_requests += x.remote_requests;
  counters_.sample_bytes += x.remote_requests * static_cast<std::int64_t>(sizeof(NodeId));
  {
    ScopedPhase t(phases, "communicate");
    send_device_requests(x);
  }
  x.answers_to.assign(x.p, 0);
  x.answers_from.assign(x.p, 0);
  {
    SamplePhase t(phases, sample_cpu_seconds_);
    answer_device_requests(x, fanout, key);
  }
  {
    ScopedPhase t(phases, "communicate");
    return_device_replies(x, frontier.numel());
  }
  SamplePhase t(phases, sample_cpu_seconds_);
  // Flagged replies to their frontier positions; the draws back in frontier order.
  std::vector<std::int64_t> flagged_routed;
  for (std::size_t r = 0; r < x.p; ++r)
    for (std::int64_t k = x.flag_begin[r]; k < x.flag_begin[r] + x.flagged_to[r]; ++k)
      flagged_routed.push_back(k);
  const Tensor flagged_pos = sampling::take(x.route.order, device_graph_->upload(flagged_routed));
  sampling::scatter(x.back_orig, flagged_pos, frontier_orig);
  sampling::scatter(x.back_degree, flagged_pos, frontier_degree);
  if (x.with_draws)
    sampling::unroute_segments(x.route.order, x.back_lengths, x.back_answers, *offsets, *draws);
}

// The frontier's known original ids and degrees, its route (by owner, then flag) and the
// per-rank counts of what it sends.
void DistributedSampler::route_device(DeviceHopExchange& x, const Tensor& frontier,
                                      Tensor& frontier_orig, Tensor& frontier_degree) {
  const Tensor known_pos = sampling::find_sorted(known_ids_, frontier);
  frontier_orig = sampling::take(known_orig_, known_pos);
  frontier_degree = sampling::take(known_degree_, known_pos);
  x.route = sampling::route_frontier(frontier, owner_offsets_, known_pos,
                                     x.with_draws ? sampling::RouteKeys::owner_then_flag
                                                  : sampling::RouteKeys::flagged_only);
  const std::vector<std::int64_t>& counts = x.route.counts;
  std::int64_t at = 0;
  for (std::size_t r = 0; r < x.p; ++r) {
    if (x.with_draws) {
      x.send[r] = counts[2 * r] + counts[2 * r + 1];
      x.flagged_to[r] = counts[2 * r + 1];
      x.flag_begin[r] = at + counts[2 * r];
    } else {
      x.send[r] = x.flagged_to[r] = counts[r];
      x.flag_begin[r] = at;
    }
    at += x.send[r];
  }
  x.requests = sampling::take(frontier, x.route.order);
}

// The per-rank counts over the control plane, then the requests over the data plane.
// Collective.
void DistributedSampler::send_device_requests(DeviceHopExchange& x) {
  const std::size_t p = x.p;
  std::vector<std::int64_t> announce(2 * p), heard(2 * p), twos(p, 2);
  for (std::size_t r = 0; r < p; ++r) {
    announce[2 * r] = x.send[r];
    announce[2 * r + 1] = x.flagged_to[r];
  }
  comm_.alltoallv(announce.data(), twos, heard.data(), twos, DType::i64);
  for (std::size_t r = 0; r < p; ++r) {
    x.recv[r] = heard[2 * r];
    x.flagged_from[r] = heard[2 * r + 1];
  }
  x.incoming = Tensor::empty({std::accumulate(x.recv.begin(), x.recv.end(), std::int64_t{0})},
                             DType::i64, x.device);
  data_.alltoallv(x.requests, x.send, x.incoming, x.recv, x.stream);
}

// The owner's side: draws for every request, the original id and degree of the flagged ones
// (the last flagged_from[r] requests from rank r).
void DistributedSampler::answer_device_requests(DeviceHopExchange& x, int fanout,
                                                const rng::Key& key) {
  Tensor in_orig, in_degree;
  device_graph_->row_info(x.incoming, part_.offset, in_orig, in_degree);
  std::vector<std::int64_t> flagged_rows;
  std::int64_t start = 0;
  for (std::size_t r = 0; r < x.p; ++r) {
    for (std::int64_t j = start + x.recv[r] - x.flagged_from[r]; j < start + x.recv[r]; ++j)
      flagged_rows.push_back(j);
    start += x.recv[r];
  }
  const Tensor flagged_index = device_graph_->upload(flagged_rows);
  x.info_orig = sampling::take(in_orig, flagged_index);
  x.info_degree = sampling::take(in_degree, flagged_index);
  if (!x.with_draws) return;
  Tensor request_offsets;
  counters_.sampled_edges +=
      device_graph_->sample(x.incoming, part_.offset, fanout, key, request_offsets, x.answers);
  x.lengths = sampling::segment_lengths(request_offsets);
  count_device_answers(x, request_offsets, in_degree);
}

// One read-back for what the host needs of the owner's side: the request offsets at the rank
// bounds (each rank's answers: the draws between its first and last request), and the sum
// of the degrees of the other ranks' requests (those before and after this rank's own) for
// the model-centric comparison (remote_adjacency: adjacency lists, degree + 1 values, of
// the rows drawn for other ranks).
void DistributedSampler::count_device_answers(DeviceHopExchange& x, const Tensor& request_offsets,
                                              const Tensor& in_degree) {
  const std::size_t p = x.p;
  // [p + 1] rank bounds, then the two ranges of the other ranks' requests.
  std::vector<std::int64_t> positions(p + 1, 0);
  for (std::size_t r = 0; r < p; ++r)
    positions[r + 1] = positions[r] + x.recv[r];
  const std::int64_t before = positions[static_cast<std::size_t>(x.me)];
  const std::int64_t after = positions[static_cast<std::size_t>(x.me) + 1];
  const std::int64_t total = positions[p];
  positions.insert(positions.end(), {0, before, after, total});
  const Tensor device_positions = device_graph_->upload(positions);
  const auto np = static_cast<std::int64_t>(p);
  const Tensor bounds = device_positions.rows_slice(0, np + 1);
  const Tensor others_ranges = device_positions.rows_slice(np + 1, np + 5).reshape({2, 2});
  Tensor readback = Tensor::empty({np + 3}, DType::i64, x.device);
  readback.rows_slice(0, np + 1).copy_from(sampling::take(request_offsets, bounds));
  readback.rows_slice(np + 1, np + 3)
      .copy_from(sampling::segment_sums({in_degree}, others_ranges).reshape({2}));
  const Tensor host = readback.to(Device::cpu());
  const std::int64_t* at_bounds = host.data<std::int64_t>();
  for (std::size_t r = 0; r < p; ++r)
    x.answers_to[r] = at_bounds[r + 1] - at_bounds[r];
  const std::int64_t other_degrees = at_bounds[p + 1] + at_bounds[p + 2];
  counters_.remote_adjacency += other_degrees + (total - (after - before));
}

// The flagged requests' original ids and degrees back to the requesters, then (with draws) the
// draw counts of the `n` frontier nodes and the answers. Collective.
void DistributedSampler::return_device_replies(DeviceHopExchange& x, std::int64_t n) {
  const std::size_t p = x.p;
  const std::int64_t num_flagged =
      std::accumulate(x.flagged_to.begin(), x.flagged_to.end(), std::int64_t{0});
  x.back_orig = Tensor::empty({num_flagged}, DType::i64, x.device);
  x.back_degree = Tensor::empty({num_flagged}, DType::i64, x.device);
  data_.alltoallv(x.info_orig, x.flagged_from, x.back_orig, x.flagged_to, x.stream);
  data_.alltoallv(x.info_degree, x.flagged_from, x.back_degree, x.flagged_to, x.stream);
  // Own requests carry no flag, so every flagged reply came from another rank.
  counters_.sample_bytes += 2 * num_flagged * static_cast<std::int64_t>(sizeof(std::int64_t));
  if (!x.with_draws) return;
  x.back_lengths = Tensor::empty({n}, DType::i64, x.device);
  data_.alltoallv(x.lengths, x.recv, x.back_lengths, x.send, x.stream);
  std::vector<std::int64_t> ones(p, 1);
  comm_.alltoallv(x.answers_to.data(), ones, x.answers_from.data(), ones, DType::i64);
  x.back_answers = Tensor::empty(
      {std::accumulate(x.answers_from.begin(), x.answers_from.end(), std::int64_t{0})}, DType::i64,
      x.device);
  data_.alltoallv(x.answers, x.answers_to, x.back_answers, x.answers_from, x.stream);
  const std::int64_t remote_answers =
      x.back_answers.numel() - x.answers_from[static_cast<std::size_t>(x.me)];
  counters_.answer_ids += remote_answers;
  counters_.sample_bytes +=
      (x.remote_requests + remote_answers) * static_cast<std::int64_t>(sizeof(std::int64_t));
}

// The device route's steps of run_hops: hop_device() with draws, the sources' original ids and
// degrees into block l + 1, then the block into device_blocks_.
void DistributedSampler::DeviceRoute::start(std::span<const NodeId> seed_ids, int layers) {
  s_.device_blocks_.resize(static_cast<std::size_t>(layers));
  frontier_ = s_.device_graph_->upload(seed_ids);
}

void DistributedSampler::DeviceRoute::draw(int l, int layers, int fanout, const rng::Key& key,
                                           PhaseTimes& phases) {
  Tensor offsets, draws, orig, degree;
  s_.hop_device(frontier_, fanout, key, phases, &offsets, &draws, orig, degree, stream_);
  SamplePhase t(phases, s_.sample_cpu_seconds_);
  if (l + 1 < layers) {
    s_.device_blocks_[l + 1].src_orig = orig;
    s_.device_blocks_[l + 1].src_degree = degree;
  }
  sampling::BlockTensors& block = s_.device_blocks_[l];
  s_.builder_.build(frontier_, offsets, draws, block);
  frontier_ = block.src;
}

void DistributedSampler::DeviceRoute::finish(PhaseTimes& phases) {
  Tensor orig, degree;
  s_.hop_device(frontier_, 0, rng::Key{}, phases, nullptr, nullptr, orig, degree, stream_);
  frontier_ = Tensor{};
  SamplePhase t(phases, s_.sample_cpu_seconds_);
  s_.device_blocks_[0].src_orig = orig;
  s_.device_blocks_[0].src_degree = degree;
}

}  // namespace tessel::dist
