// The value conversions of the row codecs, shared by the CPU and CUDA twins so both write the
// same bytes.
#pragma once

#include "tessel/core/types.hpp"
#include "tessel/kernels/row_codec.hpp"

#include <cstdint>
#include <cstring>

namespace tessel::kernels::detail {

TESSEL_HD inline std::uint32_t float_bits(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

TESSEL_HD inline float bits_float(std::uint32_t b) {
  float v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

// The conversions are written without branches (selects only), so that the row loops below
// vectorize on the CPU and run without divergence on the GPU.

// Round to nearest even; NaN stays a (quiet) NaN.
TESSEL_HD inline std::uint16_t f32_to_bf16(float v) {
  const std::uint32_t b = float_bits(v);
  const std::uint32_t rounded = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
  const std::uint32_t nan = (b >> 16) | 0x40u;
  return static_cast<std::uint16_t>((b & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}

TESSEL_HD inline float bf16_to_f32(std::uint16_t h) {
  return bits_float(static_cast<std::uint32_t>(h) << 16);
}

// IEEE binary16, round to nearest even, subnormals kept; finite values beyond 65504 saturate
// there (a halo row never turns infinite on the wire), infinities and NaN pass.
TESSEL_HD inline std::uint16_t f32_to_f16(float v) {
  const std::uint32_t b = float_bits(v);
  const std::uint32_t sign = (b >> 16) & 0x8000u, ax = b & 0x7FFFFFFFu;
  // Normal halves: the exponent rebased from 127 to 15, 13 bits rounded off.
  const std::uint32_t r = ax - 0x38000000u;
  const std::uint32_t q = r >> 13, rest = r & 0x1FFFu;
  const std::uint32_t normal = q + ((rest > 0x1000u) | ((rest == 0x1000u) & q & 1u));
  // Below 2^-14: a subnormal half in steps of 2^-24 (the shift clamped where it is not used).
  const int raw_shift = 126 - static_cast<int>(ax >> 23);
  const auto shift =
      static_cast<std::uint32_t>(raw_shift < 14 ? 14 : (raw_shift > 24 ? 24 : raw_shift));
  const std::uint32_t mantissa = (ax & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t sq = mantissa >> shift, srest = mantissa & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  const std::uint32_t subnormal = sq + ((srest > half) | ((srest == half) & sq & 1u));
  std::uint32_t out = ax < 0x38800000u ? subnormal : normal;
  out = ax <= 0x33000000u ? 0u : out;            // at most 2^-25: rounds to 0
  out = ax >= 0x477FE000u ? 0x7BFFu : out;       // at least 65504: saturates
  out = ax == 0x7F800000u ? 0x7C00u : out;       // infinity
  out = ax > 0x7F800000u ? 0x7E00u : out;        // NaN
  return static_cast<std::uint16_t>(sign | out);
}

TESSEL_HD inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  const std::uint32_t normal = ((exponent + 112u) << 23) | (mantissa << 13);
  const std::uint32_t special = 0x7F800000u | (mantissa << 13);
  // Subnormal or zero: mantissa * 2^-24, exact in f32.
  const std::uint32_t subnormal =
      float_bits(static_cast<float>(mantissa) * 5.9604644775390625e-08f);
  const std::uint32_t magnitude =
      exponent == 0x1Fu ? special : (exponent == 0 ? subnormal : normal);
  return bits_float(sign | magnitude);
}

// int8: q = round half away from zero of x * (127 / max), clamped; decoded as q * (max / 127).
TESSEL_HD inline std::int8_t int8_code(float x, float inverse_scale) {
  const float q = x * inverse_scale;
  // + or - 0.5 by q's sign bit, then the clamp as min and max: no branch on the data.
  const float half = bits_float(0x3F000000u | (float_bits(q) & 0x80000000u));
  const int code = static_cast<int>(q + half);  // truncation toward zero; |q| <= 127 (1 + eps)
  return static_cast<std::int8_t>(code > 127 ? 127 : (code < -127 ? -127 : code));
}

// Bytes of a row of `f` values in `codec` (row_codec_bytes, usable on the device).
TESSEL_HD inline std::int64_t codec_row_bytes(RowCodec codec, std::int64_t f) {
  switch (codec) {
    case RowCodec::bf16:
    case RowCodec::f16: return 2 * f;
    case RowCodec::int8: return 4 + (f + 3) / 4 * 4;
    default: return 4 * f;
  }
}

// One row: x (f floats) -> out (codec_row_bytes(codec, f) bytes; 4-byte aligned).
TESSEL_HD inline void encode_row(RowCodec codec, const float* __restrict__ x, std::int64_t f,
                                 std::uint8_t* __restrict__ out) {
  if (codec == RowCodec::f32) {
    std::memcpy(out, x, static_cast<std::size_t>(4 * f));
  } else if (codec == RowCodec::bf16 || codec == RowCodec::f16) {
    auto* __restrict__ halves = reinterpret_cast<std::uint16_t*>(out);  // 2-byte aligned rows
    if (codec == RowCodec::bf16)
      for (std::int64_t j = 0; j < f; ++j) halves[j] = f32_to_bf16(x[j]);
    else
      for (std::int64_t j = 0; j < f; ++j) halves[j] = f32_to_f16(x[j]);
  } else {
    // A row with a NaN or an infinity decodes to NaN everywhere (scale NaN, codes 0), so a
    // non-finite value still reaches the loss as one. Magnitudes compare as their bit patterns
    // (an integer max, which vectorizes); NaN and infinity are the patterns above the largest
    // finite float.
    std::uint32_t top = 0;
    for (std::int64_t j = 0; j < f; ++j) {
      const std::uint32_t a = float_bits(x[j]) & 0x7FFFFFFFu;
      top = a > top ? a : top;
    }
    const bool finite = top <= 0x7F7FFFFFu;
    const float max = bits_float(top);
    const float scale = finite ? max / 127.0f : bits_float(0x7FC00000u);
    std::memcpy(out, &scale, 4);
    auto* __restrict__ codes = reinterpret_cast<std::int8_t*>(out + 4);
    const float inverse = finite && max > 0.0f ? 127.0f / max : 0.0f;
    if (finite)
      for (std::int64_t j = 0; j < f; ++j) codes[j] = int8_code(x[j], inverse);
    else
      for (std::int64_t j = 0; j < f; ++j) codes[j] = 0;
    for (std::int64_t j = f; j < (f + 3) / 4 * 4; ++j) codes[j] = 0;
  }
}

// One row back: in (codec_row_bytes bytes) -> y (f floats).
TESSEL_HD inline void decode_row(RowCodec codec, const std::uint8_t* __restrict__ in,
                                 std::int64_t f, float* __restrict__ y) {
  if (codec == RowCodec::f32) {
    std::memcpy(y, in, static_cast<std::size_t>(4 * f));
  } else if (codec == RowCodec::bf16 || codec == RowCodec::f16) {
    const auto* halves = reinterpret_cast<const std::uint16_t*>(in);
    if (codec == RowCodec::bf16)
      for (std::int64_t j = 0; j < f; ++j) y[j] = bf16_to_f32(halves[j]);
    else
      for (std::int64_t j = 0; j < f; ++j) y[j] = f16_to_f32(halves[j]);
  } else {
    float scale;
    std::memcpy(&scale, in, 4);
    const auto* codes = reinterpret_cast<const std::int8_t*>(in + 4);
    for (std::int64_t j = 0; j < f; ++j) y[j] = static_cast<float>(codes[j]) * scale;
  }
}

}  // namespace tessel::kernels::detail
