// The row codecs of the halo exchange: exact conversions, the documented error bound, sizes.
#include "kernel_test_util.hpp"

#include "tessel/kernels/kernels.hpp"

#include "row_codec_format.hpp"

#include <cmath>
#include <limits>

namespace tessel {
namespace {

using kernels::RowCodec;
namespace detail = kernels::detail;

// Every finite half survives the trip through f32, and a value between two neighbouring halves
// goes to the nearer one, ties to the even code: the conversion is IEEE round to nearest even.
TEST(RowCodec, F16IsRoundToNearestEvenOnEveryCode) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto code = static_cast<std::uint16_t>(h);
    if ((code & 0x7C00u) == 0x7C00u) continue;  // infinities and NaN
    ASSERT_EQ(detail::f32_to_f16(detail::f16_to_f32(code)), code) << std::hex << h;
  }
  for (std::uint32_t h = 0; h < 0x7BFF; ++h) {
    const float a = detail::f16_to_f32(static_cast<std::uint16_t>(h));
    const float b = detail::f16_to_f32(static_cast<std::uint16_t>(h + 1));
    const float mid = 0.5f * (a + b);  // exact: a half needs 11 significant bits, f32 has 24
    const auto even = static_cast<std::uint16_t>(h % 2 == 0 ? h : h + 1);
    ASSERT_EQ(detail::f32_to_f16(mid), even) << std::hex << h;
    ASSERT_EQ(detail::f32_to_f16(std::nextafter(mid, 0.0f)), h) << std::hex << h;
    ASSERT_EQ(detail::f32_to_f16(std::nextafter(mid, b)), h + 1) << std::hex << h;
    ASSERT_EQ(detail::f32_to_f16(-mid), even | 0x8000u) << std::hex << h;
  }
  EXPECT_EQ(detail::f32_to_f16(1.0f), 0x3C00u);
  EXPECT_EQ(detail::f32_to_f16(65504.0f), 0x7BFFu);
  EXPECT_EQ(detail::f32_to_f16(7e4f), 0x7BFFu);  // saturates instead of turning infinite
  EXPECT_EQ(detail::f32_to_f16(-1e30f), 0xFBFFu);
  EXPECT_EQ(detail::f32_to_f16(std::numeric_limits<float>::infinity()), 0x7C00u);
  EXPECT_TRUE(std::isnan(detail::f16_to_f32(detail::f32_to_f16(std::nanf("")))));
  EXPECT_EQ(detail::f32_to_f16(0x1p-25f), 0u);         // half the smallest subnormal: to even 0
  EXPECT_EQ(detail::f32_to_f16(0x1.8p-25f), 1u);       // beyond it: the smallest subnormal
}

TEST(RowCodec, Bf16IsRoundToNearestEvenOnEveryCode) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto code = static_cast<std::uint16_t>(h);
    if ((code & 0x7F80u) == 0x7F80u) continue;
    ASSERT_EQ(detail::f32_to_bf16(detail::bf16_to_f32(code)), code) << std::hex << h;
  }
  for (std::uint32_t h = 0; h < 0x7F7F; h += 7) {
    const float a = detail::bf16_to_f32(static_cast<std::uint16_t>(h));
    const float b = detail::bf16_to_f32(static_cast<std::uint16_t>(h + 1));
    const float mid = detail::bits_float(detail::float_bits(a) + 0x8000u);  // the exact midpoint
    ASSERT_EQ(detail::f32_to_bf16(mid), h % 2 == 0 ? h : h + 1) << std::hex << h;
    ASSERT_EQ(detail::f32_to_bf16(std::nextafter(mid, b)), h + 1) << std::hex << h;
    ASSERT_EQ(detail::f32_to_bf16(std::nextafter(mid, a)), h) << std::hex << h;
  }
  EXPECT_TRUE(std::isnan(detail::bf16_to_f32(detail::f32_to_bf16(std::nanf("")))));
}

// Each codec's round trip moves every value by at most its bound (row_codec_bound), over rows
// of values from 1e-9 to 1e4; int8 keeps zero rows zero and turns a row holding NaN or an
// infinity into NaN everywhere, so the loss sees it.
TEST(RowCodec, RoundTripStaysWithinTheBoundPerRow) {
  const std::int64_t n = 400, f = 37;
  Tensor x = test::random_tensor({n, f}, 11, -1, 1);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < f; ++j)
      x.data<float>()[i * f + j] *= std::pow(10.0f, static_cast<float>((i + j) % 14) - 9.0f);
  for (std::int64_t j = 0; j < f; ++j) x.data<float>()[j] = 0.0f;  // row 0: zeros
  for (const RowCodec codec : {RowCodec::f32, RowCodec::bf16, RowCodec::f16, RowCodec::int8}) {
    SCOPED_TRACE(kernels::row_codec_name(codec));
    Tensor wire = Tensor::empty({n, kernels::row_codec_bytes(codec, f)}, DType::u8);
    kernels::encode_rows(x, codec, wire);
    Tensor back = Tensor::empty({n, f}, DType::f32);
    kernels::decode_rows(wire, codec, back);
    const auto bound = kernels::row_codec_bound(codec);
    double worst = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      double row_max = 0;
      for (std::int64_t j = 0; j < f; ++j)
        row_max = std::max(row_max, std::fabs(static_cast<double>(x.data<float>()[i * f + j])));
      for (std::int64_t j = 0; j < f; ++j) {
        const double v = x.data<float>()[i * f + j], got = back.data<float>()[i * f + j];
        const double allowed =
            bound.relative * std::fabs(v) + bound.absolute + bound.absolute_of_row_max * row_max;
        ASSERT_LE(std::fabs(got - v), allowed) << "row " << i << " col " << j << ": " << v;
        if (allowed > 0) worst = std::max(worst, std::fabs(got - v) / allowed);
      }
    }
    if (codec == RowCodec::f32) EXPECT_EQ(worst, 0.0);
    else EXPECT_GT(worst, 0.3) << "the bound is tight, not loose by orders of magnitude";
    for (std::int64_t j = 0; j < f; ++j) ASSERT_EQ(back.data<float>()[j], 0.0f);
  }
  Tensor bad = test::random_tensor({2, 5}, 3);
  bad.data<float>()[1] = std::numeric_limits<float>::infinity();
  bad.data<float>()[7] = std::nanf("");
  Tensor wire = Tensor::empty({2, kernels::row_codec_bytes(RowCodec::int8, 5)}, DType::u8);
  kernels::encode_rows(bad, RowCodec::int8, wire);
  Tensor back = Tensor::empty({2, 5}, DType::f32);
  kernels::decode_rows(wire, RowCodec::int8, back);
  for (std::int64_t e = 0; e < 10; ++e) EXPECT_TRUE(std::isnan(back.data<float>()[e])) << e;
}

TEST(RowCodec, SizesNamesAndShapeChecks) {
  EXPECT_EQ(kernels::row_codec_bytes(RowCodec::f32, 128), 512);
  EXPECT_EQ(kernels::row_codec_bytes(RowCodec::bf16, 128), 256);
  EXPECT_EQ(kernels::row_codec_bytes(RowCodec::f16, 7), 14);
  EXPECT_EQ(kernels::row_codec_bytes(RowCodec::int8, 128), 132);  // 3.88x fewer than f32
  EXPECT_EQ(kernels::row_codec_bytes(RowCodec::int8, 7), 12);     // the scale, 7 codes, padding
  for (const std::string& name : kernels::row_codec_names())
    EXPECT_EQ(kernels::row_codec_name(kernels::parse_row_codec(name)), name);
  EXPECT_THROW(kernels::parse_row_codec("fp8"), InputError);
  const Tensor x = Tensor::zeros({3, 8}, DType::f32);
  Tensor short_wire = Tensor::empty({3, 8}, DType::u8);
  EXPECT_THROW(kernels::encode_rows(x, RowCodec::int8, short_wire), InputError);
}

} // namespace
} // namespace tessel
