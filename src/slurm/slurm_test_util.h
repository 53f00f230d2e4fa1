// Test helpers for the slurm module: the outputs captured from the SLURM 22.05.8 test cluster
// (tests/fixtures/slurm/, see its README.md for the commands and jobs behind each file).
#ifndef EXPANSE_SLURM_SLURM_TEST_UTIL_H_
#define EXPANSE_SLURM_SLURM_TEST_UTIL_H_

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace expanse::slurm::testing {

inline std::string ReadFixture(std::string_view name) {
  const std::string path =
      std::string(EXPANSE_SOURCE_DIR) + "/tests/fixtures/slurm/" + std::string(name);
  std::ifstream file(path, std::ios::binary);
  EXPECT_TRUE(file.good()) << "cannot read " << path;
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace expanse::slurm::testing

#endif  // EXPANSE_SLURM_SLURM_TEST_UTIL_H_
