// Test helpers for the nvidia-smi backend: the H200 fixtures and a scratch directory.
//
// Each fixture file (tests/fixtures/gpu/h200/) is a capture: "$ <command>" on its first line,
// then what the command printed, then "rc=<exit status>" on its last line.
#ifndef EXPANSE_GPU_NVIDIA_SMI_TEST_UTIL_H_
#define EXPANSE_GPU_NVIDIA_SMI_TEST_UTIL_H_

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "core/test_temp_dir.h"

namespace expanse::gpu::testing {

inline std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  EXPECT_TRUE(file.good()) << "cannot read " << path;
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

inline std::string ReadFixture(std::string_view name) {
  return ReadFile(std::string(EXPANSE_SOURCE_DIR) + "/tests/fixtures/gpu/h200/" +
                  std::string(name));
}

// What the captured command printed: the fixture without its "$ ..." and "rc=..." lines.
inline std::string FixtureOutput(std::string_view name) {
  std::string text = ReadFixture(name);
  EXPECT_TRUE(text.starts_with("$ ")) << name;
  text.erase(0, text.find('\n') + 1);
  const size_t last_line = text.rfind("\nrc=");
  EXPECT_NE(last_line, std::string::npos) << name;
  text.erase(last_line + 1);
  return text;
}

// The fields a fixture's command asked for: "a,b,c" of its "--query-gpu=a,b,c".
inline std::vector<std::string> FixtureQueryFields(std::string_view name) {
  const std::string text = ReadFixture(name);
  const std::string command = text.substr(0, text.find('\n'));
  const size_t start = command.find('=') + 1;
  std::vector<std::string> fields;
  std::istringstream list(command.substr(start, command.find(' ', start) - start));
  for (std::string field; std::getline(list, field, ',');)
    fields.push_back(field);
  return fields;
}

inline std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> cells;
  std::istringstream stream(line);
  for (std::string cell; std::getline(stream, cell, ',');)
    cells.push_back(cell.substr(cell.find_first_not_of(' ')));
  return cells;
}

// Rewrites --format=csv output (header and units) as csv,noheader,nounits would print the
// columns named `header_names` (names as the header prints them, without units), in that
// order. Lets the fake nvidia-smi answer the backend's query from a real capture.
inline std::string ToNoHeaderNoUnits(const std::string& csv,
                                     const std::vector<std::string>& header_names) {
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line);
  std::vector<std::string> names;
  std::vector<std::string> units;
  for (const std::string& cell : SplitCsvLine(line)) {
    const size_t bracket = cell.find(" [");
    names.push_back(cell.substr(0, bracket));
    units.push_back(bracket == std::string::npos
                        ? ""
                        : " " + cell.substr(bracket + 2, cell.size() - bracket - 3));
  }
  std::string out;
  while (std::getline(lines, line)) {
    const std::vector<std::string> cells = SplitCsvLine(line);
    std::string row;
    for (const std::string& wanted : header_names) {
      size_t i = 0;
      while (i < names.size() && names[i] != wanted)
        ++i;
      EXPECT_LT(i, names.size()) << "no column " << wanted;
      if (i == names.size() || i >= cells.size())
        continue;
      std::string value = cells[i];
      if (!units[i].empty() && value.ends_with(units[i]))
        value.erase(value.size() - units[i].size());
      row += (row.empty() ? "" : ", ") + value;
    }
    out += row + "\n";
  }
  return out;
}

using TempDir = ::expanse::testing::TempDir;

// Writes `text` to `path`, creating its directory.
inline void WriteFile(const std::string& path, std::string_view text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace expanse::gpu::testing

#endif  // EXPANSE_GPU_NVIDIA_SMI_TEST_UTIL_H_
