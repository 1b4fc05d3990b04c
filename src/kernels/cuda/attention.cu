// CUDA twins of the attention ops: a warp per destination row for the forward and the
// destination-side backward; the source-side gradients are added with atomics.
#include "attention_ops.hpp"
#include "cuda_ops.hpp"
#include "resources.cuh"

#include <cmath>

namespace tessel::kernels::cuda {

namespace {

constexpr int kWarp = 32;
constexpr unsigned kFull = 0xFFFFFFFFu;

__device__ float warp_sum(float x) {
  for (int o = kWarp / 2; o > 0; o /= 2) x += __shfl_xor_sync(kFull, x, o);
  return x;
}
__device__ float warp_max(float x) {
  for (int o = kWarp / 2; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(kFull, x, o));
  return x;
}

__global__ void project_kernel(std::int64_t n_src, std::int64_t n_dst, int heads, std::int64_t f,
                               const float* __restrict__ wh, const float* __restrict__ att_src,
                               const float* __restrict__ att_dst, float* __restrict__ packed,
                               float* __restrict__ dst_term) {
  const std::int64_t hf = heads * f, ld = hf + heads;
  const std::int64_t total = n_src * ld;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < total; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t u = i / ld, j = i % ld;
    const float* z = wh + u * hf;
    if (j < hf) {
      packed[i] = z[j];
      continue;
    }
    const int h = static_cast<int>(j - hf);
    float s = 0.0f, t = 0.0f;
    for (std::int64_t c = 0; c < f; ++c) {
      s += z[h * f + c] * att_src[h * f + c];
      t += z[h * f + c] * att_dst[h * f + c];
    }
    packed[i] = s;
    if (u < n_dst) dst_term[u * heads + h] = t;
  }
}

__global__ void project_backward_kernel(std::int64_t n_src, std::int64_t n_dst, int heads,
                                        std::int64_t f, const float* __restrict__ packed,
                                        const float* __restrict__ grad_packed,
                                        const float* __restrict__ grad_dst_term,
                                        const float* __restrict__ att_src,
                                        const float* __restrict__ att_dst,
                                        float* __restrict__ grad_wh) {
  const std::int64_t hf = heads * f, ld = hf + heads;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n_src * hf; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t u = i / hf, j = i % hf;
    const std::int64_t h = j / f;
    const float gs = grad_packed[u * ld + hf + h];
    const float gt = u < n_dst ? grad_dst_term[u * heads + h] : 0.0f;
    grad_wh[i] = grad_packed[u * ld + j] + gs * att_src[j] + gt * att_dst[j];
  }
}

// The attention vectors' gradients: a block per range of rows, a thread per column, one atomic
// add per (block, column).
constexpr std::int64_t kReduceRows = 1024;
__global__ void project_reduce_kernel(std::int64_t n_src, std::int64_t n_dst, int heads,
                                      std::int64_t f, const float* __restrict__ packed,
                                      const float* __restrict__ grad_packed,
                                      const float* __restrict__ grad_dst_term,
                                      float* __restrict__ grad_att_src,
                                      float* __restrict__ grad_att_dst) {
  const std::int64_t hf = heads * f, ld = hf + heads;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * kReduceRows;
  const std::int64_t end = begin + kReduceRows < n_src ? begin + kReduceRows : n_src;
  for (std::int64_t j = threadIdx.x; j < hf; j += blockDim.x) {
    const std::int64_t h = j / f;
    float ps = 0.0f, pd = 0.0f;
    for (std::int64_t u = begin; u < end; ++u) {
      const float z = packed[u * ld + j];
      ps += grad_packed[u * ld + hf + h] * z;
      if (u < n_dst) pd += grad_dst_term[u * heads + h] * z;
    }
    atomicAdd(grad_att_src + j, ps);
    atomicAdd(grad_att_dst + j, pd);
  }
}

__global__ void forward_kernel(detail::AttentionArgs a, const float* __restrict__ packed,
                               const float* __restrict__ dst_term, rng::Key key, float p,
                               const std::int64_t* __restrict__ ids, float* __restrict__ out,
                               float* __restrict__ alpha) {
  const int lane = threadIdx.x % kWarp;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / kWarp;
  const int heads = a.heads;
  const std::int64_t f = a.f, hf = heads * f, ld = hf + heads;
  const std::int64_t out_cols = a.average ? f : hf;
  const float scale = detail::attention_keep_scale(p);
  const float head_scale = a.average ? 1.0f / static_cast<float>(heads) : 1.0f;
  for (std::int64_t v = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
       v < a.rows; v += warps) {
    const EdgeId begin = a.indptr[v], end = a.indptr[v + 1];
    for (int h = 0; h < heads; ++h) {
      const float t = dst_term[v * heads + h];
      float m = -INFINITY;
      for (EdgeId e = begin + lane; e < end; e += kWarp)
        m = fmaxf(m, detail::attention_logit(packed[a.indices[e] * ld + hf + h], t));
      m = warp_max(m);
      float sum = 0.0f;
      for (EdgeId e = begin + lane; e < end; e += kWarp)
        sum += expf(detail::attention_logit(packed[a.indices[e] * ld + hf + h], t) - m);
      const float inv = 1.0f / warp_sum(sum);
      for (EdgeId e = begin + lane; e < end; e += kWarp) {
        const LocalId u = a.indices[e];
        float w = expf(detail::attention_logit(packed[u * ld + hf + h], t) - m) * inv;
        if (p > 0.0f && !detail::attention_keep(key, ids[v], ids[u], h, p)) w = -w;
        alpha[e * heads + h] = w;
      }
    }
    __syncwarp();
    for (std::int64_t c0 = 0; c0 < out_cols; c0 += kWarp) {
      const std::int64_t c = c0 + lane;
      if (c >= out_cols) continue;
      float acc = 0.0f;
      if (a.average) {
        for (EdgeId e = begin; e < end; ++e) {
          const float* z = packed + a.indices[e] * ld;
          for (int h = 0; h < heads; ++h)
            acc += detail::attention_weight(alpha[e * heads + h], scale) * head_scale * z[h * f + c];
        }
      } else {
        const int h = static_cast<int>(c / f);
        for (EdgeId e = begin; e < end; ++e)
          acc += detail::attention_weight(alpha[e * heads + h], scale) * packed[a.indices[e] * ld + c];
      }
      out[v * out_cols + c] = acc;
    }
    __syncwarp();
  }
}

__global__ void backward_kernel(detail::AttentionArgs a, const float* __restrict__ packed,
                                const float* __restrict__ dst_term, float p,
                                const float* __restrict__ alpha,
                                const float* __restrict__ grad_out,
                                float* __restrict__ grad_packed,
                                float* __restrict__ grad_dst_term) {
  const int lane = threadIdx.x % kWarp;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / kWarp;
  const int heads = a.heads;
  const std::int64_t f = a.f, hf = heads * f, ld = hf + heads;
  const std::int64_t out_cols = a.average ? f : hf;
  const float scale = detail::attention_keep_scale(p);
  const float head_scale = a.average ? 1.0f / static_cast<float>(heads) : 1.0f;
  for (std::int64_t v = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
       v < a.rows; v += warps) {
    const EdgeId begin = a.indptr[v], end = a.indptr[v + 1];
    const float* g = grad_out + v * out_cols;
    for (int h = 0; h < heads; ++h) {
      const float* gh = g + (a.average ? 0 : h * f);
      const float t = dst_term[v * heads + h];
      // Each lane's edges: d alpha, then the row's sum of alpha d alpha.
      float c_sum = 0.0f;
      for (EdgeId e = begin + lane; e < end; e += kWarp) {
        const float* zh = packed + a.indices[e] * ld + h * f;
        float dot = 0.0f;
        for (std::int64_t c = 0; c < f; ++c) dot += gh[c] * zh[c];
        const float stored = alpha[e * heads + h];
        c_sum += fabsf(stored) * (stored > 0.0f ? dot * head_scale * scale : 0.0f);
      }
      c_sum = warp_sum(c_sum);
      float t_grad = 0.0f;
      for (EdgeId e = begin + lane; e < end; e += kWarp) {
        const LocalId u = a.indices[e];
        const float* zh = packed + u * ld + h * f;
        float dot = 0.0f;
        for (std::int64_t c = 0; c < f; ++c) dot += gh[c] * zh[c];
        const float stored = alpha[e * heads + h];
        const float d_alpha = stored > 0.0f ? dot * head_scale * scale : 0.0f;
        const float s = packed[u * ld + hf + h];
        const float lg = fabsf(stored) * (d_alpha - c_sum) * detail::attention_logit_grad(s, t);
        t_grad += lg;
        atomicAdd(grad_packed + u * ld + hf + h, lg);
      }
      t_grad = warp_sum(t_grad);
      if (lane == 0) grad_dst_term[v * heads + h] = t_grad;
      // d z_u[h] += alpha' g_v[h]: the lanes across the columns.
      for (EdgeId e = begin; e < end; ++e) {
        const float w = detail::attention_weight(alpha[e * heads + h], scale) * head_scale;
        if (w == 0.0f) continue;
        float* gz = grad_packed + a.indices[e] * ld + h * f;
        for (std::int64_t c = lane; c < f; c += kWarp) atomicAdd(gz + c, w * gh[c]);
      }
    }
  }
}

__global__ void add_self_loops_kernel(std::int64_t rows, const EdgeId* __restrict__ indptr,
                                      const LocalId* __restrict__ indices,
                                      EdgeId* __restrict__ out_indptr,
                                      LocalId* __restrict__ out_indices) {
  for (std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       v <= rows; v += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    out_indptr[v] = indptr[v] + v;
    if (v == rows) continue;
    LocalId* out = out_indices + indptr[v] + v;
    *out++ = static_cast<LocalId>(v);
    for (EdgeId e = indptr[v]; e < indptr[v + 1]; ++e) *out++ = indices[e];
  }
}

} // namespace

void attention_project(Resources& r, std::int64_t n_src, std::int64_t n_dst, int heads,
                       std::int64_t f, const float* wh, const float* att_src,
                       const float* att_dst, float* packed, float* dst_term) {
  project_kernel<<<blocks_for(n_src * (heads * f + heads)), kThreads, 0, r.stream>>>(
      n_src, n_dst, heads, f, wh, att_src, att_dst, packed, dst_term);
  TESSEL_CHECK_LAUNCH();
}

void attention_project_backward(Resources& r, std::int64_t n_src, std::int64_t n_dst, int heads,
                                std::int64_t f, const float* packed, const float* grad_packed,
                                const float* grad_dst_term, const float* att_src,
                                const float* att_dst, float* grad_wh, float* grad_att_src,
                                float* grad_att_dst) {
  project_backward_kernel<<<blocks_for(n_src * heads * f), kThreads, 0, r.stream>>>(
      n_src, n_dst, heads, f, packed, grad_packed, grad_dst_term, att_src, att_dst, grad_wh);
  TESSEL_CHECK_LAUNCH();
  const auto blocks = static_cast<unsigned>((n_src + kReduceRows - 1) / kReduceRows);
  project_reduce_kernel<<<blocks, kThreads, 0, r.stream>>>(n_src, n_dst, heads, f, packed,
                                                           grad_packed, grad_dst_term,
                                                           grad_att_src, grad_att_dst);
  TESSEL_CHECK_LAUNCH();
}

void attention_forward(Resources& r, const detail::AttentionArgs& a, const float* packed,
                       const float* dst_term, const rng::Key& key, float p,
                       const std::int64_t* ids, float* out, float* alpha) {
  forward_kernel<<<blocks_for(a.rows * kWarp), kThreads, 0, r.stream>>>(a, packed, dst_term, key,
                                                                        p, ids, out, alpha);
  TESSEL_CHECK_LAUNCH();
}

void attention_backward(Resources& r, const detail::AttentionArgs& a, const float* packed,
                        const float* dst_term, float p, const float* alpha, const float* grad_out,
                        float* grad_packed, float* grad_dst_term) {
  const std::int64_t ld = a.heads * a.f + a.heads;
  TESSEL_CHECK_CUDA(cudaMemsetAsync(grad_packed, 0, static_cast<std::size_t>(a.cols * ld) * 4,
                                    r.stream));
  if (a.rows == 0) return;
  backward_kernel<<<blocks_for(a.rows * kWarp), kThreads, 0, r.stream>>>(
      a, packed, dst_term, p, alpha, grad_out, grad_packed, grad_dst_term);
  TESSEL_CHECK_LAUNCH();
}

void add_self_loops(Resources& r, std::int64_t rows, const EdgeId* indptr, const LocalId* indices,
                    EdgeId* out_indptr, LocalId* out_indices) {
  add_self_loops_kernel<<<blocks_for(rows + 1), kThreads, 0, r.stream>>>(rows, indptr, indices,
                                                                         out_indptr, out_indices);
  TESSEL_CHECK_LAUNCH();
}

} // namespace tessel::kernels::cuda
