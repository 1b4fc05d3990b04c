// CPU twins of the attention ops: a thread per destination row for the forward and the
// destination-side backward, a range of sources per thread for the source-side backward, so
// every sum runs in a fixed order. The backward keeps no [edges, heads] array besides the
// forward's coefficients: it runs in chunks of about kBackwardEdges edges and holds the logit
// gradients of one chunk at a time.
//
// The edge loops gather source rows in random order, so they wait on memory more than they
// compute: each loop asks for the rows a few edges ahead (software prefetch), and the source
// attention terms, which every edge reads, are copied once per call into a compact [sources,
// heads] array instead of being read from the tail of each 4 (H F + H)-byte packed row. On
// x86-64 (GCC) the row loops are compiled for AVX-512, AVX2 and the portable ISA and the one
// the dropout kernels use (kernels::cpu_dropout_isa, TESSEL_CPU_ISA) is picked at run time; the
// common head widths (8, 16, 32, 64 columns) get loops of a fixed length.
#include "attention_ops.hpp"

#include "../attention_math.hpp"
#include "cpu_ops.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <omp.h>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#if __GNUC__ < 13
// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized where they are inlined (see
// dropout.cpp; fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#define TESSEL_ATTENTION_X86 1
#define TESSEL_ATTENTION_TARGET(arch) __attribute__((target(arch)))
#else
#define TESSEL_ATTENTION_X86 0
#define TESSEL_ATTENTION_TARGET(arch)
#endif
#define TESSEL_ATTENTION_INLINE inline __attribute__((always_inline))

namespace tessel::kernels::cpu {

namespace {
// Rows per partial sum of the attention vectors' gradients: the sums do not depend on the
// thread count.
constexpr std::int64_t kReduceRows = 1024;
// Destination rows per scheduling chunk.
constexpr std::int64_t kRowChunk = 64;
// How many edges ahead the gathers ask for a source's row.
constexpr int kAhead = 4;
// Edges per chunk of the backward (its logit-gradient buffer holds that many times heads).
constexpr EdgeId kBackwardEdges = 8192;

// a . b over n floats in a fixed order whatever the ISA's vector width: 8 running sums (lane
// j takes the columns j mod 8), then a fixed tree, then the tail. The 8 sums are one vector of
// 8 floats (GCC's vector extension: one register on AVX2 and AVX-512, two on SSE), so the loop
// runs vectorized on every ISA with the same per-lane order.
using Lanes8 = float __attribute__((vector_size(32)));

template <int kF>
TESSEL_ATTENTION_INLINE float dot(const float* __restrict a, const float* __restrict b,
                                  std::int64_t n_runtime) {
  const std::int64_t n = kF > 0 ? kF : n_runtime;
  Lanes8 acc = {};
  std::int64_t c = 0;
#pragma GCC unroll 8
  for (; c + 8 <= n; c += 8) {
    Lanes8 x, y;
    std::memcpy(&x, a + c, sizeof x);
    std::memcpy(&y, b + c, sizeof y);
    acc += x * y;
  }
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; c < n; ++c) s += a[c] * b[c];
  return s;
}

TESSEL_ATTENTION_INLINE void prefetch_row(const float* row, std::int64_t floats) {
  for (std::int64_t k = 0; k < floats; k += 16) __builtin_prefetch(row + k);
  __builtin_prefetch(row + floats - 1);
}

// The Philox blocks of n counters (c0, c1[j], c2[j], c3) under key: word w of block j into
// out[w][j], for j < n rounded up to 16 (c1 and c2 hold that many). rng::philox4x32, the same
// integer arithmetic, so the same bits, on 16 (AVX-512) or 8 (AVX2) counters per register.
enum class Isa { portable, avx2, avx512 };

using Words = std::uint32_t* const (&)[4];

void philox_blocks_portable(std::int64_t n, std::uint32_t c0, const std::uint32_t* c1,
                            const std::uint32_t* c2, std::uint32_t c3,
                            std::array<std::uint32_t, 2> key, Words out) {
  for (std::int64_t j = 0; j < n; ++j) {
    const auto block = rng::philox4x32({c0, c1[j], c2[j], c3}, key);
    for (int w = 0; w < 4; ++w) out[w][j] = block[static_cast<std::size_t>(w)];
  }
}

#if TESSEL_ATTENTION_X86
constexpr std::uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
constexpr std::uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

TESSEL_ATTENTION_TARGET("arch=x86-64-v4")
void philox_blocks_avx512(std::int64_t n, std::uint32_t c0, const std::uint32_t* c1,
                          const std::uint32_t* c2, std::uint32_t c3,
                          std::array<std::uint32_t, 2> key, Words out) {
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(kPhiloxM0));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(kPhiloxM1));
  for (std::int64_t j = 0; j < n; j += 16) {
    __m512i x0 = _mm512_set1_epi32(static_cast<int>(c0));
    __m512i x1 = _mm512_loadu_si512(c1 + j);
    __m512i x2 = _mm512_loadu_si512(c2 + j);
    __m512i x3 = _mm512_set1_epi32(static_cast<int>(c3));
    std::uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; ++round) {
      // 32 x 32 -> 64-bit products of the even and the odd lanes, their halves put back.
      const __m512i p0e = _mm512_mul_epu32(x0, m0);
      const __m512i p0o = _mm512_mul_epu32(_mm512_srli_epi64(x0, 32), m0);
      const __m512i p1e = _mm512_mul_epu32(x2, m1);
      const __m512i p1o = _mm512_mul_epu32(_mm512_srli_epi64(x2, 32), m1);
      const __m512i hi0 = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(p0e, 32), p0o);
      const __m512i lo0 = _mm512_mask_blend_epi32(0xAAAA, p0e, _mm512_slli_epi64(p0o, 32));
      const __m512i hi1 = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(p1e, 32), p1o);
      const __m512i lo1 = _mm512_mask_blend_epi32(0xAAAA, p1e, _mm512_slli_epi64(p1o, 32));
      x0 = _mm512_xor_si512(_mm512_xor_si512(hi1, x1), _mm512_set1_epi32(static_cast<int>(k0)));
      x2 = _mm512_xor_si512(_mm512_xor_si512(hi0, x3), _mm512_set1_epi32(static_cast<int>(k1)));
      x1 = lo1;
      x3 = lo0;
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
    _mm512_storeu_si512(out[0] + j, x0);
    _mm512_storeu_si512(out[1] + j, x1);
    _mm512_storeu_si512(out[2] + j, x2);
    _mm512_storeu_si512(out[3] + j, x3);
  }
}

TESSEL_ATTENTION_TARGET("arch=x86-64-v3")
void philox_blocks_avx2(std::int64_t n, std::uint32_t c0, const std::uint32_t* c1,
                        const std::uint32_t* c2, std::uint32_t c3,
                        std::array<std::uint32_t, 2> key, Words out) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(kPhiloxM0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(kPhiloxM1));
  for (std::int64_t j = 0; j < n; j += 8) {
    __m256i x0 = _mm256_set1_epi32(static_cast<int>(c0));
    __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c1 + j));
    __m256i x2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c2 + j));
    __m256i x3 = _mm256_set1_epi32(static_cast<int>(c3));
    std::uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; ++round) {
      const __m256i p0e = _mm256_mul_epu32(x0, m0);
      const __m256i p0o = _mm256_mul_epu32(_mm256_srli_epi64(x0, 32), m0);
      const __m256i p1e = _mm256_mul_epu32(x2, m1);
      const __m256i p1o = _mm256_mul_epu32(_mm256_srli_epi64(x2, 32), m1);
      const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(p0e, 32), p0o, 0xAA);
      const __m256i lo0 = _mm256_blend_epi32(p0e, _mm256_slli_epi64(p0o, 32), 0xAA);
      const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(p1e, 32), p1o, 0xAA);
      const __m256i lo1 = _mm256_blend_epi32(p1e, _mm256_slli_epi64(p1o, 32), 0xAA);
      x0 = _mm256_xor_si256(_mm256_xor_si256(hi1, x1), _mm256_set1_epi32(static_cast<int>(k0)));
      x2 = _mm256_xor_si256(_mm256_xor_si256(hi0, x3), _mm256_set1_epi32(static_cast<int>(k1)));
      x1 = lo1;
      x3 = lo0;
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[0] + j), x0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[1] + j), x1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[2] + j), x2);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[3] + j), x3);
  }
}
#endif

// The Philox blocks of n counters (c0, c1[j], c2[j], c3) under key: word w of block j into
// out[w][j], for j < n rounded up to 16 (c1 and c2 hold that many). rng::philox4x32, the same
// integer arithmetic, so the same bits, on 16 (AVX-512) or 8 (AVX2) counters per register.
template <Isa kIsa>
TESSEL_ATTENTION_INLINE void philox_blocks(std::int64_t n, std::uint32_t c0,
                                           const std::uint32_t* c1, const std::uint32_t* c2,
                                           std::uint32_t c3, std::array<std::uint32_t, 2> key,
                                           Words out) {
#if TESSEL_ATTENTION_X86
  if constexpr (kIsa == Isa::avx512) return philox_blocks_avx512(n, c0, c1, c2, c3, key, out);
  if constexpr (kIsa == Isa::avx2) return philox_blocks_avx2(n, c0, c1, c2, c3, key, out);
#endif
  philox_blocks_portable(n, c0, c1, c2, c3, key, out);
}

// A thread's working arrays: per-head sums, and the attention dropout's counters and draws
// for one destination row.
struct Scratch {
  std::vector<float> heads;
  std::vector<std::uint32_t> src, group, words;
};

// What the forward's and the backward's row loops read and write.
struct Args {
  detail::AttentionArgs a;
  const float* packed = nullptr;
  const float* src_term = nullptr;  // compact [cols, heads]
  const float* dst_term = nullptr;
  rng::Key key;
  float p = 0.0f;
  const std::int64_t* ids = nullptr;
  float scale = 1.0f, head_scale = 1.0f;
  // Forward
  float* out = nullptr;
  float* alpha = nullptr;
  // Backward
  const float* alpha_in = nullptr;
  const float* grad_out = nullptr;
  float* grad_packed = nullptr;
  float* grad_dst_term = nullptr;
};

// Forward of rows [v0, v1).
template <Isa kIsa, int kF>
TESSEL_ATTENTION_INLINE void forward_rows(const Args& r, std::int64_t v0, std::int64_t v1,
                                          Scratch& scratch) {
  const auto& a = r.a;
  const int heads = a.heads;
  const std::int64_t f = kF > 0 ? kF : a.f, hf = heads * f, ld = hf + heads;
  const std::int64_t out_cols = a.average ? f : hf;
  scratch.heads.resize(2 * static_cast<std::size_t>(heads));
  float* __restrict top = scratch.heads.data();
  float* __restrict inv = top + heads;
  const int groups = (heads + 3) / 4;
  const auto philox_key = r.key.philox_key();
  const float* __restrict src_term = r.src_term;
  const float* __restrict packed = r.packed;
  const LocalId* __restrict indices = a.indices;
  for (std::int64_t v = v0; v < v1; ++v) {
    const EdgeId begin = a.indptr[v], end = a.indptr[v + 1];
    float* __restrict o = r.out + v * out_cols;
    std::fill(o, o + out_cols, 0.0f);
    const float* __restrict t = r.dst_term + v * heads;
    // Edge-major passes over the row, every head at once: the logits (into alpha) and their
    // largest, their exponentials and sums, then the weights and the aggregation. Each head's
    // sums run in CSR order.
    for (int h = 0; h < heads; ++h) top[h] = -std::numeric_limits<float>::infinity();
    for (EdgeId e = begin; e < end; ++e) {
      const float* __restrict s = src_term + static_cast<std::int64_t>(indices[e]) * heads;
      float* __restrict x = r.alpha + e * heads;
      for (int h = 0; h < heads; ++h) {
        x[h] = detail::attention_logit(s[h], t[h]);
        top[h] = std::max(top[h], x[h]);
      }
    }
    for (int h = 0; h < heads; ++h) inv[h] = 0.0f;
    for (EdgeId e = begin; e < end; ++e) {
      float* __restrict x = r.alpha + e * heads;
      for (int h = 0; h < heads; ++h) {
        x[h] = std::exp(x[h] - top[h]);
        inv[h] += x[h];
      }
    }
    for (int h = 0; h < heads; ++h) inv[h] = 1.0f / inv[h];
    // The dropout draws of the whole row: one Philox block per edge and group of 4 heads.
    const std::uint32_t* words = nullptr;
    std::size_t stride = 0;
    if (r.p > 0.0f) {
      const auto lanes = static_cast<std::size_t>((end - begin) * groups);
      const std::size_t padded = (lanes + 15) / 16 * 16;
      if (scratch.src.size() < padded) {
        scratch.src.assign(padded, 0u);
        scratch.group.assign(padded, 0u);
        scratch.words.resize(4 * padded);
      }
      std::size_t j = 0;
      for (EdgeId e = begin; e < end; ++e)
        for (int g = 0; g < groups; ++g, ++j) {
          scratch.src[j] = static_cast<std::uint32_t>(r.ids[indices[e]]);
          scratch.group[j] = static_cast<std::uint32_t>(g);
        }
      stride = scratch.src.size();
      std::uint32_t* const out[4] = {scratch.words.data(), scratch.words.data() + stride,
                                     scratch.words.data() + 2 * stride,
                                     scratch.words.data() + 3 * stride};
      philox_blocks<kIsa>(static_cast<std::int64_t>(lanes), static_cast<std::uint32_t>(r.ids[v]),
                          scratch.src.data(), scratch.group.data(), r.key.step, philox_key, out);
      words = scratch.words.data();
    }
    for (EdgeId e = begin; e < end; ++e) {
      if (e + kAhead < end)
        prefetch_row(packed + static_cast<std::int64_t>(indices[e + kAhead]) * ld, hf);
      const LocalId u = indices[e];
      const float* __restrict z = packed + static_cast<std::int64_t>(u) * ld;
      float* __restrict x = r.alpha + e * heads;
      const std::uint32_t* edge_words = words ? words + (e - begin) * groups : nullptr;
      for (int h = 0; h < heads; ++h) {
        float w = x[h] * inv[h];
        if (r.p > 0.0f && !detail::attention_kept(edge_words[(h % 4) * stride + h / 4], r.p))
          w = -w;
        x[h] = w;
        const float weight = detail::attention_weight(w, r.scale) * r.head_scale;
        float* __restrict oh = o + (a.average ? 0 : h * f);
        const float* __restrict zh = z + h * f;
        for (std::int64_t c = 0; c < f; ++c) oh[c] += weight * zh[c];
      }
    }
  }
}

// The gradient of coefficient (v, u, h) before the softmax: d alpha = g_v[h] . z_u[h] (scaled,
// 0 where dropped). Both sides of the backward compute it with this one function, so they
// agree bit for bit.
template <int kF>
TESSEL_ATTENTION_INLINE float d_alpha(const Args& r, const float* gh, const float* z_u, int h,
                                      float stored) {
  if (!(stored > 0.0f)) return 0.0f;  // dropped: no gradient reaches it
  const std::int64_t f = kF > 0 ? kF : r.a.f;
  return dot<kF>(gh, z_u + h * f, f) * r.head_scale * r.scale;
}

// Destination side of the backward for rows [v0, v1), one pass over each row: per head,
// A = sum of |alpha| d alpha, B = sum of |alpha| d alpha l' and C = sum of |alpha| l' (l' the
// LeakyReLU's slope at the edge's logit); the destination term's gradient, sum of |alpha|
// (d alpha - A) l', is B - A C. Then, from the row's d alpha kept in scratch, each edge's logit
// gradient |alpha| (d alpha - A) l' into lg (edge e at lg[(e - e0) heads]) for the source side,
// which so never gathers the source rows again. scratch: 3 heads floats, then d alpha.
template <int kF>
TESSEL_ATTENTION_INLINE void backward_dst_rows(const Args& r, std::int64_t v0, std::int64_t v1,
                                               std::vector<float>& scratch, float* lg,
                                               EdgeId e0) {
  const auto& a = r.a;
  const int heads = a.heads;
  const std::int64_t f = kF > 0 ? kF : a.f, hf = heads * f, ld = hf + heads;
  const std::int64_t out_cols = a.average ? f : hf;
  const LocalId* __restrict indices = a.indices;
  for (std::int64_t v = v0; v < v1; ++v) {
    const EdgeId begin = a.indptr[v], end = a.indptr[v + 1];
    const std::size_t need = static_cast<std::size_t>((3 + (end - begin)) * heads);
    if (scratch.size() < need) scratch.resize(need);
    float* __restrict sa = scratch.data();
    float* __restrict sb = sa + heads;
    float* __restrict sc = sb + heads;
    float* __restrict das = sc + heads;
    const float* g = r.grad_out + v * out_cols;
    const float* t = r.dst_term + v * heads;
    for (int h = 0; h < 3 * heads; ++h) sa[h] = 0.0f;
    for (EdgeId e = begin; e < end; ++e) {
      if (e + kAhead < end)
        prefetch_row(r.packed + static_cast<std::int64_t>(indices[e + kAhead]) * ld, hf);
      const LocalId u = indices[e];
      const float* z_u = r.packed + static_cast<std::int64_t>(u) * ld;
      const float* s = r.src_term + static_cast<std::int64_t>(u) * heads;
      const float* stored_row = r.alpha_in + e * heads;
      float* __restrict da_row = das + (e - begin) * heads;
      for (int h = 0; h < heads; ++h) {
        const float stored = stored_row[h];
        const float weight = std::fabs(stored);
        const float slope = detail::attention_logit_grad(s[h], t[h]);
        const float raw = d_alpha<kF>(r, g + (a.average ? 0 : h * f), z_u, h, stored);
        da_row[h] = raw;
        const float da = weight * raw;
        sa[h] += da;
        sb[h] += da * slope;
        sc[h] += weight * slope;
      }
    }
    for (int h = 0; h < heads; ++h) r.grad_dst_term[v * heads + h] = sb[h] - sa[h] * sc[h];
    for (EdgeId e = begin; e < end; ++e) {
      const float* s = r.src_term + static_cast<std::int64_t>(indices[e]) * heads;
      const float* stored_row = r.alpha_in + e * heads;
      const float* da_row = das + (e - begin) * heads;
      float* __restrict out = lg + (e - e0) * heads;
      for (int h = 0; h < heads; ++h)
        out[h] = std::fabs(stored_row[h]) * (da_row[h] - sa[h]) *
                 detail::attention_logit_grad(s[h], t[h]);
    }
  }
}

// Source side of the backward for the sources [lo, hi) and the destination rows [v0, v1):
// walks those rows' edges in CSR order and takes the edges into those sources, so every
// source's sums run in destination order. lg: the rows' logit gradients from the destination
// side (edge e at lg[(e - indptr[v0]) heads]).
template <int kF>
TESSEL_ATTENTION_INLINE void backward_src_range(const Args& r, std::int64_t lo, std::int64_t hi,
                                                std::int64_t v0, std::int64_t v1,
                                                const float* lg) {
  const auto& a = r.a;
  const int heads = a.heads;
  const std::int64_t f = kF > 0 ? kF : a.f, hf = heads * f, ld = hf + heads;
  const std::int64_t out_cols = a.average ? f : hf;
  const LocalId* __restrict indices = a.indices;
  const EdgeId e0 = a.indptr[v0], edges = a.indptr[v1];
  for (std::int64_t v = v0; v < v1; ++v) {
    const float* g = r.grad_out + v * out_cols;
    const EdgeId end = a.indptr[v + 1];
    for (EdgeId e = a.indptr[v]; e < end; ++e) {
      // The gradient row of the edge kAhead on (in any row), if it is this range's.
      if (e + kAhead < edges) {
        const LocalId ahead = indices[e + kAhead];
        if (ahead >= lo && ahead < hi)
          prefetch_row(r.grad_packed + static_cast<std::int64_t>(ahead) * ld, ld);
      }
      const LocalId u = indices[e];
      if (u < lo || u >= hi) continue;
      float* __restrict gz = r.grad_packed + static_cast<std::int64_t>(u) * ld;
      const float* stored_row = r.alpha_in + e * heads;
      const float* lg_row = lg + (e - e0) * heads;
      for (int h = 0; h < heads; ++h) {
        const float w = detail::attention_weight(stored_row[h], r.scale) * r.head_scale;
        const float* __restrict gh = g + (a.average ? 0 : h * f);
        float* __restrict gzh = gz + h * f;
        if (w != 0.0f)
          for (std::int64_t c = 0; c < f; ++c) gzh[c] += w * gh[c];
        gz[hf + h] += lg_row[h];
      }
    }
  }
}

// The three row loops at one ISA, each dispatched on the head width.
struct Loops {
  void (*forward)(const Args&, std::int64_t, std::int64_t, Scratch&);
  void (*backward_dst)(const Args&, std::int64_t, std::int64_t, std::vector<float>&, float*,
                       EdgeId);
  void (*backward_src)(const Args&, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                       const float*);
};

#define TESSEL_ATTENTION_SWITCH(fn, ...)  \
  switch (r.a.f) {                        \
    case 8: fn<8>(__VA_ARGS__); break;    \
    case 16: fn<16>(__VA_ARGS__); break;  \
    case 32: fn<32>(__VA_ARGS__); break;  \
    case 64: fn<64>(__VA_ARGS__); break;  \
    default: fn<0>(__VA_ARGS__); break;   \
  }
#define TESSEL_ATTENTION_SWITCH_ISA(fn, isa, ...) \
  switch (r.a.f) {                                \
    case 8: fn<isa, 8>(__VA_ARGS__); break;       \
    case 16: fn<isa, 16>(__VA_ARGS__); break;     \
    case 32: fn<isa, 32>(__VA_ARGS__); break;     \
    case 64: fn<isa, 64>(__VA_ARGS__); break;     \
    default: fn<isa, 0>(__VA_ARGS__); break;      \
  }
#define TESSEL_ATTENTION_LOOPS(name, attr)                                                    \
  attr void forward_##name(const Args& r, std::int64_t v0, std::int64_t v1, Scratch& s) {     \
    TESSEL_ATTENTION_SWITCH_ISA(forward_rows, Isa::name, r, v0, v1, s)                        \
  }                                                                                           \
  attr void backward_dst_##name(const Args& r, std::int64_t v0, std::int64_t v1,               \
                               std::vector<float>& s, float* lg, EdgeId e0) {                 \
    TESSEL_ATTENTION_SWITCH(backward_dst_rows, r, v0, v1, s, lg, e0)                          \
  }                                                                                           \
  attr void backward_src_##name(const Args& r, std::int64_t lo, std::int64_t hi,              \
                               std::int64_t v0, std::int64_t v1, const float* lg) {           \
    TESSEL_ATTENTION_SWITCH(backward_src_range, r, lo, hi, v0, v1, lg)                        \
  }                                                                                           \
  constexpr Loops loops_##name = {forward_##name, backward_dst_##name, backward_src_##name};

TESSEL_ATTENTION_LOOPS(portable, )
#if TESSEL_ATTENTION_X86
TESSEL_ATTENTION_LOOPS(avx2, TESSEL_ATTENTION_TARGET("arch=x86-64-v3"))
TESSEL_ATTENTION_LOOPS(avx512, TESSEL_ATTENTION_TARGET("arch=x86-64-v4,prefer-vector-width=512"))
#endif
#undef TESSEL_ATTENTION_LOOPS
#undef TESSEL_ATTENTION_SWITCH
#undef TESSEL_ATTENTION_SWITCH_ISA

// The dropout kernels' instruction set (TESSEL_CPU_ISA lowers it; tests may set it).
const Loops& loops() {
#if TESSEL_ATTENTION_X86
  switch (dropout_isa()) {
    case CpuIsa::avx512: return loops_avx512;
    case CpuIsa::avx2: return loops_avx2;
    case CpuIsa::portable: break;
  }
#endif
  return loops_portable;
}

// The source terms of the packed rows as one compact [n, heads] array.
std::vector<float> compact_src_terms(std::int64_t n, int heads, std::int64_t hf,
                                     const float* packed) {
  const std::int64_t ld = hf + heads;
  std::vector<float> s(static_cast<std::size_t>(n * heads));
#pragma omp parallel for schedule(static) if (parallel_worth(n * ld))
  for (std::int64_t u = 0; u < n; ++u)
    std::copy(packed + u * ld + hf, packed + u * ld + ld, s.data() + u * heads);
  return s;
}

} // namespace

void attention_project(std::int64_t n_src, std::int64_t n_dst, int heads, std::int64_t f,
                       const float* wh, const float* att_src, const float* att_dst,
                       float* packed, float* dst_term) {
  const std::int64_t hf = heads * f, ld = hf + heads;
#pragma omp parallel for schedule(static) if (parallel_worth(n_src * hf))
  for (std::int64_t u = 0; u < n_src; ++u) {
    const float* z = wh + u * hf;
    float* row = packed + u * ld;
    std::copy(z, z + hf, row);
    for (int h = 0; h < heads; ++h) {
      row[hf + h] = dot<0>(z + h * f, att_src + h * f, f);
      if (u < n_dst) dst_term[u * heads + h] = dot<0>(z + h * f, att_dst + h * f, f);
    }
  }
}

void attention_project_backward(std::int64_t n_src, std::int64_t n_dst, int heads, std::int64_t f,
                                const float* packed, const float* grad_packed,
                                const float* grad_dst_term, const float* att_src,
                                const float* att_dst, float* grad_wh, float* grad_att_src,
                                float* grad_att_dst) {
  const std::int64_t hf = heads * f, ld = hf + heads;
  const std::int64_t chunks = (n_src + kReduceRows - 1) / kReduceRows;
  std::vector<float> partial(static_cast<std::size_t>(chunks * 2 * hf), 0.0f);
#pragma omp parallel for schedule(static) if (parallel_worth(n_src * hf))
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    float* ps = partial.data() + chunk * 2 * hf;
    float* pd = ps + hf;
    const std::int64_t end = std::min(n_src, (chunk + 1) * kReduceRows);
    for (std::int64_t u = chunk * kReduceRows; u < end; ++u) {
      const float* z = packed + u * ld;
      const float* g = grad_packed + u * ld;
      float* out = grad_wh + u * hf;
      for (int h = 0; h < heads; ++h) {
        const float gs = g[hf + h];
        const float gt = u < n_dst ? grad_dst_term[u * heads + h] : 0.0f;
        for (std::int64_t c = 0; c < f; ++c) {
          const std::int64_t j = h * f + c;
          out[j] = g[j] + gs * att_src[j] + gt * att_dst[j];
          ps[j] += gs * z[j];
          pd[j] += gt * z[j];
        }
      }
    }
  }
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk)
    for (std::int64_t j = 0; j < hf; ++j) {
      grad_att_src[j] += partial[static_cast<std::size_t>(chunk * 2 * hf + j)];
      grad_att_dst[j] += partial[static_cast<std::size_t>(chunk * 2 * hf + hf + j)];
    }
}

void attention_forward(const detail::AttentionArgs& a, const float* packed, const float* dst_term,
                       const rng::Key& key, float p, const std::int64_t* ids, float* out,
                       float* alpha) {
  const int heads = a.heads;
  const std::int64_t hf = heads * a.f;
  const std::vector<float> src_term = compact_src_terms(a.cols, heads, hf, packed);
  Args r;
  r.a = a;
  r.packed = packed;
  r.src_term = src_term.data();
  r.dst_term = dst_term;
  r.key = key;
  r.p = p;
  r.ids = ids;
  r.scale = detail::attention_keep_scale(p);
  r.head_scale = a.average ? 1.0f / static_cast<float>(heads) : 1.0f;
  r.out = out;
  r.alpha = alpha;
  const auto forward = loops().forward;
  const std::int64_t chunks = (a.rows + kRowChunk - 1) / kRowChunk;
#pragma omp parallel if (parallel_worth(a.indptr[a.rows] * (hf + heads)))
  {
    Scratch scratch;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk)
      forward(r, chunk * kRowChunk, std::min(a.rows, (chunk + 1) * kRowChunk), scratch);
  }
}

void attention_backward(const detail::AttentionArgs& a, const float* packed, const float* dst_term,
                        float p, const float* alpha, const float* grad_out, float* grad_packed,
                        float* grad_dst_term) {
  const int heads = a.heads;
  const std::int64_t hf = heads * a.f, ld = hf + heads;
  const EdgeId edges = a.indptr[a.rows];
  const std::int64_t work = edges * ld;
  const std::vector<float> src_term = compact_src_terms(a.cols, heads, hf, packed);
  Args r;
  r.a = a;
  r.packed = packed;
  r.src_term = src_term.data();
  r.dst_term = dst_term;
  r.p = p;
  r.scale = detail::attention_keep_scale(p);
  r.head_scale = a.average ? 1.0f / static_cast<float>(heads) : 1.0f;
  r.alpha_in = alpha;
  r.grad_out = grad_out;
  r.grad_packed = grad_packed;
  r.grad_dst_term = grad_dst_term;
  const Loops& l = loops();
  // The destination rows in chunks of whole rows holding about kBackwardEdges edges: per chunk
  // the destination side writes its edges' logit gradients into lg, then the source side adds
  // them, so lg stays small and in cache.
  std::vector<std::int64_t> cuts{0};
  EdgeId most = 0;
  for (std::int64_t v = 0; v < a.rows; ++v) {
    const EdgeId held = a.indptr[v + 1] - a.indptr[cuts.back()];
    if (held >= kBackwardEdges || v + 1 == a.rows) {
      most = std::max(most, held);
      cuts.push_back(v + 1);
    }
  }
  std::vector<float> lg(static_cast<std::size_t>(most * heads));
  // Source side, without a source-major copy of the edges: each thread owns a range of sources
  // (cut so the ranges hold about as many edges each) and walks the chunk's edges in CSR
  // order, taking the edges into its sources. Every source's sums run in destination order,
  // whatever the thread count.
  const int threads = static_cast<int>(std::clamp<std::int64_t>(
      std::min<std::int64_t>(omp_get_max_threads(), work / kParallelMinWork), 1,
      std::max<std::int64_t>(a.cols, 1)));
  std::vector<std::int64_t> bounds(static_cast<std::size_t>(threads) + 1, a.cols);
  bounds[0] = 0;
  if (threads > 1) {
    // In-degrees (one count per source), then the first source of each range.
    std::vector<EdgeId> in_edges(static_cast<std::size_t>(a.cols), 0);
    for (EdgeId e = 0; e < edges; ++e) ++in_edges[static_cast<std::size_t>(a.indices[e])];
    const std::int64_t total = edges + a.cols;
    std::int64_t seen = 0;
    int t = 1;
    for (std::int64_t u = 0; u < a.cols && t < threads; ++u) {
      seen += in_edges[static_cast<std::size_t>(u)] + 1;
      while (t < threads && seen >= total * t / threads) bounds[static_cast<std::size_t>(t++)] = u + 1;
    }
  }
  const std::size_t chunks = cuts.size() - 1;
#pragma omp parallel num_threads(threads)
  {
    const int team = omp_get_num_threads();
    const int me = omp_get_thread_num();
    for (int part = me; part < threads; part += team)
      std::fill(grad_packed + bounds[static_cast<std::size_t>(part)] * ld,
                grad_packed + bounds[static_cast<std::size_t>(part) + 1] * ld, 0.0f);
    std::vector<float> scratch;
    for (std::size_t c = 0; c < chunks; ++c) {
      const std::int64_t v0 = cuts[c], v1 = cuts[c + 1];
      const EdgeId e0 = a.indptr[v0];
      const std::int64_t pieces = (v1 - v0 + kRowChunk - 1) / kRowChunk;
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t piece = 0; piece < pieces; ++piece)
        l.backward_dst(r, v0 + piece * kRowChunk, std::min(v1, v0 + (piece + 1) * kRowChunk),
                       scratch, lg.data(), e0);
      // (the loop's barrier: the chunk's lg is whole)
      for (int part = me; part < threads; part += team)
        l.backward_src(r, bounds[static_cast<std::size_t>(part)],
                       bounds[static_cast<std::size_t>(part) + 1], v0, v1, lg.data());
#pragma omp barrier
    }
  }
}

void add_self_loops(std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                    EdgeId* out_indptr, LocalId* out_indices) {
#pragma omp parallel for schedule(static) if (parallel_worth(indptr[rows]))
  for (std::int64_t v = 0; v <= rows; ++v) {
    out_indptr[v] = indptr[v] + v;
    if (v == rows) continue;
    LocalId* out = out_indices + indptr[v] + v;
    *out++ = static_cast<LocalId>(v);
    std::copy(indices + indptr[v], indices + indptr[v + 1], out);
  }
}

} // namespace tessel::kernels::cpu
