// CPU twins of the attention ops: a thread per destination row for the forward and the
// destination-side backward, a thread per source (over a source-major copy of the edge list)
// for the source-side backward, so every sum runs in a fixed order.
#include "attention_ops.hpp"

#include "../attention_math.hpp"
#include "cpu_ops.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
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
#pragma omp parallel for schedule(dynamic, 64) if (parallel_worth(work))
  for (std::int64_t v = 0; v < a.rows; ++v) {
    const EdgeId begin = a.indptr[v], end = a.indptr[v + 1];
    float* o = out + v * out_cols;
    std::fill(o, o + out_cols, 0.0f);
    for (int h = 0; h < heads; ++h) {
      const float t = dst_term[v * heads + h];
      float m = -std::numeric_limits<float>::infinity();
      for (EdgeId e = begin; e < end; ++e)
        m = std::max(m, detail::attention_logit(packed[a.indices[e] * ld + hf + h], t));
      float sum = 0.0f;
      for (EdgeId e = begin; e < end; ++e) {
        const float x =
            std::exp(detail::attention_logit(packed[a.indices[e] * ld + hf + h], t) - m);
        alpha[e * heads + h] = x;
        sum += x;
      }
      const float inv = 1.0f / sum;
      for (EdgeId e = begin; e < end; ++e) {
        float w = alpha[e * heads + h] * inv;
        if (p > 0.0f && !detail::attention_keep(key, ids[v], ids[a.indices[e]], h, p)) w = -w;
        alpha[e * heads + h] = w;
      }
    }
    for (EdgeId e = begin; e < end; ++e) {
      const float* z = packed + a.indices[e] * ld;
      for (int h = 0; h < heads; ++h) {
        const float w = detail::attention_weight(alpha[e * heads + h], scale) * head_scale;
        float* oh = o + (a.average ? 0 : h * f);
        const float* zh = z + h * f;
        for (std::int64_t c = 0; c < f; ++c) oh[c] += w * zh[c];
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
  // Destination side: each edge's logit gradient (into `logit_grad`) and the destination terms'.
  std::vector<float> logit_grad(static_cast<std::size_t>(edges * heads));
#pragma omp parallel for schedule(dynamic, 64) if (parallel_worth(work))
  for (std::int64_t v = 0; v < a.rows; ++v) {
    const EdgeId begin = a.indptr[v], end = a.indptr[v + 1];
    const float* g = grad_out + v * out_cols;
    for (int h = 0; h < heads; ++h) {
      const float* gh = g + (a.average ? 0 : h * f);
      float c_sum = 0.0f;
      for (EdgeId e = begin; e < end; ++e) {
        const float* zh = packed + a.indices[e] * ld + h * f;
        float dot = 0.0f;
        for (std::int64_t c = 0; c < f; ++c) dot += gh[c] * zh[c];
        const float stored = alpha[e * heads + h];
        const float d_alpha = stored > 0.0f ? dot * head_scale * scale : 0.0f;
        logit_grad[static_cast<std::size_t>(e * heads + h)] = d_alpha;
        c_sum += std::fabs(stored) * d_alpha;
      }
      const float t = dst_term[v * heads + h];
      float t_grad = 0.0f;
      for (EdgeId e = begin; e < end; ++e) {
        auto& lg = logit_grad[static_cast<std::size_t>(e * heads + h)];
        const float s = packed[a.indices[e] * ld + hf + h];
        lg = std::fabs(alpha[e * heads + h]) * (lg - c_sum) * detail::attention_logit_grad(s, t);
        t_grad += lg;
      }
      grad_dst_term[v * heads + h] = t_grad;
    }
  }
  // Source side: the edges by source, in destination order within a source.
  std::vector<EdgeId> source_ptr(static_cast<std::size_t>(a.cols + 1), 0);
  for (EdgeId e = 0; e < edges; ++e) ++source_ptr[static_cast<std::size_t>(a.indices[e] + 1)];
  for (std::int64_t u = 0; u < a.cols; ++u)
    source_ptr[static_cast<std::size_t>(u + 1)] += source_ptr[static_cast<std::size_t>(u)];
  std::vector<EdgeId> cursor(source_ptr.begin(), source_ptr.end() - 1);
  std::vector<EdgeId> source_edge(static_cast<std::size_t>(edges));
  std::vector<LocalId> source_dst(static_cast<std::size_t>(edges));
  for (std::int64_t v = 0; v < a.rows; ++v)
    for (EdgeId e = a.indptr[v]; e < a.indptr[v + 1]; ++e) {
      const EdgeId at = cursor[static_cast<std::size_t>(a.indices[e])]++;
      source_edge[static_cast<std::size_t>(at)] = e;
      source_dst[static_cast<std::size_t>(at)] = static_cast<LocalId>(v);
    }
#pragma omp parallel for schedule(dynamic, 64) if (parallel_worth(work))
  for (std::int64_t u = 0; u < a.cols; ++u) {
    float* gz = grad_packed + u * ld;
    std::fill(gz, gz + ld, 0.0f);
    for (EdgeId k = source_ptr[static_cast<std::size_t>(u)];
         k < source_ptr[static_cast<std::size_t>(u + 1)]; ++k) {
      const EdgeId e = source_edge[static_cast<std::size_t>(k)];
      const float* g = grad_out + source_dst[static_cast<std::size_t>(k)] * out_cols;
      for (int h = 0; h < heads; ++h) {
        const float w = detail::attention_weight(alpha[e * heads + h], scale) * head_scale;
        const float* gh = g + (a.average ? 0 : h * f);
        float* gzh = gz + h * f;
        for (std::int64_t c = 0; c < f; ++c) gzh[c] += w * gh[c];
        gz[hf + h] += logit_grad[static_cast<std::size_t>(e * heads + h)];
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
