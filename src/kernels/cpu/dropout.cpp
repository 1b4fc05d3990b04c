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
// masked builtins, which -Wmaybe-uninitialized (and -Wuninitialized, for the widening and
// narrowing moves) flags wherever they are inlined (fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
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
static_assert(detail::kDropoutChunkColumns == 128 && detail::kDropoutLevels == 16,
              "a unit is 128 columns, 4 words of 32 keep bits, 16 levels");

// One call's constants: the key is derived once per call, not per row. The work is cut in
// units, one per (row, 128-column chunk): unit u is chunk u % chunks of row u / chunks, and its
// keep bits are 4 words of 32 (detail::dropout_keep_word of words 4 (u % chunks) .. + 3).
struct Draw {
  std::int64_t f = 0;
  std::int64_t chunks = 0; // ceil(f / 128)
  const float* x = nullptr;
  const float* const* x_rows = nullptr; // set: row i is read at x_rows[i], not x + i f
  const std::int64_t* order = nullptr;  // set: position k of the loops is row order[k]
  const NodeId* row_ids = nullptr;      // unread when levels == 0
  rng::Key source;                      // for its counters (Key::counter)
  std::array<std::uint32_t, 2> key{};   // source.philox_key()
  // Philox's key words at each of the 10 rounds, zero-extended to the 64-bit lanes the vector
  // paths hold a counter's words in: scalars to broadcast (AVX-512) and 4 lanes' worth (AVX2).
  std::uint64_t round_keys[2][10] = {};
  alignas(32) std::uint64_t round_key_lanes[10][2][4] = {};
  std::uint32_t threshold = 0; // keep iff draw16 >= threshold
  int levels = 0;              // detail::dropout_levels(threshold); 0: no Philox at all
  std::uint32_t undrawn = ~0u; // the keep words when levels == 0: all kept (p == 0) or none
  float keep_scale = 1.0f;
  float* y = nullptr;
  std::uint8_t* bits = nullptr; // null: not written
};

// A unit's row and 128-column chunk. Rows of at most 128 columns (the usual widths) are one unit
// each: no division then, which the loops below would otherwise pay 2-3 times per unit.
struct UnitPlace {
  std::int64_t row;
  std::int64_t chunk;
};
[[gnu::always_inline]] inline UnitPlace place_of(const Draw& d, std::int64_t unit) {
  UnitPlace at = d.chunks == 1 ? UnitPlace{unit, 0} : UnitPlace{unit / d.chunks, unit % d.chunks};
  // A gather in read order: the draws, the source and the output row all follow the row, so
  // the order changes which row is done when, never what is written.
  if (d.order) at.row = d.order[at.row];
  return at;
}

// Rows [begin, end) of a forward; kRelu: y = dropout(relu(x)) and bits = (y > 0).
using ForwardRows = void (*)(const Draw&, std::int64_t begin, std::int64_t end);
// Elements [0, count) of a backward whose bits are consecutive (bit e of bits is element e).
using BackwardSpan = void (*)(std::int64_t count, const float* grad_y, const std::uint8_t* bits,
                              float keep_scale, float* grad_x);

// ---- Portable: one Philox block at a time, the reference the vector paths must equal. ----

// Unit `unit`'s 4 keep words: one Philox block per level, its 4 words the 4 words' levels.
void keep_words_portable(const Draw& d, std::int64_t unit, std::uint32_t (&keep)[4]) {
  std::uint32_t greater[4] = {}, equal[4] = {~0u, ~0u, ~0u, ~0u};
  if (d.levels == 0) std::fill_n(equal, 4, d.undrawn);
  const UnitPlace at = place_of(d, unit);
  const auto node = static_cast<std::uint64_t>(d.levels > 0 ? d.row_ids[at.row] : 0);
  const auto first = static_cast<std::uint32_t>(at.chunk * detail::kDropoutLevels);
  for (int s = 0; s < d.levels; ++s) {
    const auto words =
        rng::philox4x32(d.source.counter(node, first + static_cast<std::uint32_t>(s)), d.key);
    for (int k = 0; k < 4; ++k)
      detail::dropout_compare_level(d.threshold, s, words[k], greater[k], equal[k]);
  }
  for (int k = 0; k < 4; ++k)
    keep[k] = greater[k] | equal[k];
}

// Applies a unit's keep words to its columns, element by element.
template <bool kRelu>
void apply_portable(const Draw& d, std::int64_t unit, const std::uint32_t (&keep)[4]) {
  const UnitPlace at = place_of(d, unit);
  const std::int64_t row = at.row, j0 = at.chunk * detail::kDropoutChunkColumns;
  const std::int64_t width = std::min<std::int64_t>(detail::kDropoutChunkColumns, d.f - j0);
  const float* xr = (d.x_rows ? d.x_rows[row] : d.x + row * d.f) + j0;
  float* yr = d.y + row * d.f + j0;
  std::uint32_t out[4] = {};
  for (std::int64_t c = 0; c < width; ++c) {
    const float v = xr[c];
    const bool kept = ((keep[c / 32] >> (c % 32)) & 1u) && (!kRelu || v > 0.0f);
    yr[c] = kept ? v * d.keep_scale : 0.0f;
    out[c / 32] |= (kept ? 1u : 0u) << (c % 32);
  }
  if (d.bits)
    std::memcpy(d.bits + row * detail::dropout_mask_row_bytes(d.f) + j0 / 8, out,
                static_cast<std::size_t>((width + 7) / 8));
}

template <bool kRelu>
void dropout_rows_portable(const Draw& call, std::int64_t begin, std::int64_t end) {
  const Draw d = call; // a local copy: the byte stores below cannot alias it
  for (std::int64_t unit = begin * d.chunks; unit < end * d.chunks; ++unit) {
    std::uint32_t keep[4];
    keep_words_portable(d, unit, keep);
    apply_portable<kRelu>(d, unit, keep);
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

// A gather (x_rows set) reads rows from all over the feature matrix: each row waits on DRAM.
// The loops below prefetch the units kGatherAhead ahead of the one they draw for, so that many
// rows are in flight at once (without it, the draws between the loads keep the core from
// issuing the next rows' loads early: measured 2.5x slower than a plain row copy at one thread).
constexpr std::int64_t kGatherAhead = 8;

// The vector paths draw the keep words of a block of units, then apply them unit by unit: in a
// gather, draws between the rows' loads kept the core from issuing the next loads early (the
// fused gather ran 1.1x / 1.3x slower than a plain row copy on the AVX-512 / AVX2 path over 1M
// rows in DRAM), while a block's draws run as one burst, the first rows of the next block in
// flight meanwhile. 512 units of keep words are 8 KiB, held in L1.
constexpr std::int64_t kBlockUnits = 512;

// Prefetches `bytes` from `p`. Always inlined (and so its callers): GCC takes a function of
// nothing but prefetches for one without effects and drops its calls.
[[gnu::always_inline]] inline void prefetch_row(const void* p, std::size_t bytes) {
  for (std::size_t byte = 0; byte < bytes; byte += 64)
    __builtin_prefetch(static_cast<const char*>(p) + byte, 0, 3);
}

// Prefetches the columns of units [begin, end) (clipped to `last`) of a gather.
[[gnu::always_inline]] inline void prefetch_units(const Draw& d, std::int64_t begin,
                                                  std::int64_t end, std::int64_t last) {
  for (std::int64_t unit = begin; unit < std::min(end, last); ++unit) {
    const UnitPlace at = place_of(d, unit);
    const std::int64_t j0 = at.chunk * detail::kDropoutChunkColumns;
    const std::int64_t width = std::min<std::int64_t>(detail::kDropoutChunkColumns, d.f - j0);
    prefetch_row(d.x_rows[at.row] + j0, static_cast<std::size_t>(width) * sizeof(float));
  }
}

// The Philox counter words of units u0 .. u0 + lanes - 1, one lane each (lanes past the last of
// the `count` units repeat it): the node id's halves and the first level's block index.
struct UnitCounters {
  alignas(32) std::uint32_t lo[16];
  alignas(32) std::uint32_t hi[16];
  alignas(32) std::uint32_t first[16];
};

inline void unit_counters(const Draw& d, std::int64_t u0, int count, int lanes, UnitCounters& c) {
  for (int u = 0; u < lanes; ++u) {
    const std::int64_t unit = u0 + std::min(u, count - 1);
    const UnitPlace at = place_of(d, unit);
    const auto node = static_cast<std::uint64_t>(d.row_ids[at.row]);
    c.lo[u] = static_cast<std::uint32_t>(node);
    c.hi[u] = static_cast<std::uint32_t>(node >> 32);
    c.first[u] = static_cast<std::uint32_t>(at.chunk * detail::kDropoutLevels);
  }
}

#if TESSEL_DROPOUT_X86

// ---- AVX-512: 16 units at a time, their Philox counters in two registers of 8 64-bit lanes. ----

// Ten Philox4x32 rounds on two sets of 8 counters (a and b, interleaved for the latency of
// vpmuludq), word w of each counter in the low half of a 64-bit lane of c[w]: vpmuludq then
// gives the 32x32 -> 64-bit products directly. The high halves of c[1] and c[3] (the products'
// high words) carry junk, which vpmuludq and the final narrowing to 32-bit lanes ignore.
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

TESSEL_AVX512 inline __m512i widen_avx512(const std::uint32_t* p) {
  return _mm512_cvtepu32_epi64(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
}

// One level of the bit-sliced compare (detail::dropout_compare_level) on 8 lanes.
TESSEL_AVX512 inline void compare_level_avx512(bool threshold_bit, __m512i r, __m512i& greater,
                                               __m512i& equal) {
  if (threshold_bit) {
    equal = _mm512_and_si512(equal, r);
  } else {
    greater = _mm512_ternarylogic_epi64(greater, equal, r, 0xF8); // greater | (equal & r)
    equal = _mm512_andnot_si512(r, equal);
  }
}

// The keep words of units u0 .. u0 + 15 (those past u0 + count - 1 repeat the last one):
// keep[k][u] is word k of unit u0 + u. Lane u of a pass is unit u0 + u, and pass s is level s,
// so the compare runs on whole registers: no transposes.
TESSEL_AVX512 void keep_words_avx512(const Draw& d, std::int64_t u0, int count,
                                     std::uint32_t (&keep)[4][16]) {
  UnitCounters c;
  unit_counters(d, u0, count, 16, c);
  const __m512i lo_a = widen_avx512(c.lo), lo_b = widen_avx512(c.lo + 8);
  const __m512i hi_a = widen_avx512(c.hi), hi_b = widen_avx512(c.hi + 8);
  const __m512i first_a = widen_avx512(c.first), first_b = widen_avx512(c.first + 8);
  const __m512i step = _mm512_set1_epi64(d.source.step);
  __m512i greater_a[4], greater_b[4], equal_a[4], equal_b[4];
  for (int k = 0; k < 4; ++k) {
    greater_a[k] = greater_b[k] = _mm512_setzero_si512();
    equal_a[k] = equal_b[k] = _mm512_set1_epi64(-1);
  }
  for (int s = 0; s < d.levels; ++s) {
    const __m512i level = _mm512_set1_epi64(s);
    __m512i a[4] = {lo_a, hi_a, _mm512_add_epi64(first_a, level), step};
    __m512i b[4] = {lo_b, hi_b, _mm512_add_epi64(first_b, level), step};
    philox_avx512(a, b, d);
    const bool bit = (d.threshold >> (detail::kDropoutLevels - 1 - s)) & 1u;
    for (int k = 0; k < 4; ++k) {
      compare_level_avx512(bit, a[k], greater_a[k], equal_a[k]);
      compare_level_avx512(bit, b[k], greater_b[k], equal_b[k]);
    }
  }
  for (int k = 0; k < 4; ++k) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(keep[k]),
                       _mm512_cvtepi64_epi32(_mm512_or_si512(greater_a[k], equal_a[k])));
    _mm256_store_si256(reinterpret_cast<__m256i*>(keep[k] + 8),
                       _mm512_cvtepi64_epi32(_mm512_or_si512(greater_b[k], equal_b[k])));
  }
}

// Applies a unit's keep words to its columns, 16 at a time (masked multiplies whose __mmask16
// is 2 mask bytes), the chunk's last partial step through masked loads and stores.
template <bool kRelu>
TESSEL_AVX512 inline void apply_avx512(const Draw& d, std::int64_t unit,
                                       const std::uint32_t (&keep)[4]) {
  const UnitPlace at = place_of(d, unit);
  const std::int64_t row = at.row, j0 = at.chunk * detail::kDropoutChunkColumns;
  const std::int64_t width = std::min<std::int64_t>(detail::kDropoutChunkColumns, d.f - j0);
  const float* xr = (d.x_rows ? d.x_rows[row] : d.x + row * d.f) + j0;
  float* yr = d.y + row * d.f + j0;
  std::uint8_t* br = d.bits ? d.bits + row * detail::dropout_mask_row_bytes(d.f) + j0 / 8 : nullptr;
  const __m512 scale = _mm512_set1_ps(d.keep_scale), zero = _mm512_setzero_ps();
  if (width == detail::kDropoutChunkColumns) {
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      auto m = static_cast<__mmask16>(keep[s / 2] >> (16 * (s % 2)));
      const __m512 v = _mm512_loadu_ps(xr + 16 * s);
      if constexpr (kRelu) m = _mm512_mask_cmp_ps_mask(m, v, zero, _CMP_GT_OQ);
      _mm512_storeu_ps(yr + 16 * s, _mm512_maskz_mul_ps(m, v, scale));
      if (br) std::memcpy(br + 2 * s, &m, 2);
    }
    return;
  }
  for (int s = 0; 16 * s < width; ++s) {
    const std::int64_t w = std::min<std::int64_t>(16, width - 16 * s);
    const auto in_row = static_cast<__mmask16>((1u << w) - 1u);
    auto m = static_cast<__mmask16>((keep[s / 2] >> (16 * (s % 2))) & in_row);
    const __m512 v = _mm512_maskz_loadu_ps(in_row, xr + 16 * s);
    if constexpr (kRelu) m = _mm512_mask_cmp_ps_mask(m, v, zero, _CMP_GT_OQ);
    _mm512_mask_storeu_ps(yr + 16 * s, in_row, _mm512_maskz_mul_ps(m, v, scale));
    if (br) std::memcpy(br + 2 * s, &m, static_cast<std::size_t>((w + 7) / 8));
  }
}

template <bool kRelu>
TESSEL_AVX512 void dropout_rows_avx512(const Draw& call, std::int64_t begin, std::int64_t end) {
  const Draw d = call; // a local copy: the byte stores below cannot alias it
  alignas(64) std::uint32_t keep[kBlockUnits / 16][4][16];
  for (auto& group : keep)
    for (auto& word : group)
      std::fill_n(word, 16, d.undrawn);
  const std::int64_t last = end * d.chunks;
  if (d.x_rows) prefetch_units(d, begin * d.chunks, begin * d.chunks + kGatherAhead, last);
  for (std::int64_t block = begin * d.chunks; block < last; block += kBlockUnits) {
    const std::int64_t block_end = std::min(last, block + kBlockUnits);
    if (d.levels > 0)
      for (std::int64_t u0 = block; u0 < block_end; u0 += 16)
        keep_words_avx512(d, u0, static_cast<int>(std::min<std::int64_t>(16, block_end - u0)),
                          keep[(u0 - block) / 16]);
    for (std::int64_t unit = block; unit < block_end; ++unit) {
      if (d.x_rows) prefetch_units(d, unit + kGatherAhead, unit + kGatherAhead + 1, last);
      const auto& group = keep[(unit - block) / 16];
      const auto u = (unit - block) % 16;
      const std::uint32_t unit_keep[4] = {group[0][u], group[1][u], group[2][u], group[3][u]};
      apply_avx512<kRelu>(d, unit, unit_keep);
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

// ---- AVX2: 8 units at a time, their Philox counters in two registers of 4 64-bit lanes. ----

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

TESSEL_AVX2 inline __m256i widen_avx2(const std::uint32_t* p) {
  return _mm256_cvtepu32_epi64(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
}

// One level of the bit-sliced compare (detail::dropout_compare_level) on 4 lanes.
TESSEL_AVX2 inline void compare_level_avx2(bool threshold_bit, __m256i r, __m256i& greater,
                                           __m256i& equal) {
  if (threshold_bit) {
    equal = _mm256_and_si256(equal, r);
  } else {
    greater = _mm256_or_si256(greater, _mm256_and_si256(equal, r));
    equal = _mm256_andnot_si256(r, equal);
  }
}

// The low 32-bit halves of a's 4 lanes then of b's, in that order.
TESSEL_AVX2 inline __m256i narrow_avx2(__m256i a, __m256i b) {
  const __m256i interleaved = _mm256_blend_epi32(a, _mm256_slli_epi64(b, 32), 0xAA);
  return _mm256_permutevar8x32_epi32(interleaved, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
}

// As keep_words_avx512 for units u0 .. u0 + 7.
TESSEL_AVX2 void keep_words_avx2(const Draw& d, std::int64_t u0, int count,
                                 std::uint32_t (&keep)[4][8]) {
  UnitCounters c;
  unit_counters(d, u0, count, 8, c);
  const __m256i lo_a = widen_avx2(c.lo), lo_b = widen_avx2(c.lo + 4);
  const __m256i hi_a = widen_avx2(c.hi), hi_b = widen_avx2(c.hi + 4);
  const __m256i first_a = widen_avx2(c.first), first_b = widen_avx2(c.first + 4);
  const __m256i step = _mm256_set1_epi64x(d.source.step);
  __m256i greater_a[4], greater_b[4], equal_a[4], equal_b[4];
  for (int k = 0; k < 4; ++k) {
    greater_a[k] = greater_b[k] = _mm256_setzero_si256();
    equal_a[k] = equal_b[k] = _mm256_set1_epi64x(-1);
  }
  for (int s = 0; s < d.levels; ++s) {
    const __m256i level = _mm256_set1_epi64x(s);
    __m256i a[4] = {lo_a, hi_a, _mm256_add_epi64(first_a, level), step};
    __m256i b[4] = {lo_b, hi_b, _mm256_add_epi64(first_b, level), step};
    philox_avx2(a, b, d);
    const bool bit = (d.threshold >> (detail::kDropoutLevels - 1 - s)) & 1u;
    for (int k = 0; k < 4; ++k) {
      compare_level_avx2(bit, a[k], greater_a[k], equal_a[k]);
      compare_level_avx2(bit, b[k], greater_b[k], equal_b[k]);
    }
  }
  for (int k = 0; k < 4; ++k)
    _mm256_store_si256(reinterpret_cast<__m256i*>(keep[k]),
                       narrow_avx2(_mm256_or_si256(greater_a[k], equal_a[k]),
                                   _mm256_or_si256(greater_b[k], equal_b[k])));
}

// Lane k of the result is all ones iff bit 8 q + k of `word` is set, for `word` broadcast to
// every lane: a variable shift moves each lane's bit to its sign, an arithmetic shift spreads it
// (2 instructions per 8 columns, the broadcast shared by a word's 4 bytes).
TESSEL_AVX2 inline __m256 lanes_of_word_byte(__m256i word, int q) {
  const __m256i to_sign =
      _mm256_sub_epi32(_mm256_set1_epi32(31 - 8 * q), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_castsi256_ps(_mm256_srai_epi32(_mm256_sllv_epi32(word, to_sign), 31));
}

// Lane k of the result is all ones iff bit k of `byte` is set.
TESSEL_AVX2 inline __m256 lanes_of_byte(std::uint32_t byte) {
  return lanes_of_word_byte(_mm256_set1_epi32(static_cast<int>(byte)), 0);
}

// Columns 8 b .. 8 b + 7 of a unit, kept where `lanes` is all ones (and, with kRelu, x > 0);
// their keep bits go to byte b of `br` when it is set (`byte`, the keep bits as drawn, unless
// kRelu clears some). Everything comes in as values: `br` may alias any byte in memory.
template <bool kRelu>
TESSEL_AVX2 inline __attribute__((always_inline)) void
apply_byte_avx2(const float* xr, float* yr, std::uint8_t* br, std::int64_t b, __m256 lanes,
                std::uint32_t byte, __m256 scale) {
  const __m256 v = _mm256_loadu_ps(xr + 8 * b);
  if constexpr (kRelu)
    lanes = _mm256_and_ps(lanes, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ));
  _mm256_storeu_ps(yr + 8 * b, _mm256_and_ps(_mm256_mul_ps(v, scale), lanes));
  if (br) {
    br[b] = kRelu ? static_cast<std::uint8_t>(_mm256_movemask_ps(lanes))
                  : static_cast<std::uint8_t>(byte);
  }
}

// Applies a unit's keep words to its columns 8 at a time (each keep byte widened to float
// lanes), the last partial byte element by element.
template <bool kRelu>
TESSEL_AVX2 inline void apply_avx2(const Draw& d, std::int64_t unit,
                                   const std::uint32_t (&keep)[4]) {
  const UnitPlace at = place_of(d, unit);
  const std::int64_t row = at.row, j0 = at.chunk * detail::kDropoutChunkColumns;
  const std::int64_t width = std::min<std::int64_t>(detail::kDropoutChunkColumns, d.f - j0);
  const float* xr = (d.x_rows ? d.x_rows[row] : d.x + row * d.f) + j0;
  float* yr = d.y + row * d.f + j0;
  std::uint8_t* br = d.bits ? d.bits + row * detail::dropout_mask_row_bytes(d.f) + j0 / 8 : nullptr;
  const __m256 scale = _mm256_set1_ps(d.keep_scale);
  const std::uint32_t words[4] = {keep[0], keep[1], keep[2], keep[3]};
  // ReLU + dropout of a whole chunk, unrolled: one broadcast per keep word (1.2-1.3x faster in
  // place). The plain dropout and the gather keep the loop: unrolled, they ran 1.1-1.3x slower
  // (measured on [200000, 128], 1 and 2 threads).
  if (kRelu && width == detail::kDropoutChunkColumns) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256i word = _mm256_set1_epi32(static_cast<int>(words[k]));
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q)
        apply_byte_avx2<kRelu>(xr, yr, br, 4 * k + q, lanes_of_word_byte(word, q),
                               words[k] >> (8 * q), scale);
    }
    return;
  }
  std::int64_t b = 0;
  for (; 8 * b + 8 <= width; ++b) {
    const std::uint32_t byte = (words[b / 4] >> (8 * (b % 4))) & 0xFFu;
    apply_byte_avx2<kRelu>(xr, yr, br, b, lanes_of_byte(byte), byte, scale);
  }
  if (8 * b < width) {
    const auto byte = (words[b / 4] >> (8 * (b % 4))) & 0xFFu;
    const float keep_scale = d.keep_scale;
    std::uint32_t out = 0;
    for (std::int64_t k = 0; 8 * b + k < width; ++k) {
      const float v = xr[8 * b + k];
      const bool kept = ((byte >> k) & 1u) && (!kRelu || v > 0.0f);
      yr[8 * b + k] = kept ? v * keep_scale : 0.0f;
      out |= (kept ? 1u : 0u) << k;
    }
    if (br) br[b] = static_cast<std::uint8_t>(out);
  }
}

template <bool kRelu>
TESSEL_AVX2 void dropout_rows_avx2(const Draw& call, std::int64_t begin, std::int64_t end) {
  const Draw d = call; // a local copy: the byte stores below cannot alias it
  alignas(32) std::uint32_t keep[kBlockUnits / 8][4][8];
  for (auto& group : keep)
    for (auto& word : group)
      std::fill_n(word, 8, d.undrawn);
  const std::int64_t last = end * d.chunks;
  if (d.x_rows) prefetch_units(d, begin * d.chunks, begin * d.chunks + kGatherAhead, last);
  for (std::int64_t block = begin * d.chunks; block < last; block += kBlockUnits) {
    const std::int64_t block_end = std::min(last, block + kBlockUnits);
    if (d.levels > 0)
      for (std::int64_t u0 = block; u0 < block_end; u0 += 8)
        keep_words_avx2(d, u0, static_cast<int>(std::min<std::int64_t>(8, block_end - u0)),
                        keep[(u0 - block) / 8]);
    for (std::int64_t unit = block; unit < block_end; ++unit) {
      if (d.x_rows) prefetch_units(d, unit + kGatherAhead, unit + kGatherAhead + 1, last);
      const auto& group = keep[(unit - block) / 8];
      const auto u = (unit - block) % 8;
      const std::uint32_t unit_keep[4] = {group[0][u], group[1][u], group[2][u], group[3][u]};
      apply_avx2<kRelu>(d, unit, unit_keep);
    }
  }
}

TESSEL_AVX2 void dropout_grad_avx2(std::int64_t count, const float* grad_y,
                                   const std::uint8_t* bits, float keep_scale, float* grad_x) {
  const __m256 scale = _mm256_set1_ps(keep_scale);
  std::int64_t e = 0;
  // 32 elements per keep word (4 mask bytes read at once), then 8 per byte.
  for (; e + 32 <= count; e += 32) {
    std::uint32_t bits32;
    std::memcpy(&bits32, bits + e / 8, 4);
    const __m256i word = _mm256_set1_epi32(static_cast<int>(bits32));
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q)
      _mm256_storeu_ps(grad_x + e + 8 * q,
                       _mm256_and_ps(_mm256_mul_ps(_mm256_loadu_ps(grad_y + e + 8 * q), scale),
                                     lanes_of_word_byte(word, q)));
  }
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

Draw make_draw(std::int64_t f, const float* x, const NodeId* row_ids, const rng::Key& key, float p,
               float* y, std::uint8_t* bits) {
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
  d.levels = detail::dropout_levels(d.threshold);
  d.undrawn = d.threshold == 0 ? ~0u : 0u; // p == 0 keeps everything; p near 1 nothing
  d.chunks = (f + detail::kDropoutChunkColumns - 1) / detail::kDropoutChunkColumns;
  d.keep_scale = 1.0f / (1.0f - p);
  d.y = y;
  d.bits = bits;
  return d;
}

template <bool kRelu>
void forward(std::int64_t n, std::int64_t f, const float* x, const NodeId* row_ids,
             const rng::Key& key, float p, float* y, std::uint8_t* bits) {
  const Draw d = make_draw(f, x, row_ids, key, p, y, bits);
  const ForwardRows rows = dropout_rows<kRelu>(dropout_isa());
  for_row_ranges(n, f, [&](std::int64_t begin, std::int64_t end) { rows(d, begin, end); });
}

} // namespace

void dropout_forward(std::int64_t n, std::int64_t f, const float* x, const NodeId* row_ids,
                     const rng::Key& key, float p, float* y, std::uint8_t* mask) {
  forward<false>(n, f, x, row_ids, key, p, y, mask);
}

void gather_dropout_rows(std::int64_t n, std::int64_t f, const float* const* rows,
                         const NodeId* row_ids, const rng::Key& key, float p, float* y,
                         const std::int64_t* order) {
  const auto row_bytes = static_cast<std::size_t>(f) * sizeof(float);
  if (p == 0.0f) {
    for_row_ranges(n, f, [&](std::int64_t begin, std::int64_t end) {
      if (order) {
        for (std::int64_t k = begin; k < end; ++k) {
          if (k + kGatherAhead < end) prefetch_row(rows[order[k + kGatherAhead]], row_bytes);
          const std::int64_t i = order[k];
          std::memcpy(y + i * f, rows[i], row_bytes);
        }
        return;
      }
      for (std::int64_t i = begin; i < end; ++i) {
        if (i + kGatherAhead < end) prefetch_row(rows[i + kGatherAhead], row_bytes);
        std::memcpy(y + i * f, rows[i], row_bytes);
      }
    });
    return;
  }
  Draw d = make_draw(f, nullptr, row_ids, key, p, y, nullptr);
  d.x_rows = rows;
  d.order = order;
  const ForwardRows apply = dropout_rows<false>(dropout_isa());
  for_row_ranges(n, f, [&](std::int64_t begin, std::int64_t end) { apply(d, begin, end); });
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
