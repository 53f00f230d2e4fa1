// libFuzzer target for the two /proc files the sampler reads per job thread
// (src/telemetry/proc_thread_files.h): a thread's stat, whose name field the job chooses, and
// its schedstat.
//
// Beyond "no crash, no sanitizer report" it checks, aborting when one fails:
//  1. A state letter is the character after the input's last ")" and one space.
//  2. A run-queue wait is the second field, written in decimal exactly as parsed, after a
//     first field of digits; and a schedstat line the kernel's way round-trips.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "telemetry/proc_thread_files.h"

namespace {

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_proc_thread_files: property violated: %s\n", what);
    std::abort();
  }
}

void CheckState(std::string_view text) {
  const char state = expanse::telemetry::ParseThreadState(text);
  if (state == 0)
    return;
  const size_t paren = text.rfind(')');
  Require(paren != std::string_view::npos && paren + 2 < text.size(), "state without a paren");
  Require(text[paren + 1] == ' ' && text[paren + 2] == state, "state not after the last paren");
}

void CheckRunQueueWait(std::string_view text) {
  const std::optional<uint64_t> waiting = expanse::telemetry::ParseRunQueueWaitNs(text);
  if (!waiting)
    return;
  const size_t space = text.find(' ');
  Require(space != std::string_view::npos && space > 0, "no first field");
  for (size_t i = 0; i < space; ++i)
    Require(text[i] >= '0' && text[i] <= '9', "first field not digits");
  const std::string_view rest = text.substr(space + 1);
  const std::string_view field = rest.substr(0, rest.find_first_of(" \n"));
  Require(!field.empty() && field.find_first_not_of("0123456789") == std::string_view::npos,
          "second field not digits");
  // from_chars reads leading zeros.
  const size_t significant = field.find_first_not_of('0');
  Require(
      (significant == std::string_view::npos ? std::string_view("0") : field.substr(significant)) ==
          std::to_string(*waiting),
      "wait is not the second field");
}

void CheckRoundTrip(const std::uint8_t* data, std::size_t size) {
  if (size < 16)
    return;
  uint64_t on_cpu = 0, waiting = 0;
  std::memcpy(&on_cpu, data, 8);
  std::memcpy(&waiting, data + 8, 8);
  char line[80];
  std::snprintf(line, sizeof(line), "%llu %llu %lu\n", static_cast<unsigned long long>(on_cpu),
                static_cast<unsigned long long>(waiting), static_cast<unsigned long>(size));
  const std::optional<uint64_t> parsed = expanse::telemetry::ParseRunQueueWaitNs(line);
  Require(parsed.has_value() && *parsed == waiting, "the kernel's format does not round-trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckState(text);
  CheckRunQueueWait(text);
  CheckRoundTrip(data, size);
  return 0;
}
