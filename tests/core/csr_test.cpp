// Csr: construction from edges, validation of corrupt arrays, transpose.
#include "tessel/core/csr.hpp"
#include "tessel/core/error.hpp"

#include "test_support.hpp"

#include <gtest/gtest.h>

using namespace tessel;

TEST(Csr, FromEdgesGroupsByDestination) {
  // 0->1, 2->1, 1->0
  Csr csr = Csr::from_edges(3, 3, {0, 2, 1}, {1, 1, 0});
  csr.sort_rows();
  EXPECT_NO_THROW(csr.validate("test"));
  EXPECT_EQ(csr.indptr, (std::vector<EdgeId>{0, 1, 3, 3}));
  EXPECT_EQ(csr.indices, (std::vector<NodeId>{1, 0, 2}));
}

TEST(Csr, ValidateRejectsNonMonotoneIndptr) {
  Csr csr;
  csr.num_rows = 2;
  csr.num_cols = 2;
  csr.indptr = {0, 2, 1};
  csr.indices = {0};
  EXPECT_THROW(csr.validate("g"), InputError);
}

TEST(Csr, ValidateRejectsIndexOutOfRange) {
  Csr csr = Csr::from_edges(2, 2, {0, 1}, {1, 0});
  csr.indices[1] = 5;
  try {
    csr.validate("graph.h5");
    FAIL() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("graph.h5"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("outside"), std::string::npos);
  }
}

TEST(Csr, TransposeTwiceIsIdentity) {
  Csr csr = test::symmetric_csr(6, test::two_cliques_edges(3));
  Csr tt = csr.transpose().transpose();
  tt.sort_rows();
  EXPECT_EQ(tt.indptr, csr.indptr);
  EXPECT_EQ(tt.indices, csr.indices);
  // A directed path transposed reverses its edges.
  Csr path = Csr::from_edges(3, 3, {0, 1}, {1, 2});
  Csr t = path.transpose();
  EXPECT_EQ(t.indptr, (std::vector<EdgeId>{0, 1, 2, 2}));
  EXPECT_EQ(t.indices, (std::vector<NodeId>{1, 2}));
}
