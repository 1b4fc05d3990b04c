// CPU twins of dropout and ReLU + dropout, their keep bits drawn in vector registers.
#include "cpu_ops.hpp"

#include "../dropout_draw.hpp"

#include "tessel/core/error.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <cstring>

// On x86-64 the kernels are compiled for AVX-512 and AVX2 besides the portable code, and the
// widest the CPU has is picked at run time: target attributes on free functions and a dispatch
// by hand, which GCC and clang both build (target_clones on a member links with GCC only).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TESSEL_DROPOUT_X86 1
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
// GCC 12's AVX-512 intrinsics hand _mm512_undefined_epi32() (a self-initialized variable) to the
// masked builtins, which -Wmaybe-uninitialized flags wherever they are inlined (fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#define TESSEL_AVX512 __attribute__((target("avx512f,avx512bw")))
#define TESSEL_AVX2 __attribute__((target("avx2")))
#else
#define TESSEL_DROPOUT_X86 0
#endif

namespace tessel::kernels::cpu {

namespace {

static_assert(std::endian::native == std::endian::little, "mask bytes assume little-endian");
static_assert(detail::kDropoutColumnsPerBlock == 8, "one mask byte per Philox block");

// One call's constants: the key is derived once per call, not per row.
struct Draw {
  std::int64_t f = 0;
  const float* x = nullptr;
  const NodeId* row_ids = nullptr;    // unread when !draw
  rng::Key source;                    // for its counters (Key::counter)
  std::array<std::uint32_t, 2> key{}; // source.philox_key()
  // Philox's key words at each of the 10 rounds, zero-extended to the 64-bit lanes the vector
  // paths hold a counter's words in: scalars to broadcast (AVX-512) and 4 lanes' worth (AVX2).
  std::uint64_t round_keys[2][10] = {};
  alignas(32) std::uint64_t round_key_lanes[10][2][4] = {};
  std::uint32_t threshold = 0; // keep iff draw16 >= threshold
  bool draw = true;            // false when p == 0: every element kept, no Philox
  float keep_scale = 1.0f;
  float* y = nullptr;
  std::uint8_t* bits = nullptr; // null: not written
};

// Rows [begin, end) of a forward; kRelu: y = dropout(relu(x)) and bits = (y > 0).
using ForwardRows = void (*)(const Draw&, std::int64_t begin, std::int64_t end);
// Elements [0, count) of a backward whose bits are consecutive (bit e of bits is element e).
using BackwardSpan = void (*)(std::int64_t count, const float* grad_y, const std::uint8_t* bits,
                              float keep_scale, float* grad_x);

// ---- Portable: one Philox block at a time, the reference the vector paths must equal. ----

template <bool kRelu>
void dropout_rows_portable(const Draw& call, std::int64_t begin, std::int64_t end) {
  const Draw d = call; // a local copy: the byte stores below cannot alias it
  const std::int64_t f = d.f, row_bytes = detail::dropout_mask_row_bytes(f);
  for (std::int64_t i = begin; i < end; ++i) {
    const auto node = d.draw ? static_cast<std::uint64_t>(d.row_ids[i]) : 0;
    const float* xr = d.x + i * f;
    float* yr = d.y + i * f;
    for (std::int64_t g = 0; g < row_bytes; ++g) {
      std::uint32_t keep = 0xFFu;
      if (d.draw) {
        const auto words =
            rng::philox4x32(d.source.counter(node, static_cast<std::uint32_t>(g)), d.key);
        keep = detail::dropout_keep_byte(words.data(), d.threshold);
      }
      const std::int64_t j0 = 8 * g, width = std::min<std::int64_t>(8, f - j0);
      std::uint32_t out = 0;
      for (std::int64_t k = 0; k < width; ++k) {
        const float v = xr[j0 + k];
        const bool kept = ((keep >> k) & 1u) && (!kRelu || v > 0.0f);
        yr[j0 + k] = kept ? v * d.keep_scale : 0.0f;
        out |= (kept ? 1u : 0u) << k;
      }
      if (d.bits) d.bits[i * row_bytes + g] = static_cast<std::uint8_t>(out);
    }
  }
}

void dropout_grad_portable(std::int64_t count, const float* grad_y, const std::uint8_t* bits,
                           float keep_scale, float* grad_x) {
  for (std::int64_t e = 0; e < count; ++e) {
    // Cleared elements become +0 through a bit mask (also when grad_y is not finite): a
    // select on the bit compiles to a branch, which mispredicts on half of the elements.
    const float g = grad_y[e] * keep_scale;
    const std::uint32_t keep_bits = 0u - ((bits[e >> 3] >> (e & 7)) & 1u);
    grad_x[e] = std::bit_cast<float>(std::bit_cast<std::uint32_t>(g) & keep_bits);
  }
}

#if TESSEL_DROPOUT_X86

// ---- AVX-512: 16 Philox counters in two registers of 8 64-bit lanes. ----

// Ten Philox4x32 rounds on two sets of 8 counters (a and b, interleaved for the latency of
// vpmuludq), word w of each counter in the low half of a 64-bit lane of c[w]: vpmuludq then
// gives the 32x32 -> 64-bit products directly. The high halves of c[1] and c[3] (the products'
// low words) carry junk, which vpmuludq and the packing into 32-bit lanes ignore.
TESSEL_AVX512 inline void philox_avx512(__m512i (&a)[4], __m512i (&b)[4], const Draw& d) {
  const __m512i m0 = _mm512_set1_epi64(0xD2511F53), m1 = _mm512_set1_epi64(0xCD9E8D57);
  for (int round = 0; round < 10; ++round) {
    const __m512i k0 = _mm512_set1_epi64(d.round_keys[0][round]);
    const __m512i k1 = _mm512_set1_epi64(d.round_keys[1][round]);
    const __m512i pa0 = _mm512_mul_epu32(a[0], m0), pa1 = _mm512_mul_epu32(a[2], m1);
    const __m512i pb0 = _mm512_mul_epu32(b[0], m0), pb1 = _mm512_mul_epu32(b[2], m1);
    // 0x96: three-way xor.
    a[0] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(pa1, 32), a[1], k0, 0x96);
    a[2] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(pa0, 32), a[3], k1, 0x96);
    b[0] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(pb1, 32), b[1], k0, 0x96);
    b[2] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(pb0, 32), b[3], k1, 0x96);
    a[1] = pa1;
    a[3] = pa0;
    b[1] = pb1;
    b[3] = pb0;
  }
}

// Word w of 16 counters as 32-bit lanes: a's counters at the even lanes, b's at the odd ones.
TESSEL_AVX512 inline __m512i pack_avx512(__m512i a, __m512i b) {
  return _mm512_mask_blend_epi32(0xAAAA, a, _mm512_slli_epi64(b, 32));
}

// The keep bits of blocks first .. first + 15 of `node`: bit 8b + k of keep[b / 4] for column
// k of block first + 4 (b / 4) + b % 4, i.e. each keep[s / 2] >> 16 (s % 2) is the __mmask16 of
// columns 16s .. 16s + 15 of the 128. After packing, 32-bit lane p holds block
// first + 4 (p % 4) + p / 4; the 4x4 transposes inside each 128-bit lane then leave one block's
// four words — its 8 draws in column order — per 128-bit lane, blocks in order across the four
// results, so each 16-bit compare mask is 4 keep bytes in place.
TESSEL_AVX512 inline void keep_bits_avx512(const Draw& d, std::uint64_t node, std::uint32_t first,
                                           __mmask32 (&keep)[4]) {
  const __m512i node_lo = _mm512_set1_epi64(static_cast<std::uint32_t>(node));
  const __m512i node_hi = _mm512_set1_epi64(static_cast<std::uint32_t>(node >> 32));
  const __m512i step = _mm512_set1_epi64(d.source.step), base = _mm512_set1_epi64(first);
  // a: the even 32-bit lanes p = 2q of the layout above, b: the odd ones.
  __m512i a[4] = {node_lo, node_hi,
                  _mm512_add_epi64(base, _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11)), step};
  __m512i b[4] = {node_lo, node_hi,
                  _mm512_add_epi64(base, _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15)), step};
  philox_avx512(a, b, d);
  const __m512i w0 = pack_avx512(a[0], b[0]), w1 = pack_avx512(a[1], b[1]);
  const __m512i w2 = pack_avx512(a[2], b[2]), w3 = pack_avx512(a[3], b[3]);
  const __m512i t0 = _mm512_unpacklo_epi32(w0, w1), t1 = _mm512_unpacklo_epi32(w2, w3);
  const __m512i t2 = _mm512_unpackhi_epi32(w0, w1), t3 = _mm512_unpackhi_epi32(w2, w3);
  const __m512i threshold = _mm512_set1_epi16(static_cast<short>(d.threshold));
  keep[0] = _mm512_cmpge_epu16_mask(_mm512_unpacklo_epi64(t0, t1), threshold);
  keep[1] = _mm512_cmpge_epu16_mask(_mm512_unpackhi_epi64(t0, t1), threshold);
  keep[2] = _mm512_cmpge_epu16_mask(_mm512_unpacklo_epi64(t2, t3), threshold);
  keep[3] = _mm512_cmpge_epu16_mask(_mm512_unpackhi_epi64(t2, t3), threshold);
}

// A row in steps of 128 columns (16 blocks, one Philox pass), each applied as 8 masked
// multiplies whose __mmask16 is 2 keep bytes, stored as the mask's 2 bytes; the row's last
// partial step through masked loads and stores.
template <bool kRelu>
TESSEL_AVX512 void dropout_rows_avx512(const Draw& call, std::int64_t begin, std::int64_t end) {
  const Draw d = call; // a local copy: the byte stores below cannot alias it
  const std::int64_t f = d.f, row_bytes = detail::dropout_mask_row_bytes(f);
  const __m512 scale = _mm512_set1_ps(d.keep_scale), zero = _mm512_setzero_ps();
  for (std::int64_t i = begin; i < end; ++i) {
    const auto node = d.draw ? static_cast<std::uint64_t>(d.row_ids[i]) : 0;
    const float* xr = d.x + i * f;
    float* yr = d.y + i * f;
    std::uint8_t* br = d.bits ? d.bits + i * row_bytes : nullptr;
    for (std::int64_t j0 = 0; j0 < f; j0 += 128) {
      __mmask32 keep[4] = {~0u, ~0u, ~0u, ~0u};
      if (d.draw) keep_bits_avx512(d, node, static_cast<std::uint32_t>(j0 / 8), keep);
      if (j0 + 128 <= f) {
#pragma GCC unroll 8
        for (int s = 0; s < 8; ++s) {
          const std::int64_t j = j0 + 16 * s;
          auto m = static_cast<__mmask16>(keep[s / 2] >> (16 * (s % 2)));
          const __m512 v = _mm512_loadu_ps(xr + j);
          if constexpr (kRelu) m = _mm512_mask_cmp_ps_mask(m, v, zero, _CMP_GT_OQ);
          _mm512_storeu_ps(yr + j, _mm512_maskz_mul_ps(m, v, scale));
          if (br) std::memcpy(br + j / 8, &m, 2);
        }
        continue;
      }
      for (int s = 0; s < 8 && j0 + 16 * s < f; ++s) {
        const std::int64_t j = j0 + 16 * s, width = std::min<std::int64_t>(16, f - j);
        const auto in_row = static_cast<__mmask16>((1u << width) - 1u);
        auto m = static_cast<__mmask16>((keep[s / 2] >> (16 * (s % 2))) & in_row);
        const __m512 v = _mm512_maskz_loadu_ps(in_row, xr + j);
        if constexpr (kRelu) m = _mm512_mask_cmp_ps_mask(m, v, zero, _CMP_GT_OQ);
        _mm512_mask_storeu_ps(yr + j, in_row, _mm512_maskz_mul_ps(m, v, scale));
        if (br) std::memcpy(br + j / 8, &m, static_cast<std::size_t>((width + 7) / 8));
      }
    }
  }
}

TESSEL_AVX512 void dropout_grad_avx512(std::int64_t count, const float* grad_y,
                                       const std::uint8_t* bits, float keep_scale, float* grad_x) {
  const __m512 scale = _mm512_set1_ps(keep_scale);
  std::int64_t e = 0;
  for (; e + 16 <= count; e += 16) {
    __mmask16 m;
    std::memcpy(&m, bits + e / 8, 2);
    _mm512_storeu_ps(grad_x + e, _mm512_maskz_mul_ps(m, _mm512_loadu_ps(grad_y + e), scale));
  }
  if (e < count) {
    const auto in_span = static_cast<__mmask16>((1u << (count - e)) - 1u);
    __mmask16 m = 0;
    std::memcpy(&m, bits + e / 8, static_cast<std::size_t>((count - e + 7) / 8));
    m &= in_span;
    _mm512_mask_storeu_ps(
        grad_x + e, in_span,
        _mm512_maskz_mul_ps(m, _mm512_maskz_loadu_ps(in_span, grad_y + e), scale));
  }
}

// ---- AVX2: 8 Philox counters in two registers of 4 64-bit lanes. ----

// As philox_avx512, on two sets of 4 counters. The round keys are read as whole registers
// (AVX2 has no broadcast operand).
TESSEL_AVX2 inline void philox_avx2(__m256i (&a)[4], __m256i (&b)[4], const Draw& d) {
  const __m256i m0 = _mm256_set1_epi64x(0xD2511F53), m1 = _mm256_set1_epi64x(0xCD9E8D57);
  for (int round = 0; round < 10; ++round) {
    const __m256i k0 =
        _mm256_load_si256(reinterpret_cast<const __m256i*>(d.round_key_lanes[round][0]));
    const __m256i k1 =
        _mm256_load_si256(reinterpret_cast<const __m256i*>(d.round_key_lanes[round][1]));
    const __m256i pa0 = _mm256_mul_epu32(a[0], m0), pa1 = _mm256_mul_epu32(a[2], m1);
    const __m256i pb0 = _mm256_mul_epu32(b[0], m0), pb1 = _mm256_mul_epu32(b[2], m1);
    a[0] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(pa1, 32), a[1]), k0);
    a[2] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(pa0, 32), a[3]), k1);
    b[0] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(pb1, 32), b[1]), k0);
    b[2] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(pb0, 32), b[3]), k1);
    a[1] = pa1;
    a[3] = pa0;
    b[1] = pb1;
    b[3] = pb0;
  }
}

TESSEL_AVX2 inline __m256i pack_avx2(__m256i a, __m256i b) {
  return _mm256_blend_epi32(a, _mm256_slli_epi64(b, 32), 0xAA);
}

// All ones in the 16-bit lanes whose draw is kept. AVX2 has no unsigned 16-bit compare:
// draw >= threshold iff max(draw, threshold) == draw.
TESSEL_AVX2 inline __m256i kept_avx2(__m256i draws, __m256i threshold) {
  return _mm256_cmpeq_epi16(_mm256_max_epu16(draws, threshold), draws);
}

// The keep flags of blocks first .. first + 7 of `node` as 16-bit lanes, all ones = kept:
// block first + b is one 128-bit half of keep[(b % 2) + 2 (b / 4)] (the upper half iff
// b / 2 is odd), its 8 columns in order. The transposes leave one block per 128-bit half
// (keep[j]'s half i is 32-bit lane 4i + j of the packed words); 32-bit lane p holds block
// first + {0,1,4,5,2,3,6,7}[p], which makes vpacksswb of keep[0], keep[1] (and of keep[2],
// keep[3]) interleave the halves back into block order for keep_bytes_avx2.
TESSEL_AVX2 inline void keep_lanes_avx2(const Draw& d, std::uint64_t node, std::uint32_t first,
                                        __m256i (&keep)[4]) {
  const __m256i node_lo = _mm256_set1_epi64x(static_cast<std::uint32_t>(node));
  const __m256i node_hi = _mm256_set1_epi64x(static_cast<std::uint32_t>(node >> 32));
  const __m256i step = _mm256_set1_epi64x(d.source.step), base = _mm256_set1_epi64x(first);
  __m256i a[4] = {node_lo, node_hi, _mm256_add_epi64(base, _mm256_setr_epi64x(0, 4, 2, 6)), step};
  __m256i b[4] = {node_lo, node_hi, _mm256_add_epi64(base, _mm256_setr_epi64x(1, 5, 3, 7)), step};
  philox_avx2(a, b, d);
  const __m256i w0 = pack_avx2(a[0], b[0]), w1 = pack_avx2(a[1], b[1]);
  const __m256i w2 = pack_avx2(a[2], b[2]), w3 = pack_avx2(a[3], b[3]);
  const __m256i t0 = _mm256_unpacklo_epi32(w0, w1), t1 = _mm256_unpacklo_epi32(w2, w3);
  const __m256i t2 = _mm256_unpackhi_epi32(w0, w1), t3 = _mm256_unpackhi_epi32(w2, w3);
  const __m256i threshold = _mm256_set1_epi16(static_cast<short>(d.threshold));
  keep[0] = kept_avx2(_mm256_unpacklo_epi64(t0, t1), threshold);
  keep[1] = kept_avx2(_mm256_unpackhi_epi64(t0, t1), threshold);
  keep[2] = kept_avx2(_mm256_unpacklo_epi64(t2, t3), threshold);
  keep[3] = kept_avx2(_mm256_unpackhi_epi64(t2, t3), threshold);
}

// The 8 keep bytes of keep_lanes_avx2's blocks, byte b for block first + b.
TESSEL_AVX2 inline std::uint64_t keep_bytes_avx2(const __m256i (&keep)[4]) {
  const auto low =
      static_cast<std::uint32_t>(_mm256_movemask_epi8(_mm256_packs_epi16(keep[0], keep[1])));
  const auto high =
      static_cast<std::uint32_t>(_mm256_movemask_epi8(_mm256_packs_epi16(keep[2], keep[3])));
  return low | (static_cast<std::uint64_t>(high) << 32);
}

// Block b's keep flags widened to the 8 float lanes of its columns.
TESSEL_AVX2 inline __m256 block_lanes_avx2(const __m256i (&keep)[4], int b) {
  const __m256i k = keep[(b % 2) + 2 * (b / 4)];
  const __m128i half = (b / 2) % 2 ? _mm256_extracti128_si256(k, 1) : _mm256_castsi256_si128(k);
  return _mm256_castsi256_ps(_mm256_cvtepi16_epi32(half));
}

// Lane k of the result is all ones iff bit k of `byte` is set.
TESSEL_AVX2 inline __m256 lanes_of_byte(std::uint32_t byte) {
  const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_castsi256_ps(_mm256_cmpeq_epi32(
      _mm256_and_si256(_mm256_set1_epi32(static_cast<int>(byte)), lane_bit), lane_bit));
}

// A row in steps of 64 columns (8 blocks, one Philox pass), applied 8 columns at a time with
// the keep flags widened to float lanes; the row's last partial step from the keep bytes, its
// last partial byte element by element.
template <bool kRelu>
TESSEL_AVX2 void dropout_rows_avx2(const Draw& call, std::int64_t begin, std::int64_t end) {
  const Draw d = call; // a local copy: the byte stores below cannot alias it
  const std::int64_t f = d.f, row_bytes = detail::dropout_mask_row_bytes(f);
  const __m256 scale = _mm256_set1_ps(d.keep_scale), zero = _mm256_setzero_ps();
  const __m256i all = _mm256_set1_epi32(-1);
  for (std::int64_t i = begin; i < end; ++i) {
    const auto node = d.draw ? static_cast<std::uint64_t>(d.row_ids[i]) : 0;
    const float* xr = d.x + i * f;
    float* yr = d.y + i * f;
    std::uint8_t* br = d.bits ? d.bits + i * row_bytes : nullptr;
    for (std::int64_t j0 = 0; j0 < f; j0 += 64) {
      __m256i keep[4] = {all, all, all, all};
      if (d.draw) keep_lanes_avx2(d, node, static_cast<std::uint32_t>(j0 / 8), keep);
      if (j0 + 64 <= f) {
        std::uint64_t out = 0;
#pragma GCC unroll 8
        for (int b = 0; b < 8; ++b) {
          const std::int64_t j = j0 + 8 * b;
          const __m256 v = _mm256_loadu_ps(xr + j);
          __m256 lanes = block_lanes_avx2(keep, b);
          if constexpr (kRelu) {
            lanes = _mm256_and_ps(lanes, _mm256_cmp_ps(v, zero, _CMP_GT_OQ));
            out |= static_cast<std::uint64_t>(_mm256_movemask_ps(lanes)) << (8 * b);
          }
          _mm256_storeu_ps(yr + j, _mm256_and_ps(_mm256_mul_ps(v, scale), lanes));
        }
        if (br) {
          if constexpr (!kRelu) out = keep_bytes_avx2(keep);
          std::memcpy(br + j0 / 8, &out, 8);
        }
        continue;
      }
      const std::uint64_t keep_bytes = keep_bytes_avx2(keep);
      for (int b = 0; b < 8 && j0 + 8 * b < f; ++b) {
        const std::int64_t j = j0 + 8 * b;
        auto byte = static_cast<std::uint32_t>(keep_bytes >> (8 * b)) & 0xFFu;
        if (j + 8 <= f) {
          const __m256 v = _mm256_loadu_ps(xr + j);
          __m256 lanes = lanes_of_byte(byte);
          if constexpr (kRelu) {
            lanes = _mm256_and_ps(lanes, _mm256_cmp_ps(v, zero, _CMP_GT_OQ));
            byte = static_cast<std::uint32_t>(_mm256_movemask_ps(lanes));
          }
          _mm256_storeu_ps(yr + j, _mm256_and_ps(_mm256_mul_ps(v, scale), lanes));
          if (br) br[j / 8] = static_cast<std::uint8_t>(byte);
        } else {
          std::uint32_t out = 0;
          for (std::int64_t k = 0; k < f - j; ++k) {
            const float v = xr[j + k];
            const bool kept = ((byte >> k) & 1u) && (!kRelu || v > 0.0f);
            yr[j + k] = kept ? v * d.keep_scale : 0.0f;
            out |= (kept ? 1u : 0u) << k;
          }
          if (br) br[j / 8] = static_cast<std::uint8_t>(out);
        }
      }
    }
  }
}

TESSEL_AVX2 void dropout_grad_avx2(std::int64_t count, const float* grad_y,
                                   const std::uint8_t* bits, float keep_scale, float* grad_x) {
  const __m256 scale = _mm256_set1_ps(keep_scale);
  std::int64_t e = 0;
  for (; e + 8 <= count; e += 8)
    _mm256_storeu_ps(grad_x + e, _mm256_and_ps(_mm256_mul_ps(_mm256_loadu_ps(grad_y + e), scale),
                                               lanes_of_byte(bits[e / 8])));
  // The partial last byte: the portable loop on the elements left (their bits start at a byte).
  if (e < count) dropout_grad_portable(count - e, grad_y + e, bits + e / 8, keep_scale, grad_x + e);
}

#endif // TESSEL_DROPOUT_X86

CpuIsa best_isa() {
#if TESSEL_DROPOUT_X86
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2")) return CpuIsa::portable;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
    return CpuIsa::avx512;
  return CpuIsa::avx2;
#else
  return CpuIsa::portable;
#endif
}

// The best ISA, lowered by TESSEL_CPU_ISA (the variable the SpMM reads too); then whatever
// set_dropout_isa chose.
std::atomic<CpuIsa>& selected_isa() {
  static std::atomic<CpuIsa> isa{[] {
    const CpuIsa best = best_isa();
    const char* requested = std::getenv("TESSEL_CPU_ISA");
    if (requested && std::strcmp(requested, "sse") == 0) return CpuIsa::portable;
    if (requested && std::strcmp(requested, "avx2") == 0 && best != CpuIsa::portable)
      return CpuIsa::avx2;
    return best;
  }()};
  return isa;
}

template <bool kRelu> ForwardRows dropout_rows(CpuIsa isa) {
#if TESSEL_DROPOUT_X86
  if (isa == CpuIsa::avx512) return dropout_rows_avx512<kRelu>;
  if (isa == CpuIsa::avx2) return dropout_rows_avx2<kRelu>;
#endif
  (void)isa;
  return dropout_rows_portable<kRelu>;
}

BackwardSpan dropout_grad(CpuIsa isa) {
#if TESSEL_DROPOUT_X86
  if (isa == CpuIsa::avx512) return dropout_grad_avx512;
  if (isa == CpuIsa::avx2) return dropout_grad_avx2;
#endif
  (void)isa;
  return dropout_grad_portable;
}

// Contiguous row ranges, one per thread (the rows are independent).
template <class Fn> void for_row_ranges(std::int64_t n, std::int64_t f, Fn&& fn) {
#pragma omp parallel if (parallel_worth(n * f))
  {
    const std::int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
    fn(n * t / threads, n * (t + 1) / threads);
  }
}

template <bool kRelu>
void forward(std::int64_t n, std::int64_t f, const float* x, const NodeId* row_ids,
             const rng::Key& key, float p, float* y, std::uint8_t* bits) {
  Draw d;
  d.f = f;
  d.x = x;
  d.row_ids = row_ids;
  d.source = key;
  d.key = key.philox_key();
  for (std::uint32_t round = 0; round < 10; ++round) {
    d.round_keys[0][round] = static_cast<std::uint32_t>(d.key[0] + round * 0x9E3779B9u);
    d.round_keys[1][round] = static_cast<std::uint32_t>(d.key[1] + round * 0xBB67AE85u);
    for (int w = 0; w < 2; ++w)
      std::fill_n(d.round_key_lanes[round][w], 4, d.round_keys[w][round]);
  }
  d.threshold = detail::dropout_threshold(p);
  d.draw = p > 0.0f;
  d.keep_scale = 1.0f / (1.0f - p);
  d.y = y;
  d.bits = bits;
  // A threshold of 65536 (p within 2^-17 of 1: nothing kept) does not fit the vector paths'
  // 16-bit compares; the portable path takes it.
  const ForwardRows rows =
      dropout_rows<kRelu>(d.threshold > 0xFFFFu ? CpuIsa::portable : dropout_isa());
  for_row_ranges(n, f, [&](std::int64_t begin, std::int64_t end) { rows(d, begin, end); });
}

} // namespace

void dropout_forward(std::int64_t n, std::int64_t f, const float* x, const NodeId* row_ids,
                     const rng::Key& key, float p, float* y, std::uint8_t* mask) {
  forward<false>(n, f, x, row_ids, key, p, y, mask);
}

void relu_dropout_forward(std::int64_t n, std::int64_t f, const float* x, const NodeId* row_ids,
                          const rng::Key& key, float p, float* y, std::uint8_t* bits) {
  forward<true>(n, f, x, row_ids, key, p, y, bits);
}

// The two backwards are one op: the gradient passes where the bit is set.
void relu_dropout_backward(std::int64_t n, std::int64_t f, const float* grad_y,
                           const std::uint8_t* bits, float p, float* grad_x) {
  const float keep_scale = 1.0f / (1.0f - p);
  const BackwardSpan span = dropout_grad(dropout_isa());
  const std::int64_t row_bytes = detail::dropout_mask_row_bytes(f);
  for_row_ranges(n, f, [&](std::int64_t begin, std::int64_t end) {
    if (f % 8 == 0) {
      // No padding bits: the range's bits are consecutive, one span for all its rows.
      span((end - begin) * f, grad_y + begin * f, bits + begin * row_bytes, keep_scale,
           grad_x + begin * f);
    } else {
      for (std::int64_t i = begin; i < end; ++i)
        span(f, grad_y + i * f, bits + i * row_bytes, keep_scale, grad_x + i * f);
    }
  });
}

void dropout_backward(std::int64_t n, std::int64_t f, const float* grad_y, const std::uint8_t* mask,
                      float p, float* grad_x) {
  relu_dropout_backward(n, f, grad_y, mask, p, grad_x);
}

bool isa_supported(CpuIsa isa) {
  static const CpuIsa best = best_isa();
  return static_cast<int>(isa) <= static_cast<int>(best);
}

CpuIsa dropout_isa() {
  return selected_isa().load(std::memory_order_relaxed);
}

void set_dropout_isa(CpuIsa isa) {
  TESSEL_EXPECTS(isa_supported(isa), "set_cpu_dropout_isa: this CPU has no {}", cpu_isa_name(isa));
  selected_isa().store(isa, std::memory_order_relaxed);
}

} // namespace tessel::kernels::cpu
