// What the doctor reads from programs it runs on the controller (src/doctor/gather.h): find's
// records of the workers' report mtimes (the spool's directory names are chosen by the workers)
// and `df -P -k`'s table (a FUSE or network file system reports what it likes). Input: both
// outputs at once, read by each parser.
// Properties:
// - nothing throws or crashes;
// - the mtimes hold at most one host per NUL-ended record, each a valid spool host name with a
//   time between the epoch and the end of year 9999;
// - df gives at most one disk per path and per data line, in the paths' order; a disk's sizes
//   are exactly the KiB its line prints (no sign taken, no wrap), else its error is clean text.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "doctor/gather.h"
#include "spool/spool_names.h"
#include "wire/field_reader.h"

namespace {

void CheckMtimes(std::string_view output) {
  const std::map<std::string, int64_t> mtimes = expanse::doctor::ParseReportMtimes(output);
  size_t records = 0;
  for (size_t from = 0; from < output.size(); ++records) {
    const size_t nul = output.find('\0', from);
    from = nul == std::string_view::npos ? output.size() : nul + 1;
  }
  if (mtimes.size() > records)
    std::abort();
  for (const auto& [host, ms] : mtimes) {
    if (!expanse::spool::IsValidHostName(host) || ms < 0 || ms > 253'402'300'799'999)
      std::abort();
  }
}

// The data lines of df's output as ParseDf splits them: after the header, '\n'-ended.
std::vector<std::string_view> DataLines(std::string_view output) {
  std::vector<std::string_view> lines;
  while (!output.empty()) {
    const size_t newline = output.find('\n');
    lines.push_back(output.substr(0, newline));
    output.remove_prefix(newline == std::string_view::npos ? output.size() : newline + 1);
  }
  if (!lines.empty())
    lines.erase(lines.begin());
  return lines;
}

// Whether `bytes` is 1024 times the decimal number `field` (leading zeros allowed, nothing else).
bool PrintsKibibytes(std::string_view field, uint64_t bytes) {
  while (field.size() > 1 && field.front() == '0')
    field.remove_prefix(1);
  return bytes % 1024 == 0 && field == std::to_string(bytes / 1024);
}

// The n-th whitespace-separated field of a line.
std::string_view Field(std::string_view line, size_t n) {
  constexpr std::string_view kSpace = " \t\r\v\f";
  size_t at = line.find_first_not_of(kSpace);
  for (; at != std::string_view::npos && n > 0; --n)
    at = line.find_first_not_of(kSpace, line.find_first_of(kSpace, at));
  if (at == std::string_view::npos)
    return {};
  return line.substr(at, line.find_first_of(kSpace, at) - at);
}

void CheckDf(const std::string& output) {
  const std::vector<std::string> paths = {"/var/lib/expanse", "/srv/expanse", "/srv/other"};
  const std::vector<expanse::doctor::DiskFacts> disks = expanse::doctor::ParseDf(output, paths);
  const std::vector<std::string_view> lines = DataLines(output);
  if (disks.size() > paths.size() || disks.size() > lines.size())
    std::abort();
  for (size_t i = 0; i < disks.size(); ++i) {
    const expanse::doctor::DiskFacts& disk = disks[i];
    if (disk.path != paths[i])
      std::abort();
    if (!disk.error.empty()) {
      if (!expanse::wire::IsCleanText(disk.error) || disk.total_bytes != 0 || disk.free_bytes != 0)
        std::abort();
      continue;
    }
    if (!PrintsKibibytes(Field(lines[i], 1), disk.total_bytes) ||
        !PrintsKibibytes(Field(lines[i], 3), disk.free_bytes))
      std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string output(reinterpret_cast<const char*>(data), size);
  CheckMtimes(output);
  CheckDf(output);
  return 0;
}
