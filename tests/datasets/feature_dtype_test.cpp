// Feature storage dtypes: the float32 -> float16/bfloat16 kernels round to nearest even (checked
// against a reference that picks the nearest representable value), widen exactly, keep
// subnormals, and report overflow; a 16-bit store reads back the rounded values and refuses a
// value its dtype cannot hold without leaving a file.
#include "tessel/core/error.hpp"
#include "tessel/datasets/dataset.hpp"
#include "tessel/datasets/feature_dtype.hpp"
#include "tessel/datasets/h5.hpp"

#include "dataset_fixtures.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace tessel {
namespace {

using datasets::FeatureDtype;

float widen(std::uint16_t bits, FeatureDtype dtype) {
  return dtype == FeatureDtype::float16 ? datasets::half_to_float(bits)
                                        : datasets::bfloat16_to_float(bits);
}
std::uint16_t narrow(float value, FeatureDtype dtype) {
  return dtype == FeatureDtype::float16 ? datasets::float_to_half(value)
                                        : datasets::float_to_bfloat16(value);
}

// The nearest 16-bit value to a finite float, ties to the even bit pattern, found by binary
// search over the positive patterns (which ascend with their values); infinity stands at the
// next power of two past the largest finite value, as IEEE rounding with an unbounded exponent
// places it.
std::uint16_t reference(float value, FeatureDtype dtype) {
  const bool half = dtype == FeatureDtype::float16;
  const std::uint16_t inf = half ? 0x7c00 : 0x7f80;
  const double inf_at = half ? 65536.0 : std::ldexp(1.0, 128);
  const auto value_of = [&](std::uint32_t bits) {
    return bits == inf ? inf_at : static_cast<double>(widen(static_cast<std::uint16_t>(bits), dtype));
  };
  const double a = std::fabs(static_cast<double>(value));
  std::uint32_t lo = 0, hi = inf; // value_of(lo) <= a < value_of(hi), or a >= inf_at
  if (a >= inf_at) {
    lo = inf;
  } else {
    while (hi - lo > 1) {
      const std::uint32_t mid = (lo + hi) / 2;
      (value_of(mid) <= a ? lo : hi) = mid;
    }
    const double down = a - value_of(lo), up = value_of(hi) - a;
    if (up < down || (up == down && (lo & 1u) != 0)) lo = hi;
  }
  return static_cast<std::uint16_t>(lo | (std::signbit(value) ? 0x8000u : 0u));
}

class Kernel : public ::testing::TestWithParam<FeatureDtype> {};

TEST_P(Kernel, EveryStoredValueWidensAndNarrowsBackToItself) {
  const FeatureDtype dtype = GetParam();
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const float f = widen(static_cast<std::uint16_t>(bits), dtype);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(widen(narrow(f, dtype), dtype))) << bits;
      continue;
    }
    ASSERT_EQ(narrow(f, dtype), bits) << bits;
  }
}

TEST_P(Kernel, RoundsToNearestEvenLikeTheReference) {
  const FeatureDtype dtype = GetParam();
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<std::uint32_t> any_finite(0, 0x7f7fffffu);
  std::uniform_int_distribution<std::uint32_t> small(0, 0x38ffffffu); // half subnormals and below
  for (int i = 0; i < 200000; ++i) {
    std::uint32_t bits = (i % 2 == 0 ? any_finite(rng) : small(rng)) | (i % 3 == 0 ? 0x80000000u : 0u);
    const float f = std::bit_cast<float>(bits);
    ASSERT_EQ(narrow(f, dtype), reference(f, dtype)) << f << " bits " << bits;
  }
  // Every midpoint between neighbouring 16-bit values is a tie: it goes to the even pattern.
  for (std::uint32_t bits = 0; bits + 1 < (dtype == FeatureDtype::float16 ? 0x7c00u : 0x7f80u);
       bits += 7) {
    const double mid = (static_cast<double>(widen(static_cast<std::uint16_t>(bits), dtype)) +
                        static_cast<double>(widen(static_cast<std::uint16_t>(bits + 1), dtype))) / 2;
    const auto f = static_cast<float>(mid);
    if (static_cast<double>(f) != mid) continue; // not a float
    ASSERT_EQ(narrow(f, dtype), (bits & 1u) == 0 ? bits : bits + 1) << mid;
  }
}

INSTANTIATE_TEST_SUITE_P(FeatureDtype, Kernel,
                         ::testing::Values(FeatureDtype::float16, FeatureDtype::bfloat16),
                         [](const auto& info) { return std::string(datasets::to_string(info.param)); });

TEST(FeatureDtypeKernel, HalfTiesSubnormalsAndOverflow) {
  using datasets::float_to_half;
  using datasets::half_to_float;
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3c00);           // tie: down to even 1.0
  EXPECT_EQ(float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);       // tie: up to even
  EXPECT_EQ(float_to_half(0x1p-24f), 0x0001);                   // smallest subnormal
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);                   // tie with 0: even
  EXPECT_EQ(float_to_half(1.5f * 0x1p-25f), 0x0001);
  EXPECT_EQ(float_to_half(-0x1p-14f), 0x8400);                  // smallest normal, negative
  EXPECT_EQ(float_to_half(1023 * 0x1p-24f), 0x03ff);            // largest subnormal
  EXPECT_EQ(half_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(half_to_float(0x03ff), 1023 * 0x1p-24f);
  EXPECT_TRUE(std::signbit(half_to_float(0x8000)));
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.99f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00); // past the largest: infinity
  const float values[] = {1.0f, -3.5f, 65520.0f, 2.0f};
  std::uint16_t out[4];
  EXPECT_EQ(datasets::narrow_features(values, out, 4, FeatureDtype::float16), 2);
  const float fine[] = {1.0f, 65504.0f, -65504.0f, 1e-9f};
  EXPECT_EQ(datasets::narrow_features(fine, out, 4, FeatureDtype::float16), -1);
  EXPECT_EQ(out[3], 0x0000); // underflow is rounding, not an error
  const float nan_in[] = {0.0f, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_EQ(datasets::narrow_features(nan_in, out, 2, FeatureDtype::float16), 1);
}

TEST(FeatureDtypeKernel, BfloatTiesAndOverflow) {
  using datasets::float_to_bfloat16;
  EXPECT_EQ(float_to_bfloat16(1.0f + 0x1p-8f), 0x3f80);     // tie: down to even
  EXPECT_EQ(float_to_bfloat16(1.0f + 3 * 0x1p-8f), 0x3f82); // tie: up to even
  EXPECT_EQ(float_to_bfloat16(0x1p-133f), 0x0001);          // a float subnormal stays one
  const float big[] = {std::numeric_limits<float>::max()};
  std::uint16_t out[1];
  EXPECT_EQ(datasets::narrow_features(big, out, 1, FeatureDtype::bfloat16), 0);
  EXPECT_EQ(out[0], 0x7f80);
}

TEST(FeatureDtypeKernel, RoundFeaturesIsNarrowThenWiden) {
  std::vector<float> v = {0.1f, -7.77f, 3e-6f, 1234.567f};
  std::vector<float> r = v;
  EXPECT_EQ(datasets::round_features(r.data(), 4, FeatureDtype::float16), -1);
  for (std::size_t i = 0; i < v.size(); ++i)
    EXPECT_EQ(r[i], datasets::half_to_float(datasets::float_to_half(v[i])));
  EXPECT_NE(r[0], v[0]);
  EXPECT_EQ(datasets::parse_feature_dtype("bfloat16"), FeatureDtype::bfloat16);
  const std::string error = test::input_error([] { datasets::parse_feature_dtype("float64"); });
  EXPECT_NE(error.find("float64: expected float32, float16 or bfloat16"), std::string::npos)
      << error;
}

TEST(FeatureDtypeStore, SixteenBitStoresReadBackTheRoundedValues) {
  test::TempDir dir;
  datasets::Dataset data = test::small_dataset(700);
  for (std::size_t i = 0; i < data.features.size(); ++i)
    data.features[i] *= 1000.0f; // well inside float16, many values not representable
  datasets::write_store(data, dir / "f32.h5");
  for (const FeatureDtype dtype : {FeatureDtype::float16, FeatureDtype::bfloat16}) {
    const std::string name = std::string(datasets::to_string(dtype)) + ".h5";
    datasets::write_store(data, dir / name, dtype);
    std::vector<float> rounded = data.features;
    datasets::round_features(rounded.data(), static_cast<std::int64_t>(rounded.size()), dtype);
    ASSERT_NE(rounded, data.features);
    const auto back = datasets::read_store(dir / name);
    EXPECT_EQ(back.features, rounded) << name;
    EXPECT_EQ(back.graph.indices, data.graph.indices);
    EXPECT_EQ(datasets::read_store_info(dir / name).feature_dtype, dtype);
    const std::int64_t f = data.feature_dim;
    const auto rows = datasets::read_feature_rows(dir / name, 17, 420);
    EXPECT_EQ(rows, std::vector<float>(rounded.begin() + 17 * f, rounded.begin() + 420 * f));
    datasets::check_store_features(dir / name);
    // Recorded as an HDF5 16-bit float type, 2 bytes a value.
    const auto file = h5::File::open_read(dir / name);
    EXPECT_EQ(file.feature_dtype("/node/feat"), dtype);
    std::vector<std::uint16_t> stored;
    file.read_rows_stored("/node/feat", 0, 1, stored);
    ASSERT_EQ(stored.size(), static_cast<std::size_t>(f));
    EXPECT_EQ(stored[0], dtype == FeatureDtype::float16 ? datasets::float_to_half(data.features[0])
                                                        : datasets::float_to_bfloat16(data.features[0]));
    EXPECT_LT(std::filesystem::file_size(dir / name), std::filesystem::file_size(dir / "f32.h5"));
  }
  EXPECT_EQ(datasets::read_store_info(dir / "f32.h5").feature_dtype, FeatureDtype::float32);
}

TEST(FeatureDtypeStore, AValueBeyondFloat16IsRefusedAndNoFileIsLeft) {
  test::TempDir dir;
  datasets::Dataset data = test::small_dataset(300);
  const std::int64_t f = data.feature_dim;
  data.features[static_cast<std::size_t>(123 * f + 1)] = 70000.0f;
  const std::string error = test::input_error(
      [&] { datasets::write_store(data, dir / "x.h5", FeatureDtype::float16); });
  EXPECT_NE(error.find("x.h5: /node/feat row 123 column 1 is 70000, beyond the largest float16 "
                       "(65504)"),
            std::string::npos)
      << error;
  EXPECT_TRUE(test::list_dir(dir.path()).empty());
  // bfloat16 holds it.
  datasets::write_store(data, dir / "x.h5", FeatureDtype::bfloat16);
  EXPECT_EQ(datasets::read_store(dir / "x.h5").features[static_cast<std::size_t>(123 * f + 1)],
            70144.0f); // 70000 rounded to bfloat16's 8 significant bits
}

} // namespace
} // namespace tessel
