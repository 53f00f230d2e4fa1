// Names in the spool tree: which host names, boot ids and record kinds are acceptable, how
// spool, temporary and quarantine files are named, and how a directory entry is classified.
// Every name read from the shared directory is hostile; nothing here trusts one.
#ifndef EXPANSE_SPOOL_SPOOL_NAMES_H_
#define EXPANSE_SPOOL_SPOOL_NAMES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace expanse::spool {

// 1..64 bytes of [A-Za-z0-9._-], starting with a letter or digit. The leading character
// keeps host directories apart from ".quarantine" and from "." and "..".
bool IsValidHostName(std::string_view host);
// 1..64 bytes of [A-Za-z0-9-] (the kernel's boot id is a lowercase UUID). Boot ids become
// part of file names, hence the narrow alphabet.
bool IsValidBootId(std::string_view boot_id);
// 1..32 bytes of [a-z0-9_], e.g. "gpu_series".
bool IsValidKind(std::string_view kind);

// "<sequence, 20 decimal digits>-<boot id>.spool": the digits make the name sort by sequence.
std::string SpoolFileName(uint64_t sequence, std::string_view boot_id);

struct SpoolFileNameParts {
  uint64_t sequence = 0;
  std::string boot_id;
};
// The parts of a name SpoolFileName produced; nullopt for anything else.
std::optional<SpoolFileNameParts> ParseSpoolFileName(std::string_view name);

// A writer's temporary name for `final_name`: ".tmp-<pid>-<counter>-<final_name>". Readers
// skip every name with the ".tmp-" prefix.
std::string TempFileName(std::string_view final_name);
bool IsTempFileName(std::string_view name);

enum class EntryKind { kSpoolFile, kTempFile, kHealthFile, kUnexpected };
EntryKind ClassifyHostEntry(std::string_view name);

// "<host>-<name>-<reason>" with every byte outside [A-Za-z0-9._-] replaced by '_', cut so it
// fits a file name. The name is hostile; the quarantine entry must not be.
std::string QuarantineEntryName(std::string_view host, std::string_view name,
                                std::string_view reason);

}  // namespace expanse::spool

#endif  // EXPANSE_SPOOL_SPOOL_NAMES_H_
