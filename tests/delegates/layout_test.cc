// Layout changes at region edges against an index-by-index reference: channel and pixel
// counts below, at and above the 8x8 blocks and the 512-column tasks, one and two threads.
#include <gtest/gtest.h>

#include <pthreadpool.h>

#include <cmath>
#include <vector>

#include "delegates/xnnpack/layout.h"

namespace kiln::delegates::xnnpack {
namespace {

TEST(Layout, ChannelsLastAndBackAtManySizes) {
  pthreadpool_t two = pthreadpool_create(2);
  for (size_t n : {1, 2})
    for (size_t c : {1, 3, 8, 13, 64, 520})
      for (size_t p : {1, 7, 64, 300, 1031}) {
        std::vector<float> x(n * c * p);
        for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
        for (pthreadpool_t pool : {pthreadpool_t{nullptr}, two}) {
          std::vector<float> y(x.size() + 1, NAN), z(x.size() + 1, NAN);
          to_channels_last(x.data(), y.data(), n, c, p, pool);
          for (size_t b = 0; b < n; ++b)
            for (size_t k = 0; k < c; ++k)
              for (size_t q = 0; q < p; ++q)
                ASSERT_EQ(y[(b * p + q) * c + k], x[(b * c + k) * p + q]) << n << "x" << c << "x" << p;
          to_channels_first(y.data(), z.data(), n, c, p, pool);
          for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(z[i], x[i]) << n << "x" << c << "x" << p;
          EXPECT_TRUE(std::isnan(y.back()) && std::isnan(z.back()));
        }
      }
  pthreadpool_destroy(two);
}

}  // namespace
}  // namespace kiln::delegates::xnnpack
