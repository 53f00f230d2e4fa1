// Ordering of release versions ("1.10.0" after "1.9.2") and NVIDIA driver versions
// ("580.159.04" after "580.65.06"): dotted numbers compared numerically, never as text.

#ifndef EXPANSE_CORE_VERSION_COMPARE_H_
#define EXPANSE_CORE_VERSION_COMPARE_H_

#include <optional>
#include <string>
#include <string_view>

namespace expanse {

// A release version: 1 to 4 dot-separated numbers of 1 to 9 digits each, optionally followed
// by "-" and a pre-release suffix of dot-separated [0-9A-Za-z-] identifiers ("1.2.0-rc.1").
// At most 64 characters.
bool IsValidVersion(std::string_view version);

// A release version as people write it, in its canonical form: an optional leading "v" and
// SemVer build metadata ("+build.7", which never changes precedence) are dropped, so "v1.8.0"
// and "1.8.0+git.abc" are "1.8.0". nullopt when what remains is not IsValidVersion or the build
// part is not dot-separated [0-9A-Za-z-] identifiers. The one rule for the installer's
// --daemon-version and the console's install templates.
std::optional<std::string> CanonicalVersion(std::string_view text);

// <0, 0 or >0 as `a` is older than, the same as or newer than `b`. Numbers compare
// numerically and a missing number counts as 0 ("1.2" == "1.2.0"). A pre-release is older
// than the same version without a suffix; two suffixes compare identifier by identifier the
// way SemVer 2.0 orders pre-releases (numeric identifiers numerically and before
// alphanumeric ones; a prefix is older). Invalid versions sort before every valid one and
// among themselves byte by byte, so this is a total order whatever the input.
int CompareVersions(std::string_view a, std::string_view b);

// An NVIDIA driver version as nvidia-smi prints it: 2 to 4 dot-separated numbers of 1 to 9
// digits each ("580.65.06", "535.104.05", "550.54"), leading zeros allowed.
bool IsValidDriverVersion(std::string_view version);

// As CompareVersions, for driver versions ("580.159.04" > "580.65.06").
int CompareDriverVersions(std::string_view a, std::string_view b);

}  // namespace expanse

#endif  // EXPANSE_CORE_VERSION_COMPARE_H_
