// Writes a dataset store piece by piece (graph, labels, feature row blocks, splits), so large
// datasets can be streamed into it; the file appears only on commit.
#pragma once

#include "tessel/datasets/atomic_output.hpp"
#include "tessel/datasets/dataset.hpp"
#include "tessel/datasets/h5.hpp"

#include <string>
#include <vector>

namespace tessel::datasets::detail {

class StoreWriter {
public:
  // feature_dtype: how /node/feat is stored; rows still arrive as float.
  explicit StoreWriter(const std::filesystem::path& target,
                       FeatureDtype feature_dtype = FeatureDtype::float32);

  void write_graph(const Csr& graph);
  // Creates /node/feat [num_nodes, feature_dim]; rows then arrive in blocks, in any order.
  void begin_features(std::int64_t num_nodes, std::int64_t feature_dim);
  void write_feature_rows(std::int64_t begin, const float* rows, std::int64_t count);
  void write_labels(const std::vector<std::int64_t>& labels);
  // which: train, valid or test.
  void write_split(const std::string& which, const std::vector<NodeId>& ids);
  // The /link group (nothing when link is not present).
  void write_link(const LinkSplits& link);
  // Writes the root attributes from info, closes the file and renames it into place.
  void commit(const DatasetInfo& info);

  const std::filesystem::path& temp_path() const { return output_.temp_path(); }
  // The file being written, for groups this class does not know (the link splits).
  h5::File& file() { return file_; }

private:
  AtomicOutput output_;
  h5::File file_;
  std::int64_t feature_dim_ = 0;
  FeatureDtype feature_dtype_ = FeatureDtype::float32;
  std::vector<std::uint16_t> narrowed_; // one block of 16-bit rows
};

// The /link group of an open store (an empty LinkSplits when it has none); shapes checked,
// ids and the message-passing invariant left to check_link_splits.
LinkSplits read_link(const h5::File& f, std::int64_t num_nodes);

} // namespace tessel::datasets::detail
