// Test helpers for the dcgm module: the recorded dcgmi outputs in tests/fixtures/dcgm.
//
// Each fixture is "$ <command>" on its first line, then what the command printed (stdout and
// stderr in the order dcgmi writes them; the README says which lines go where), then
// "rc=<exit status>" on its last line.
#ifndef EXPANSE_DCGM_FIXTURE_TEST_UTIL_H_
#define EXPANSE_DCGM_FIXTURE_TEST_UTIL_H_

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::dcgm::testing {

inline std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  EXPECT_TRUE(file.good()) << "cannot read " << path;
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

inline std::string FixturePath(std::string_view name) {
  return std::string(EXPANSE_SOURCE_DIR) + "/tests/fixtures/dcgm/" + std::string(name);
}

inline std::string FakeDcgmiPath() {
  return std::string(EXPANSE_SOURCE_DIR) + "/tests/fakes/dcgm/dcgmi";
}

struct Fixture {
  std::string command;  // without the "$ "
  std::string output;
  int exit_status = -1;
};

inline Fixture ReadFixture(std::string_view name) {
  std::string text = ReadFile(FixturePath(name));
  Fixture fixture;
  EXPECT_TRUE(text.starts_with("$ ")) << name;
  const size_t first_end = text.find('\n');
  fixture.command = text.substr(2, first_end - 2);
  text.erase(0, first_end + 1);
  const size_t last_line = text.rfind("rc=");
  EXPECT_NE(last_line, std::string::npos) << name;
  EXPECT_TRUE(last_line == 0 || text[last_line - 1] == '\n') << name;
  fixture.exit_status = std::stoi(text.substr(last_line + 3));
  text.erase(last_line);
  fixture.output = std::move(text);
  return fixture;
}

// The `-e` list of a fixture's dmon command.
inline std::vector<uint16_t> FixtureFieldIds(const Fixture& fixture) {
  std::vector<uint16_t> ids;
  const size_t at = fixture.command.find(" -e ");
  EXPECT_NE(at, std::string::npos) << fixture.command;
  std::istringstream list(
      fixture.command.substr(at + 4, fixture.command.find(' ', at + 4) - at - 4));
  std::string id;
  while (std::getline(list, id, ','))
    ids.push_back(static_cast<uint16_t>(std::stoi(id)));
  return ids;
}

}  // namespace expanse::dcgm::testing

#endif  // EXPANSE_DCGM_FIXTURE_TEST_UTIL_H_
