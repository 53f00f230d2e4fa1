// How the capture agent writes into the node-local capture spool (<control>/capture, the daemon
// account's, mode 1733: jobs may create files but not list or remove another's). Each file is
// written under a hidden temporary name and renamed into place, so the sampler never reads half
// a file; nothing is written when the file system is nearly full, so a job's disk is never the
// one the agent fills. The agent's own problems go, once each, into its log file there.
#ifndef EXPANSE_CAPTURE_SPOOL_FILES_H_
#define EXPANSE_CAPTURE_SPOOL_FILES_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace expanse::capture {

inline constexpr char kCaptureDirName[] = "capture";
inline constexpr uint64_t kMinFreeBytes = 1ULL << 30;

// Writes `content` as <dir>/<name>. Returns "" or what went wrong, naming the path.
std::string WriteSpoolFile(const std::string& dir, const std::string& name,
                           std::string_view content, uint64_t min_free_bytes = kMinFreeBytes);

// Appends one line to <dir>/<name> (created 0644); best effort.
void AppendSpoolLine(const std::string& dir, const std::string& name, const std::string& line);

}  // namespace expanse::capture

#endif  // EXPANSE_CAPTURE_SPOOL_FILES_H_
