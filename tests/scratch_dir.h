#pragma once
// One scratch directory per test process. ctest runs each test in its own process and
// runs them in parallel, so files under a fixed name in ::testing::TempDir() would be
// written by one test while another reads them.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

namespace kiln::testing {

/// A fresh directory (mkdtemp under ::testing::TempDir()) private to this process,
/// removed when the process exits unless KILN_KEEP_TEST_FILES is set.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    std::string tmpl = ::testing::TempDir() + "/kiln-test-XXXXXX";
    if (!mkdtemp(tmpl.data())) {
      ADD_FAILURE() << "mkdtemp failed under " << ::testing::TempDir();
      return ::testing::TempDir();
    }
    return tmpl;
  }();
  static const bool cleanup_registered = [] {
    if (!getenv("KILN_KEEP_TEST_FILES") && dir != ::testing::TempDir()) {
      atexit([] {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
      });
    }
    return true;
  }();
  (void)cleanup_registered;
  return dir;
}

}  // namespace kiln::testing
