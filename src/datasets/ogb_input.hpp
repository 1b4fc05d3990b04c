// The OGB raw folder reader's inputs and its sink, shared by the CSV layout's reader
// (ogb_reader.cpp) and the binary npz layout's (ogb_npz.cpp).
#pragma once

#include "npz.hpp"

#include "tessel/core/csr.hpp"
#include "tessel/datasets/ogb.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tessel::datasets::detail {

namespace fs = std::filesystem;

// The files of one OGB raw folder, resolved and checked to exist before any parsing starts.
struct OgbInputs {
  fs::path dir;
  std::string name;
  bool npz = false;
  fs::path edge, num_nodes, num_edges, feat, label; // CSV layout
  fs::path data_npz, label_npz;                     // binary layout
  std::string split_name;
  fs::path split[3];
};

// Where parsed pieces go: a Dataset in memory, or a store being written.
class Sink {
public:
  virtual ~Sink() = default;
  virtual void graph(Csr&& graph) = 0;
  virtual void labels(std::vector<std::int64_t>&& labels) = 0;
  virtual void begin_features(std::int64_t num_nodes, std::int64_t feature_dim) = 0;
  virtual void feature_rows(std::int64_t begin, const float* rows, std::int64_t count) = 0;
  virtual void split(int which, std::vector<NodeId>&& ids) = 0;
};

// ---- the CSV layout's readers (ogb_reader.cpp), shared with the link layout (ogb_link.cpp) ----

// base.csv.gz, else base.csv, else empty.
fs::path ogb_find_table(const fs::path& base);
// The single count of num-node-list / num-edge-list.
std::int64_t ogb_read_count(const fs::path& file, ConvertReport& report);
// in.edge as a CSR of n nodes and m edges (in.num_edges gave m), every id checked.
Csr ogb_read_edges_csv(const OgbInputs& in, std::int64_t n, std::int64_t m, ConvertReport& report);
// in.feat, streamed to the sink in row blocks; returns the feature width.
std::int64_t ogb_read_features_csv(const OgbInputs& in, std::int64_t n, Sink& sink,
                                   ConvertReport& report);

// ---- papers100M binary layout (ogb_npz.cpp) ----

// edge_index as a CSR of n nodes, every id checked; Id is the narrowest type that holds n.
template <class Id>
Csr read_edges_npz(const OgbInputs& in, NpzArchive& archive, std::int64_t n, ConvertReport& report);
extern template Csr read_edges_npz<std::uint32_t>(const OgbInputs&, NpzArchive&, std::int64_t,
                                                  ConvertReport&);
extern template Csr read_edges_npz<std::int64_t>(const OgbInputs&, NpzArchive&, std::int64_t,
                                                 ConvertReport&);
// node_label of the label archive: one class id per node, -1 for NaN (unlabeled).
std::vector<std::int64_t> read_labels_npz(const OgbInputs& in, std::int64_t n,
                                          ConvertReport& report);
// node_feat, streamed to the sink in blocks; returns the feature width.
std::int64_t read_features_npz(NpzArchive& archive, std::int64_t n, Sink& sink,
                               ConvertReport& report);
// The binary layout's other arrays must agree with num_nodes_list before anything is read.
void check_npz_shapes(const OgbInputs& in, NpzArchive& archive, std::int64_t n, std::int64_t* m);

} // namespace tessel::datasets::detail
