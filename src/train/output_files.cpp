// The predictions and embeddings files: owned rows gathered at rank 0 in ascending source node id
// and written as they arrive, one range of source ids per round, so that no rank holds more than
// a round's rows besides its own.
#include "tessel/train/graph_mode.hpp"
#include "tessel/train/trainer.hpp"

#include "tessel/core/error.hpp"
#include "tessel/datasets/atomic_output.hpp"
#include "tessel/datasets/h5.hpp"
#include "tessel/sampling/feature_rows.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <optional>

namespace tessel::train {
namespace fs = std::filesystem;

namespace {

// Source ids per round: as many rows as a few blocks of layer-wise inference hold.
std::int64_t round_rows(std::int64_t cols) {
  return std::max<std::int64_t>(1, 4 * GraphModeTrainer::infer_block_elements() /
                                       std::max<std::int64_t>(cols, 1));
}

// Rows of the owned nodes (rows 0..part.num_owned-1 of `rows`), handed to `at_root` at rank 0
// in ascending source node id: at_root(first, ids, values) with values [ids.size(), cols], first
// the index of ids[0] among all nodes. Each round covers one range of round_rows(cols) source
// ids. Returns the number of nodes (every rank). Collective.
template <class AtRoot>
std::int64_t gather_in_rounds(comm::Communicator& comm, const partition::Part& part,
                              sampling::OwnedFeatureRows& rows, AtRoot&& at_root) {
  const std::int64_t n = part.num_owned;
  const std::int64_t cols = rows.feature_dim();
  TESSEL_EXPECTS(rows.num_rows() >= n, "outputs: {} rows for {} owned nodes", rows.num_rows(), n);
  std::vector<LocalId> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), LocalId{0});
  std::sort(order.begin(), order.end(), [&](LocalId a, LocalId b) {
    return part.orig_id[static_cast<std::size_t>(a)] < part.orig_id[static_cast<std::size_t>(b)];
  });
  const std::int64_t total = comm.allreduce_value(n);
  const std::int64_t max_id = comm.allreduce_value<std::int64_t>(
      n > 0 ? part.orig_id[static_cast<std::size_t>(order.back())] : -1, comm::ReduceOp::max);
  const std::int64_t per_round = round_rows(cols);
  const auto ranks = static_cast<std::size_t>(comm.size());
  std::vector<std::int64_t> id_counts(ranks, 0), row_counts(ranks, 0);
  std::vector<LocalId> locals;
  std::vector<const float*> pointers;
  std::vector<std::int64_t> ids, sorted_ids, position;
  std::vector<float> values, sorted_values;
  std::size_t cursor = 0;
  std::int64_t written = 0;
  for (std::int64_t low = 0; low <= max_id; low += per_round) {
    const std::int64_t high = low + per_round;
    locals.clear();
    ids.clear();
    for (; cursor < order.size() && part.orig_id[order[cursor]] < high; ++cursor) {
      locals.push_back(order[cursor]);
      ids.push_back(part.orig_id[order[cursor]]);
    }
    rows.resolve(locals, pointers);
    values.resize(locals.size() * static_cast<std::size_t>(cols));
    for (std::size_t k = 0; k < locals.size(); ++k)
      std::copy_n(pointers[k], cols, values.data() + k * static_cast<std::size_t>(cols));
    id_counts[0] = static_cast<std::int64_t>(ids.size());
    row_counts[0] = id_counts[0] * cols;
    const auto got_ids = comm.alltoallv<std::int64_t>(ids, id_counts);
    const auto got_values = comm.alltoallv<float>(values, row_counts);
    if (comm.rank() != 0 || got_ids.empty()) continue;
    // Each rank's ids arrive ascending; the ranks' runs are interleaved into one order.
    position.resize(got_ids.size());
    std::iota(position.begin(), position.end(), std::int64_t{0});
    std::sort(position.begin(), position.end(),
              [&](auto a, auto b) { return got_ids[a] < got_ids[b]; });
    sorted_ids.resize(got_ids.size());
    sorted_values.resize(got_values.size());
    for (std::size_t k = 0; k < position.size(); ++k) {
      sorted_ids[k] = got_ids[position[k]];
      std::copy_n(got_values.data() + position[k] * cols, cols,
                  sorted_values.data() + k * static_cast<std::size_t>(cols));
    }
    at_root(written, std::span<const std::int64_t>(sorted_ids),
            std::span<const float>(sorted_values));
    written += static_cast<std::int64_t>(sorted_ids.size());
  }
  TESSEL_ASSERT(comm.rank() != 0 || written == total, "outputs: {} rows gathered of {}", written,
                total);
  return total;
}

// An in-memory tensor's owned rows as a row source (copied to the host if on a device).
struct TensorRows {
  Tensor host;
  std::unique_ptr<sampling::OwnedFeatureRows> rows;
  TensorRows(const Tensor& any, std::int64_t owned) {
    host = any.device().is_cpu() ? any : any.to(Device::cpu());
    TESSEL_EXPECTS(host.rows() >= owned, "outputs: {} rows for {} owned nodes", host.rows(), owned);
    rows = sampling::rows_in_memory(
        std::span<const float>(host.data<float>(), static_cast<std::size_t>(owned * host.cols())),
        host.cols());
  }
};

// The file at rank 0 (nothing on the others), written through a temporary that commit() puts in
// place.
struct RootFile {
  std::optional<datasets::AtomicOutput> output;
  std::optional<h5::File> file;
  RootFile(const comm::Communicator& comm, const fs::path& path, const char* flag) {
    if (comm.rank() != 0) return;
    datasets::make_parent_folders(path, flag);
    output.emplace(path);
    file.emplace(h5::File::create(output->temp_path()));
  }
  void commit() {
    if (!file) return;
    file->close();
    file.reset();
    output->commit();
  }
};

std::int64_t owned_nodes_total(comm::Communicator& comm, const partition::Part& part) {
  return comm.allreduce_value(part.num_owned);
}

} // namespace

void write_predictions_file(comm::Communicator& comm, const partition::Part& part,
                            sampling::OwnedFeatureRows& logits, const fs::path& path) {
  const std::int64_t total = owned_nodes_total(comm, part);
  const std::int64_t classes = logits.feature_dim();
  RootFile out(comm, path, "--predictions");
  if (out.file) {
    h5::File& file = *out.file;
    file.set_attr("format", std::string("tessel-predictions"));
    file.set_attr("version", std::int64_t{1});
    file.set_attr("num_nodes", total);
    file.set_attr("num_classes", classes);
    file.create_dataset<std::int64_t>("/node_id", {total},
                                      "node id in the source dataset, ascending");
    file.create_dataset<std::int64_t>("/predicted", {total}, "predicted class (argmax of logits)");
    file.create_dataset<float>("/logits", {total, classes},
                               "model output before softmax, one row per node_id");
  }
  std::vector<std::int64_t> predicted;
  gather_in_rounds(comm, part, logits,
                   [&](std::int64_t first, std::span<const std::int64_t> ids,
                       std::span<const float> rows) {
                     const auto count = static_cast<std::int64_t>(ids.size());
                     predicted.resize(ids.size());
                     for (std::int64_t i = 0; i < count; ++i) {
                       const float* row = rows.data() + i * classes;
                       predicted[static_cast<std::size_t>(i)] =
                           std::max_element(row, row + classes) - row;
                     }
                     out.file->write_rows("/node_id", first, ids.data(), count);
                     out.file->write_rows("/predicted", first, predicted.data(), count);
                     out.file->write_rows("/logits", first, rows.data(), count);
                   });
  out.commit();
}

void write_predictions_file(comm::Communicator& comm, const partition::Part& part,
                            const Tensor& logits_owned, const fs::path& path) {
  TensorRows rows(logits_owned, part.num_owned);
  write_predictions_file(comm, part, *rows.rows, path);
}

void write_embeddings_file(comm::Communicator& comm, const partition::Part& part,
                           sampling::OwnedFeatureRows& rows, const std::string& layer,
                           const fs::path& path) {
  const std::int64_t total = owned_nodes_total(comm, part);
  const std::int64_t dim = rows.feature_dim();
  RootFile out(comm, path, "--embeddings");
  if (out.file) {
    h5::File& file = *out.file;
    file.set_attr("format", std::string("tessel-embeddings"));
    file.set_attr("version", std::int64_t{1});
    file.set_attr("num_nodes", total);
    file.set_attr("dim", dim);
    file.set_attr("layer", layer);
    file.create_dataset<std::int64_t>("/node_id", {total},
                                      "node id in the source dataset, ascending");
    file.create_dataset<float>(
        "/embedding", {total, dim},
        "float32 [num_nodes, dim]: the last hidden layer's output, one row per node_id");
  }
  gather_in_rounds(comm, part, rows,
                   [&](std::int64_t first, std::span<const std::int64_t> ids,
                       std::span<const float> values) {
                     const auto count = static_cast<std::int64_t>(ids.size());
                     out.file->write_rows("/node_id", first, ids.data(), count);
                     out.file->write_rows("/embedding", first, values.data(), count);
                   });
  out.commit();
}

void write_embeddings_file(comm::Communicator& comm, const partition::Part& part,
                           const Tensor& rows_owned, const std::string& layer,
                           const fs::path& path) {
  TensorRows rows(rows_owned, part.num_owned);
  write_embeddings_file(comm, part, *rows.rows, layer, path);
}

} // namespace tessel::train
