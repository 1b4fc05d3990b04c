// Dense ops on the CPU against hand-written references: GEMM, bias, rows, ReLU, dropout,
// normalization, loss, accuracy and the optimizer updates.
#include "kernel_test_util.hpp"

#include "tessel/kernels/kernels.hpp"

#include "dropout_draw.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <set>

namespace tessel {
namespace {

float at(const Tensor& t, std::int64_t i, std::int64_t j) {
  return t.data<float>()[i * t.cols() + j];
}

// Bit (i, j) of a dropout mask or ReLU-dropout bits: u8 [n, ceil(F / 8)].
bool bit_at(const Tensor& bits, std::int64_t i, std::int64_t j) {
  return (bits.data<std::uint8_t>()[i * bits.cols() + j / 8] >> (j % 8)) & 1u;
}

TEST(Gemm, EveryTransposeWithAlphaBeta) {
  const std::int64_t m = 7, n = 5, k = 9;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Tensor a = test::random_tensor(
          ta ? std::vector<std::int64_t>{k, m} : std::vector<std::int64_t>{m, k}, 1);
      const Tensor b = test::random_tensor(
          tb ? std::vector<std::int64_t>{n, k} : std::vector<std::int64_t>{k, n}, 2);
      Tensor c = test::random_tensor({m, n}, 3);
      const Tensor c0 = c.clone();
      kernels::gemm(a, ta, b, tb, c, 0.5f, 2.0f);
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (std::int64_t l = 0; l < k; ++l)
            s += double(ta ? at(a, l, i) : at(a, i, l)) * (tb ? at(b, j, l) : at(b, l, j));
          EXPECT_NEAR(at(c, i, j), 0.5 * s + 2.0 * at(c0, i, j), 1e-5) << ta << tb;
        }
    }
}

TEST(Gemm, BetaZeroIgnoresNanAndZeroInnerDimension) {
  const Tensor a = test::random_tensor({3, 4}, 1), b = test::random_tensor({4, 2}, 2);
  Tensor c = Tensor::empty({3, 2}, DType::f32);
  std::fill_n(c.data<float>(), 6, std::nanf(""));
  kernels::gemm(a, false, b, false, c);
  for (int i = 0; i < 6; ++i)
    EXPECT_FALSE(std::isnan(c.data<float>()[i]));
  const Tensor a0 = Tensor::empty({3, 0}, DType::f32), b0 = Tensor::empty({0, 2}, DType::f32);
  Tensor c0 = test::random_tensor({3, 2}, 4);
  const Tensor before = c0.clone();
  kernels::gemm(a0, false, b0, false, c0, 1.0f, 0.5f);
  for (int i = 0; i < 6; ++i)
    EXPECT_FLOAT_EQ(c0.data<float>()[i], 0.5f * before.data<float>()[i]);
  Tensor bad = Tensor::empty({3, 3}, DType::f32);
  EXPECT_THROW(kernels::gemm(a, false, b, false, bad), InputError);
}

TEST(Bias, AddAndColumnSums) {
  Tensor y = test::random_tensor({5000, 3}, 1); // more than one row block
  const Tensor y0 = y.clone();
  const Tensor bias = Tensor::from_vector<float>({1.0f, -2.0f, 0.5f});
  kernels::add_bias(y, bias);
  for (std::int64_t i = 0; i < 5000; ++i)
    for (int j = 0; j < 3; ++j)
      ASSERT_FLOAT_EQ(at(y, i, j), at(y0, i, j) + bias.data<float>()[j]);
  Tensor sums = Tensor::from_vector<float>({10.0f, 10.0f, 10.0f});
  kernels::column_sums(y0, sums, /*accumulate=*/true);
  for (int j = 0; j < 3; ++j) {
    double s = 10.0;
    for (std::int64_t i = 0; i < 5000; ++i)
      s += at(y0, i, j);
    EXPECT_NEAR(sums.data<float>()[j], s, 1e-3);
  }
  kernels::column_sums(y0, sums, /*accumulate=*/false);
  double s0 = 0;
  for (std::int64_t i = 0; i < 5000; ++i)
    s0 += at(y0, i, 0);
  EXPECT_NEAR(sums.data<float>()[0], s0, 1e-3);
}

TEST(Rows, GatherAndScatterAddWithRepeats) {
  const Tensor src = test::random_tensor({6, 40}, 1);
  for (DType index_type : {DType::i32, DType::i64}) {
    const std::vector<std::int64_t> idx = {5, 0, 5, 2};
    Tensor index = index_type == DType::i32 ? Tensor::from_vector<std::int32_t>({5, 0, 5, 2})
                                            : Tensor::from_vector<std::int64_t>({5, 0, 5, 2});
    Tensor packed = Tensor::empty({4, 40}, DType::f32);
    kernels::gather_rows(src, index, packed);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 40; ++j)
        ASSERT_EQ(at(packed, i, j), at(src, idx[i], j));
    Tensor out = Tensor::zeros({6, 40}, DType::f32);
    kernels::scatter_add_rows(packed, index, out);
    for (int j = 0; j < 40; ++j) {
      EXPECT_FLOAT_EQ(at(out, 5, j), 2 * at(src, 5, j));
      EXPECT_FLOAT_EQ(at(out, 0, j), at(src, 0, j));
      EXPECT_FLOAT_EQ(at(out, 1, j), 0.0f);
    }
  }
  Tensor wrong_index = Tensor::from_vector<float>({0.0f});
  Tensor out = Tensor::empty({1, 40}, DType::f32);
  EXPECT_THROW(kernels::gather_rows(src, wrong_index, out), InputError);
}

TEST(Rows, SegmentedScatterAddSumsSegmentsInOrder) {
  // Two segments that each name rows 0..n-1 in some order: every out row receives two sums,
  // always segment 0's then segment 1's, whatever the thread count (bit-exact reference).
  const std::int64_t n = 3000, f = 24;
  std::vector<std::int32_t> idx;
  for (std::int64_t i = 0; i < n; ++i)
    idx.push_back(static_cast<std::int32_t>((i * 7) % n));
  for (std::int64_t i = 0; i < n; ++i)
    idx.push_back(static_cast<std::int32_t>(n - 1 - i));
  const Tensor index = Tensor::from_vector(idx);
  const Tensor src = test::random_tensor({2 * n, f}, 3);
  const Tensor base = test::random_tensor({n, f}, 4);
  Tensor out = base.clone();
  const std::vector<std::int64_t> segments{n, n};
  kernels::scatter_add_rows_segmented(src, index, segments, out);
  std::vector<float> expected(base.data<float>(), base.data<float>() + n * f);
  for (std::int64_t i = 0; i < 2 * n; ++i)
    for (std::int64_t j = 0; j < f; ++j)
      expected[idx[i] * f + j] += at(src, i, j);
  for (std::int64_t k = 0; k < n * f; ++k)
    ASSERT_EQ(out.data<float>()[k], expected[k]) << k;
  const std::vector<std::int64_t> short_segments{n, n - 1};
  EXPECT_THROW(kernels::scatter_add_rows_segmented(src, index, short_segments, out), InputError);
}

TEST(Relu, ForwardAndBackward) {
  const Tensor x = Tensor::from_vector<float>({-1.0f, 0.0f, 2.0f, -3.0f, 4.0f, 0.5f}, {2, 3});
  Tensor y = Tensor::empty({2, 3}, DType::f32);
  kernels::relu_forward(x, y);
  const std::vector<float> expected = {0, 0, 2, 0, 4, 0.5f};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(y.data<float>()[i], expected[i]);
  const Tensor g = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor gx = Tensor::empty({2, 3}, DType::f32);
  kernels::relu_backward(g, y, gx);
  const std::vector<float> expected_g = {0, 0, 3, 0, 5, 6};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(gx.data<float>()[i], expected_g[i]);
}

TEST(ReluDropout, EqualsReluThenDropoutAndItsBitsGiveTheBackward) {
  const std::int64_t n = 50, f = 29; // f not a multiple of 8: the last bit byte is partial
  const rng::Key key{11, rng::Stream::dropout, 2, 0, 1};
  const Tensor x = test::random_tensor({n, f}, 7, -1.0f, 1.0f);
  std::vector<NodeId> ids(n);
  std::iota(ids.begin(), ids.end(), 300);
  for (const float p : {0.0f, 0.5f}) {
    SCOPED_TRACE(p);
    // Reference: ReLU, then dropout with a mask, then their backward passes one after another.
    Tensor relu = Tensor::empty({n, f}, DType::f32);
    kernels::relu_forward(x, relu);
    Tensor expected = relu.clone(), mask = Tensor::empty({n, (f + 7) / 8}, DType::u8);
    if (p > 0) kernels::dropout_forward(relu, ids, key, p, expected, mask);
    const Tensor g = test::random_tensor({n, f}, 8);
    Tensor expected_grad = g.clone();
    if (p > 0) kernels::dropout_backward(g, mask, p, expected_grad);
    kernels::relu_backward(expected_grad, relu, expected_grad);

    Tensor y = x.clone();
    Tensor bits = Tensor::empty({n, (f + 7) / 8}, DType::u8);
    kernels::relu_dropout_forward(y, ids, key, p, y, bits);
    Tensor grad = g.clone();
    kernels::relu_dropout_backward(grad, bits, p, grad);
    std::int64_t set = 0;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < f; ++j) {
        ASSERT_EQ(at(y, i, j), at(expected, i, j)) << i << "," << j;
        const bool bit = (bits.data<std::uint8_t>()[i * ((f + 7) / 8) + j / 8] >> (j % 8)) & 1;
        ASSERT_EQ(bit, at(y, i, j) > 0.0f) << i << "," << j;
        ASSERT_EQ(at(grad, i, j), at(expected_grad, i, j)) << i << "," << j;
        set += bit;
      }
    // About half the entries are positive, and dropout keeps about 1 - p of those.
    EXPECT_NEAR(double(set) / (n * f), 0.5 * (1 - p), 0.06);
  }
  // Dropout without a mask writes the same values as with one.
  Tensor with_mask = Tensor::empty({n, f}, DType::f32),
         mask = Tensor::empty({n, (f + 7) / 8}, DType::u8);
  Tensor without = Tensor::empty({n, f}, DType::f32), none;
  kernels::dropout_forward(x, ids, key, 0.3f, with_mask, mask);
  kernels::dropout_forward(x, ids, key, 0.3f, without, none);
  EXPECT_EQ(std::memcmp(with_mask.raw(), without.raw(), n * f * sizeof(float)), 0);
  Tensor short_bits = Tensor::empty({n, 3}, DType::u8);
  EXPECT_THROW(kernels::relu_dropout_forward(x, ids, key, 0.3f, without, short_bits), InputError);
}

TEST(Dropout, MaskDependsOnNodeIdNotRowOrder) {
  const std::int64_t n = 200, f = 37;
  const float p = 0.3f;
  const rng::Key key{42, rng::Stream::dropout, 3, 0, 1};
  const Tensor x = test::random_tensor({n, f}, 5, 0.5f, 1.5f); // nonzero everywhere
  std::vector<NodeId> ids(n);
  std::iota(ids.begin(), ids.end(), 1000);
  Tensor y = Tensor::empty({n, f}, DType::f32);
  Tensor mask = Tensor::empty(kernels::dropout_mask_shape(x), DType::u8);
  ASSERT_EQ(mask.shape(), (std::vector<std::int64_t>{n, (f + 7) / 8}));
  kernels::dropout_forward(x, ids, key, p, y, mask);
  // Reverse the rows and their ids: each node's mask row must move with it.
  std::vector<NodeId> reversed(ids.rbegin(), ids.rend());
  Tensor x_rev = Tensor::empty({n, f}, DType::f32);
  for (std::int64_t i = 0; i < n; ++i)
    std::copy_n(x.data<float>() + (n - 1 - i) * f, f, x_rev.data<float>() + i * f);
  Tensor y_rev = Tensor::empty({n, f}, DType::f32),
         mask_rev = Tensor::empty(mask.shape(), DType::u8);
  kernels::dropout_forward(x_rev, reversed, key, p, y_rev, mask_rev);
  std::int64_t kept = 0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < f; ++j) {
      const bool m = bit_at(mask, i, j);
      ASSERT_EQ(m, bit_at(mask_rev, n - 1 - i, j));
      ASSERT_EQ(at(y, i, j), at(y_rev, n - 1 - i, j));
      ASSERT_FLOAT_EQ(at(y, i, j), m ? at(x, i, j) / (1 - p) : 0.0f);
      kept += m;
    }
  EXPECT_NEAR(double(kept) / (n * f), 1 - p, 0.03);
  // A different layer (key) gives a different mask.
  rng::Key other = key;
  other.layer = 2;
  Tensor y2 = Tensor::empty({n, f}, DType::f32), mask2 = Tensor::empty(mask.shape(), DType::u8);
  kernels::dropout_forward(x, ids, other, p, y2, mask2);
  EXPECT_NE(std::memcmp(mask.raw(), mask2.raw(), mask.nbytes()), 0);
  // Backward with the same mask.
  const Tensor g = test::random_tensor({n, f}, 6);
  Tensor gx = Tensor::empty({n, f}, DType::f32);
  kernels::dropout_backward(g, mask, p, gx);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < f; ++j)
      ASSERT_FLOAT_EQ(at(gx, i, j), bit_at(mask, i, j) ? at(g, i, j) / (1 - p) : 0.0f);
  EXPECT_THROW(kernels::dropout_forward(x, ids, key, 1.0f, y, mask), InputError);
  EXPECT_THROW(kernels::dropout_forward(x, std::span(ids).first(3), key, p, y, mask), InputError);
  // A mask of one byte per element (the layout before masks were bits) is refused.
  Tensor byte_mask = Tensor::empty({n, f}, DType::u8);
  EXPECT_THROW(kernels::dropout_forward(x, ids, key, p, y, byte_mask), InputError);
  EXPECT_THROW(kernels::dropout_backward(g, byte_mask, p, gx), InputError);
}

// Forces the CPU dropout kernels' instruction set for a scope, then restores the one before.
class ScopedDropoutIsa {
public:
  explicit ScopedDropoutIsa(kernels::CpuIsa isa) : before_(kernels::cpu_dropout_isa()) {
    kernels::set_cpu_dropout_isa(isa);
  }
  ~ScopedDropoutIsa() { kernels::set_cpu_dropout_isa(before_); }
  ScopedDropoutIsa(const ScopedDropoutIsa&) = delete;
  ScopedDropoutIsa& operator=(const ScopedDropoutIsa&) = delete;

private:
  kernels::CpuIsa before_;
};

std::vector<kernels::CpuIsa> supported_isas() {
  std::vector<kernels::CpuIsa> isas;
  for (const auto isa : {kernels::CpuIsa::portable, kernels::CpuIsa::avx2, kernels::CpuIsa::avx512})
    if (kernels::cpu_supports(isa)) isas.push_back(isa);
  return isas;
}

bool same_bits(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

// Inputs with the values whose product or sign a kernel could get wrong: zeros of both signs,
// infinities, NaN, subnormals; the rest uniform in [-2, 2].
Tensor awkward_tensor(std::int64_t n, std::int64_t f, std::uint32_t seed) {
  Tensor x = test::random_tensor({n, f}, seed, -2.0f, 2.0f);
  const float specials[] = {0.0f,
                            -0.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::denorm_min(),
                            -1e-40f};
  for (std::int64_t e = 0; e < x.numel(); e += 13)
    x.data<float>()[e] = specials[(e / 13) % std::size(specials)];
  return x;
}

// The scalar reference of every dropout kernel, element by element from the draw itself.
struct DropoutReference {
  std::vector<float> y, relu_y, grad, relu_grad;
  std::vector<std::uint8_t> mask, relu_bits; // [n, ceil(f / 8)], bits past column f clear
};

// Every element's 16-bit draw, row-major: the reference's dear part, computed once per shape.
std::vector<std::uint32_t> dropout_draws(std::int64_t n, std::int64_t f, std::span<const NodeId> ids,
                                         const rng::Key& key) {
  std::vector<std::uint32_t> draws(static_cast<std::size_t>(n * f));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < f; ++j)
      draws[static_cast<std::size_t>(i * f + j)] = kernels::detail::dropout_draw16(key, ids[i], j);
  return draws;
}

DropoutReference dropout_reference(const Tensor& x, const Tensor& g,
                                   const std::vector<std::uint32_t>& draws, float p) {
  const std::int64_t n = x.rows(), f = x.cols(), row_bytes = (f + 7) / 8;
  const std::uint32_t threshold = kernels::detail::dropout_threshold(p);
  const float scale = 1.0f / (1.0f - p);
  DropoutReference r;
  r.y.resize(static_cast<std::size_t>(n * f));
  r.relu_y = r.grad = r.relu_grad = r.y;
  r.mask.assign(static_cast<std::size_t>(n * row_bytes), 0);
  r.relu_bits = r.mask;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < f; ++j) {
      const auto e = static_cast<std::size_t>(i * f + j);
      const auto byte = static_cast<std::size_t>(i * row_bytes + j / 8);
      const bool keep = draws[e] >= threshold;
      const float v = at(x, i, j), gv = at(g, i, j);
      r.y[e] = keep ? v * scale : 0.0f;
      r.grad[e] = keep ? gv * scale : 0.0f;
      r.mask[byte] |= static_cast<std::uint8_t>((keep ? 1u : 0u) << (j % 8));
      r.relu_y[e] = v > 0.0f && keep ? v * scale : 0.0f;
      const bool pass = r.relu_y[e] > 0.0f;
      r.relu_grad[e] = pass ? gv * scale : 0.0f;
      r.relu_bits[byte] |= static_cast<std::uint8_t>((pass ? 1u : 0u) << (j % 8));
    }
  return r;
}

::testing::AssertionResult floats_equal_bits(const Tensor& got, const std::vector<float>& want,
                                             const char* what) {
  for (std::int64_t e = 0; e < got.numel(); ++e)
    if (!same_bits(got.data<float>()[e], want[static_cast<std::size_t>(e)]))
      return ::testing::AssertionFailure()
             << what << " element " << e << " (row " << e / got.cols() << ", col " << e % got.cols()
             << "): " << got.data<float>()[e] << " vs " << want[static_cast<std::size_t>(e)];
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult bytes_equal(const Tensor& got, const std::vector<std::uint8_t>& want,
                                       const char* what) {
  for (std::int64_t e = 0; e < got.numel(); ++e)
    if (got.data<std::uint8_t>()[e] != want[static_cast<std::size_t>(e)])
      return ::testing::AssertionFailure() << what << " byte " << e << " (row " << e / got.cols()
                                           << "): " << int(got.data<std::uint8_t>()[e]) << " vs "
                                           << int(want[static_cast<std::size_t>(e)]);
  return ::testing::AssertionSuccess();
}

// Every instruction-set path of the CPU dropout kernels (portable, AVX2, AVX-512: each one this
// CPU has, forced in turn) writes exactly the scalar reference built from detail::dropout_draw16:
// the same bits, the same floats, +0 where dropped, for widths around the 8-, 16-, 64- and
// 128-column steps of the vector paths, node ids above 2^32, in place and out of place.
TEST(Dropout, EveryCpuIsaEqualsTheScalarDrawBitForBit) {
  const auto isas = supported_isas();
  std::string names;
  for (const auto isa : isas)
    names += std::string(names.empty() ? "" : ",") + kernels::cpu_isa_name(isa);
  std::printf("dropout paths tested on this CPU: %s\n", names.c_str());
  RecordProperty("dropout_isas", names);
  const rng::Key key{0x123456789ABCDEFull, rng::Stream::dropout, 4, 9, 2};
  for (const std::int64_t f : {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 200,
                               256, 257}) {
    // Enough rows that the larger widths run on several threads (uneven row ranges).
    const std::int64_t n = std::max<std::int64_t>(37, 40000 / f + 3);
    std::vector<NodeId> ids(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) // both halves of the counter, in no particular order
      ids[static_cast<std::size_t>(i)] = i % 3 == 0   ? (NodeId{1} << 32) + 7919 * i
                                         : i % 3 == 1 ? (NodeId{5} << 40) - i
                                                      : 3 * n - i;
    const Tensor x = awkward_tensor(n, f, static_cast<std::uint32_t>(f));
    const Tensor g = awkward_tensor(n, f, static_cast<std::uint32_t>(f) + 1000);
    const std::vector<std::uint32_t> draws = dropout_draws(n, f, ids, key);
    // 0.5, 0.25 and 0.75 read 1 and 2 of the 16 levels, 0.1 and 0.9 15, 0.3 all 16;
    // 0.999995: a threshold of 65536, nothing kept.
    for (const float p : {0.0f, 0.1f, 0.25f, 0.3f, 0.5f, 0.75f, 0.9f, 0.999995f}) {
      const DropoutReference want = dropout_reference(x, g, draws, p);
      for (const auto isa : isas) {
        SCOPED_TRACE(testing::Message() << kernels::cpu_isa_name(isa) << " F=" << f << " p=" << p);
        ScopedDropoutIsa forced(isa);
        ASSERT_EQ(kernels::cpu_dropout_isa(), isa);
        const auto shape = kernels::dropout_mask_shape(x);
        auto garbage = [&shape] {
          Tensor t = Tensor::empty(shape, DType::u8);
          std::memset(t.raw(), 0xA5, static_cast<std::size_t>(t.nbytes()));
          return t;
        };
        Tensor y = Tensor::empty({n, f}, DType::f32), mask = garbage();
        kernels::dropout_forward(x, ids, key, p, y, mask);
        ASSERT_TRUE(floats_equal_bits(y, want.y, "dropout y"));
        ASSERT_TRUE(bytes_equal(mask, want.mask, "dropout mask"));
        Tensor in_place = x.clone(), none;
        kernels::dropout_forward(in_place, ids, key, p, in_place, none);
        ASSERT_TRUE(floats_equal_bits(in_place, want.y, "dropout y, in place, no mask"));
        Tensor gx = Tensor::empty({n, f}, DType::f32);
        kernels::dropout_backward(g, mask, p, gx);
        ASSERT_TRUE(floats_equal_bits(gx, want.grad, "dropout grad"));

        Tensor relu_y = x.clone(), bits = garbage();
        kernels::relu_dropout_forward(relu_y, ids, key, p, relu_y, bits);
        ASSERT_TRUE(floats_equal_bits(relu_y, want.relu_y, "relu_dropout y"));
        ASSERT_TRUE(bytes_equal(bits, want.relu_bits, "relu_dropout bits"));
        Tensor relu_grad = g.clone();
        kernels::relu_dropout_backward(relu_grad, bits, p, relu_grad);
        ASSERT_TRUE(floats_equal_bits(relu_grad, want.relu_grad, "relu_dropout grad, in place"));
        if (p == 0.0f) { // no draws: the row ids are not needed
          Tensor no_ids = Tensor::empty({n, f}, DType::f32), no_ids_bits = garbage();
          kernels::relu_dropout_forward(x, std::span<const NodeId>(), key, p, no_ids, no_ids_bits);
          ASSERT_TRUE(floats_equal_bits(no_ids, want.relu_y, "relu alone"));
          ASSERT_TRUE(bytes_equal(no_ids_bits, want.relu_bits, "relu alone bits"));
        }
      }
    }
  }
}

// The gather with dropout on the way writes what a copy of the rows followed by dropout_forward
// writes, bit for bit, on every instruction-set path, rows repeated and out of order included;
// p = 0 is a plain copy.
TEST(Dropout, GatherWithDropoutEqualsGatherThenDropout) {
  const rng::Key key{9, rng::Stream::dropout, 3, 1, 0};
  for (const std::int64_t f : {5, 32, 128, 200}) {
    const std::int64_t sources = 300, n = 1000;
    const Tensor table = awkward_tensor(sources, f, static_cast<std::uint32_t>(f) + 7);
    std::vector<const float*> rows(static_cast<std::size_t>(n));
    std::vector<NodeId> ids(static_cast<std::size_t>(n));
    Tensor gathered = Tensor::empty({n, f}, DType::f32);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t src = (i * 7919) % sources;
      rows[static_cast<std::size_t>(i)] = table.data<float>() + src * f;
      ids[static_cast<std::size_t>(i)] = 40 * src + 3; // a node id per source row
      std::memcpy(gathered.data<float>() + i * f, rows[static_cast<std::size_t>(i)],
                  static_cast<std::size_t>(f) * sizeof(float));
    }
    for (const float p : {0.0f, 0.3f, 0.5f})
      for (const auto isa : supported_isas()) {
        SCOPED_TRACE(testing::Message() << kernels::cpu_isa_name(isa) << " F=" << f << " p=" << p);
        ScopedDropoutIsa forced(isa);
        Tensor want = Tensor::empty({n, f}, DType::f32), none;
        if (p > 0.0f)
          kernels::dropout_forward(gathered, ids, key, p, want, none);
        else
          want = gathered.clone();
        Tensor got = Tensor::empty({n, f}, DType::f32);
        kernels::gather_dropout_rows(rows, ids, key, p, got);
        ASSERT_EQ(std::memcmp(got.raw(), want.raw(), static_cast<std::size_t>(got.nbytes())), 0);
      }
  }
  Tensor y = Tensor::empty({2, 4}, DType::f32);
  const float row[4] = {1, 2, 3, 4};
  const std::vector<const float*> one_row = {row};
  const std::vector<NodeId> one_id = {0};
  EXPECT_THROW(kernels::gather_dropout_rows(one_row, one_id, key, 0.5f, y), InputError);
}

// A gather in read order (rows sorted by where they lie, or reversed) writes the same rows as in
// the step's order, bit for bit, on every instruction-set path: the order moves the reads only.
TEST(Dropout, GatherInReadOrderEqualsGatherInStepOrder) {
  const rng::Key key{5, rng::Stream::dropout, 2, 7, 0};
  for (const std::int64_t f : {5, 100, 128, 200}) {
    const std::int64_t sources = 500, n = 777;
    const Tensor table = awkward_tensor(sources, f, static_cast<std::uint32_t>(f) + 11);
    std::vector<const float*> rows(static_cast<std::size_t>(n));
    std::vector<NodeId> ids(static_cast<std::size_t>(n));
    std::vector<std::int64_t> keys(static_cast<std::size_t>(n)), reversed(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t src = (i * 104729 + 17) % sources;
      rows[static_cast<std::size_t>(i)] = table.data<float>() + src * f;
      ids[static_cast<std::size_t>(i)] = 3 * src + 1;
      keys[static_cast<std::size_t>(i)] = src;
      reversed[static_cast<std::size_t>(i)] = n - 1 - i;
    }
    std::vector<std::int64_t> sorted;
    kernels::gather_read_order(keys, sources, sorted);
    for (const float p : {0.0f, 0.4f})
      for (const auto isa : supported_isas()) {
        SCOPED_TRACE(testing::Message() << kernels::cpu_isa_name(isa) << " F=" << f << " p=" << p);
        ScopedDropoutIsa forced(isa);
        Tensor want = Tensor::empty({n, f}, DType::f32);
        kernels::gather_dropout_rows(rows, ids, key, p, want);
        for (const auto* order : {&sorted, &reversed}) {
          Tensor got = Tensor::empty({n, f}, DType::f32);
          std::fill_n(got.data<float>(), got.numel(), -1.0f);
          kernels::gather_dropout_rows(rows, ids, key, p, got, *order);
          ASSERT_EQ(std::memcmp(got.raw(), want.raw(), static_cast<std::size_t>(got.nbytes())), 0);
        }
      }
  }
  // An order that is not a permutation would leave rows unwritten: refused.
  Tensor y = Tensor::empty({2, 4}, DType::f32);
  const float row[4] = {1, 2, 3, 4};
  const std::vector<const float*> two_rows = {row, row};
  const std::vector<NodeId> two_ids = {0, 1};
  const std::vector<std::int64_t> twice = {1, 1}, outside = {0, 2};
  EXPECT_THROW(kernels::gather_dropout_rows(two_rows, two_ids, key, 0.5f, y, twice), InputError);
  EXPECT_THROW(kernels::gather_dropout_rows(two_rows, two_ids, key, 0.0f, y, outside), InputError);
}

// The read order is a stable permutation whose keys' buckets ascend: exact ascending keys while
// the key range fits 2^16 buckets, windows of 2^shift keys beyond.
TEST(Dropout, GatherReadOrderSortsRowsByWhereTheyLie) {
  for (const std::int64_t bound : {std::int64_t{1000}, std::int64_t{3} << 20}) {
    std::vector<std::int64_t> keys(5000);
    for (std::size_t i = 0; i < keys.size(); ++i)
      keys[i] = static_cast<std::int64_t>((i * 2654435761u) % static_cast<std::uint64_t>(bound));
    std::vector<std::int64_t> order;
    kernels::gather_read_order(keys, bound, order);
    ASSERT_EQ(order.size(), keys.size());
    std::vector<int> seen(keys.size(), 0);
    for (const auto i : order) ++seen[static_cast<std::size_t>(i)];
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(keys.size()));
    const int shift = bound > (1 << 16) ? 6 : 0; // 3 * 2^20 keys: 3 * 2^14 windows of 2^6
    for (std::size_t k = 1; k < order.size(); ++k) {
      const auto a = keys[static_cast<std::size_t>(order[k - 1])] >> shift;
      const auto b = keys[static_cast<std::size_t>(order[k])] >> shift;
      ASSERT_LE(a, b) << "at " << k;
      if (a == b) {
        ASSERT_LT(order[k - 1], order[k]) << "unstable at " << k;
      }
    }
  }
  std::vector<std::int64_t> order;
  const std::vector<std::int64_t> bad = {0, 10};
  EXPECT_THROW(kernels::gather_read_order(bad, 10, order), InputError);
}

// The bit-sliced compare, which stops at the threshold's lowest set bit, keeps exactly the
// columns whose full 16-bit draw (all levels assembled) is >= the threshold, for thresholds of
// every level count.
TEST(Dropout, KeepWordsEqualTheFullDrawCompare) {
  const rng::Key key{77, rng::Stream::dropout, 1, 5, 3};
  std::vector<std::uint32_t> thresholds = {0, 1, 2, 3, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 65536};
  for (int b = 0; b < 16; ++b) thresholds.push_back(1u << b);
  for (std::uint32_t t = 17; t < 0xFFFF; t += 4099) thresholds.push_back(t);
  for (const std::uint32_t t : thresholds)
    for (const NodeId node : {NodeId{0}, NodeId{12345}, (NodeId{3} << 33) + 9})
      for (const std::int64_t word : {0, 1, 3, 4, 9}) {
        const std::uint32_t keep = kernels::detail::dropout_keep_word(
            key, static_cast<std::uint64_t>(node), word, t);
        for (int i = 0; i < 32; ++i)
          ASSERT_EQ((keep >> i) & 1u,
                    kernels::detail::dropout_keep(key, node, 32 * word + i, t) ? 1u : 0u)
              << "threshold " << t << " node " << node << " column " << 32 * word + i;
      }
}

// Each column is kept with probability 1 - threshold / 65536, at every position of the
// 128-column chunk, and two columns sharing Philox words are kept independently.
TEST(Dropout, KeepRateIsOneMinusPAtEveryColumnAndColumnsAreIndependent) {
  const std::int64_t n = 4000, f = 256;
  const rng::Key key{5, rng::Stream::dropout, 2, 7, 1};
  std::vector<NodeId> ids(n);
  std::iota(ids.begin(), ids.end(), 10);
  const Tensor x = test::random_tensor({n, f}, 3, 0.5f, 1.5f);
  for (const float p : {0.1f, 0.25f, 0.3f, 0.5f, 0.75f, 0.9f}) {
    SCOPED_TRACE(p);
    Tensor y = Tensor::empty({n, f}, DType::f32), mask = Tensor::empty({n, f / 8}, DType::u8);
    kernels::dropout_forward(x, ids, key, p, y, mask);
    const double q = 1.0 - kernels::detail::dropout_threshold(p) / 65536.0;
    std::vector<std::int64_t> column_kept(f, 0);
    std::int64_t kept = 0, both = 0;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < f; ++j) {
        const bool k = bit_at(mask, i, j);
        column_kept[static_cast<std::size_t>(j)] += k;
        kept += k;
        if (j % 2 == 0) both += k && bit_at(mask, i, j + 1);
      }
    const double all = double(n) * f, sd = std::sqrt(q * (1 - q) / all);
    EXPECT_NEAR(kept / all, q, 5 * sd);
    const double column_sd = std::sqrt(q * (1 - q) / double(n));
    for (std::int64_t j = 0; j < f; ++j)
      ASSERT_NEAR(column_kept[static_cast<std::size_t>(j)] / double(n), q, 5 * column_sd)
          << "column " << j;
    const double pairs = all / 2, pair_sd = std::sqrt(q * q * (1 - q * q) / pairs);
    EXPECT_NEAR(both / pairs, q * q, 5 * pair_sd);
  }
}

TEST(Dropout, CpuIsaCanOnlyBeForcedToOneTheCpuHas) {
  EXPECT_TRUE(kernels::cpu_supports(kernels::CpuIsa::portable));
  for (const auto isa : {kernels::CpuIsa::avx2, kernels::CpuIsa::avx512})
    if (!kernels::cpu_supports(isa)) {
      EXPECT_THROW(kernels::set_cpu_dropout_isa(isa), InputError) << kernels::cpu_isa_name(isa);
    }
  // TESSEL_CPU_ISA lowers the path picked at start (the kernels_test.avx2 and .sse runs).
  const char* requested = std::getenv("TESSEL_CPU_ISA");
  if (requested && std::string(requested) == "sse")
    EXPECT_EQ(kernels::cpu_dropout_isa(), kernels::CpuIsa::portable);
  else if (requested && std::string(requested) == "avx2" &&
           kernels::cpu_supports(kernels::CpuIsa::avx2))
    EXPECT_EQ(kernels::cpu_dropout_isa(), kernels::CpuIsa::avx2);
  else
    EXPECT_TRUE(kernels::cpu_supports(kernels::cpu_dropout_isa()));
}

TEST(NormalizeRows, DividesByAbsoluteSum) {
  Tensor x = Tensor::from_vector<float>({1, 3, 0, 0, 0, 0, -1, 1, 2}, {3, 3});
  kernels::normalize_rows(x);
  const std::vector<float> expected = {0.25f, 0.75f, 0, 0, 0, 0, -0.25f, 0.25f, 0.5f};
  for (int i = 0; i < 9; ++i)
    EXPECT_FLOAT_EQ(x.data<float>()[i], expected[i]);
}

TEST(Loss, SoftmaxCrossEntropyAndAccuracyByHand) {
  // Row 0: logits (0, ln 3) -> p = (1/4, 3/4); row 2: (2, 2) -> (1/2, 1/2); row 1 unselected.
  const Tensor logits =
      Tensor::from_vector<float>({0.0f, std::log(3.0f), 5.0f, -5.0f, 2.0f, 2.0f}, {3, 2});
  const std::vector<LocalId> rows = {0, 2};
  const std::vector<std::int64_t> labels = {1, 0};
  Tensor grad = test::random_tensor({3, 2}, 1); // overwritten, zero outside the rows
  const double loss = kernels::softmax_cross_entropy(logits, rows, labels, 0.5, grad);
  EXPECT_NEAR(loss, -std::log(0.75) - std::log(0.5), 1e-6);
  const std::vector<float> expected = {0.125f, -0.125f, 0, 0, -0.25f, 0.25f};
  for (int i = 0; i < 6; ++i)
    EXPECT_NEAR(grad.data<float>()[i], expected[i], 1e-6);
  EXPECT_EQ(kernels::count_correct(logits, rows, labels), 2); // tie -> first maximum (0)
  const std::vector<std::int64_t> wrong = {0, 1};
  EXPECT_EQ(kernels::count_correct(logits, rows, wrong), 0);
  const std::vector<std::int64_t> out_of_range = {2, 0};
  EXPECT_THROW(kernels::count_correct(logits, rows, out_of_range), InputError);
}

TEST(Optim, AdamMatchesHandComputedSteps) {
  Tensor p = Tensor::from_vector<float>({1.0f, -2.0f});
  Tensor m = Tensor::zeros({2}, DType::f32), v = Tensor::zeros({2}, DType::f32);
  const Tensor g = Tensor::from_vector<float>({0.5f, 0.25f});
  kernels::AdamStep step{0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 1};
  double ref_p[2] = {1.0, -2.0}, ref_m[2] = {0, 0}, ref_v[2] = {0, 0};
  for (int t = 1; t <= 3; ++t) {
    step.step = t;
    kernels::adam_update(p, g, m, v, step);
    for (int i = 0; i < 2; ++i) {
      const double gi = g.data<float>()[i] + 0.01 * ref_p[i];
      ref_m[i] = 0.9 * ref_m[i] + 0.1 * gi;
      ref_v[i] = 0.999 * ref_v[i] + 0.001 * gi * gi;
      const double mh = ref_m[i] / (1 - std::pow(0.9, t)), vh = ref_v[i] / (1 - std::pow(0.999, t));
      ref_p[i] -= 0.1 * mh / (std::sqrt(vh) + 1e-8);
      EXPECT_NEAR(p.data<float>()[i], ref_p[i], 1e-5) << "step " << t;
    }
  }
}

TEST(Optim, SgdWithMomentumAndWeightDecay) {
  Tensor p = Tensor::from_vector<float>({1.0f});
  Tensor buf = Tensor::zeros({1}, DType::f32);
  const Tensor g = Tensor::from_vector<float>({2.0f});
  // Step 1: g' = 2 + 0.1 * 1 = 2.1, buf = 2.1, p = 1 - 0.5 * 2.1 = -0.05.
  kernels::sgd_update(p, g, buf, 0.5f, 0.9f, 0.1f);
  EXPECT_NEAR(p.data<float>()[0], -0.05, 1e-6);
  // Step 2: g' = 2 - 0.005 = 1.995, buf = 0.9 * 2.1 + 1.995 = 3.885, p = -0.05 - 1.9425.
  kernels::sgd_update(p, g, buf, 0.5f, 0.9f, 0.1f);
  EXPECT_NEAR(p.data<float>()[0], -1.9925, 1e-5);
  Tensor plain = Tensor::from_vector<float>({1.0f});
  Tensor none;
  kernels::sgd_update(plain, g, none, 0.5f, 0.0f, 0.0f);
  EXPECT_FLOAT_EQ(plain.data<float>()[0], 0.0f);
}

} // namespace
} // namespace tessel
