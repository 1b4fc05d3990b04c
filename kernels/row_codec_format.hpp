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

// Round to nearest even; NaN stays a (quiet) NaN.
TESSEL_HD inline std::uint16_t f32_to_bf16(float v) {
  const std::uint32_t b = float_bits(v);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((b >> 16) | 0x40u);
  return static_cast<std::uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

TESSEL_HD inline float bf16_to_f32(std::uint16_t h) {
  return bits_float(static_cast<std::uint32_t>(h) << 16);
}

// IEEE binary16, round to nearest even, subnormals kept; finite values beyond 65504 saturate
// there (a halo row never turns infinite on the wire), infinities and NaN pass.
TESSEL_HD inline std::uint16_t f32_to_f16(float v) {
  const std::uint32_t b = float_bits(v);
  const std::uint32_t sign = (b >> 16) & 0x8000u, ax = b & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u);
  if (ax == 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7C00u);
  if (ax >= 0x477FE000u) return static_cast<std::uint16_t>(sign | 0x7BFFu);  // >= 65504
  if (ax < 0x38800000u) {  // below 2^-14: a subnormal half (or zero), in steps of 2^-24
    if (ax <= 0x33000000u) return static_cast<std::uint16_t>(sign);  // <= 2^-25 rounds to 0
    const std::uint32_t mantissa = (ax & 0x7FFFFFu) | 0x800000u;
    const int shift = 126 - static_cast<int>(ax >> 23);  // 14 .. 24
    std::uint32_t q = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (q & 1u))) ++q;
    return static_cast<std::uint16_t>(sign | q);
  }
  const std::uint32_t r = ax - 0x38000000u;  // exponent rebased from 127 to 15
  std::uint32_t q = r >> 13;
  const std::uint32_t rest = r & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (q & 1u))) ++q;
  return static_cast<std::uint16_t>(sign | q);
}

TESSEL_HD inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) return bits_float(sign | 0x7F800000u | (mantissa << 13));
  if (exponent != 0) return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  // Subnormal or zero: mantissa * 2^-24, exact in f32.
  const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
  return sign ? -magnitude : magnitude;
}

// int8: q = round half away from zero of x * (127 / max), clamped; decoded as q * (max / 127).
TESSEL_HD inline std::int8_t int8_code(float x, float inverse_scale) {
  float q = x * inverse_scale;
  q = q >= 0.0f ? q + 0.5f : q - 0.5f;
  q = q > 127.0f ? 127.0f : (q < -127.0f ? -127.0f : q);
  return static_cast<std::int8_t>(static_cast<int>(q));  // truncation toward zero
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
TESSEL_HD inline void encode_row(RowCodec codec, const float* x, std::int64_t f,
                                 std::uint8_t* out) {
  if (codec == RowCodec::f32) {
    std::memcpy(out, x, static_cast<std::size_t>(4 * f));
  } else if (codec == RowCodec::bf16 || codec == RowCodec::f16) {
    for (std::int64_t j = 0; j < f; ++j) {
      const std::uint16_t h = codec == RowCodec::bf16 ? f32_to_bf16(x[j]) : f32_to_f16(x[j]);
      std::memcpy(out + 2 * j, &h, 2);
    }
  } else {
    // A row with a NaN or an infinity decodes to NaN everywhere (scale NaN, codes 0), so a
    // non-finite value still reaches the loss as one.
    float max = 0.0f;
    bool finite = true;
    for (std::int64_t j = 0; j < f; ++j) {
      const float a = x[j] < 0.0f ? -x[j] : x[j];
      if (!(a <= 3.4028234663852886e+38f)) finite = false;
      else if (a > max) max = a;
    }
    const float scale = finite ? max / 127.0f : bits_float(0x7FC00000u);
    std::memcpy(out, &scale, 4);
    auto* codes = reinterpret_cast<std::int8_t*>(out + 4);
    const float inverse = finite && max > 0.0f ? 127.0f / max : 0.0f;
    for (std::int64_t j = 0; j < f; ++j) codes[j] = finite ? int8_code(x[j], inverse) : 0;
    for (std::int64_t j = f; j < (f + 3) / 4 * 4; ++j) codes[j] = 0;
  }
}

// One row back: in (codec_row_bytes bytes) -> y (f floats).
TESSEL_HD inline void decode_row(RowCodec codec, const std::uint8_t* in, std::int64_t f,
                                 float* y) {
  if (codec == RowCodec::f32) {
    std::memcpy(y, in, static_cast<std::size_t>(4 * f));
  } else if (codec == RowCodec::bf16 || codec == RowCodec::f16) {
    for (std::int64_t j = 0; j < f; ++j) {
      std::uint16_t h;
      std::memcpy(&h, in + 2 * j, 2);
      y[j] = codec == RowCodec::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
  } else {
    float scale;
    std::memcpy(&scale, in, 4);
    const auto* codes = reinterpret_cast<const std::int8_t*>(in + 4);
    for (std::int64_t j = 0; j < f; ++j) y[j] = static_cast<float>(codes[j]) * scale;
  }
}

}  // namespace tessel::kernels::detail
