// How /node/feat is stored: float32, or 16-bit (IEEE binary16 "float16", or bfloat16) to halve
// disk and I/O. Readers always hand out float32; 16-bit values widen exactly.
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessel::datasets {

enum class FeatureDtype : std::uint8_t { float32, float16, bfloat16 };

// "float32", "float16", "bfloat16".
const char* to_string(FeatureDtype dtype);
// Parses one of the names above; anything else is an InputError naming `flag`.
FeatureDtype parse_feature_dtype(std::string_view text, std::string_view flag = "--feature-dtype");
// Bytes of one stored value (4 or 2).
inline std::int64_t stored_bytes(FeatureDtype dtype) {
  return dtype == FeatureDtype::float32 ? 4 : 2;
}
// The largest finite value the dtype holds.
double largest_finite(FeatureDtype dtype);

// float -> float16 bits, rounding to nearest even. Values beyond the largest float16 (65504)
// become infinity (the caller decides whether that is an error); values below the smallest
// normal become subnormals or zero; NaN stays NaN.
inline std::uint16_t float_to_half(float value) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) // infinity or NaN (NaN keeps its top payload bits and stays quiet)
    return static_cast<std::uint16_t>(sign | 0x7c00u |
                                      (x > 0x7f800000u ? 0x200u | ((x >> 13) & 0x3ffu) : 0u));
  if (x >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u); // rounds past 65504
  if (x < 0x38800000u) {
    // Below 2^-14: a subnormal (or zero). Adding 0.5f puts the value's units of 2^-24 in the
    // low mantissa bits, rounded to nearest even by the float addition itself.
    const float shifted = std::bit_cast<float>(x) + 0.5f;
    return static_cast<std::uint16_t>(sign | (std::bit_cast<std::uint32_t>(shifted) - 0x3f000000u));
  }
  const std::uint32_t odd = (x >> 13) & 1u;
  x += 0xc8000fffu + odd; // rebias the exponent (-112 << 23) and round to nearest even
  return static_cast<std::uint16_t>(sign | (x >> 13));
}

// float16 bits -> float (exact).
inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f; // exact: < 2^10 units
    return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// float -> bfloat16 bits, rounding to nearest even; beyond the largest bfloat16 -> infinity.
inline std::uint16_t float_to_bfloat16(float value) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// bfloat16 bits -> float (exact).
inline float bfloat16_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

// Narrows count values to the 16-bit dtype (rounding to nearest even). Returns the index of the
// first value that does not stay finite (an overflow to infinity, or a NaN or infinity in the
// input), or -1; every value is written either way.
std::int64_t narrow_features(const float* in, std::uint16_t* out, std::int64_t count,
                             FeatureDtype dtype);
// Widens count 16-bit values to float (exact).
void widen_features(const std::uint16_t* in, float* out, std::int64_t count, FeatureDtype dtype);
// Rounds count floats in place to the values the dtype would store (what a 16-bit store reads
// back as); returns narrow_features's index.
std::int64_t round_features(float* values, std::int64_t count, FeatureDtype dtype);

// The one-line error for a value that narrow_features refused: `what` names the file or the
// source, row and column the value's place.
[[noreturn]] void fail_not_representable(const std::string& what, std::int64_t row,
                                         std::int64_t column, float value, FeatureDtype dtype);

} // namespace tessel::datasets
