// libFuzzer target for the environment-file code in src/core/env_file.h.
//
// Beyond "no crash, no sanitizer report" it checks two properties on every input
// that parses, and aborts (which libFuzzer reports as a crash) when one fails:
//  1. Render -> parse gives back exactly the parsed entries.
//  2. Merging updates into the original bytes gives a file that parses to the
//     original entries with the updates applied, i.e. MergeEnvFile neither loses
//     an operator's setting nor lets an appended line change a neighbouring one.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/env_file.h"

namespace {

// Values that need quoting and escaping when rendered.
constexpr std::string_view kRewrittenValue = R"(merged "value" $HOME \)";
constexpr std::string_view kAppendedValue = "a\nb";

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_env_file: property violated: %s\n", what);
    std::abort();
  }
}

void CheckRenderRoundTrip(const expanse::EnvFile& parsed) {
  const std::string rendered = expanse::RenderEnvFile(parsed);
  // Escaping can make the rendering of a file near the cap exceed the cap.
  if (rendered.size() > expanse::kMaxEnvFileBytes) {
    return;
  }
  const expanse::Result<expanse::EnvFile> reparsed = expanse::ParseEnvFile(rendered);
  Require(reparsed.ok(), "rendered file does not parse");
  Require(reparsed->entries() == parsed.entries(), "render/parse round trip changed entries");
}

void CheckMerge(std::string_view text, const expanse::EnvFile& parsed) {
  expanse::EnvFile updates;
  expanse::EnvFile expected = parsed;
  // Rewrites an existing key in place and appends a new one.
  if (!parsed.empty()) {
    const std::string key = parsed.entries().front().key;
    Require(updates.Set(key, kRewrittenValue).ok(), "Set existing key");
    Require(expected.Set(key, kRewrittenValue).ok(), "Set existing key");
  }
  Require(updates.Set("EXPANSE_FUZZ_APPENDED", kAppendedValue).ok(), "Set new key");
  Require(expected.Set("EXPANSE_FUZZ_APPENDED", kAppendedValue).ok(), "Set new key");

  const expanse::Result<std::string> merged = expanse::MergeEnvFile(text, updates);
  if (!merged.ok()) {
    // The input parsed, so the only acceptable failure is growing past the cap.
    Require(merged.status().message().starts_with("merged env file would be"),
            "MergeEnvFile failed on a file that parses");
    return;
  }
  const expanse::Result<expanse::EnvFile> reparsed = expanse::ParseEnvFile(*merged);
  Require(reparsed.ok(), "merged file does not parse");
  Require(reparsed->entries() == expected.entries(), "merge lost or changed an entry");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const expanse::Result<expanse::EnvFile> parsed = expanse::ParseEnvFile(text);
  if (!parsed.ok()) {
    return 0;
  }
  CheckRenderRoundTrip(*parsed);
  CheckMerge(text, *parsed);
  return 0;
}
