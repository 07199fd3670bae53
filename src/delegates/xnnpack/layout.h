#pragma once
// Layout changes at delegate region edges: [N, C, P] <-> [N, P, C] (P = product of the
// spatial sizes). 8x8 register transposes (AVX2, chosen at run time) with a scalar edge,
// split over the thread pool by batch, blocks of 8 rows and blocks of 512 columns.

#include <cstddef>
#include <cstdint>

typedef struct pthreadpool* pthreadpool_t;

namespace kiln::delegates::xnnpack {

/// dst[n][p][c] = src[n][c][p]. Never allocates.
void to_channels_last(const float* src, float* dst, size_t n, size_t c, size_t p, pthreadpool_t pool);
/// dst[n][c][p] = src[n][p][c]. Never allocates.
void to_channels_first(const float* src, float* dst, size_t n, size_t c, size_t p, pthreadpool_t pool);

/// The same for one-byte elements (int8 and uint8 regions).
void to_channels_last_bytes(const uint8_t* src, uint8_t* dst, size_t n, size_t c, size_t p);
void to_channels_first_bytes(const uint8_t* src, uint8_t* dst, size_t n, size_t c, size_t p);

}  // namespace kiln::delegates::xnnpack
