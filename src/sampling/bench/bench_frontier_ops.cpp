// Micro-benchmark of the frontier routing ops (the device routing of one sampling hop): time per
// call and effective GB/s of each op, on the CPU twins or the CUDA twins, for frontiers of
// realistic size, several part counts and fanouts 15 and -1 over power-law degrees.
//
// tessel_bench_frontier_ops [--device cpu|cuda] [--sizes 100000,1000000] [--parts 2,8]
//                           [--fanouts 15,-1] [--reps 5] [--max-degree 20000] [--json]
// Effective bytes count every input element read once and every output element written once (a
// binary search's probes and an op's internal scratch are not counted), so GB/s compares an op
// with a plain copy of what it must touch. A frontier holds n distinct-ish global ids over
// P equal id ranges, a third of them flagged (unknown to the requester); degrees follow a power
// law (P(degree >= k) ~ k^-1.1 from 2, capped), and a routed hop answers min(degree, fanout)
// draws per node (the whole row with -1). Never asserted: it prints numbers.
#include "tessel/core/tensor.hpp"
#include "tessel/core/timer.hpp"
#include "tessel/kernels/context.hpp"
#include "tessel/sampling/frontier_ops.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace tessel;

namespace {

Tensor i64(const std::vector<std::int64_t>& v, Device device) {
  return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())}).to(device);
}

// Seconds per call: calls are batched between synchronizations (enough of them for a batch of
// about a millisecond, so a GPU's launch and synchronization latency is not what is measured
// for the small sizes), and the median of `reps` batches is taken. The first call warms the
// allocator, the second sizes the batches.
double seconds_per_call(Device device, int reps, const std::function<void()>& op) {
  kernels::Context& ctx = kernels::default_context(device);
  op();
  ctx.synchronize();
  Stopwatch once;
  op();
  ctx.synchronize();
  const double second = once.seconds();
  const int inner =
      static_cast<int>(std::clamp(std::ceil(1e-3 / std::max(second, 1e-7)), 1.0, 50.0));
  std::vector<double> per_call;
  for (int r = 0; r < reps; ++r) {
    Stopwatch watch;
    for (int k = 0; k < inner; ++k)
      op();
    ctx.synchronize();
    per_call.push_back(watch.seconds() / inner);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

struct Row {
  std::string op;
  std::int64_t n = 0;
  int parts = 0;
  std::string fanout = "-";
  double seconds = 0;
  double bytes = 0;
};

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tessel frontier routing ops benchmark: ms per call and effective GB/s"};
  std::string device_name = "cpu";
  std::vector<std::int64_t> sizes{100000, 1000000};
  std::vector<int> parts_list{2, 8};
  std::vector<int> fanouts{15, -1};
  int reps = 5;
  std::int64_t max_degree = 20000;
  std::uint64_t seed = 1;
  bool json = false;
  app.add_option("--device", device_name, "cpu (the CPU twins) or cuda (the CUDA twins on GPU 0)")
      ->capture_default_str();
  app.add_option("--sizes", sizes, "frontier sizes n")->delimiter(',')->capture_default_str();
  app.add_option("--parts", parts_list, "part counts P")->delimiter(',')->capture_default_str();
  app.add_option("--fanouts", fanouts, "fanouts of the answers put back (-1: whole rows)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--reps", reps, "timed batches per op (the median is printed)")
      ->capture_default_str();
  app.add_option("--max-degree", max_degree, "cap of the power-law degrees")->capture_default_str();
  app.add_option("--seed", seed, "random seed")->capture_default_str();
  app.add_flag("--json", json, "also print one JSON line per op");
  CLI11_PARSE(app, argc, argv);
  if ((device_name != "cpu" && device_name != "cuda") || reps < 1 || max_degree < 2 ||
      std::any_of(sizes.begin(), sizes.end(), [](std::int64_t n) { return n < 1; }) ||
      std::any_of(parts_list.begin(), parts_list.end(), [](int p) { return p < 1; }) ||
      std::any_of(fanouts.begin(), fanouts.end(), [](int f) { return f < -1 || f == 0; })) {
    std::fprintf(stderr, "bench_frontier_ops: expected --device cpu|cuda, --reps >= 1, "
                         "--max-degree >= 2, sizes and parts >= 1, fanouts -1 or >= 1\n");
    return 2;
  }
  if (device_name == "cuda" && !device_memory::cuda_available()) {
    std::fprintf(stderr, "bench_frontier_ops: --device cuda, but no GPU is visible\n");
    return 1;
  }
  const Device device = device_name == "cuda" ? Device::cuda(0) : Device::cpu();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<Row> rows;
  std::vector<std::string> notes;
  Stopwatch total;

  for (const std::int64_t n : sizes) {
    // Global ids over 8n nodes; the part knows a sorted set of n of them (owned and halo).
    const std::int64_t num_nodes = 8 * n;
    std::vector<std::int64_t> ids(static_cast<std::size_t>(n)), known(static_cast<std::size_t>(n));
    std::vector<std::int64_t> degree(static_cast<std::size_t>(n)), keys;
    for (std::int64_t i = 0; i < n; ++i) {
      ids[i] = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(num_nodes));
      known[i] =
          rng() % 3 == 0 ? -1 : static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n));
      const double u = 1.0 - unit(rng); // (0, 1]
      degree[i] = std::min<std::int64_t>(max_degree,
                                         static_cast<std::int64_t>(2.0 * std::pow(u, -1.0 / 1.1)));
    }
    for (std::int64_t k = 0; k < num_nodes; k += 1 + static_cast<std::int64_t>(rng() % 15))
      keys.push_back(k);
    std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
    std::iota(perm.begin(), perm.end(), std::int64_t{0});
    std::shuffle(perm.begin(), perm.end(), rng);
    const Tensor t_ids = i64(ids, device), t_known = i64(known, device), t_keys = i64(keys, device);
    const Tensor t_perm = i64(perm, device);
    std::vector<std::int64_t> offsets(static_cast<std::size_t>(n) + 1, 0);
    for (std::int64_t i = 0; i < n; ++i)
      offsets[i + 1] = offsets[i] + degree[i];
    const Tensor t_offsets = i64(offsets, device);
    const double b8 = 8.0;
    const auto nd = static_cast<double>(n);

    Tensor pos;
    rows.push_back(
        {"find_sorted", n, 0, "-",
         seconds_per_call(device, reps, [&] { pos = sampling::find_sorted(t_keys, t_ids); }),
         2 * nd * b8});
    rows.push_back({"take", n, 0, "-",
                    seconds_per_call(device, reps, [&] { sampling::take(t_ids, t_perm); }),
                    3 * nd * b8});
    Tensor scattered = Tensor::zeros({n}, DType::i64, device);
    rows.push_back(
        {"scatter", n, 0, "-",
         seconds_per_call(device, reps, [&] { sampling::scatter(t_ids, t_perm, scattered); }),
         3 * nd * b8});
    rows.push_back({"segment_lengths", n, 0, "-",
                    seconds_per_call(device, reps, [&] { sampling::segment_lengths(t_offsets); }),
                    (2 * nd + 1) * b8});
    rows.push_back(
        {"sum", n, 0, "-", seconds_per_call(device, reps, [&] { sampling::sum(t_ids); }), nd * b8});

    for (const int parts : parts_list) {
      std::vector<std::int64_t> owner_offsets(static_cast<std::size_t>(parts) + 1);
      for (int p = 0; p <= parts; ++p)
        owner_offsets[p] = num_nodes * p / parts;
      const Tensor t_owner = i64(owner_offsets, device);
      sampling::FrontierRoute route;
      for (const auto keys_kind :
           {sampling::RouteKeys::owner_then_flag, sampling::RouteKeys::flagged_only}) {
        const bool pairs = keys_kind == sampling::RouteKeys::owner_then_flag;
        rows.push_back(
            {pairs ? "route_frontier (owner, flag)" : "route_frontier (flagged)", n, parts, "-",
             seconds_per_call(
                 device, reps,
                 [&] { route = sampling::route_frontier(t_ids, t_owner, t_known, keys_kind); }),
             3 * nd * b8});
      }
      route =
          sampling::route_frontier(t_ids, t_owner, t_known, sampling::RouteKeys::owner_then_flag);
      for (const int fanout : fanouts) {
        // Routed position k answered min(degree, fanout) draws of the node it names.
        std::vector<std::int64_t> lengths(static_cast<std::size_t>(n));
        const Tensor order_host = route.order.to(Device::cpu());
        const std::int64_t* order = order_host.data<std::int64_t>();
        std::int64_t draws = 0;
        for (std::int64_t k = 0; k < n; ++k) {
          const std::int64_t d = degree[order[k]];
          lengths[k] = fanout < 0 ? d : std::min<std::int64_t>(d, fanout);
          draws += lengths[k];
        }
        std::vector<std::int64_t> answers(static_cast<std::size_t>(draws));
        for (std::int64_t d = 0; d < draws; ++d)
          answers[d] = d;
        const Tensor t_lengths = i64(lengths, device), t_answers = i64(answers, device);
        const std::string f = fanout < 0 ? "-1" : std::to_string(fanout);
        if (parts == parts_list.front())
          notes.push_back(fmt::format("n = {}, fanout {}: {} draws ({:.1f} per node, the longest "
                                      "segment {})",
                                      n, f, draws, static_cast<double>(draws) / nd,
                                      *std::max_element(lengths.begin(), lengths.end())));
        Tensor back_offsets, back;
        rows.push_back({"unroute_segments", n, parts, f,
                        seconds_per_call(device, reps,
                                         [&] {
                                           sampling::unroute_segments(route.order, t_lengths,
                                                                      t_answers, back_offsets,
                                                                      back);
                                         }),
                        (3 * nd + 1 + 2 * static_cast<double>(draws)) * b8});
        // The owner's read-back in a hop (the requests of P ranks, this rank the first): the
        // answer count per rank and the degrees of the rows drawn for the other ranks. Before:
        // the request offsets at the rank bounds and two sums of degrees, three waits for the
        // device; now the same offsets and one segment_sums gathered on the device, one wait.
        std::vector<std::int64_t> bounds(static_cast<std::size_t>(parts) + 1);
        for (int p = 0; p <= parts; ++p)
          bounds[p] = n * p / parts;
        std::vector<std::int64_t> request_offsets(static_cast<std::size_t>(n) + 1, 0);
        for (std::int64_t k = 0; k < n; ++k)
          request_offsets[k + 1] = request_offsets[k] + lengths[k];
        const Tensor t_request_offsets = i64(request_offsets, device);
        const Tensor t_degree = i64(degree, device), t_bounds = i64(bounds, device);
        std::int64_t check_before = 0, check_after = 0;
        rows.push_back(
            {"owner read-back: take + 2 sums (before)", n, parts, f,
             seconds_per_call(device, reps,
                              [&] {
                                const Tensor at =
                                    sampling::take(t_request_offsets, t_bounds).to(Device::cpu());
                                check_before = at.data<std::int64_t>()[1] +
                                               sampling::sum(t_degree.rows_slice(0, 0)) +
                                               sampling::sum(t_degree.rows_slice(bounds[1], n));
                              }),
             (static_cast<double>(n - bounds[1]) + 2 * static_cast<double>(parts) + 2) * b8});
        const Tensor t_others =
            Tensor::from_vector(std::vector<std::int64_t>{0, 0, bounds[1], n}, {2, 2}).to(device);
        rows.push_back(
            {"owner read-back: take + segment_sums (now)", n, parts, f,
             seconds_per_call(device, reps,
                              [&] {
                                const auto np = static_cast<std::int64_t>(parts);
                                Tensor readback = Tensor::empty({np + 3}, DType::i64, device);
                                readback.rows_slice(0, np + 1).copy_from(
                                    sampling::take(t_request_offsets, t_bounds));
                                readback.rows_slice(np + 1, np + 3)
                                    .copy_from(
                                        sampling::segment_sums({t_degree}, t_others).reshape({2}));
                                const Tensor host = readback.to(Device::cpu());
                                const std::int64_t* v = host.data<std::int64_t>();
                                check_after = v[1] - v[0] + v[parts + 1] + v[parts + 2];
                              }),
             (static_cast<double>(n - bounds[1]) + 2 * static_cast<double>(parts) + 6) * b8});
        if (check_before != check_after)
          std::fprintf(stderr, "bench_frontier_ops: the two read-backs disagree (%lld, %lld)\n",
                       static_cast<long long>(check_before), static_cast<long long>(check_after));
      }
    }
    std::fprintf(stderr, "n = %lld done after %.1f s\n", static_cast<long long>(n),
                 total.seconds());
  }

  std::printf("Frontier routing ops on %s (%s twins): median ms per call, effective GB/s "
              "(inputs read + outputs written once)\n\n",
              device.str().c_str(), device.is_cpu() ? "CPU" : "CUDA");
  for (const std::string& note : notes)
    std::printf("%s\n", note.c_str());
  std::printf("\n| op | n | P | fanout | ms | GB/s |\n|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    std::printf("| %s | %lld | %s | %s | %.3f | %.1f |\n", r.op.c_str(),
                static_cast<long long>(r.n), r.parts > 0 ? std::to_string(r.parts).c_str() : "-",
                r.fanout.c_str(), 1e3 * r.seconds, r.bytes / r.seconds / 1e9);
    if (json) {
      const nlohmann::json line{{"bench", "frontier_ops"},
                                {"device", device.str()},
                                {"op", r.op},
                                {"n", r.n},
                                {"parts", r.parts},
                                {"fanout", r.fanout},
                                {"seconds", r.seconds},
                                {"gbps", r.bytes / r.seconds / 1e9}};
      std::printf("%s\n", line.dump().c_str());
    }
  }
  return 0;
}
