// SpMM against a naive reference (empty rows, odd widths, both CPU algorithms, thread counts),
// the sparse-matrix helpers and the GCN / mean edge weights.
#include "kernel_test_util.hpp"

#include "tessel/kernels/sparse.hpp"

#include "cpu/cpu_ops.hpp"

#include <cstring>

#include <omp.h>

namespace tessel {
namespace {

using kernels::SparseMatrix;
using kernels::SpmmAlgorithm;

struct SpmmCase {
  std::int64_t rows, cols;
  int max_degree;
  std::int64_t f;
  bool weighted;
};

class SpmmReference : public ::testing::TestWithParam<SpmmCase> {};

TEST_P(SpmmReference, MatchesNaiveForEveryCpuAlgorithmAndThreadCount) {
  const auto c = GetParam();
  const LocalCsr csr = test::random_csr(c.rows, c.cols, c.max_degree, c.weighted, 7);
  const SparseMatrix a = SparseMatrix::from_csr(csr);
  const Tensor x = test::random_tensor({c.cols, c.f}, 11);
  const auto expected = test::naive_spmm(csr, x);
  const int saved_threads = omp_get_max_threads();
  for (auto algorithm :
       {SpmmAlgorithm::cpu_row_simple, SpmmAlgorithm::cpu_row_blocked, SpmmAlgorithm::automatic}) {
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      Tensor y = Tensor::empty({c.rows, c.f}, DType::f32);
      // Garbage in y must not leak into the result: SpMM overwrites.
      for (std::int64_t i = 0; i < y.numel(); ++i)
        y.data<float>()[i] = 1e30f;
      kernels::spmm(a, x, y, nullptr, algorithm);
      for (std::int64_t i = 0; i < y.numel(); ++i)
        ASSERT_NEAR(y.data<float>()[i], expected[i], 1e-4 * (1.0 + std::fabs(expected[i])))
            << "algorithm " << static_cast<int>(algorithm) << " threads " << threads << " at " << i;
    }
  }
  omp_set_num_threads(saved_threads);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SpmmReference,
    ::testing::Values(SpmmCase{50, 40, 6, 1, true}, SpmmCase{50, 40, 6, 3, false},
                      SpmmCase{64, 64, 9, 7, true}, SpmmCase{33, 70, 5, 8, true},
                      SpmmCase{200, 150, 12, 17, false}, SpmmCase{100, 100, 8, 64, true},
                      SpmmCase{80, 90, 40, 100, true}, SpmmCase{120, 120, 10, 128, false},
                      SpmmCase{120, 120, 10, 128, true}, SpmmCase{60, 50, 7, 130, true},
                      SpmmCase{10, 10, 3, 200, false}, SpmmCase{3000, 2500, 20, 33, true},
                      SpmmCase{2000, 2000, 30, 64, false}, SpmmCase{7, 0, 0, 16, true},
                      SpmmCase{0, 10, 3, 16, true}));

// Column tiles change which columns a pass computes, never the order in which a row's entries
// are summed, so every tile width gives the one-pass result bit for bit (forward and on the
// transpose, as the backward pass runs it), on every thread count and ISA path.
TEST(Spmm, ColumnTilesMatchOnePassBitForBit) {
  const int saved_threads = omp_get_max_threads();
  for (const SpmmCase c : {SpmmCase{300, 260, 12, 128, true}, SpmmCase{200, 150, 9, 100, false},
                           SpmmCase{120, 90, 7, 37, true}}) {
    const LocalCsr csr = test::random_csr(c.rows, c.cols, c.max_degree, c.weighted, 5);
    const SparseMatrix forward = SparseMatrix::from_csr(csr);
    for (const SparseMatrix& a : {forward, forward.transpose()}) {
      const Tensor x = test::random_tensor({a.num_cols, c.f}, 13);
      const float* values = a.weighted() ? a.values.ptr<float>() : nullptr;
      Tensor one_pass = Tensor::empty({a.num_rows, c.f}, DType::f32);
      kernels::cpu::spmm_blocked_tiled(a.num_rows, a.indptr.ptr<EdgeId>(),
                                       a.indices.ptr<LocalId>(), values, x.ptr<float>(), c.f, 0,
                                       one_pass.ptr<float>());
      for (std::int64_t tile : {1, 5, 16, 17, 32, 64}) {
        for (int threads : {1, 2, 3}) {
          omp_set_num_threads(threads);
          Tensor y = Tensor::empty({a.num_rows, c.f}, DType::f32);
          for (std::int64_t i = 0; i < y.numel(); ++i)
            y.data<float>()[i] = 1e30f;
          kernels::cpu::spmm_blocked_tiled(a.num_rows, a.indptr.ptr<EdgeId>(),
                                           a.indices.ptr<LocalId>(), values, x.ptr<float>(), c.f,
                                           tile, y.ptr<float>());
          ASSERT_EQ(std::memcmp(y.ptr<float>(), one_pass.ptr<float>(),
                                static_cast<std::size_t>(y.nbytes())),
                    0)
              << "tile " << tile << " threads " << threads << " f " << c.f;
        }
      }
    }
  }
  omp_set_num_threads(saved_threads);
}

TEST(Spmm, TileWidthFollowsTheCacheSize) {
  // [200k, 128] f32 is 102 MB: with a 32 MiB cache, half of it holds 20 columns -> 16.
  EXPECT_EQ(kernels::cpu::spmm_tile_columns_for(200000, 128, std::int64_t{32} << 20), 16);
  EXPECT_EQ(kernels::cpu::spmm_tile_columns_for(200000, 128, std::int64_t{256} << 20), 128);
  EXPECT_EQ(kernels::cpu::spmm_tile_columns_for(200000, 128, std::int64_t{128} << 20), 80);
  EXPECT_EQ(kernels::cpu::spmm_tile_columns_for(1000, 128, std::int64_t{1} << 20), 128);
  EXPECT_EQ(kernels::cpu::spmm_tile_columns_for(50000000, 128, std::int64_t{1} << 20), 16);
  EXPECT_GT(kernels::cpu::last_level_cache_bytes(), 0);
}

TEST(Spmm, AllocatingFormAndShapeErrorsNameTheOp) {
  const LocalCsr csr = test::random_csr(10, 12, 4, true, 3);
  const SparseMatrix a = SparseMatrix::from_csr(csr);
  const Tensor x = test::random_tensor({12, 5}, 4);
  const Tensor y = kernels::spmm(a, x);
  EXPECT_EQ(y.shape(), (std::vector<std::int64_t>{10, 5}));
  const Tensor bad_x = test::random_tensor({11, 5}, 4);
  Tensor out = Tensor::empty({10, 5}, DType::f32);
  try {
    kernels::spmm(a, bad_x, out);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("spmm"), std::string::npos) << e.what();
  }
  Tensor wrong_out = Tensor::empty({9, 5}, DType::f32);
  EXPECT_THROW(kernels::spmm(a, x, wrong_out), InputError);
  Tensor wrong_dtype = Tensor::empty({10, 5}, DType::f64);
  EXPECT_THROW(kernels::spmm(a, x, wrong_dtype), InputError);
  EXPECT_THROW(kernels::spmm(a, x, out, nullptr, SpmmAlgorithm::cuda_warp_row), InputError);
}

TEST(Context, CudaContextWithoutAGpuIsAnError) {
  if (device_memory::cuda_available()) {
    std::fprintf(stderr, "a GPU is present: a CUDA context is valid here, nothing to reject\n");
    kernels::Context context(Device::cuda(0));
    EXPECT_EQ(context.device(), Device::cuda(0));
    return;
  }
  try {
    kernels::Context context(Device::cuda(0));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
}

TEST(SparseMatrix, TransposeRoundTripAndSpmmOfTranspose) {
  const LocalCsr csr = test::random_csr(30, 45, 6, true, 5);
  const SparseMatrix a = SparseMatrix::from_csr(csr);
  const SparseMatrix at = a.transpose();
  EXPECT_EQ(at.num_rows, 45);
  EXPECT_EQ(at.num_cols, 30);
  EXPECT_EQ(at.nnz(), a.nnz());
  // <A x, z> == <x, A^T z> for random x, z.
  const Tensor x = test::random_tensor({45, 3}, 1);
  const Tensor z = test::random_tensor({30, 3}, 2);
  const Tensor ax = kernels::spmm(a, x);
  const Tensor atz = kernels::spmm(at, z);
  double lhs = 0, rhs = 0;
  for (std::int64_t i = 0; i < ax.numel(); ++i)
    lhs += double(ax.data<float>()[i]) * z.data<float>()[i];
  for (std::int64_t i = 0; i < atz.numel(); ++i)
    rhs += double(atz.data<float>()[i]) * x.data<float>()[i];
  EXPECT_NEAR(lhs, rhs, 1e-4 * (1 + std::fabs(lhs)));
  // Transposing twice sorts each row by column: the same entries, in column order.
  const LocalCsr back = at.transpose().to_csr();
  const LocalCsr sorted = csr.transpose().transpose();
  EXPECT_EQ(back.indptr, csr.indptr);
  EXPECT_EQ(back.indices, sorted.indices);
  EXPECT_EQ(back.values, sorted.values);
}

TEST(SparseMatrix, TransposeKeepsRowOrderInsideColumnsForAnyThreadCount) {
  // Big enough that the CPU twin splits it over threads; the serial counting sort of LocalCsr
  // is the reference, entry for entry.
  const LocalCsr csr = test::random_csr(5000, 3000, 40, true, 11);
  const LocalCsr expected = csr.transpose();
  const LocalCsr got = SparseMatrix::from_csr(csr).transpose().to_csr();
  EXPECT_EQ(got.num_rows, 3000);
  EXPECT_EQ(got.num_cols, 5000);
  EXPECT_EQ(got.indptr, expected.indptr);
  EXPECT_EQ(got.indices, expected.indices);
  EXPECT_EQ(got.values, expected.values);
  // Pattern-only matrices stay pattern-only.
  LocalCsr pattern = csr;
  pattern.values.clear();
  const SparseMatrix pt = SparseMatrix::from_csr(pattern).transpose();
  EXPECT_FALSE(pt.weighted());
  EXPECT_EQ(pt.to_csr().indices, expected.indices);
}

TEST(SparseMatrix, FromCsrRejectsCorruptInput) {
  LocalCsr csr = test::random_csr(5, 5, 3, false, 9);
  csr.indices.push_back(0); // indptr no longer ends at nnz
  EXPECT_THROW(SparseMatrix::from_csr(csr), InputError);
  LocalCsr out_of_range = test::random_csr(5, 5, 3, false, 9);
  if (!out_of_range.indices.empty()) {
    out_of_range.indices[0] = 5;
    EXPECT_THROW(SparseMatrix::from_csr(out_of_range), InputError);
  }
}

TEST(EdgeWeights, GcnAndMeanFollowTheirDefinitions) {
  LocalCsr csr;
  csr.num_rows = 3;
  csr.num_cols = 4;
  csr.indptr = {0, 2, 2, 5};
  csr.indices = {1, 3, 0, 1, 2};
  const SparseMatrix a = SparseMatrix::from_csr(csr);
  // Whole-graph degrees of the 4 columns; rows 0..2 are columns 0..2. Row 0 lists 2 of its 3
  // neighbors (sampled: scale 3/2), row 1 none, row 2 lists 3 of its 8 (scale 8/3).
  const Tensor degree = Tensor::from_vector<std::int64_t>({3, 1, 8, 0});
  const SparseMatrix gcn = kernels::gcn_matrix(a, degree);
  const LocalCsr g = gcn.to_csr();
  EXPECT_EQ(g.indptr, (std::vector<EdgeId>{0, 3, 4, 8}));
  EXPECT_EQ(g.indices, (std::vector<LocalId>{0, 1, 3, 1, 2, 0, 1, 2}));
  const double expected_gcn[] = {1 / 4.0,
                                 1.5 / std::sqrt(4.0 * 2),
                                 1.5 / std::sqrt(4.0 * 1),
                                 1 / 2.0,
                                 1 / 9.0,
                                 (8 / 3.0) / std::sqrt(9.0 * 4),
                                 (8 / 3.0) / std::sqrt(9.0 * 2),
                                 (8 / 3.0) / std::sqrt(9.0 * 9)};
  for (int e = 0; e < 8; ++e)
    EXPECT_NEAR(g.values[e], expected_gcn[e], 1e-7) << e;
  EXPECT_THROW(kernels::gcn_matrix(a, Tensor::from_vector<std::int64_t>({3, 1, 8})), InputError);
  Tensor mean = Tensor::empty({5}, DType::f32);
  kernels::mean_edge_weights(a, mean);
  const double expected_mean[] = {0.5, 0.5, 1 / 3.0, 1 / 3.0, 1 / 3.0};
  for (int e = 0; e < 5; ++e)
    EXPECT_NEAR(mean.data<float>()[e], expected_mean[e], 1e-7);
  const SparseMatrix weighted = a.with_values(mean);
  EXPECT_TRUE(weighted.weighted());
  Tensor wrong = Tensor::empty({4}, DType::f32);
  EXPECT_THROW(kernels::mean_edge_weights(a, wrong), InputError);
}

} // namespace
} // namespace tessel
