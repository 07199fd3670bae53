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

// The copy when the innermost axis is strided and axis j (not the innermost) is contiguous in
// the source: a transpose of two axes (attention's K^T). Row by row, every element read is a
// cache line of its own (16x128x64 floats: 0.86 ns per element); in blocks of kB x kB, each
// line read serves kB outputs. The axes other than j and the innermost run as an odometer.
template <typename Word>
inline void transpose_blocks(unsigned char* dst, const unsigned char* src, int rank, const int64_t* dims,
                             const int64_t* strides, int64_t base, int j) {
  constexpr int64_t kB = 8;
  const int64_t inner = dims[rank - 1], in_stride = strides[rank - 1], rows = dims[j];
  int64_t out_strides[kMaxRank];
  int64_t s = 1;
  for (int k = rank - 1; k >= 0; --k) out_strides[k] = s, s *= dims[k];
  const int64_t row_step = out_strides[j];  // output elements between j and j + 1
  int64_t idx[kMaxRank] = {};
  int64_t off = base, out_off = 0;
  constexpr int64_t w = sizeof(Word);
  for (;;) {
    for (int64_t j0 = 0; j0 < rows; j0 += kB) {
      const int64_t jn = std::min(kB, rows - j0);
      for (int64_t i0 = 0; i0 < inner; i0 += kB) {
        const int64_t in_n = std::min(kB, inner - i0);
        for (int64_t jj = 0; jj < jn; ++jj)
          copy_strided_row<Word>(dst + (out_off + (j0 + jj) * row_step + i0) * w,
                                 src + (off + j0 + jj + i0 * in_stride) * w, in_n, in_stride);
      }
    }
    int k = rank - 2;
    for (; k >= 0; --k) {  // odometer over the axes other than j and the innermost
      if (k == j) continue;
      off += strides[k], out_off += out_strides[k];
      if (++idx[k] < dims[k]) break;
      off -= strides[k] * dims[k], out_off -= out_strides[k] * dims[k];
      idx[k] = 0;
    }
    if (k < 0) return;
  }
}

// The axis to transpose in blocks (contiguous in the source, at least 4 long, the innermost
// at least 4 long and strided), or -1.
inline int transpose_axis(int rank, const int64_t* dims, const int64_t* strides) {
  if (rank < 2 || strides[rank - 1] == 1 || dims[rank - 1] < 4) return -1;
  for (int k = rank - 2; k >= 0; --k)
    if (strides[k] == 1 && dims[k] >= 4) return k;
  return -1;
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
  if (const int j = detail::transpose_axis(rank, dims, strides); j >= 0 && (elem_size == 4 || elem_size == 8)) {
    if (elem_size == 4) detail::transpose_blocks<uint32_t>(out, in, rank, dims, strides, base, j);
    else detail::transpose_blocks<uint64_t>(out, in, rank, dims, strides, base, j);
    return;
  }
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
