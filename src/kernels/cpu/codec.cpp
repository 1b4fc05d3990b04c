// CPU twins of the row codecs: the shared per-row conversions, rows in parallel.
#include "cpu_ops.hpp"

#include "../row_codec_format.hpp"

namespace tessel::kernels::cpu {

void encode_rows(std::int64_t n, std::int64_t f, RowCodec codec, const float* x,
                 std::uint8_t* wire) {
  const std::int64_t row_bytes = detail::codec_row_bytes(codec, f);
#pragma omp parallel for schedule(static) if (parallel_worth(n * f))
  for (std::int64_t i = 0; i < n; ++i) detail::encode_row(codec, x + i * f, f, wire + i * row_bytes);
}

void decode_rows(std::int64_t n, std::int64_t f, RowCodec codec, const std::uint8_t* wire,
                 float* x) {
  const std::int64_t row_bytes = detail::codec_row_bytes(codec, f);
#pragma omp parallel for schedule(static) if (parallel_worth(n * f))
  for (std::int64_t i = 0; i < n; ++i) detail::decode_row(codec, wire + i * row_bytes, f, x + i * f);
}

}  // namespace tessel::kernels::cpu
