#pragma once
// Strided read, contiguous write: the one loop behind Transpose and Slice. Elements are
// copied as bytes of their dtype size, so every dtype takes the same path.

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/kernel.h"
#include "kiln/tensor.h"

namespace kiln::kernels {

namespace detail {

template <typename Word>
inline void copy_strided_row(unsigned char* dst, const unsigned char* src, int64_t count, int64_t stride) {
  for (int64_t i = 0; i < count; ++i) {
    Word w;
    std::memcpy(&w, src + i * stride * static_cast<int64_t>(sizeof(Word)), sizeof(Word));
    std::memcpy(dst + i * static_cast<int64_t>(sizeof(Word)), &w, sizeof(Word));
  }
}

}  // namespace detail

/// Fills the contiguous `dst` with dst[i] = src[base + sum_k idx_k * strides[k]], where idx
/// runs over `dims[0..rank)` in row-major order. Offsets and strides count elements of
/// `elem_size` bytes and may be negative; the caller guarantees every offset read is in
/// range. Never allocates.
inline void strided_copy(void* dst, const void* src, size_t elem_size, int rank, const int64_t* dims,
                         const int64_t* strides, int64_t base) {
  const auto es = static_cast<int64_t>(elem_size);
  auto* out = static_cast<unsigned char*>(dst);
  const auto* in = static_cast<const unsigned char*>(src);
  if (rank == 0) {
    std::memcpy(out, in + base * es, elem_size);
    return;
  }
  for (int k = 0; k < rank; ++k)
    if (dims[k] == 0) return;
  const int64_t inner = dims[rank - 1], inner_stride = strides[rank - 1];
  int64_t idx[kMaxRank] = {};
  int64_t off = base;
  for (;;) {
    const unsigned char* row = in + off * es;
    if (inner_stride == 1) {
      std::memcpy(out, row, static_cast<size_t>(inner * es));
    } else {
      switch (elem_size) {
        case 1: detail::copy_strided_row<uint8_t>(out, row, inner, inner_stride); break;
        case 4: detail::copy_strided_row<uint32_t>(out, row, inner, inner_stride); break;
        case 8: detail::copy_strided_row<uint64_t>(out, row, inner, inner_stride); break;
        default:
          for (int64_t i = 0; i < inner; ++i) std::memcpy(out + i * es, row + i * inner_stride * es, elem_size);
      }
    }
    out += inner * es;
    int k = rank - 2;
    for (; k >= 0; --k) {  // odometer increment over the outer axes
      off += strides[k];
      if (++idx[k] < dims[k]) break;
      off -= strides[k] * dims[k];
      idx[k] = 0;
    }
    if (k < 0) return;
  }
}

/// Row-major strides (in elements) of `v`'s actual dims into `out[0..rank)`.
inline void row_major_strides(const TensorView& v, int64_t* out) {
  int64_t s = 1;
  for (int k = v.rank - 1; k >= 0; --k) {
    out[k] = s;
    s *= v.dims[k];
  }
}

/// strided_copy split over c.pool along the outermost axis of more than one element (axes of
/// one are skipped), in chunks of at least 64 KiB of output; the split follows the actual dims.
inline void strided_copy(const RunCtx& c, void* dst, const void* src, size_t elem_size, int rank, const int64_t* dims,
                         const int64_t* strides, int64_t base) {
  int a = 0;
  while (a + 1 < rank && dims[a] == 1) ++a;
  if (rank == 0 || !c.pool || dims[a] < 2) return strided_copy(dst, src, elem_size, rank, dims, strides, base);
  int64_t inner = 1;  // output elements per index of axis a
  for (int k = a + 1; k < rank; ++k) inner *= dims[k];
  const size_t row_bytes = static_cast<size_t>(inner) * elem_size;
  struct Job {
    void* dst;
    const void* src;
    size_t elem_size, row_bytes;
    int rank, a;
    const int64_t* dims;
    const int64_t* strides;
    int64_t base;
  } job{dst, src, elem_size, row_bytes, rank, a, dims, strides, base};
  parallel_for(c, static_cast<size_t>(dims[a]), (65536 + row_bytes - 1) / std::max<size_t>(1, row_bytes),
               [&job](size_t b, size_t e) {
                 int64_t d[kMaxRank];
                 for (int k = 0; k < job.rank; ++k) d[k] = job.dims[k];
                 d[job.a] = static_cast<int64_t>(e - b);
                 strided_copy(static_cast<unsigned char*>(job.dst) + b * job.row_bytes, job.src, job.elem_size, job.rank, d,
                              job.strides, job.base + static_cast<int64_t>(b) * job.strides[job.a]);
               });
}

}  // namespace kiln::kernels
