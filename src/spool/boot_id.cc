#include "spool/boot_id.h"

#include <fcntl.h>

#include <cerrno>
#include <string_view>

#include "core/quote.h"
#include "spool/fs_util.h"
#include "spool/spool_names.h"

namespace expanse::spool {

Result<std::string> ReadBootId(const std::string& path) {
  fs::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid())
    return IoError(errno, "open", path);
  std::string text;
  if (!fs::ReadAll(fd.get(), text, 128))
    return IoError(errno, "read", path);
  std::string_view id = text;
  while (!id.empty() && (id.back() == '\n' || id.back() == ' '))
    id.remove_suffix(1);
  if (!IsValidBootId(id)) {
    return InvalidArgumentError("spool: " + path + " holds " + QuoteForMessage(id) +
                                ", not a boot id ([A-Za-z0-9-]{1,64})")
        .WithReason("spool_bad_boot_id");
  }
  return std::string(id);
}

}  // namespace expanse::spool
