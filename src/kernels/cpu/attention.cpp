// CPU twins of the attention ops: a thread per destination row for the forward and the
// destination-side backward, a range of sources per thread for the source-side backward, so
// every sum runs in a fixed order. The backward keeps no per-edge array besides the forward's
// coefficients.
#include "attention_ops.hpp"

#include "../attention_math.hpp"
#include "cpu_ops.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <omp.h>
#include <vector>

namespace tessel::kernels::cpu {

namespace {
// Rows per partial sum of the attention vectors' gradients: the sums do not depend on the
// thread count.
constexpr std::int64_t kReduceRows = 1024;
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
      float s = 0.0f, t = 0.0f;
      for (std::int64_t c = 0; c < f; ++c) {
        s += z[h * f + c] * att_src[h * f + c];
        t += z[h * f + c] * att_dst[h * f + c];
      }
      row[hf + h] = s;
      if (u < n_dst) dst_term[u * heads + h] = t;
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
  const std::int64_t f = a.f, hf = heads * f, ld = hf + heads;
  const std::int64_t out_cols = a.average ? f : hf;
  const float scale = detail::attention_keep_scale(p);
  const float head_scale = a.average ? 1.0f / static_cast<float>(heads) : 1.0f;
  const std::int64_t work = a.indptr[a.rows] * ld;
  const auto hs = static_cast<std::size_t>(heads);
#pragma omp parallel if (parallel_worth(work))
  {
    // Per head: the row's largest logit, then 1 / the sum of its exponentials.
    std::vector<float> top(hs), inv(hs);
#pragma omp for schedule(dynamic, 64)
    for (std::int64_t v = 0; v < a.rows; ++v) {
      const EdgeId begin = a.indptr[v], end = a.indptr[v + 1];
      float* o = out + v * out_cols;
      std::fill(o, o + out_cols, 0.0f);
      const float* t = dst_term + v * heads;
      // Edge-major passes over the row, every head at once: the logits (into alpha), their
      // exponentials and sums, then the weights and the aggregation. Each head's sums run in
      // CSR order.
      std::fill(top.begin(), top.end(), -std::numeric_limits<float>::infinity());
      for (EdgeId e = begin; e < end; ++e) {
        const float* s = packed + static_cast<std::int64_t>(a.indices[e]) * ld + hf;
        float* x = alpha + e * heads;
        for (int h = 0; h < heads; ++h) {
          x[h] = detail::attention_logit(s[h], t[h]);
          top[static_cast<std::size_t>(h)] = std::max(top[static_cast<std::size_t>(h)], x[h]);
        }
      }
      std::fill(inv.begin(), inv.end(), 0.0f);
      for (EdgeId e = begin; e < end; ++e) {
        float* x = alpha + e * heads;
        for (int h = 0; h < heads; ++h) {
          x[h] = std::exp(x[h] - top[static_cast<std::size_t>(h)]);
          inv[static_cast<std::size_t>(h)] += x[h];
        }
      }
      for (float& i : inv) i = 1.0f / i;
      std::array<std::uint32_t, 4> draws{};
      for (EdgeId e = begin; e < end; ++e) {
        const LocalId u = a.indices[e];
        const float* z = packed + static_cast<std::int64_t>(u) * ld;
        float* x = alpha + e * heads;
        for (int h = 0; h < heads; ++h) {
          float w = x[h] * inv[static_cast<std::size_t>(h)];
          if (p > 0.0f) {
            if (h % 4 == 0) draws = detail::attention_draws(key, ids[v], ids[u], h / 4);
            if (!detail::attention_kept(draws[static_cast<std::size_t>(h % 4)], p)) w = -w;
          }
          x[h] = w;
          const float weight = detail::attention_weight(w, scale) * head_scale;
          float* oh = o + (a.average ? 0 : h * f);
          const float* zh = z + h * f;
          for (std::int64_t c = 0; c < f; ++c) oh[c] += weight * zh[c];
        }
      }
    }
  }
}

void attention_backward(const detail::AttentionArgs& a, const float* packed, const float* dst_term,
                        float p, const float* alpha, const float* grad_out, float* grad_packed,
                        float* grad_dst_term) {
  const int heads = a.heads;
  const std::int64_t f = a.f, hf = heads * f, ld = hf + heads;
  const std::int64_t out_cols = a.average ? f : hf;
  const float scale = detail::attention_keep_scale(p);
  const float head_scale = a.average ? 1.0f / static_cast<float>(heads) : 1.0f;
  const EdgeId edges = a.indptr[a.rows];
  const std::int64_t work = edges * ld;
  // The gradient of coefficient (v, u, h) before the softmax: d alpha = g_v[h] . z_u[h] (scaled,
  // 0 where dropped). Both sides below compute it with this one loop, so they agree bit for bit.
  const auto d_alpha = [&](const float* gh, LocalId u, int h, float stored) {
    if (!(stored > 0.0f)) return 0.0f;  // dropped: no gradient reaches it
    const float* zh = packed + static_cast<std::int64_t>(u) * ld + h * f;
    float dot = 0.0f;
    for (std::int64_t c = 0; c < f; ++c) dot += gh[c] * zh[c];
    return dot * head_scale * scale;
  };
  // Destination side, one pass over each row: per head, A = sum of |alpha| d alpha (kept per
  // destination and head for the source side), B = sum of |alpha| d alpha l' and C = sum of
  // |alpha| l' (l' the LeakyReLU's slope at the edge's logit); the destination term's gradient,
  // sum of |alpha| (d alpha - A) l', is B - A C. No per-edge array: the source side recomputes
  // each edge's logit gradient from alpha, the rows and A.
  std::vector<float> c_sums(static_cast<std::size_t>(a.rows * heads));
  const auto hs = static_cast<std::size_t>(heads);
#pragma omp parallel if (parallel_worth(work))
  {
    std::vector<float> sums(3 * hs);
#pragma omp for schedule(dynamic, 64)
    for (std::int64_t v = 0; v < a.rows; ++v) {
      const float* g = grad_out + v * out_cols;
      const float* t = dst_term + v * heads;
      std::fill(sums.begin(), sums.end(), 0.0f);
      float* sa = sums.data();
      float* sb = sa + heads;
      float* sc = sb + heads;
      for (EdgeId e = a.indptr[v]; e < a.indptr[v + 1]; ++e) {
        const LocalId u = a.indices[e];
        const float* s = packed + static_cast<std::int64_t>(u) * ld + hf;
        for (int h = 0; h < heads; ++h) {
          const float stored = alpha[e * heads + h];
          const float weight = std::fabs(stored);
          const float slope = detail::attention_logit_grad(s[h], t[h]);
          const float da = weight * d_alpha(g + (a.average ? 0 : h * f), u, h, stored);
          sa[h] += da;
          sb[h] += da * slope;
          sc[h] += weight * slope;
        }
      }
      for (int h = 0; h < heads; ++h) {
        c_sums[static_cast<std::size_t>(v * heads + h)] = sa[h];
        grad_dst_term[v * heads + h] = sb[h] - sa[h] * sc[h];
      }
    }
  }
  // Source side, without a source-major copy of the edges: each thread owns a range of sources
  // (cut so the ranges hold about as many edges each) and walks the whole edge list in CSR
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
#pragma omp parallel num_threads(threads)
  {
    const int team = omp_get_num_threads();
    for (int part = omp_get_thread_num(); part < threads; part += team) {
      const std::int64_t lo = bounds[static_cast<std::size_t>(part)];
      const std::int64_t hi = bounds[static_cast<std::size_t>(part) + 1];
      std::fill(grad_packed + lo * ld, grad_packed + hi * ld, 0.0f);
      for (std::int64_t v = 0; v < a.rows; ++v) {
        const float* g = grad_out + v * out_cols;
        for (EdgeId e = a.indptr[v]; e < a.indptr[v + 1]; ++e) {
          const LocalId u = a.indices[e];
          if (u < lo || u >= hi) continue;
          float* gz = grad_packed + static_cast<std::int64_t>(u) * ld;
          const float* s_u = packed + static_cast<std::int64_t>(u) * ld + hf;
          const float* c_v = c_sums.data() + v * heads;
          for (int h = 0; h < heads; ++h) {
            const float stored = alpha[e * heads + h];
            const float w = detail::attention_weight(stored, scale) * head_scale;
            const float* gh = g + (a.average ? 0 : h * f);
            const float lg = std::fabs(stored) * (d_alpha(gh, u, h, stored) - c_v[h]) *
                             detail::attention_logit_grad(s_u[h], dst_term[v * heads + h]);
            float* gzh = gz + h * f;
            if (w != 0.0f)
              for (std::int64_t c = 0; c < f; ++c) gzh[c] += w * gh[c];
            gz[hf + h] += lg;
          }
        }
      }
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
