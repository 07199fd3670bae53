// XNNPACK runs its operators on Kiln's thread pool: the pthreadpool symbols the process
// resolves are Kiln's (src/kernels/pthreadpool_api.cc), and an XNNPACK operator run on a Kiln
// pool is counted by that pool, with the right result.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <pthreadpool.h>
#include <xnnpack.h>

#include <cmath>
#include <string>
#include <vector>

#include "delegates/xnnpack/delegate.h"
#include "kernels/thread_pool.h"

namespace kiln::testing {
namespace {

TEST(XnnpackPool, PthreadpoolSymbolsResolveToKiln) {
  for (const char* name : {"pthreadpool_create", "pthreadpool_parallelize_1d", "pthreadpool_parallelize_2d_tile_2d",
                           "pthreadpool_parallelize_4d_tile_2d", "pthreadpool_parallelize_6d_tile_2d"}) {
    void* sym = dlsym(RTLD_DEFAULT, name);
    ASSERT_NE(sym, nullptr) << name;
    Dl_info info{};
    ASSERT_NE(dladdr(sym, &info), 0) << name;
    EXPECT_EQ(std::string(info.dli_fname).find("libpthreadpool"), std::string::npos) << name << " from " << info.dli_fname;
  }
  using Fn = void (*)(pthreadpool_t, pthreadpool_task_1d_t, void*, size_t, uint32_t);
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "pthreadpool_parallelize_1d"), reinterpret_cast<void*>(static_cast<Fn>(&pthreadpool_parallelize_1d)));
  EXPECT_TRUE(kernels::pthreadpool_api_is_kiln());
}

TEST(XnnpackPool, OperatorsRunOnKilnsPool) {
  ASSERT_TRUE(delegates::xnnpack::initialize().ok());  // Kiln's allocator, as a Method would
  pthreadpool_t pool = pthreadpool_create(2);
  ASSERT_NE(pool, nullptr);
  const size_t n = 1 << 16;
  std::vector<float> x(n), y(n, -1.f);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 13) - 6.f;
  xnn_operator_t op = nullptr;
  ASSERT_EQ(xnn_create_clamp_nc_f32(1, 1, 1, -2.f, 3.f, 0, &op), xnn_status_success);
  ASSERT_EQ(xnn_setup_clamp_nc_f32(op, n, x.data(), y.data(), pool), xnn_status_success);
  const uint64_t before = pool->stats().jobs;
  ASSERT_EQ(xnn_run_operator(op, pool), xnn_status_success);
  EXPECT_GT(pool->stats().jobs, before) << "XNNPACK did not call Kiln's pthreadpool_parallelize_*";
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(y[i], std::fmin(3.f, std::fmax(-2.f, x[i]))) << i;
  xnn_delete_operator(op);
  pthreadpool_destroy(pool);
}

}  // namespace
}  // namespace kiln::testing
