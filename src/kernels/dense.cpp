// Dispatch of the dense ops: GEMM, bias, row gather/scatter, ReLU, dropout, normalization, axpy.
#include "tessel/kernels/dense.hpp"

#include "check.hpp"
#include "cpu/cpu_ops.hpp"
#ifdef TESSEL_WITH_CUDA
#include "cuda/cuda_ops.hpp"
#endif

namespace tessel::kernels {

void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c,
          float alpha, float beta, Context* ctx) {
  constexpr const char* kOp = "gemm";
  detail::expect_tensor(kOp, "a", a, DType::f32, 2);
  detail::expect_tensor(kOp, "b", b, DType::f32, 2);
  detail::expect_tensor(kOp, "c", c, DType::f32, 2);
  const Device device = c.device();
  detail::expect_device(kOp, "a", a, device);
  detail::expect_device(kOp, "b", b, device);
  const std::int64_t m = transpose_a ? a.cols() : a.rows();
  const std::int64_t k = transpose_a ? a.rows() : a.cols();
  const std::int64_t kb = transpose_b ? b.cols() : b.rows();
  const std::int64_t n = transpose_b ? b.rows() : b.cols();
  TESSEL_EXPECTS(k == kb, "{}: inner dimensions differ: op(a) is {}x{} ({}), op(b) is {}x{} ({})",
                 kOp, m, k, a.describe(), kb, n, b.describe());
  detail::expect_shape(kOp, "c", c, {m, n});
  Context& context = resolve_context(ctx, device, kOp);
  if (m == 0 || n == 0) return;
  TESSEL_KERNEL_DISPATCH(kOp, device, context,
                         cpu::gemm(transpose_a, transpose_b, m, n, k, alpha, a.ptr<float>(),
                                   a.cols(), b.ptr<float>(), b.cols(), beta, c.ptr<float>(), n),
                         cuda::gemm(r, transpose_a, transpose_b, m, n, k, alpha, a.ptr<float>(),
                                    a.cols(), b.ptr<float>(), b.cols(), beta, c.ptr<float>(), n));
}

const char* cpu_gemm_backend() {
  return cpu::gemm_backend();
}

void set_cpu_threads(int threads) {
  TESSEL_EXPECTS(threads >= 1, "set_cpu_threads: {} threads, need at least 1", threads);
  cpu::set_threads(threads);
}

void add_bias(Tensor& y, const Tensor& bias, Context* ctx) {
  constexpr const char* kOp = "add_bias";
  detail::expect_tensor(kOp, "y", y, DType::f32, 2);
  detail::expect_tensor(kOp, "bias", bias, DType::f32, 1);
  detail::expect_shape(kOp, "bias", bias, {y.cols()});
  const Device device = y.device();
  detail::expect_device(kOp, "bias", bias, device);
  Context& context = resolve_context(ctx, device, kOp);
  if (y.numel() == 0) return;
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context, cpu::add_bias(y.rows(), y.cols(), bias.ptr<float>(), y.ptr<float>()),
      cuda::add_bias(r, y.rows(), y.cols(), bias.ptr<float>(), y.ptr<float>()));
}

void column_sums(const Tensor& x, Tensor& out, bool accumulate, Context* ctx) {
  constexpr const char* kOp = "column_sums";
  detail::expect_tensor(kOp, "x", x, DType::f32, 2);
  detail::expect_tensor(kOp, "out", out, DType::f32, 1);
  detail::expect_shape(kOp, "out", out, {x.cols()});
  const Device device = x.device();
  detail::expect_device(kOp, "out", out, device);
  Context& context = resolve_context(ctx, device, kOp);
  if (out.numel() == 0) return;
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context,
      cpu::column_sums(x.rows(), x.cols(), x.ptr<float>(), out.ptr<float>(), accumulate),
      cuda::column_sums(r, x.rows(), x.cols(), x.ptr<float>(), out.ptr<float>(), accumulate));
}

namespace {
void expect_row_op(const char* op, const Tensor& src, const Tensor& index, const Tensor& out) {
  detail::expect_tensor(op, "src", src, DType::f32, 2);
  detail::expect_tensor(op, "out", out, DType::f32, 2);
  TESSEL_EXPECTS(index.defined() && index.dim() == 1 &&
                     (index.dtype() == DType::i32 || index.dtype() == DType::i64),
                 "{}: index must be i32 or i64 of rank 1, got {}", op,
                 index.defined() ? index.describe() : std::string("undefined"));
  TESSEL_EXPECTS(src.cols() == out.cols(), "{}: src {} and out {} differ in columns", op,
                 src.describe(), out.describe());
  detail::expect_device(op, "index", index, src.device());
  detail::expect_device(op, "out", out, src.device());
}
} // namespace

void gather_rows(const Tensor& src, const Tensor& index, Tensor& out, Context* ctx) {
  constexpr const char* kOp = "gather_rows";
  expect_row_op(kOp, src, index, out);
  TESSEL_EXPECTS(out.rows() == index.numel(), "{}: out {} for {} indices", kOp, out.describe(),
                 index.numel());
  const Device device = src.device();
  Context& context = resolve_context(ctx, device, kOp);
  if (out.numel() == 0) return;
  const std::int64_t m = out.rows(), f = out.cols();
  detail::with_index_type(index, [&](auto tag) {
    using Index = decltype(tag);
    TESSEL_KERNEL_DISPATCH(
        kOp, device, context,
        cpu::gather_rows(m, f, src.ptr<float>(), index.ptr<Index>(), out.ptr<float>()),
        cuda::gather_rows(r, m, f, src.ptr<float>(), index.ptr<Index>(), out.ptr<float>()));
  });
}

void scatter_add_rows(const Tensor& src, const Tensor& index, Tensor& out, Context* ctx) {
  constexpr const char* kOp = "scatter_add_rows";
  expect_row_op(kOp, src, index, out);
  TESSEL_EXPECTS(src.rows() == index.numel(), "{}: src {} for {} indices", kOp, src.describe(),
                 index.numel());
  const Device device = src.device();
  Context& context = resolve_context(ctx, device, kOp);
  if (src.numel() == 0) return;
  const std::int64_t m = src.rows(), f = src.cols();
  detail::with_index_type(index, [&](auto tag) {
    using Index = decltype(tag);
    TESSEL_KERNEL_DISPATCH(
        kOp, device, context,
        cpu::scatter_add_rows(m, f, src.ptr<float>(), index.ptr<Index>(), out.ptr<float>()),
        cuda::scatter_add_rows(r, m, f, src.ptr<float>(), index.ptr<Index>(), out.ptr<float>()));
  });
}

void scatter_add_rows_segmented(const Tensor& src, const Tensor& index,
                                std::span<const std::int64_t> segment_rows, Tensor& out,
                                Context* ctx) {
  constexpr const char* kOp = "scatter_add_rows_segmented";
  expect_row_op(kOp, src, index, out);
  TESSEL_EXPECTS(src.rows() == index.numel(), "{}: src {} for {} indices", kOp, src.describe(),
                 index.numel());
  std::int64_t total = 0;
  for (const std::int64_t rows : segment_rows) {
    TESSEL_EXPECTS(rows >= 0, "{}: a segment of {} rows", kOp, rows);
    total += rows;
  }
  TESSEL_EXPECTS(total == src.rows(), "{}: segments of {} rows in all for src {}", kOp, total,
                 src.describe());
  const Device device = src.device();
  Context& context = resolve_context(ctx, device, kOp);
  if (src.numel() == 0) return;
  const std::int64_t f = src.cols();
  const auto segments = static_cast<std::int64_t>(segment_rows.size());
  detail::with_index_type(index, [&](auto tag) {
    using Index = decltype(tag);
    TESSEL_KERNEL_DISPATCH(
        kOp, device, context,
        cpu::scatter_add_rows_segmented(segments, segment_rows.data(), f, src.ptr<float>(),
                                        index.ptr<Index>(), out.ptr<float>()),
        cuda::scatter_add_rows_segmented(r, segments, segment_rows.data(), f, src.ptr<float>(),
                                         index.ptr<Index>(), out.ptr<float>()));
  });
}

void relu_forward(const Tensor& x, Tensor& y, Context* ctx) {
  constexpr const char* kOp = "relu_forward";
  detail::expect_tensor(kOp, "x", x, DType::f32, x.defined() ? x.dim() : 1);
  detail::expect_tensor(kOp, "y", y, DType::f32, x.dim());
  detail::expect_same_shape(kOp, "x", x, "y", y);
  const Device device = x.device();
  detail::expect_device(kOp, "y", y, device);
  Context& context = resolve_context(ctx, device, kOp);
  if (x.numel() == 0) return;
  TESSEL_KERNEL_DISPATCH(kOp, device, context,
                         cpu::relu_forward(x.numel(), x.ptr<float>(), y.ptr<float>()),
                         cuda::relu_forward(r, x.numel(), x.ptr<float>(), y.ptr<float>()));
}

void relu_backward(const Tensor& grad_y, const Tensor& y, Tensor& grad_x, Context* ctx) {
  constexpr const char* kOp = "relu_backward";
  detail::expect_tensor(kOp, "y", y, DType::f32, y.defined() ? y.dim() : 1);
  detail::expect_tensor(kOp, "grad_y", grad_y, DType::f32, y.dim());
  detail::expect_tensor(kOp, "grad_x", grad_x, DType::f32, y.dim());
  detail::expect_same_shape(kOp, "grad_y", grad_y, "y", y);
  detail::expect_same_shape(kOp, "grad_x", grad_x, "y", y);
  const Device device = y.device();
  detail::expect_device(kOp, "grad_y", grad_y, device);
  detail::expect_device(kOp, "grad_x", grad_x, device);
  Context& context = resolve_context(ctx, device, kOp);
  if (y.numel() == 0) return;
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context,
      cpu::relu_backward(y.numel(), grad_y.ptr<float>(), y.ptr<float>(), grad_x.ptr<float>()),
      cuda::relu_backward(r, y.numel(), grad_y.ptr<float>(), y.ptr<float>(),
                          grad_x.ptr<float>()));
}

namespace {
// A mask of one bit per element of x: u8 [rows, ceil(cols / 8)].
void expect_mask(const char* op, const char* name, const Tensor& mask, const Tensor& x) {
  detail::expect_tensor(op, name, mask, DType::u8, 2);
  TESSEL_EXPECTS(mask.rows() == x.rows() && mask.cols() == (x.cols() + 7) / 8,
                 "{}: {} {} expected [{}, {}] (one bit per element of {})", op, name,
                 mask.describe(), x.rows(), (x.cols() + 7) / 8, x.describe());
}
} // namespace

std::vector<std::int64_t> dropout_mask_shape(const Tensor& x) {
  TESSEL_EXPECTS(x.defined() && x.dim() == 2, "dropout_mask_shape: {} is not a matrix",
                 x.describe());
  return {x.rows(), (x.cols() + 7) / 8};
}

void dropout_forward(const Tensor& x, std::span<const NodeId> row_ids, const rng::Key& key, float p,
                     Tensor& y, Tensor& mask, Context* ctx) {
  constexpr const char* kOp = "dropout_forward";
  detail::expect_tensor(kOp, "x", x, DType::f32, 2);
  detail::expect_tensor(kOp, "y", y, DType::f32, 2);
  detail::expect_same_shape(kOp, "x", x, "y", y);
  if (mask.defined()) expect_mask(kOp, "mask", mask, x);
  TESSEL_EXPECTS(static_cast<std::int64_t>(row_ids.size()) == x.rows(),
                 "{}: {} row ids for {} rows", kOp, row_ids.size(), x.rows());
  TESSEL_EXPECTS(p >= 0.0f && p < 1.0f, "{}: probability {} outside [0, 1)", kOp, p);
  const Device device = x.device();
  detail::expect_device(kOp, "y", y, device);
  if (mask.defined()) detail::expect_device(kOp, "mask", mask, device);
  std::uint8_t* mask_ptr = mask.defined() ? mask.ptr<std::uint8_t>() : nullptr;
  Context& context = resolve_context(ctx, device, kOp);
  if (x.numel() == 0) return;
  TESSEL_KERNEL_DISPATCH(kOp, device, context,
                         cpu::dropout_forward(x.rows(), x.cols(), x.ptr<float>(), row_ids.data(),
                                              key, p, y.ptr<float>(), mask_ptr),
                         cuda::dropout_forward(r, x.rows(), x.cols(), x.ptr<float>(),
                                               row_ids.data(), key, p, y.ptr<float>(), mask_ptr));
}

void dropout_forward(const Tensor& x, const Tensor& row_ids, const rng::Key& key, float p,
                     Tensor& y, Tensor& mask, Context* ctx) {
  constexpr const char* kOp = "dropout_forward";
  detail::expect_tensor(kOp, "x", x, DType::f32, 2);
  detail::expect_tensor(kOp, "row_ids", row_ids, DType::i64, 1);
  detail::expect_tensor(kOp, "y", y, DType::f32, 2);
  detail::expect_same_shape(kOp, "x", x, "y", y);
  if (mask.defined()) expect_mask(kOp, "mask", mask, x);
  TESSEL_EXPECTS(row_ids.numel() == x.rows(), "{}: {} row ids for {} rows", kOp, row_ids.numel(),
                 x.rows());
  TESSEL_EXPECTS(p >= 0.0f && p < 1.0f, "{}: probability {} outside [0, 1)", kOp, p);
  const Device device = x.device();
  detail::expect_device(kOp, "row_ids", row_ids, device);
  detail::expect_device(kOp, "y", y, device);
  if (mask.defined()) detail::expect_device(kOp, "mask", mask, device);
  std::uint8_t* mask_ptr = mask.defined() ? mask.ptr<std::uint8_t>() : nullptr;
  Context& context = resolve_context(ctx, device, kOp);
  if (x.numel() == 0) return;
  TESSEL_KERNEL_DISPATCH(kOp, device, context,
                         cpu::dropout_forward(x.rows(), x.cols(), x.ptr<float>(),
                                              row_ids.ptr<NodeId>(), key, p, y.ptr<float>(),
                                              mask_ptr),
                         cuda::dropout_forward_device_ids(r, x.rows(), x.cols(), x.ptr<float>(),
                                                          row_ids.ptr<NodeId>(), key, p,
                                                          y.ptr<float>(), mask_ptr));
}

namespace {

// The checks both gather_dropout_rows overloads make of their rows, ids, probability and y.
void expect_gather_args(std::span<const float* const> rows, std::span<const NodeId> row_ids,
                        float p, const Tensor& y) {
  constexpr const char* kOp = "gather_dropout_rows";
  TESSEL_EXPECTS(y.device().is_cpu(), "{}: y is on {}, the op runs on the CPU only", kOp,
                 y.device().str());
  TESSEL_EXPECTS(static_cast<std::int64_t>(rows.size()) == y.rows(), "{}: {} rows for {} of y",
                 kOp, rows.size(), y.rows());
  TESSEL_EXPECTS(p == 0.0f || static_cast<std::int64_t>(row_ids.size()) == y.rows(),
                 "{}: {} row ids for {} rows", kOp, row_ids.size(), y.rows());
  TESSEL_EXPECTS(p >= 0.0f && p < 1.0f, "{}: probability {} outside [0, 1)", kOp, p);
}

}  // namespace

void gather_dropout_rows(std::span<const float* const> rows, std::span<const NodeId> row_ids,
                         const rng::Key& key, float p, Tensor& y) {
  detail::expect_tensor("gather_dropout_rows", "y", y, DType::f32, 2);
  expect_gather_args(rows, row_ids, p, y);
  if (y.numel() == 0) return;
  cpu::gather_dropout_rows(y.rows(), y.cols(), rows.data(), p > 0.0f ? row_ids.data() : nullptr,
                           key, p, y.ptr<float>());
}

void gather_dropout_rows(std::span<const float* const> rows, std::span<const NodeId> row_ids,
                         const rng::Key& key, float p, Tensor& y,
                         std::span<const std::int64_t> order) {
  constexpr const char* kOp = "gather_dropout_rows";
  if (order.empty()) {
    gather_dropout_rows(rows, row_ids, key, p, y);
    return;
  }
  detail::expect_tensor(kOp, "y", y, DType::f32, 2);
  TESSEL_EXPECTS(static_cast<std::int64_t>(order.size()) == y.rows(),
                 "{}: an order of {} rows for {} of y", kOp, order.size(), y.rows());
  // A permutation, or some rows of y would be left unwritten (one byte per row: cheap beside
  // the gather's row reads).
  std::vector<std::uint8_t> seen(order.size(), 0);
  for (const std::int64_t i : order) {
    TESSEL_EXPECTS(i >= 0 && i < y.rows() && seen[static_cast<std::size_t>(i)] == 0,
                   "{}: the order is not a permutation of the {} rows (row {})", kOp, y.rows(), i);
    seen[static_cast<std::size_t>(i)] = 1;
  }
  expect_gather_args(rows, row_ids, p, y);
  cpu::gather_dropout_rows(y.rows(), y.cols(), rows.data(), p > 0.0f ? row_ids.data() : nullptr,
                           key, p, y.ptr<float>(), order.data());
}

void gather_read_order(std::span<const std::int64_t> keys, std::int64_t key_bound,
                       std::vector<std::int64_t>& order) {
  constexpr int kMaxBucketBits = 16;
  TESSEL_EXPECTS(key_bound >= 0, "gather_read_order: key bound {}", key_bound);
  int shift = 0;
  while ((key_bound >> shift) > (std::int64_t{1} << kMaxBucketBits)) ++shift;
  const std::int64_t buckets = (key_bound >> shift) + 1;
  std::vector<std::int64_t> start(static_cast<std::size_t>(buckets) + 1, 0);
  for (const std::int64_t k : keys) {
    TESSEL_EXPECTS(k >= 0 && k < key_bound, "gather_read_order: key {} outside [0, {})", k,
                   key_bound);
    ++start[static_cast<std::size_t>(k >> shift) + 1];
  }
  for (std::size_t b = 1; b < start.size(); ++b) start[b] += start[b - 1];
  order.resize(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i)
    order[static_cast<std::size_t>(start[static_cast<std::size_t>(keys[i] >> shift)]++)] =
        static_cast<std::int64_t>(i);
}

void dropout_backward(const Tensor& grad_y, const Tensor& mask, float p, Tensor& grad_x,
                      Context* ctx) {
  constexpr const char* kOp = "dropout_backward";
  detail::expect_tensor(kOp, "grad_y", grad_y, DType::f32, 2);
  detail::expect_tensor(kOp, "grad_x", grad_x, DType::f32, 2);
  expect_mask(kOp, "mask", mask, grad_y);
  detail::expect_same_shape(kOp, "grad_y", grad_y, "grad_x", grad_x);
  TESSEL_EXPECTS(p >= 0.0f && p < 1.0f, "{}: probability {} outside [0, 1)", kOp, p);
  const Device device = grad_y.device();
  detail::expect_device(kOp, "mask", mask, device);
  detail::expect_device(kOp, "grad_x", grad_x, device);
  Context& context = resolve_context(ctx, device, kOp);
  if (grad_y.numel() == 0) return;
  TESSEL_KERNEL_DISPATCH(kOp, device, context,
                         cpu::dropout_backward(grad_y.rows(), grad_y.cols(), grad_y.ptr<float>(),
                                               mask.ptr<std::uint8_t>(), p, grad_x.ptr<float>()),
                         cuda::dropout_backward(r, grad_y.rows(), grad_y.cols(),
                                                grad_y.ptr<float>(), mask.ptr<std::uint8_t>(), p,
                                                grad_x.ptr<float>()));
}

namespace {
void expect_relu_dropout(const char* op, const Tensor& x, const Tensor& y, const Tensor& bits,
                         float p) {
  detail::expect_tensor(op, "x", x, DType::f32, 2);
  detail::expect_tensor(op, "y", y, DType::f32, 2);
  detail::expect_same_shape(op, "x", x, "y", y);
  expect_mask(op, "bits", bits, x);
  TESSEL_EXPECTS(p >= 0.0f && p < 1.0f, "{}: probability {} outside [0, 1)", op, p);
  detail::expect_device(op, "y", y, x.device());
  detail::expect_device(op, "bits", bits, x.device());
}
} // namespace

void relu_dropout_forward(const Tensor& x, std::span<const NodeId> row_ids, const rng::Key& key,
                          float p, Tensor& y, Tensor& bits, Context* ctx) {
  constexpr const char* kOp = "relu_dropout_forward";
  expect_relu_dropout(kOp, x, y, bits, p);
  TESSEL_EXPECTS(p == 0.0f || static_cast<std::int64_t>(row_ids.size()) == x.rows(),
                 "{}: {} row ids for {} rows", kOp, row_ids.size(), x.rows());
  const Device device = x.device();
  Context& context = resolve_context(ctx, device, kOp);
  if (x.numel() == 0) return;
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context,
      cpu::relu_dropout_forward(x.rows(), x.cols(), x.ptr<float>(), row_ids.data(), key, p,
                                y.ptr<float>(), bits.ptr<std::uint8_t>()),
      cuda::relu_dropout_forward(r, x.rows(), x.cols(), x.ptr<float>(),
                                 p > 0.0f ? cuda::upload_row_ids(r, x.rows(), row_ids.data())
                                          : nullptr,
                                 key, p, y.ptr<float>(), bits.ptr<std::uint8_t>()));
}

void relu_dropout_forward(const Tensor& x, const Tensor& row_ids, const rng::Key& key, float p,
                          Tensor& y, Tensor& bits, Context* ctx) {
  constexpr const char* kOp = "relu_dropout_forward";
  expect_relu_dropout(kOp, x, y, bits, p);
  detail::expect_tensor(kOp, "row_ids", row_ids, DType::i64, 1);
  TESSEL_EXPECTS(row_ids.numel() == x.rows(), "{}: {} row ids for {} rows", kOp, row_ids.numel(),
                 x.rows());
  const Device device = x.device();
  detail::expect_device(kOp, "row_ids", row_ids, device);
  Context& context = resolve_context(ctx, device, kOp);
  if (x.numel() == 0) return;
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context,
      cpu::relu_dropout_forward(x.rows(), x.cols(), x.ptr<float>(), row_ids.ptr<NodeId>(), key, p,
                                y.ptr<float>(), bits.ptr<std::uint8_t>()),
      cuda::relu_dropout_forward(r, x.rows(), x.cols(), x.ptr<float>(), row_ids.ptr<NodeId>(), key,
                                 p, y.ptr<float>(), bits.ptr<std::uint8_t>()));
}

void relu_dropout_backward(const Tensor& grad_y, const Tensor& bits, float p, Tensor& grad_x,
                           Context* ctx) {
  constexpr const char* kOp = "relu_dropout_backward";
  expect_relu_dropout(kOp, grad_y, grad_x, bits, p);
  const Device device = grad_y.device();
  Context& context = resolve_context(ctx, device, kOp);
  if (grad_y.numel() == 0) return;
  TESSEL_KERNEL_DISPATCH(kOp, device, context,
                         cpu::relu_dropout_backward(grad_y.rows(), grad_y.cols(),
                                                    grad_y.ptr<float>(), bits.ptr<std::uint8_t>(),
                                                    p, grad_x.ptr<float>()),
                         cuda::relu_dropout_backward(r, grad_y.rows(), grad_y.cols(),
                                                     grad_y.ptr<float>(), bits.ptr<std::uint8_t>(),
                                                     p, grad_x.ptr<float>()));
}

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
  case CpuIsa::portable:
    return "portable";
  case CpuIsa::avx2:
    return "avx2";
  case CpuIsa::avx512:
    return "avx512";
  }
  return "unknown";
}

bool cpu_supports(CpuIsa isa) {
  return cpu::isa_supported(isa);
}

CpuIsa cpu_dropout_isa() {
  return cpu::dropout_isa();
}

void set_cpu_dropout_isa(CpuIsa isa) {
  cpu::set_dropout_isa(isa);
}

void normalize_rows(Tensor& x, Context* ctx) {
  constexpr const char* kOp = "normalize_rows";
  detail::expect_tensor(kOp, "x", x, DType::f32, 2);
  const Device device = x.device();
  Context& context = resolve_context(ctx, device, kOp);
  if (x.numel() == 0) return;
  TESSEL_KERNEL_DISPATCH(kOp, device, context,
                         cpu::normalize_rows(x.rows(), x.cols(), x.ptr<float>()),
                         cuda::normalize_rows(r, x.rows(), x.cols(), x.ptr<float>()));
}

void axpy(float alpha, const Tensor& x, Tensor& y, Context* ctx) {
  constexpr const char* kOp = "axpy";
  detail::expect_tensor(kOp, "x", x, DType::f32, x.defined() ? x.dim() : 1);
  detail::expect_tensor(kOp, "y", y, DType::f32, x.dim());
  detail::expect_same_shape(kOp, "x", x, "y", y);
  const Device device = x.device();
  detail::expect_device(kOp, "y", y, device);
  Context& context = resolve_context(ctx, device, kOp);
  if (x.numel() == 0) return;
  TESSEL_KERNEL_DISPATCH(kOp, device, context,
                         cpu::axpy(x.numel(), alpha, x.ptr<float>(), y.ptr<float>()),
                         cuda::axpy(r, x.numel(), alpha, x.ptr<float>(), y.ptr<float>()));
}

} // namespace tessel::kernels
