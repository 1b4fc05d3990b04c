// Feature storage dtypes: names and the float32 <-> float16/bfloat16 conversion kernels.
#include "tessel/datasets/feature_dtype.hpp"

#include "tessel/core/error.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>

namespace tessel::datasets {

const char* to_string(FeatureDtype dtype) {
  switch (dtype) {
  case FeatureDtype::float16: return "float16";
  case FeatureDtype::bfloat16: return "bfloat16";
  case FeatureDtype::float32: break;
  }
  return "float32";
}

FeatureDtype parse_feature_dtype(std::string_view text, std::string_view flag) {
  if (text == "float32") return FeatureDtype::float32;
  if (text == "float16") return FeatureDtype::float16;
  if (text == "bfloat16") return FeatureDtype::bfloat16;
  TESSEL_FAIL("{} {}: expected float32, float16 or bfloat16", flag, text);
}

double largest_finite(FeatureDtype dtype) {
  switch (dtype) {
  case FeatureDtype::float16: return 65504.0;
  case FeatureDtype::bfloat16: return static_cast<double>(bfloat16_to_float(0x7f7f));
  case FeatureDtype::float32: break;
  }
  return static_cast<double>(std::numeric_limits<float>::max());
}

namespace {

// Every float16 value as a float: widening is one table lookup (256 KiB, built once).
const float* half_table() {
  static const std::unique_ptr<float[]> table = [] {
    auto t = std::make_unique<float[]>(65536);
    for (std::uint32_t h = 0; h < 65536; ++h)
      t[h] = half_to_float(static_cast<std::uint16_t>(h));
    return t;
  }();
  return table.get();
}

bool finite_bits(std::uint16_t bits, FeatureDtype dtype) {
  return dtype == FeatureDtype::float16 ? (bits & 0x7c00u) != 0x7c00u
                                        : (bits & 0x7f80u) != 0x7f80u;
}

} // namespace

std::int64_t narrow_features(const float* in, std::uint16_t* out, std::int64_t count,
                             FeatureDtype dtype) {
  TESSEL_ASSERT(dtype != FeatureDtype::float32, "narrow_features: float32 is not narrowed");
  std::int64_t first = std::numeric_limits<std::int64_t>::max();
  if (dtype == FeatureDtype::float16) {
#pragma omp parallel for reduction(min : first) schedule(static) if (count > (1 << 18))
    for (std::int64_t i = 0; i < count; ++i) {
      out[i] = float_to_half(in[i]);
      if (!finite_bits(out[i], dtype)) first = std::min(first, i);
    }
  } else {
#pragma omp parallel for reduction(min : first) schedule(static) if (count > (1 << 18))
    for (std::int64_t i = 0; i < count; ++i) {
      out[i] = float_to_bfloat16(in[i]);
      if (!finite_bits(out[i], dtype)) first = std::min(first, i);
    }
  }
  return first == std::numeric_limits<std::int64_t>::max() ? -1 : first;
}

void widen_features(const std::uint16_t* in, float* out, std::int64_t count, FeatureDtype dtype) {
  TESSEL_ASSERT(dtype != FeatureDtype::float32, "widen_features: float32 is not widened");
  if (dtype == FeatureDtype::float16) {
    const float* table = half_table();
    for (std::int64_t i = 0; i < count; ++i)
      out[i] = table[in[i]];
  } else {
    for (std::int64_t i = 0; i < count; ++i)
      out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(in[i]) << 16);
  }
}

std::int64_t round_features(float* values, std::int64_t count, FeatureDtype dtype) {
  if (dtype == FeatureDtype::float32) return -1;
  std::int64_t first = -1;
  constexpr std::int64_t kBlock = 1 << 16;
  std::array<std::uint16_t, kBlock> bits{};
  for (std::int64_t at = 0; at < count; at += kBlock) {
    const std::int64_t n = std::min(kBlock, count - at);
    const std::int64_t bad = narrow_features(values + at, bits.data(), n, dtype);
    if (bad >= 0 && first < 0) first = at + bad;
    widen_features(bits.data(), values + at, n, dtype);
  }
  return first;
}

void fail_not_representable(const std::string& what, std::int64_t row, std::int64_t column,
                            float value, FeatureDtype dtype) {
  if (!std::isfinite(value))
    TESSEL_FAIL("{} row {} column {} is {}, expected a finite number", what, row, column, value);
  TESSEL_FAIL("{} row {} column {} is {}, beyond the largest {} ({}): store it as {}, or scale "
              "the features",
              what, row, column, value, to_string(dtype), largest_finite(dtype),
              dtype == FeatureDtype::float16 ? "bfloat16 or float32" : "float32");
}

} // namespace tessel::datasets
