#include "release/trusted_key.h"

#include <unistd.h>

#include <array>
#include <optional>

#include "core/file_util.h"
#include "crypto/ecdsa.h"
#include "release/embedded_key.h"

namespace expanse::release {
namespace {

constexpr size_t kMaxKeyFileBytes = 64 * 1024;

// The directory of the running program, "" when /proc does not say.
std::string ProgramDirectory() {
  std::array<char, 4096> buffer{};
  const ssize_t n = ::readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
  if (n <= 0)
    return "";
  return fs::SplitPath(std::string(buffer.data(), static_cast<size_t>(n))).first;
}

}  // namespace

std::vector<std::string> PinnedKeyPaths() {
  std::vector<std::string> out;
  if (const std::string dir = ProgramDirectory(); !dir.empty())
    out.push_back(dir + "/../etc/expanse/release.pub");
  out.push_back("/etc/expanse/release.pub");
  return out;
}

Result<TrustedKey> FirstTrustedKey(const std::vector<std::string>& candidates) {
  for (const std::string& path : candidates) {
    Result<std::optional<std::string>> pem = fs::ReadSmallFile(path, kMaxKeyFileBytes);
    if (!pem.ok()) {
      return FailedPreconditionError("the pinned release key " + path +
                                     " cannot be read: " + pem.status().message())
          .WithReason("key_invalid");
    }
    if (!*pem)
      continue;
    if (Status valid = crypto::CheckPublicKey(**pem); !valid.ok()) {
      return FailedPreconditionError("the pinned release key " + path +
                                     " is not an ECDSA P-256 public key (" + valid.message() +
                                     "); replace or remove it")
          .WithReason("key_invalid");
    }
    return TrustedKey{.pem = std::move(**pem), .source = path};
  }
  return TrustedKey{.pem = std::string(EmbeddedReleasePublicKey()),
                    .source = "the embedded release key"};
}

Result<TrustedKey> DefaultTrustedKey() { return FirstTrustedKey(PinnedKeyPaths()); }

}  // namespace expanse::release
