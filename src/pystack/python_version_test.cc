#include "pystack/python_version.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pystack/interpreter_locator.h"

namespace expanse::pystack {
namespace python_version_test {
namespace {

TEST(PythonVersionTest, DecodesVersionHex) {
  EXPECT_EQ(VersionFromHex(0x030B02F0).ToString(), "3.11.2");
  EXPECT_EQ(VersionFromHex(0x030D00C1).ToString(), "3.13.0rc1");
  EXPECT_EQ(VersionFromHex(0x030C00A3).ToString(), "3.12.0a3");
  EXPECT_EQ(VersionFromHex(0x030E00B2).ToString(), "3.14.0b2");
}

TEST(PythonVersionTest, ReadsVersionsFromFileNames) {
  struct Case {
    const char* name;
    const char* version;
  };
  for (const Case& c : {Case{"python3.11", "3.11"}, Case{"python3.9d", "3.9"},
                        Case{"libpython3.10.so.1.0", "3.10"}, Case{"libpython3.7m.so", "3.7"},
                        Case{"libpython2.7.so.1.0", "2.7"}, Case{"python3.13t", "3.13t"},
                        Case{"libpython3.13t.so.1.0", "3.13t"}, Case{"python3.12-dbg", "3.12"}}) {
    const std::optional<PythonVersion> version = VersionFromFileName(c.name);
    ASSERT_TRUE(version.has_value()) << c.name;
    EXPECT_EQ(version->ToString(), c.version) << c.name;
  }
  for (const char* name :
       {"python", "python3", "uwsgi", "python3.x", "python3.11x", "libfoo.so", "python3.1234"}) {
    EXPECT_FALSE(VersionFromFileName(name).has_value()) << name;
  }
  EXPECT_TRUE(IsLibPythonName("libpython3.11.so.1.0"));
  EXPECT_FALSE(IsLibPythonName("python3.11"));
}

TEST(PythonVersionTest, SupportsThreeNineToThreeThirteenWithTheGil) {
  for (int minor = 9; minor <= 13; ++minor) {
    EXPECT_TRUE(IsSupportedVersion(MajorMinor(3, minor)));
  }
  EXPECT_FALSE(IsSupportedVersion(MajorMinor(3, 8)));
  EXPECT_FALSE(IsSupportedVersion(MajorMinor(3, 14)));
  EXPECT_FALSE(IsSupportedVersion(MajorMinor(2, 7)));
  PythonVersion free_threaded = MajorMinor(3, 13);
  free_threaded.free_threaded = true;
  EXPECT_FALSE(IsSupportedVersion(free_threaded));
}

TEST(DecideVersionTest, PrefersDebugOffsetsThenPyVersionThenName) {
  VersionEvidence evidence;
  evidence.file_name = MajorMinor(3, 13);
  EXPECT_EQ(DecideVersion(evidence)->ToString(), "3.13");
  evidence.py_version = VersionFromHex(0x030D0000 | 0x01F0);
  EXPECT_EQ(DecideVersion(evidence)->ToString(), "3.13.1");
  evidence.debug_offsets = VersionFromHex(0x030D02F0);
  EXPECT_EQ(DecideVersion(evidence)->ToString(), "3.13.2");
}

TEST(DecideVersionTest, RefusesUnknownUnsupportedAndConflictingVersionsNamingThem) {
  const Result<PythonVersion> unknown = DecideVersion({});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().reason(), "unsupported_version");
  EXPECT_NE(unknown.status().message().find("unknown"), std::string::npos);

  VersionEvidence old;
  old.file_name = MajorMinor(3, 8);
  const Result<PythonVersion> refused = DecideVersion(old);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), "unsupported_version");
  EXPECT_NE(refused.status().message().find("3.8"), std::string::npos) << refused.status();

  VersionEvidence future;
  future.py_version = VersionFromHex(0x030E01F0);
  const Result<PythonVersion> too_new = DecideVersion(future);
  ASSERT_FALSE(too_new.ok());
  EXPECT_NE(too_new.status().message().find("3.14.1"), std::string::npos) << too_new.status();

  VersionEvidence conflict;
  conflict.py_version = VersionFromHex(0x030B02F0);
  conflict.file_name = MajorMinor(3, 12);
  const Result<PythonVersion> unclear = DecideVersion(conflict);
  ASSERT_FALSE(unclear.ok());
  EXPECT_EQ(unclear.status().reason(), "unsupported_version");

  VersionEvidence free_threaded;
  free_threaded.py_version = VersionFromHex(0x030D00F0);
  free_threaded.file_name = MajorMinor(3, 13);
  free_threaded.file_name->free_threaded = true;
  const Result<PythonVersion> no_gil = DecideVersion(free_threaded);
  ASSERT_FALSE(no_gil.ok());
  EXPECT_NE(no_gil.status().message().find("3.13.0t"), std::string::npos) << no_gil.status();
}

TEST(CandidateBinariesTest, LibPythonFirstThenTheExecutable) {
  std::vector<MemoryMapping> maps(4);
  maps[0].path = "/usr/bin/python3.10";
  maps[0].inode = 1;
  maps[1].path = "/usr/lib/libpython3.10.so.1.0";
  maps[1].inode = 2;
  maps[2].path = "/usr/lib/libpython3.10.so.1.0";
  maps[2].inode = 2;
  maps[3].path = "[heap]";
  EXPECT_EQ(CandidateBinaries(maps, "/usr/bin/python3.10"),
            (std::vector<std::string>{"/usr/lib/libpython3.10.so.1.0", "/usr/bin/python3.10"}));
  EXPECT_EQ(CandidateBinaries(maps, ""),
            (std::vector<std::string>{"/usr/lib/libpython3.10.so.1.0"}));
  // An executable that is not mapped (a kernel thread's empty link, a stale name) is skipped.
  EXPECT_EQ(CandidateBinaries(maps, "/bin/other"),
            (std::vector<std::string>{"/usr/lib/libpython3.10.so.1.0"}));
}

TEST(CandidateBinariesTest, LibPythonCandidatesAreCapped) {
  std::vector<MemoryMapping> maps;
  for (int i = 0; i < 10000; ++i) {
    MemoryMapping mapping;
    mapping.path = "/tmp/x" + std::to_string(i) + "/libpython3.11.so";
    mapping.inode = 1;
    maps.push_back(std::move(mapping));
  }
  maps.push_back(maps.front());
  maps.back().path = "/usr/bin/python3.11";
  const std::vector<std::string> candidates = CandidateBinaries(maps, "/usr/bin/python3.11");
  ASSERT_EQ(candidates.size(), kMaxLibPythonCandidates + 1);
  EXPECT_EQ(candidates.back(), "/usr/bin/python3.11");  // the executable is still tried
}

TEST(ElfCacheTest, AFailingFileIsParsedOnce) {
  const std::string path = ::testing::TempDir() + "/elf_cache_not_elf";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << std::string(4096, 'x');
  }
  ElfCache cache(64);
  for (int i = 0; i < 3; ++i) {
    Result<std::unique_ptr<DiskFile>> file = DiskFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ(cache.Get(**file).status().reason(), "not_elf");
  }
  EXPECT_EQ(cache.parses(), 1u);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace python_version_test
}  // namespace expanse::pystack
