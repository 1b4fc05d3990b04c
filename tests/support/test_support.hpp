// Shared test helpers: temporary folders, tiny graphs, the shared dataset location.
#pragma once

#include "tessel/core/csr.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/tensor.hpp"

#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

// TESSEL_TEST_UNDER_ASAN: defined in an AddressSanitizer build, whose binaries reserve
// terabytes of shadow memory and so cannot start under `ulimit -v` (the out-of-memory tests).
#if defined(__SANITIZE_ADDRESS__)  // GCC
#define TESSEL_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)  // clang
#define TESSEL_TEST_UNDER_ASAN 1
#endif
#endif

namespace tessel::test {

// A fresh empty folder under the build tree, removed when the object dies.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "tmp");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// A real dataset shipped with the project (datasets/samples/<name>: cora, england_covid; the
// environment variable TESSEL_SAMPLE_DATASETS names another folder holding them).
std::filesystem::path sample_dataset(const std::string& name);

// Path to the built `tessel` binary.
std::filesystem::path tessel_binary();

// "mpirun ... -np N" with the flags and environment Tessel's tests need (root, oversubscription,
// one OpenMP thread per rank unless threads > 0).
std::string mpirun(int np, int threads = 1);

// Runs a shell command, returns its exit status; stdout+stderr go to *output if given.
int run_command(const std::string& command, std::string* output = nullptr);

// `path` in single quotes, for a shell command line.
std::string quote(const std::filesystem::path& path);

// Zeroes the whole-file checksum header in an HDF5 file's user block, as if the file had been
// written by h5py or an older Tessel: tests that edit a Tessel file in place through HDF5 call it
// to reach the per-dataset checks (with the header, the edit is refused as damage first).
void drop_file_checksum(const std::filesystem::path& path);

// The exit status and the output (stdout and stderr together) of a command.
struct CommandResult {
  int code = -1;
  std::string output;
};
// Runs the `tessel` binary with `args`, under mpirun with `np` ranks when np > 0.
CommandResult run_tessel(const std::string& args, int np = 0);

// The message of the InputError that f() throws, or "" when it throws none.
template <class F> std::string input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Tiny graphs as undirected edge lists (each edge once, u < v).
std::vector<std::pair<NodeId, NodeId>> path_edges(NodeId n);
std::vector<std::pair<NodeId, NodeId>> cycle_edges(NodeId n);
// Two cliques of size k joined by one edge (k-1 -- k).
std::vector<std::pair<NodeId, NodeId>> two_cliques_edges(NodeId k);
// Symmetric in-neighbor CSR of an undirected edge list.
Csr symmetric_csr(NodeId n, const std::vector<std::pair<NodeId, NodeId>>& edges);

// A float32 tensor of the given shape with values uniform in [lo, hi), from a seeded generator.
inline Tensor random_tensor(std::vector<std::int64_t> shape, std::uint32_t seed, float lo = -1.0f,
                            float hi = 1.0f) {
  Tensor t = Tensor::empty(std::move(shape), DType::f32);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (std::int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = dist(gen);
  return t;
}

}  // namespace tessel::test
