// Dispatch of the row codecs (halo rows on the wire) and their names and bounds.
#include "tessel/kernels/row_codec.hpp"

#include "check.hpp"
#include "cpu/cpu_ops.hpp"
#include "cuda/cuda_ops.hpp"
#include "row_codec_format.hpp"

#include "tessel/core/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tessel::kernels {

namespace {
constexpr RowCodec kCodecs[] = {RowCodec::f32, RowCodec::bf16, RowCodec::f16, RowCodec::int8};
} // namespace

const char* row_codec_name(RowCodec codec) {
  switch (codec) {
    case RowCodec::bf16: return "bf16";
    case RowCodec::f16: return "f16";
    case RowCodec::int8: return "int8";
    default: return "f32";
  }
}

std::vector<std::string> row_codec_names() {
  std::vector<std::string> names;
  for (const RowCodec c : kCodecs) names.emplace_back(row_codec_name(c));
  return names;
}

RowCodec parse_row_codec(const std::string& name) {
  for (const RowCodec c : kCodecs)
    if (name == row_codec_name(c)) return c;
  TESSEL_FAIL("unknown halo dtype '{}': expected one of {}", name,
              fmt::join(row_codec_names(), ", "));
}

std::int64_t row_codec_bytes(RowCodec codec, std::int64_t columns) {
  return detail::codec_row_bytes(codec, columns);
}

RowCodecBound row_codec_bound(RowCodec codec) {
  switch (codec) {
    case RowCodec::bf16: return {1.0 / 256, 0, 0};           // 8 significant bits, half an ulp
    case RowCodec::f16: return {1.0 / 2048, 0x1p-25, 0};     // 11 bits; subnormal steps 2^-24
    case RowCodec::int8: return {0, 0, 0.5 / 127 * (1 + 1e-6)};  // half a step of max / 127
    default: return {};
  }
}

void encode_rows(const Tensor& x, RowCodec codec, Tensor& wire, Context* ctx) {
  constexpr const char* kOp = "encode_rows";
  detail::expect_tensor(kOp, "x", x, DType::f32, 2);
  detail::expect_tensor(kOp, "wire", wire, DType::u8, 2);
  TESSEL_EXPECTS(wire.rows() == x.rows() && wire.cols() == row_codec_bytes(codec, x.cols()),
                 "{}: wire {} expected [{}, {}] for {} rows of {}", kOp, wire.describe(), x.rows(),
                 row_codec_bytes(codec, x.cols()), row_codec_name(codec), x.describe());
  const Device device = x.device();
  detail::expect_device(kOp, "wire", wire, device);
  Context& context = resolve_context(ctx, device, kOp);
  if (x.numel() == 0) return;
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context,
      cpu::encode_rows(x.rows(), x.cols(), codec, x.ptr<float>(), wire.ptr<std::uint8_t>()),
      cuda::encode_rows(r, x.rows(), x.cols(), codec, x.ptr<float>(), wire.ptr<std::uint8_t>()));
}

void decode_rows(const Tensor& wire, RowCodec codec, Tensor& x, Context* ctx) {
  constexpr const char* kOp = "decode_rows";
  detail::expect_tensor(kOp, "wire", wire, DType::u8, 2);
  detail::expect_tensor(kOp, "x", x, DType::f32, 2);
  TESSEL_EXPECTS(wire.rows() == x.rows() && wire.cols() == row_codec_bytes(codec, x.cols()),
                 "{}: wire {} expected [{}, {}] for {} rows of {}", kOp, wire.describe(), x.rows(),
                 row_codec_bytes(codec, x.cols()), row_codec_name(codec), x.describe());
  const Device device = wire.device();
  detail::expect_device(kOp, "x", x, device);
  Context& context = resolve_context(ctx, device, kOp);
  if (x.numel() == 0) return;
  TESSEL_KERNEL_DISPATCH(
      kOp, device, context,
      cpu::decode_rows(x.rows(), x.cols(), codec, wire.ptr<std::uint8_t>(), x.ptr<float>()),
      cuda::decode_rows(r, x.rows(), x.cols(), codec, wire.ptr<std::uint8_t>(), x.ptr<float>()));
}

}  // namespace tessel::kernels
