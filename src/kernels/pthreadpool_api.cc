// The pthreadpool C API on Kiln's ThreadPool. XNNPACK (Debian's shared libXNNPACK) calls
// pthreadpool_parallelize_* for every operator it runs; these definitions, in the program or
// the extension module that links Kiln, come before libpthreadpool's in the dynamic linker's
// lookup order (ELF symbol interposition: the executable, or a dlopen'ed module, is searched
// before the libraries it needs), so XNNPACK's operators and Kiln's own kernels share one pool
// with one scheduling policy. Every function of the API is defined here, so no pool made here
// can reach libpthreadpool's code. tests/runtime/thread_pool_test.cc checks that XNNPACK's calls
// arrive here.
//
// Each call is a grid of up to 6 dims, the last one or two (or, for the deprecated compute_*
// calls, all) cut into tiles; an item is one tile of the grid. The task gets every dim's index
// (a tiled dim's first index), then the tiled dims' extents, as pthreadpool documents.
#include <pthreadpool.h>

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <new>

#include "kernels/thread_pool.h"

namespace {

struct Grid {
  void* fn;
  void* ctx;
  bool with_id;          // the *_with_uarch forms: a uarch index before the indices
  uint32_t uarch;        // the default one (Kiln does not tell cores apart)
  int dims;
  size_t range[6], tile[6], tiles[6];
  bool tiled[6];
};

using S = size_t;
template <typename... A>
void call(const Grid& g, A... a) {
  if (g.with_id)
    reinterpret_cast<void (*)(void*, uint32_t, A...)>(g.fn)(g.ctx, g.uarch, a...);
  else
    reinterpret_cast<void (*)(void*, A...)>(g.fn)(g.ctx, a...);
}

void run_items(const void* p, size_t begin, size_t end) {
  const Grid& g = *static_cast<const Grid*>(p);
  for (size_t item = begin; item < end; ++item) {
    S a[12];
    int n = 0;
    size_t rest = item, start[6];
    for (int d = g.dims - 1; d >= 0; --d) {
      start[d] = (rest % g.tiles[d]) * g.tile[d];
      rest /= g.tiles[d];
    }
    for (int d = 0; d < g.dims; ++d) a[n++] = start[d];
    for (int d = 0; d < g.dims; ++d)
      if (g.tiled[d]) a[n++] = std::min(g.tile[d], g.range[d] - start[d]);
    switch (n) {
      case 1: call(g, a[0]); break;
      case 2: call(g, a[0], a[1]); break;
      case 3: call(g, a[0], a[1], a[2]); break;
      case 4: call(g, a[0], a[1], a[2], a[3]); break;
      case 5: call(g, a[0], a[1], a[2], a[3], a[4]); break;
      case 6: call(g, a[0], a[1], a[2], a[3], a[4], a[5]); break;
      case 7: call(g, a[0], a[1], a[2], a[3], a[4], a[5], a[6]); break;
      case 8: call(g, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]); break;
    }
  }
}

// ranges[d] with tiles[d] (0 = not tiled).
void grid(pthreadpool_t pool, void* fn, void* ctx, bool with_id, std::initializer_list<size_t> ranges,
          std::initializer_list<size_t> tiles, uint32_t flags, uint32_t uarch = 0) {
  Grid g{};
  g.uarch = uarch;
  g.fn = fn;
  g.ctx = ctx;
  g.with_id = with_id;
  g.dims = static_cast<int>(ranges.size());
  size_t items = 1;
  auto t = tiles.begin();
  for (int d = 0; d < g.dims; ++d, ++t) {
    g.range[d] = ranges.begin()[d];
    g.tiled[d] = *t != 0;
    g.tile[d] = g.tiled[d] ? *t : 1;
    g.tiles[d] = (g.range[d] + g.tile[d] - 1) / g.tile[d];
    items *= g.tiles[d];
  }
  if (items == 0) return;
  kiln::kernels::run_on(pool, run_items, &g, items, (flags & PTHREADPOOL_FLAG_DISABLE_DENORMALS) != 0,
                        (flags & kiln::kernels::kSharedSplitFlag) ? kiln::kernels::ThreadPool::Split::kShared
                                                                  : kiln::kernels::ThreadPool::Split::kHomes);
}

}  // namespace

namespace kiln::kernels {

bool pthreadpool_api_is_kiln() {
  // The object that defines the pthreadpool_parallelize_1d the process resolves (what XNNPACK's
  // calls, and this library's own calls through the PLT, reach) must be the one holding this
  // file's code.
  static const bool ours = [] {
    void* sym = dlsym(RTLD_DEFAULT, "pthreadpool_parallelize_1d");
    Dl_info found{}, here{};
    return sym && dladdr(sym, &found) && dladdr(reinterpret_cast<void*>(&run_items), &here) &&
           found.dli_fbase == here.dli_fbase;
  }();
  return ours;
}

}  // namespace kiln::kernels

#define KILN_PTHREADPOOL_API extern "C" __attribute__((visibility("default")))

KILN_PTHREADPOOL_API pthreadpool_t pthreadpool_create(size_t threads_count) {
  if (threads_count == 0) threads_count = static_cast<size_t>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  auto* pool = new (std::nothrow) pthreadpool;
  if (!pool) return nullptr;
  if (!pool->start(threads_count)) {
    delete pool;
    return nullptr;
  }
  return pool;
}

KILN_PTHREADPOOL_API void pthreadpool_destroy(pthreadpool_t pool) { delete pool; }

KILN_PTHREADPOOL_API size_t pthreadpool_get_threads_count(pthreadpool_t pool) { return pool ? pool->threads() : 1; }

#define F(f) reinterpret_cast<void*>(f)
KILN_PTHREADPOOL_API void pthreadpool_parallelize_1d(pthreadpool_t p, pthreadpool_task_1d_t f, void* c, S i, uint32_t fl) {
  grid(p, F(f), c, false, {i}, {0}, fl);
}
KILN_PTHREADPOOL_API void pthreadpool_parallelize_1d_with_uarch(pthreadpool_t p, pthreadpool_task_1d_with_id_t f, void* c,
                                                                uint32_t u, uint32_t, S i, uint32_t fl) {
  grid(p, F(f), c, true, {i}, {0}, fl, u);
}
KILN_PTHREADPOOL_API void pthreadpool_parallelize_1d_tile_1d(pthreadpool_t p, pthreadpool_task_1d_tile_1d_t f, void* c, S i,
                                                             S ti, uint32_t fl) {
  grid(p, F(f), c, false, {i}, {ti}, fl);
}
KILN_PTHREADPOOL_API void pthreadpool_parallelize_2d(pthreadpool_t p, pthreadpool_task_2d_t f, void* c, S i, S j, uint32_t fl) {
  grid(p, F(f), c, false, {i, j}, {0, 0}, fl);
}
KILN_PTHREADPOOL_API void pthreadpool_parallelize_2d_tile_1d(pthreadpool_t p, pthreadpool_task_2d_tile_1d_t f, void* c, S i,
                                                             S j, S tj, uint32_t fl) {
  grid(p, F(f), c, false, {i, j}, {0, tj}, fl);
}
KILN_PTHREADPOOL_API void pthreadpool_parallelize_2d_tile_2d(pthreadpool_t p, pthreadpool_task_2d_tile_2d_t f, void* c, S i,
                                                             S j, S ti, S tj, uint32_t fl) {
  grid(p, F(f), c, false, {i, j}, {ti, tj}, fl);
}
KILN_PTHREADPOOL_API void pthreadpool_parallelize_2d_tile_2d_with_uarch(pthreadpool_t p,
                                                                        pthreadpool_task_2d_tile_2d_with_id_t f, void* c,
                                                                        uint32_t u, uint32_t, S i, S j, S ti, S tj,
                                                                        uint32_t fl) {
  grid(p, F(f), c, true, {i, j}, {ti, tj}, fl, u);
}
KILN_PTHREADPOOL_API void pthreadpool_parallelize_3d(pthreadpool_t p, pthreadpool_task_3d_t f, void* c, S i, S j, S k,
                                                     uint32_t fl) {
  grid(p, F(f), c, false, {i, j, k}, {0, 0, 0}, fl);
}
KILN_PTHREADPOOL_API void pthreadpool_parallelize_3d_tile_1d(pthreadpool_t p, pthreadpool_task_3d_tile_1d_t f, void* c, S i,
                                                             S j, S k, S tk, uint32_t fl) {
  grid(p, F(f), c, false, {i, j, k}, {0, 0, tk}, fl);
}
KILN_PTHREADPOOL_API void pthreadpool_parallelize_3d_tile_2d(pthreadpool_t p, pthreadpool_task_3d_tile_2d_t f, void* c, S i,
                                                             S j, S k, S tj, S tk, uint32_t fl) {
  grid(p, F(f), c, false, {i, j, k}, {0, tj, tk}, fl);
}
KILN_PTHREADPOOL_API void pthreadpool_parallelize_3d_tile_2d_with_uarch(pthreadpool_t p,
                                                                        pthreadpool_task_3d_tile_2d_with_id_t f, void* c,
                                                                        uint32_t u, uint32_t, S i, S j, S k, S tj, S tk,
                                                                        uint32_t fl) {
  grid(p, F(f), c, true, {i, j, k}, {0, tj, tk}, fl, u);
}
KILN_PTHREADPOOL_API void pthreadpool_parallelize_4d(pthreadpool_t p, pthreadpool_task_4d_t f, void* c, S i, S j, S k, S l,
                                                     uint32_t fl) {
  grid(p, F(f), c, false, {i, j, k, l}, {0, 0, 0, 0}, fl);
}
KILN_PTHREADPOOL_API void pthreadpool_parallelize_4d_tile_1d(pthreadpool_t p, pthreadpool_task_4d_tile_1d_t f, void* c, S i,
                                                             S j, S k, S l, S tl, uint32_t fl) {
  grid(p, F(f), c, false, {i, j, k, l}, {0, 0, 0, tl}, fl);
}
KILN_PTHREADPOOL_API void pthreadpool_parallelize_4d_tile_2d(pthreadpool_t p, pthreadpool_task_4d_tile_2d_t f, void* c, S i,
                                                             S j, S k, S l, S tk, S tl, uint32_t fl) {
  grid(p, F(f), c, false, {i, j, k, l}, {0, 0, tk, tl}, fl);
}
KILN_PTHREADPOOL_API void pthreadpool_parallelize_4d_tile_2d_with_uarch(pthreadpool_t p,
                                                                        pthreadpool_task_4d_tile_2d_with_id_t f, void* c,
                                                                        uint32_t u, uint32_t, S i, S j, S k, S l, S tk, S tl,
                                                                        uint32_t fl) {
  grid(p, F(f), c, true, {i, j, k, l}, {0, 0, tk, tl}, fl, u);
}
KILN_PTHREADPOOL_API void pthreadpool_parallelize_5d(pthreadpool_t p, pthreadpool_task_5d_t f, void* c, S i, S j, S k, S l,
                                                     S m, uint32_t fl) {
  grid(p, F(f), c, false, {i, j, k, l, m}, {0, 0, 0, 0, 0}, fl);
}
KILN_PTHREADPOOL_API void pthreadpool_parallelize_5d_tile_1d(pthreadpool_t p, pthreadpool_task_5d_tile_1d_t f, void* c, S i,
                                                             S j, S k, S l, S m, S tm, uint32_t fl) {
  grid(p, F(f), c, false, {i, j, k, l, m}, {0, 0, 0, 0, tm}, fl);
}
KILN_PTHREADPOOL_API void pthreadpool_parallelize_5d_tile_2d(pthreadpool_t p, pthreadpool_task_5d_tile_2d_t f, void* c, S i,
                                                             S j, S k, S l, S m, S tl, S tm, uint32_t fl) {
  grid(p, F(f), c, false, {i, j, k, l, m}, {0, 0, 0, tl, tm}, fl);
}
KILN_PTHREADPOOL_API void pthreadpool_parallelize_6d(pthreadpool_t p, pthreadpool_task_6d_t f, void* c, S i, S j, S k, S l,
                                                     S m, S n, uint32_t fl) {
  grid(p, F(f), c, false, {i, j, k, l, m, n}, {0, 0, 0, 0, 0, 0}, fl);
}
KILN_PTHREADPOOL_API void pthreadpool_parallelize_6d_tile_1d(pthreadpool_t p, pthreadpool_task_6d_tile_1d_t f, void* c, S i,
                                                             S j, S k, S l, S m, S n, S tn, uint32_t fl) {
  grid(p, F(f), c, false, {i, j, k, l, m, n}, {0, 0, 0, 0, 0, tn}, fl);
}
KILN_PTHREADPOOL_API void pthreadpool_parallelize_6d_tile_2d(pthreadpool_t p, pthreadpool_task_6d_tile_2d_t f, void* c, S i,
                                                             S j, S k, S l, S m, S n, S tm, S tn, uint32_t fl) {
  grid(p, F(f), c, false, {i, j, k, l, m, n}, {0, 0, 0, 0, tm, tn}, fl);
}

// The deprecated compute_* forms: every dim tiled (1 when untiled), no flags.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
KILN_PTHREADPOOL_API void pthreadpool_compute_1d(pthreadpool_t p, pthreadpool_function_1d_t f, void* c, S i) {
  grid(p, F(f), c, false, {i}, {0}, 0);
}
KILN_PTHREADPOOL_API void pthreadpool_compute_1d_tiled(pthreadpool_t p, pthreadpool_function_1d_tiled_t f, void* c, S i, S ti) {
  grid(p, F(f), c, false, {i}, {ti}, 0);
}
KILN_PTHREADPOOL_API void pthreadpool_compute_2d(pthreadpool_t p, pthreadpool_function_2d_t f, void* c, S i, S j) {
  grid(p, F(f), c, false, {i, j}, {0, 0}, 0);
}
KILN_PTHREADPOOL_API void pthreadpool_compute_2d_tiled(pthreadpool_t p, pthreadpool_function_2d_tiled_t f, void* c, S i, S j,
                                                       S ti, S tj) {
  grid(p, F(f), c, false, {i, j}, {ti, tj}, 0);
}
KILN_PTHREADPOOL_API void pthreadpool_compute_3d_tiled(pthreadpool_t p, pthreadpool_function_3d_tiled_t f, void* c, S i, S j,
                                                       S k, S ti, S tj, S tk) {
  grid(p, F(f), c, false, {i, j, k}, {ti, tj, tk}, 0);
}
KILN_PTHREADPOOL_API void pthreadpool_compute_4d_tiled(pthreadpool_t p, pthreadpool_function_4d_tiled_t f, void* c, S i, S j,
                                                       S k, S l, S ti, S tj, S tk, S tl) {
  grid(p, F(f), c, false, {i, j, k, l}, {ti, tj, tk, tl}, 0);
}
#pragma GCC diagnostic pop
#undef F
