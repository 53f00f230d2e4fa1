#include "pystack/python_version.h"

#include <cctype>

#include "pystack/text_format.h"

namespace expanse::pystack {
namespace {

constexpr int kFirstSupportedMinor = 9;
constexpr int kLastSupportedMinor = 13;

// Reads a decimal number of 1 to 3 digits from the front of `text`.
std::optional<int> TakeSmallNumber(std::string_view& text) {
  int value = 0;
  std::size_t digits = 0;
  while (digits < text.size() && digits < 4 &&
         std::isdigit(static_cast<unsigned char>(text[digits]))) {
    value = value * 10 + (text[digits] - '0');
    ++digits;
  }
  if (digits == 0 || digits > 3) {
    return std::nullopt;
  }
  text.remove_prefix(digits);
  return value;
}

}  // namespace

std::string PythonVersion::ToString() const {
  std::string text = Format("{}.{}", major, minor);
  if (micro >= 0) {
    text += Format(".{}{}", micro, prerelease);
  }
  if (free_threaded) {
    text += 't';
  }
  return text;
}

PythonVersion MajorMinor(int major, int minor) {
  PythonVersion version;
  version.major = major;
  version.minor = minor;
  return version;
}

PythonVersion VersionFromHex(std::uint64_t hex) {
  PythonVersion version;
  version.major = static_cast<int>((hex >> 24) & 0xff);
  version.minor = static_cast<int>((hex >> 16) & 0xff);
  version.micro = static_cast<int>((hex >> 8) & 0xff);
  const int level = static_cast<int>((hex >> 4) & 0xf);
  const int serial = static_cast<int>(hex & 0xf);
  switch (level) {
    case 0xa:
      version.prerelease = Format("a{}", serial);
      break;
    case 0xb:
      version.prerelease = Format("b{}", serial);
      break;
    case 0xc:
      version.prerelease = Format("rc{}", serial);
      break;
    default:
      break;
  }
  return version;
}

bool IsLibPythonName(std::string_view file_name) {
  return file_name.starts_with("libpython") && file_name.find(".so") != std::string_view::npos;
}

std::optional<PythonVersion> VersionFromFileName(std::string_view file_name) {
  std::string_view rest = file_name;
  if (rest.starts_with("lib")) {
    rest.remove_prefix(3);
  }
  if (!rest.starts_with("python")) {
    return std::nullopt;
  }
  rest.remove_prefix(6);
  PythonVersion version;
  const std::optional<int> major = TakeSmallNumber(rest);
  if (!major || !rest.starts_with('.')) {
    return std::nullopt;
  }
  rest.remove_prefix(1);
  const std::optional<int> minor = TakeSmallNumber(rest);
  if (!minor) {
    return std::nullopt;
  }
  version.major = *major;
  version.minor = *minor;
  // ABI flags ("d" debug, "m" pymalloc before 3.8, "u", "t" free-threaded), then the end,
  // a ".so" suffix or a "-config"-style suffix.
  while (!rest.empty() && std::islower(static_cast<unsigned char>(rest.front()))) {
    if (rest.front() == 't') {
      version.free_threaded = true;
    } else if (rest.front() != 'd' && rest.front() != 'm' && rest.front() != 'u') {
      return std::nullopt;
    }
    rest.remove_prefix(1);
  }
  if (!rest.empty() && rest.front() != '.' && rest.front() != '-') {
    return std::nullopt;
  }
  return version;
}

bool IsSupportedVersion(const PythonVersion& version) {
  return version.major == 3 && version.minor >= kFirstSupportedMinor &&
         version.minor <= kLastSupportedMinor && !version.free_threaded;
}

}  // namespace expanse::pystack
