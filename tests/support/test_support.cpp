// Shared test helpers.
#include "test_support.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <sys/wait.h>

namespace tessel::test {

namespace {
// The build tree and mpiexec of this build; a copied test tree (a GPU machine without the build
// dependencies) names its own with TESSEL_TEST_BINARY_DIR and TESSEL_TEST_MPIEXEC.
std::filesystem::path binary_dir() {
  if (const char* dir = std::getenv("TESSEL_TEST_BINARY_DIR"); dir && *dir) return dir;
  return TESSEL_BINARY_DIR;
}
std::string mpiexec() {
  if (const char* exe = std::getenv("TESSEL_TEST_MPIEXEC"); exe && *exe) return exe;
  return TESSEL_MPIEXEC;
}
}  // namespace

TempDir::TempDir(const std::string& tag) {
  static std::atomic<int> counter{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "none";
  for (auto& c : name)
    if (c == '/') c = '_';
  path_ = binary_dir() / "test-tmp" /
          (name + "." + tag + "." + std::to_string(getpid()) + "." + std::to_string(counter++));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!std::getenv("TESSEL_KEEP_TEST_FILES")) std::filesystem::remove_all(path_, ec);
}

std::filesystem::path sample_dataset(const std::string& name) {
  // TESSEL_SAMPLE_DATASETS moves them, for test binaries run away from the source tree (the GPU
  // check's bundle).
  const char* env = std::getenv("TESSEL_SAMPLE_DATASETS");
  const std::filesystem::path root =
      env && *env ? std::filesystem::path(env)
                  : std::filesystem::path(TESSEL_SOURCE_DIR) / "datasets" / "samples";
  return root / name;
}

std::filesystem::path tessel_binary() {
  return binary_dir() / "src" / "cli" / "tessel";
}

std::string mpirun(int np, int threads) {
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
         "OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_mpi_yield_when_idle=1 "
         "OMP_NUM_THREADS=" +
         std::to_string(threads) + " " + mpiexec() +
         " --oversubscribe --bind-to none -np " + std::to_string(np) + " ";
}

int run_command(const std::string& command, std::string* output) {
  const std::string full = command + " 2>&1";
  FILE* pipe = popen(full.c_str(), "r");
  if (!pipe) return -1;
  std::array<char, 4096> buf{};
  std::string text;
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), pipe)) text += buf.data();
  const int status = pclose(pipe);
  if (output) *output = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string quote(const std::filesystem::path& path) {
  return "'" + path.string() + "'";
}

void drop_file_checksum(const std::filesystem::path& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good()) << path;
  const std::string zeros(64, '\0');
  f.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  ASSERT_TRUE(f.good()) << path;
}

CommandResult run_tessel(const std::string& args, int np) {
  CommandResult r;
  const std::string prefix = np > 0 ? mpirun(np) : std::string();
  r.code = run_command(prefix + quote(tessel_binary()) + " " + args, &r.output);
  return r;
}

std::vector<std::pair<NodeId, NodeId>> path_edges(NodeId n) {
  std::vector<std::pair<NodeId, NodeId>> e;
  for (NodeId i = 0; i + 1 < n; ++i) e.emplace_back(i, i + 1);
  return e;
}

std::vector<std::pair<NodeId, NodeId>> cycle_edges(NodeId n) {
  auto e = path_edges(n);
  if (n > 2) e.emplace_back(0, n - 1);
  return e;
}

std::vector<std::pair<NodeId, NodeId>> two_cliques_edges(NodeId k) {
  std::vector<std::pair<NodeId, NodeId>> e;
  for (NodeId base : {NodeId{0}, k})
    for (NodeId i = 0; i < k; ++i)
      for (NodeId j = i + 1; j < k; ++j) e.emplace_back(base + i, base + j);
  e.emplace_back(k - 1, k);
  return e;
}

Csr symmetric_csr(NodeId n, const std::vector<std::pair<NodeId, NodeId>>& edges) {
  std::vector<NodeId> src, dst;
  for (auto [u, v] : edges) {
    src.push_back(u);
    dst.push_back(v);
    src.push_back(v);
    dst.push_back(u);
  }
  Csr csr = Csr::from_edges(n, n, src, dst);
  csr.sort_rows();
  return csr;
}

}  // namespace tessel::test
