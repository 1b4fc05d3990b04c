// CPU twins of the GRU and LSTM gate arithmetic (forward and backward), a row per iteration.
#include "cpu_ops.hpp"

#include <cmath>

namespace tessel::kernels::cpu {

namespace {
inline float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}
} // namespace

void gru_cell_forward(std::int64_t n, std::int64_t h, const float* gi, const float* gh,
                      const float* h_prev, float* r, float* z, float* n_gate, float* hn,
                      float* h_next) {
#pragma omp parallel for schedule(static) if (parallel_worth(n * h))
  for (std::int64_t v = 0; v < n; ++v) {
    const float* a = gi + v * 3 * h;
    const float* b = gh + v * 3 * h;
    for (std::int64_t j = 0; j < h; ++j) {
      const std::int64_t k = v * h + j;
      r[k] = sigmoid(a[j] + b[j]);
      z[k] = sigmoid(a[h + j] + b[h + j]);
      hn[k] = b[2 * h + j];
      n_gate[k] = std::tanh(a[2 * h + j] + r[k] * hn[k]);
      h_next[k] = (1.0f - z[k]) * n_gate[k] + z[k] * h_prev[k];
    }
  }
}

void gru_cell_backward(std::int64_t n, std::int64_t h, const float* grad_h_next,
                       const float* h_prev, const float* r, const float* z, const float* n_gate,
                       const float* hn, float* grad_gi, float* grad_gh, float* grad_h) {
#pragma omp parallel for schedule(static) if (parallel_worth(n * h))
  for (std::int64_t v = 0; v < n; ++v) {
    float* a = grad_gi + v * 3 * h;
    float* b = grad_gh + v * 3 * h;
    for (std::int64_t j = 0; j < h; ++j) {
      const std::int64_t k = v * h + j;
      const float g = grad_h_next[k];
      const float dn = g * (1.0f - z[k]);
      const float dz = g * (h_prev[k] - n_gate[k]);
      grad_h[k] = g * z[k];
      const float dn_pre = dn * (1.0f - n_gate[k] * n_gate[k]);
      const float dr_pre = dn_pre * hn[k] * r[k] * (1.0f - r[k]);
      const float dz_pre = dz * z[k] * (1.0f - z[k]);
      a[j] = b[j] = dr_pre;
      a[h + j] = b[h + j] = dz_pre;
      a[2 * h + j] = dn_pre;
      b[2 * h + j] = dn_pre * r[k];
    }
  }
}

void lstm_cell_forward(std::int64_t n, std::int64_t h, float* gates, const float* c, float* c_next,
                       float* h_next) {
#pragma omp parallel for schedule(static) if (parallel_worth(n * h))
  for (std::int64_t v = 0; v < n; ++v) {
    float* row = gates + v * 4 * h;
    for (std::int64_t j = 0; j < h; ++j) {
      const float i = sigmoid(row[j]), f = sigmoid(row[h + j]), g = std::tanh(row[2 * h + j]),
                  o = sigmoid(row[3 * h + j]);
      row[j] = i;
      row[h + j] = f;
      row[2 * h + j] = g;
      row[3 * h + j] = o;
      const std::int64_t k = v * h + j;
      c_next[k] = f * c[k] + i * g;
      h_next[k] = o * std::tanh(c_next[k]);
    }
  }
}

void lstm_cell_backward(std::int64_t n, std::int64_t h, const float* grad_h, const float* grad_c,
                        const float* gates, const float* c, const float* c_next, float* grad_pre,
                        float* grad_c_prev) {
#pragma omp parallel for schedule(static) if (parallel_worth(n * h))
  for (std::int64_t v = 0; v < n; ++v) {
    const float* row = gates + v * 4 * h;
    float* d = grad_pre + v * 4 * h;
    for (std::int64_t j = 0; j < h; ++j) {
      const std::int64_t k = v * h + j;
      const float i = row[j], f = row[h + j], g = row[2 * h + j], o = row[3 * h + j];
      const float tc = std::tanh(c_next[k]);
      const float dc = (grad_c ? grad_c[k] : 0.0f) + grad_h[k] * o * (1.0f - tc * tc);
      d[j] = dc * g * i * (1.0f - i);
      d[h + j] = dc * c[k] * f * (1.0f - f);
      d[2 * h + j] = dc * i * (1.0f - g * g);
      d[3 * h + j] = grad_h[k] * tc * o * (1.0f - o);
      grad_c_prev[k] = dc * f;
    }
  }
}

} // namespace tessel::kernels::cpu
