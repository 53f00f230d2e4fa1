// Which CPython a process runs: from the interpreter's own version number (Py_Version on 3.11+,
// the debug offsets on 3.13+) or, before 3.11, from the file name of the executable or
// libpython. Pure.
#ifndef EXPANSE_PYSTACK_PYTHON_VERSION_H_
#define EXPANSE_PYSTACK_PYTHON_VERSION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace expanse::pystack {

struct PythonVersion {
  int major = 0;
  int minor = 0;
  int micro = -1;              // -1 when only major.minor is known (from a file name)
  std::string prerelease;      // "a1", "b2", "rc1"; empty for a final release
  bool free_threaded = false;  // a "t" build (3.13t): a different object layout

  // "3.11.2", "3.13.0rc1", "3.10" (micro unknown), "3.13t".
  std::string ToString() const;
};

// A version known by major and minor only.
PythonVersion MajorMinor(int major, int minor);

// Decodes PY_VERSION_HEX (0x030B02F0 is 3.11.2 final).
PythonVersion VersionFromHex(std::uint64_t hex);

// The version a file name announces: "python3.11", "python3.11d", "python3.13t",
// "libpython3.10.so.1.0", "libpython3.7m.so", "libpython2.7.so". nullopt for names that do
// not ("python", "python3", "uwsgi").
std::optional<PythonVersion> VersionFromFileName(std::string_view file_name);

// Whether the name looks like libpython (the library, not the executable).
bool IsLibPythonName(std::string_view file_name);

// The native reader knows the layouts of CPython 3.9 to 3.13 with the GIL.
bool IsSupportedVersion(const PythonVersion& version);

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_PYTHON_VERSION_H_
