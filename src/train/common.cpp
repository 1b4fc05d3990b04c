// Pieces every training mode shares: split labels, accuracies, gradient all-reduce, predictions;
// the graph modes' trainer base.
#include "tessel/train/graph_mode.hpp"
#include "tessel/train/trainer.hpp"

#include "tessel/core/error.hpp"
#include "tessel/core/progress.hpp"
#include "tessel/datasets/atomic_output.hpp"
#include "tessel/datasets/h5.hpp"
#include "tessel/core/interrupt.hpp"
#include "tessel/core/log.hpp"
#include "tessel/train/feature_memory.hpp"
#include "tessel/kernels/dense.hpp"
#include "tessel/kernels/loss.hpp"
#include "tessel/kernels/sparse.hpp"
#include "tessel/nn/layers.hpp"
#include "tessel/nn/loss.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>

namespace tessel::train {
namespace fs = std::filesystem;

std::vector<std::vector<std::int64_t>> split_labels(const partition::Part& part) {
  std::vector<std::vector<std::int64_t>> out;
  for (const auto* list : {&part.train, &part.valid, &part.test}) {
    std::vector<std::int64_t> labels;
    labels.reserve(list->size());
    for (LocalId v : *list) labels.push_back(part.labels[v]);
    out.push_back(std::move(labels));
  }
  return out;
}

Accuracy split_accuracy(comm::Communicator& comm, const Tensor& logits,
                        const partition::Part& part, const partition::Manifest& manifest,
                        const std::vector<std::vector<std::int64_t>>& labels) {
  std::int64_t correct[3];
  const std::vector<LocalId>* lists[3] = {&part.train, &part.valid, &part.test};
  for (int s = 0; s < 3; ++s) correct[s] = nn::count_correct(logits, *lists[s], labels[s]);
  comm.allreduce(std::span<std::int64_t>(correct, 3));
  auto ratio = [](std::int64_t c, std::int64_t n) {
    return n > 0 ? static_cast<double>(c) / static_cast<double>(n) : 0.0;
  };
  return {ratio(correct[0], manifest.num_train), ratio(correct[1], manifest.num_valid),
          ratio(correct[2], manifest.num_test)};
}

Tensor infer_all_nodes(nn::Model& model, const Tensor& features,
                       std::span<nn::Aggregator* const> aggregators, Tensor* last_hidden) {
  ProgressLine progress("evaluate: layer", static_cast<std::int64_t>(aggregators.size()));
  return model.infer(features, aggregators, [&](int layer) { progress.update(layer + 1); },
                     last_hidden);
}

void allreduce_gradients(comm::Communicator& comm, nn::Model& model) {
  if (comm.size() == 1) return;
  // The backward pass runs on the device's main stream, and so does its all-reduce.
  comm.allreduce(model.flat_gradients(), DeviceStream::main());
}

GraphModeTrainer::GraphModeTrainer(const TrainerContext& ctx, bool aggregator_on_first_use)
    : comm_(ctx.comm),
      data_(ctx.runtime.data ? *ctx.runtime.data : ctx.comm),
      device_(ctx.runtime.device),
      options_(ctx.options),
      manifest_(ctx.manifest),
      part_(ctx.part),
      model_([&] {
        nn::ModelConfig config = ctx.options.model;
        config.device = ctx.runtime.device;
        return config;
      }()),
      optimizer_(nn::make_optimizer(ctx.options.optimizer)),
      split_labels_(split_labels(ctx.part)) {
  // Built now unless the mode asks for it on first use (see aggregator()), which needs every
  // loaded row ascending (the partitioner's order) to restore that order later.
  if (aggregator_on_first_use) {
    const LocalCsr& graph = part_.graph;
    bool ascending = true;
#pragma omp parallel for reduction(&& : ascending) schedule(static, 4096)
    for (std::int64_t r = 0; r < graph.num_rows; ++r)
      ascending = ascending && std::is_sorted(graph.indices.begin() + graph.indptr[r],
                                              graph.indices.begin() + graph.indptr[r + 1]);
    rows_ascending_ = ascending;
  }
  if (!rows_ascending_) (void)aggregator();
  // Features go to the device once; every epoch step then stays there. Read from the part file
  // (out of core), they are read for each evaluation instead (eval_features()).
  feature_rows_ = ctx.loaded.feature_rows;
  if (feature_rows_) return;
  features_ = Tensor::empty({part_.num_owned, part_.feature_dim}, DType::f32);
  std::copy(part_.features.begin(), part_.features.end(), features_.data<float>());
  if (device_.is_cuda()) features_ = features_.to(device_);
}

dist::FullAggregator& GraphModeTrainer::aggregator() {
  if (!aggregator_) {
    // The first build after the sampler sorted the rows by source id reads them ascending again.
    aggregator_.emplace(part_, comm_, &data_, device_, rows_ascending_);
    layer_aggregators_.assign(static_cast<std::size_t>(options_.model.layers), &*aggregator_);
  }
  return *aggregator_;
}

const std::vector<nn::Aggregator*>& GraphModeTrainer::layer_aggregators() {
  (void)aggregator();
  return layer_aggregators_;
}

bool GraphModeTrainer::infers_in_blocks() const {
  return blocks_inference_ && device_.is_cpu() && model_.infer_blocks_possible();
}

namespace {

// One layer's output rows in whole-part inference over row blocks, written block by block in
// row order, then read like features: held in memory, or (out of core) written to a scratch
// file and read back through the out-of-core row reader within `budget` bytes. The scratch
// file is "tessel-infer-RANDOM.h5" in TMPDIR (TMPDIR, else /tmp), created
// exclusively, readable by this user only, and removed when the rows are dropped, on an error
// and on SIGINT/SIGTERM/SIGHUP (interrupt::TemporaryPath). In memory, `halo_rows` more rows
// follow the owned ones (with_halo()), where a halo exchange can land them: a block then
// aggregates straight from the rows, with the part's own column ids.
class LayerRows {
 public:
  LayerRows(std::int64_t rows, std::int64_t cols, bool on_disk, std::int64_t budget,
            std::span<const std::int64_t> degree, std::int64_t chunk_rows,
            std::int64_t halo_rows = 0)
      : rows_(rows), cols_(cols), budget_(budget), degree_(degree) {
    if (!on_disk) {
      all_ = Tensor::empty({rows + halo_rows, cols}, DType::f32);
      return;
    }
    const fs::path folder = scratch_folder();
    path_ = folder / ("tessel-infer-" + datasets::random_name_suffix() + ".h5");
    // Registered and made in one step under the registry's lock: an interrupt at any moment
    // either removes it or ends the process before it is made.
    int fd = -1;
    int err = 0;
    registration_ = interrupt::TemporaryPath(path_, [&] {
      fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      err = errno;
    });
    if (fd < 0) registration_ = interrupt::TemporaryPath(); // not ours: never remove it
    TESSEL_EXPECTS(fd >= 0, "layer-wise inference: cannot create a scratch file in {} ({})",
                   folder.string(), std::strerror(err));
    ::close(fd);
    file_.emplace(h5::File::create(path_));
    file_->create_group("/node");
    file_->create_dataset<float>("/node/feat", {rows, cols},
                                 "one layer's output rows (layer-wise inference scratch)",
                                 std::max<std::int64_t>(1, std::min(chunk_rows, rows)));
  }
  ~LayerRows() {
    reader_.reset();
    file_.reset();
    if (!path_.empty()) {
      std::error_code ignored;
      fs::remove(path_, ignored);
    }
  }
  LayerRows(const LayerRows&) = delete;
  LayerRows& operator=(const LayerRows&) = delete;

  bool on_disk() const { return !path_.empty(); }
  // In memory: the owned rows, then the halo rows' room; undefined on disk.
  Tensor with_halo() const { return all_; }
  void write(std::int64_t begin, const Tensor& block) {
    if (file_)
      file_->write_rows("/node/feat", begin, block.data<float>(), block.rows());
    else
      all_.rows_slice(begin, begin + block.rows()).copy_from(block);
  }
  // The rows written, readable from now on (no write after).
  sampling::OwnedFeatureRows& reader() {
    if (reader_) return *reader_;
    if (file_) {
      file_->close();
      file_.reset();
      sampling::OutOfCoreOptions options;
      options.budget_bytes = budget_;
      reader_ = sampling::open_rows_out_of_core(path_, rows_, cols_, degree_, options);
    } else {
      reader_ = sampling::rows_in_memory(
          std::span<const float>(all_.data<float>(), static_cast<std::size_t>(rows_ * cols_)),
          cols_);
    }
    return *reader_;
  }
  // Every row as one tensor (outputs written whole).
  Tensor whole() {
    if (!on_disk()) return all_.rows_slice(0, rows_);
    Tensor out = Tensor::empty({rows_, cols_}, DType::f32);
    reader().read_block(0, rows_, out.data<float>());
    return out;
  }

 private:
  std::int64_t rows_, cols_, budget_;
  std::span<const std::int64_t> degree_;
  Tensor all_;
  fs::path path_;
  interrupt::TemporaryPath registration_;
  std::optional<h5::File> file_;
  std::unique_ptr<sampling::OwnedFeatureRows> reader_;
};

} // namespace

std::int64_t GraphModeTrainer::infer_block_elements() {
  static const std::int64_t elements = [] {
    const char* env = std::getenv("TESSEL_INFER_BLOCK_ELEMENTS");
    if (env == nullptr) return std::int64_t{1} << 20;
    const long long value = std::atoll(env);
    TESSEL_EXPECTS(value > 0, "TESSEL_INFER_BLOCK_ELEMENTS={}: expected a positive count", env);
    return static_cast<std::int64_t>(value);
  }();
  return elements;
}

namespace {

// Rows [0, rows) of `buffer` ([capacity, cols] of dtype), which only grows (by half again):
// blocks of varying sizes reuse one allocation instead of each leaving its size in the CPU
// allocator's cache.
Tensor grown_rows(Tensor& buffer, std::int64_t rows, std::int64_t cols, DType dtype) {
  if (!buffer.defined() || buffer.rows() < rows || buffer.cols() != cols) {
    const std::int64_t had = buffer.defined() && buffer.cols() == cols ? buffer.rows() : 0;
    buffer = Tensor();
    buffer = Tensor::empty({std::max(rows, had + had / 2), cols}, dtype);
  }
  return buffer.rows_slice(0, rows);
}

// A 1-D tensor of `values` in a grown buffer.
template <class T>
Tensor grown_copy(Tensor& buffer, const std::vector<T>& values, DType dtype) {
  const auto n = static_cast<std::int64_t>(values.size());
  Tensor view = grown_rows(buffer, n, 1, dtype);
  std::copy(values.begin(), values.end(), view.data<T>());
  return view.reshape({n});
}

} // namespace

// The folder of layer-wise inference's scratch files: TMPDIR, else /tmp.
struct GraphModeTrainer::BlockOutputs {
  std::unique_ptr<LayerRows> logits, hidden;
};

// Every layer reads its input a block of destination rows at a time: the block's in-neighbour
// rows (owned ones through a row reader, halo ones exchanged once per layer), the aggregation of
// those rows, and the layer's transform. Where the layer's output is narrower than its input
// (nn::GraphLayer::infer_transforms_first), the owners first transform all their rows in blocks
// (infer_transform), so the halo carries and the blocks aggregate the narrow rows; the self term
// and bias follow (infer_transformed). Else each block aggregates input rows, then transforms
// (infer_aggregated). Block rows depend on the input's width alone, and each output row on its
// own neighbours, so in memory and out of core give the same bits. Collective.
GraphModeTrainer::BlockOutputs GraphModeTrainer::infer_in_blocks(bool keep_hidden) {
  const std::int64_t n = part_.num_owned;
  const int layers = model_.num_layers();
  std::unique_ptr<sampling::OwnedFeatureRows> in_memory_features;
  sampling::OwnedFeatureRows* input = feature_rows_.get();
  if (!input) {
    in_memory_features = sampling::rows_in_memory(
        std::span<const float>(features_.data<float>(), static_cast<std::size_t>(features_.numel())),
        part_.feature_dim);
    input = in_memory_features.get();
  }
  const bool out_of_core = feature_rows_ && !feature_rows_->in_memory();
  const std::int64_t budget = out_of_core ? feature_rows_->held_bytes() : 0;
  const std::span<const std::int64_t> degree(part_.degree.data(), static_cast<std::size_t>(n));
  BlockOutputs outputs;
  std::unique_ptr<LayerRows> previous;
  LayerRows* input_rows = nullptr; // what `input` reads, from layer 1 on
  const std::int64_t halo_count = part_.num_halo;
  std::vector<LocalId> columns, owned_columns, halo_columns;
  std::vector<LocalId> slot_of;  // a column's slot in the block's gathered rows, -1 elsewhere
  std::vector<const float*> pointers;
  std::vector<EdgeId> sub_indptr;
  std::vector<LocalId> sub_indices;
  std::vector<float> sub_values;
  Tensor gather_buffer, indptr_buffer, indices_buffer, values_buffer, aggregated_buffer,
      self_buffer, result_buffer;
  // The aggregation of destination rows [begin, end) of `a` (whose indptr rows are in
  // sub.indptr already) over rows of `width` columns: owned ones read through `source`, halo
  // ones from `halo` or, when the halo is on disk, through `halo_source` (halo row h as its row
  // h), each distinct row gathered once for the block, owned ones first. The
  // order of the gathered rows changes no row's sum, which follows the matrix's own order of
  // nonzeros. In memory the columns are numbered in order of first appearance through slot_of
  // (4 bytes a column, marked for the block and cleared after: linear in its nonzeros); out
  // of core, where that array would sit outside the budget, by sorting them.
  auto aggregate_gathered = [&](std::int64_t begin, std::int64_t end, std::int64_t width,
                                sampling::OwnedFeatureRows* source, const Tensor& halo,
                                sampling::OwnedFeatureRows* halo_source,
                                const kernels::SparseMatrix& a, kernels::SparseMatrix& sub,
                                Tensor& target) {
    const auto* indptr = a.indptr.data<EdgeId>();
    const auto* indices = a.indices.data<LocalId>();
    const auto* values = a.values.data<float>();
    const EdgeId first = indptr[begin];
    const EdgeId nnz = indptr[end] - first;
    owned_columns.clear();
    halo_columns.clear();
    sub_indices.resize(static_cast<std::size_t>(nnz));
    if (!out_of_core) {
      if (slot_of.size() < static_cast<std::size_t>(a.num_cols)) slot_of.assign(a.num_cols, -1);
      for (EdgeId e = first; e < first + nnz; ++e) {
        const LocalId c = indices[e];
        if (slot_of[c] >= 0) continue;
        if (c < n) {
          slot_of[c] = static_cast<LocalId>(owned_columns.size());
          owned_columns.push_back(c);
        } else {
          slot_of[c] = 0; // seen; numbered after the owned ones below
          halo_columns.push_back(c);
        }
      }
      const auto owned = static_cast<LocalId>(owned_columns.size());
      for (std::size_t k = 0; k < halo_columns.size(); ++k)
        slot_of[halo_columns[k]] = owned + static_cast<LocalId>(k);
      for (EdgeId e = 0; e < nnz; ++e) sub_indices[e] = slot_of[indices[first + e]];
      for (const LocalId c : owned_columns) slot_of[c] = -1;
      for (const LocalId c : halo_columns) slot_of[c] = -1;
    } else {
      columns.assign(indices + first, indices + first + nnz);
      std::sort(columns.begin(), columns.end());
      columns.erase(std::unique(columns.begin(), columns.end()), columns.end());
      const auto split = std::lower_bound(columns.begin(), columns.end(), static_cast<LocalId>(n));
      owned_columns.assign(columns.begin(), split);
      halo_columns.assign(split, columns.end());
      for (EdgeId e = 0; e < nnz; ++e)
        sub_indices[e] = static_cast<LocalId>(
            std::lower_bound(columns.begin(), columns.end(), indices[first + e]) - columns.begin());
    }
    const auto owned_count = static_cast<std::int64_t>(owned_columns.size());
    const std::int64_t count = owned_count + static_cast<std::int64_t>(halo_columns.size());
    Tensor gathered = grown_rows(gather_buffer, count, width, DType::f32);
    float* g = gathered.data<float>();
    source->resolve(owned_columns, pointers);
    for (std::int64_t k = 0; k < owned_count; ++k) std::copy_n(pointers[k], width, g + k * width);
    float* halo_at = g + owned_count * width;
    if (halo_source != nullptr) {
      for (LocalId& c : halo_columns) c -= static_cast<LocalId>(n);  // halo row ids
      halo_source->resolve(halo_columns, pointers);
      for (std::size_t k = 0; k < halo_columns.size(); ++k)
        std::copy_n(pointers[k], width, halo_at + static_cast<std::int64_t>(k) * width);
    } else {
      for (std::size_t k = 0; k < halo_columns.size(); ++k)
        std::copy_n(halo.data<float>() + (halo_columns[k] - n) * width, width,
                    halo_at + static_cast<std::int64_t>(k) * width);
    }
    sub_values.assign(values + first, values + first + nnz);
    sub.num_cols = count;
    sub.indices = grown_copy(indices_buffer, sub_indices, DType::i32);
    sub.values = grown_copy(values_buffer, sub_values, DType::f32);
    kernels::spmm(sub, gathered, target);
  };
  ProgressLine progress("evaluate: layer", layers);
  for (int l = 0; l < layers; ++l) {
    nn::GraphLayer& layer = model_.layer(l);
    const std::int64_t in = layer.in_dim();
    const std::int64_t out = layer.out_dim();
    const nn::Norm norm = layer.infer_norm();
    const bool transform_first = layer.infer_transforms_first();
    TESSEL_EXPECTS(input->feature_dim() == in, "layer {}: input rows of width {}, expected {}", l,
                   input->feature_dim(), in);
    const std::int64_t block_rows = std::max<std::int64_t>(1, infer_block_elements() / std::max<std::int64_t>(in, 1));
    const std::int64_t next_block_rows = std::max<std::int64_t>(1, infer_block_elements() / std::max<std::int64_t>(out, 1));
    const bool on_disk = out_of_core && n * out * static_cast<std::int64_t>(sizeof(float)) > budget;
    if (on_disk && !scratch_noted_) {
      log::info("evaluate: layer {}'s output ({} rows x {}) exceeds the feature budget ({}): each "
                "layer's output over it goes to a scratch file in {}, read back out of core",
                l, n, out, format_mib(budget), scratch_folder().string());
      scratch_noted_ = true;
    }
    // The rows the halo carries and the blocks aggregate: the input's, or (transform first) the
    // owners' rows through the layer's first weight, [n, out], kept like a layer's output.
    std::unique_ptr<LayerRows> transformed;
    sampling::OwnedFeatureRows* source = input;
    const std::int64_t width = transform_first ? out : in;
    if (transform_first) {
      transformed =
          std::make_unique<LayerRows>(n, out, on_disk, budget, degree, next_block_rows, halo_count);
      for (std::int64_t begin = 0; begin < n; begin += block_rows) {
        const std::int64_t end = std::min(n, begin + block_rows);
        Tensor x = grown_rows(self_buffer, end - begin, in, DType::f32);
        input->read_block(begin, end, x.data<float>());
        Tensor t = grown_rows(result_buffer, end - begin, out, DType::f32);
        layer.infer_transform(x, t);
        transformed->write(begin, t);
      }
      source = &transformed->reader();
    }
    // Rows held in memory with room for the halo (transformed rows, layer outputs): the halo
    // lands after them and each block aggregates straight from [owned + halo, width]. Else
    // (the features, rows on disk) each block gathers the rows it reads.
    LayerRows* source_rows = transform_first ? transformed.get() : input_rows;
    // Layer 0's features in memory without a halo (one rank) are such rows too.
    const Tensor whole_x =
        source_rows != nullptr && !source_rows->on_disk() ? source_rows->with_halo()
        : l == 0 && !transform_first && !feature_rows_ && halo_count == 0 ? features_
                                                                          : Tensor();
    Tensor halo = whole_x.defined() ? whole_x.rows_slice(n, n + halo_count) : Tensor();
    const auto pack = [&](std::span<const LocalId> ids, Tensor& rows) {
      source->resolve(ids, pointers);
      for (std::size_t i = 0; i < ids.size(); ++i)
        std::copy_n(pointers[i], width, rows.data<float>() + static_cast<std::int64_t>(i) * width);
    };
    // Rounds of 8 blocks' worth of rows (32 MiB) per peer.
    const std::int64_t round_rows =
        std::max<std::int64_t>(1, 8 * infer_block_elements() / std::max<std::int64_t>(width, 1));
    // Out of core, halo rows over the budget go to a scratch file as they arrive and are read
    // back like the owned ones: a hidden layer's halo, [halo nodes, width], can be several
    // times the budget (on a power-law graph a part's halo is about as large as the part).
    std::unique_ptr<LayerRows> halo_rows;
    sampling::OwnedFeatureRows* halo_source = nullptr;
    if (!whole_x.defined() && out_of_core && halo_count > 0 &&
        halo_count * width * static_cast<std::int64_t>(sizeof(float)) > budget &&
        aggregator().halo().lands_in_halo_order()) {
      if (!halo_noted_) {
        log::info("evaluate: layer {}'s halo rows ({} rows x {}) exceed the feature budget ({}): "
                  "each layer's halo over it goes to a scratch file in {} as it arrives",
                  l, halo_count, width, format_mib(budget), scratch_folder().string());
        halo_noted_ = true;
      }
      halo_rows = std::make_unique<LayerRows>(
          halo_count, width, true, budget,
          std::span<const std::int64_t>(part_.degree.data() + n,
                                        static_cast<std::size_t>(halo_count)),
          std::max<std::int64_t>(1, infer_block_elements() / std::max<std::int64_t>(width, 1)));
      aggregator().halo().forward_halo(
          pack, width, round_rows,
          [&](std::int64_t first, const Tensor& rows) { halo_rows->write(first, rows); });
      halo_source = &halo_rows->reader();
    } else {
      aggregator().halo().forward_halo(pack, width, round_rows, halo);
    }
    const kernels::SparseMatrix& a = aggregator().weighted_matrix(norm);
    const auto* indptr = a.indptr.data<EdgeId>();
    TESSEL_EXPECTS(a.num_cols == n + halo_count, "layer {}: {} matrix columns for {} + {} rows", l,
                   a.num_cols, n, halo_count);
    // Room for the halo where the next layer aggregates these rows.
    const bool next_aggregates_first =
        l + 1 < layers && !model_.layer(l + 1).infer_transforms_first();
    auto next = std::make_unique<LayerRows>(n, out, on_disk, budget, degree, next_block_rows,
                                            next_aggregates_first ? halo_count : 0);
    for (std::int64_t begin = 0; begin < n; begin += block_rows) {
      const std::int64_t end = std::min(n, begin + block_rows);
      const std::int64_t rows = end - begin;
      const EdgeId first = indptr[begin];
      const EdgeId nnz = indptr[end] - first;
      sub_indptr.resize(static_cast<std::size_t>(rows + 1));
      for (std::int64_t r = 0; r <= rows; ++r) sub_indptr[r] = indptr[begin + r] - first;
      Tensor result = grown_rows(result_buffer, rows, out, DType::f32);
      Tensor aggregated =
          transform_first ? result : grown_rows(aggregated_buffer, rows, in, DType::f32);
      kernels::SparseMatrix sub;
      sub.num_rows = rows;
      sub.indptr = grown_copy(indptr_buffer, sub_indptr, DType::i64);
      if (whole_x.defined()) {
        // The block's rows of the part's matrix, its column ids unchanged.
        sub.num_cols = n + halo_count;
        sub.indices = a.indices.rows_slice(first, first + nnz);
        sub.values = a.values.rows_slice(first, first + nnz);
        kernels::spmm(sub, whole_x, aggregated);
      } else {
        aggregate_gathered(begin, end, width, source, halo, halo_source, a, sub, aggregated);
      }
      Tensor self;
      if (norm == nn::Norm::mean) {
        self = grown_rows(self_buffer, rows, in, DType::f32);
        input->read_block(begin, end, self.data<float>());
      }
      if (transform_first)
        layer.infer_transformed(self, result);
      else
        layer.infer_aggregated(aggregated, self, result);
      if (l + 1 < layers) kernels::relu_forward(result, result);
      next->write(begin, result);
    }
    halo = Tensor();
    halo_rows.reset();
    transformed.reset();
    // This layer's input is dropped now, unless it is the kept hidden layer.
    if (keep_hidden && l + 2 == layers) {
      previous.reset();
      outputs.hidden = std::move(next);
      input_rows = outputs.hidden.get();
    } else {
      previous = std::move(next);
      input_rows = previous.get();
    }
    input = &input_rows->reader();
    progress.update(l + 1);
  }
  outputs.logits = std::move(previous);
  return outputs;
}

Tensor GraphModeTrainer::infer_logits(Tensor* last_hidden) {
  if (!infers_in_blocks())
    return infer_all_nodes(model_, eval_features(), layer_aggregators(), last_hidden);
  BlockOutputs outputs = infer_in_blocks(last_hidden != nullptr && model_.num_layers() >= 2);
  if (last_hidden && outputs.hidden) *last_hidden = outputs.hidden->whole();
  return outputs.logits->whole();
}

Tensor GraphModeTrainer::eval_features() {
  if (!feature_rows_) return features_;
  // Every owned row, read in blocks in order: held only while the evaluation runs (models
  // without inference over row blocks, GAT).
  Tensor all = Tensor::empty({part_.num_owned, part_.feature_dim}, DType::f32);
  constexpr std::int64_t kBlockRows = 1 << 16;
  for (std::int64_t begin = 0; begin < part_.num_owned; begin += kBlockRows) {
    const std::int64_t end = std::min(part_.num_owned, begin + kBlockRows);
    feature_rows_->read_block(begin, end, all.data<float>() + begin * part_.feature_dim);
  }
  return all;
}

Accuracy GraphModeTrainer::evaluate(PhaseTimes& phases) {
  // The aggregation's phases are not the epoch's: evaluation counts as "eval" as a whole.
  PhaseTimes eval_phases;
  aggregator().set_phases(&eval_phases);
  Stopwatch watch;
  Accuracy accuracy;
  if (infers_in_blocks()) {
    // The logits are read back a block at a time: never held whole when they are on disk.
    BlockOutputs outputs = infer_in_blocks(false);
    sampling::OwnedFeatureRows& logits = outputs.logits->reader();
    const std::int64_t classes = logits.feature_dim();
    const std::int64_t block_rows = std::max<std::int64_t>(1, infer_block_elements() / std::max<std::int64_t>(classes, 1));
    std::int64_t correct[3] = {0, 0, 0};
    const std::vector<LocalId>* lists[3] = {&part_.train, &part_.valid, &part_.test};
    std::vector<LocalId> rows;
    std::vector<std::int64_t> labels;
    for (int s = 0; s < 3; ++s) {
      // The split's nodes in local id order, so each block's nodes are one stretch.
      const auto& list = *lists[s];
      std::vector<std::size_t> order(list.size());
      std::iota(order.begin(), order.end(), std::size_t{0});
      std::sort(order.begin(), order.end(), [&](auto x, auto y) { return list[x] < list[y]; });
      Tensor block = Tensor::empty({std::min(block_rows, std::max<std::int64_t>(part_.num_owned, 1)), classes}, DType::f32);
      std::size_t k = 0;
      for (std::int64_t begin = 0; begin < part_.num_owned && k < order.size(); begin += block_rows) {
        const std::int64_t end = std::min(part_.num_owned, begin + block_rows);
        rows.clear();
        labels.clear();
        for (; k < order.size() && list[order[k]] < end; ++k) {
          rows.push_back(static_cast<LocalId>(list[order[k]] - begin));
          labels.push_back(split_labels_[static_cast<std::size_t>(s)][order[k]]);
        }
        if (rows.empty()) continue;
        Tensor view = block.rows_slice(0, end - begin);
        logits.read_block(begin, end, view.data<float>());
        correct[s] += kernels::count_correct(view, rows, labels);
      }
    }
    comm_.allreduce(std::span<std::int64_t>(correct, 3));
    auto ratio = [](std::int64_t c, std::int64_t n) {
      return n > 0 ? static_cast<double>(c) / static_cast<double>(n) : 0.0;
    };
    accuracy = {ratio(correct[0], manifest_.num_train), ratio(correct[1], manifest_.num_valid),
                ratio(correct[2], manifest_.num_test)};
  } else {
    const Tensor logits = infer_logits(nullptr);
    accuracy = split_accuracy(comm_, logits, part_, manifest_, split_labels_);
  }
  phases.add("eval", watch.seconds());
  return accuracy;
}

void GraphModeTrainer::write_outputs(const OutputFiles& files) {
  PhaseTimes ignored;
  aggregator().set_phases(&ignored);
  const std::string hidden_layer = fmt::format("GNN layer {} (layers 0..{}), after its ReLU",
                                               options_.model.layers - 2,
                                               options_.model.layers - 1);
  if (infers_in_blocks()) {
    // Read back from the layers' rows (a scratch file when on disk) a round at a time.
    const bool want_hidden = !files.embeddings.empty();
    TESSEL_EXPECTS(!want_hidden || model_.num_layers() >= 2,
                   "--embeddings: a {}-layer model has no hidden layer", options_.model.layers);
    BlockOutputs outputs = infer_in_blocks(want_hidden);
    if (!files.predictions.empty())
      write_predictions_file(comm_, part_, outputs.logits->reader(), files.predictions);
    if (want_hidden)
      write_embeddings_file(comm_, part_, outputs.hidden->reader(), hidden_layer,
                            files.embeddings);
    return;
  }
  Tensor hidden;
  const Tensor logits = infer_logits(files.embeddings.empty() ? nullptr : &hidden);
  if (!files.predictions.empty()) write_predictions_file(comm_, part_, logits, files.predictions);
  if (!files.embeddings.empty()) {
    TESSEL_EXPECTS(hidden.defined(), "--embeddings: a {}-layer model has no hidden layer",
                   options_.model.layers);
    write_embeddings_file(comm_, part_, hidden, hidden_layer, files.embeddings);
  }
}

}  // namespace tessel::train
