// Row codecs: how f32 rows are written on the wire (halo rows and gradients).
#pragma once

#include "tessel/core/tensor.hpp"
#include "tessel/kernels/context.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::kernels {

// f32: the rows as they are. bf16, f16: 2 bytes per value, rounded to nearest even (f16
// saturates finite values beyond its range at +-65504). int8: per row a 4-byte f32 scale
// s = max |x| / 127, then round(x / s) as 8-bit integers in [-127, 127] (padded to 4 bytes).
enum class RowCodec : std::uint8_t { f32, bf16, f16, int8 };

const char* row_codec_name(RowCodec codec);
// The names in the order above, for the command line.
std::vector<std::string> row_codec_names();
// Throws InputError naming the known codecs for an unknown name.
RowCodec parse_row_codec(const std::string& name);
// Bytes one row of `columns` values takes on the wire.
std::int64_t row_codec_bytes(RowCodec codec, std::int64_t columns);
// The most a value may move through encode and decode: |x' - x| <= relative * |x| + absolute,
// with absolute relative to the row's largest magnitude for int8 (absolute_of_row_max * max).
struct RowCodecBound {
  double relative = 0;
  double absolute = 0;             // f16's subnormal step
  double absolute_of_row_max = 0;  // int8: half a quantization step
};
RowCodecBound row_codec_bound(RowCodec codec);

// x: f32 [n, F] -> wire: u8 [n, row_codec_bytes(codec, F)] on x's device (allocated by the
// caller). The CPU and CUDA twins write the same bytes.
void encode_rows(const Tensor& x, RowCodec codec, Tensor& wire, Context* ctx = nullptr);
// wire (from encode_rows) -> x: f32 [n, F] on wire's device.
void decode_rows(const Tensor& wire, RowCodec codec, Tensor& x, Context* ctx = nullptr);

}  // namespace tessel::kernels
