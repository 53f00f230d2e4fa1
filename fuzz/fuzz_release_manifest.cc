// libFuzzer target for the release documents an installer reads from a mirror or an archive:
// manifest.json (release/manifest.h) and release.json (release/release_info.h). Either
// signature-verified or checked against hashes before use, but parsed from bytes that came
// over the network, so the parsers must hold against anything.
//
// Properties, beyond "no crash, no sanitizer report":
//  1. A refusal is always kInvalidArgument.
//  2. Whatever parses renders to text that parses back to the same value, and rendering that
//     gives the same bytes again (so a rebuilt manifest is stable).
//  3. Every URL in an accepted manifest is an absolute http(s) URL.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "release/manifest.h"
#include "release/release_info.h"

namespace {

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_release_manifest: property violated: %s\n", what);
    std::abort();
  }
}

void CheckManifest(std::string_view text) {
  using expanse::release::Manifest;
  const expanse::Result<Manifest> parsed = expanse::release::ParseManifest(text);
  if (!parsed.ok()) {
    Require(parsed.status().code() == expanse::StatusCode::kInvalidArgument,
            "manifest refusal is not kInvalidArgument");
    return;
  }
  for (const auto& release : parsed->releases) {
    for (const auto& archive : release.archives) {
      Require(expanse::release::IsAbsoluteHttpUrl(archive.ref.url), "relative archive URL");
      Require(expanse::release::IsAbsoluteHttpUrl(archive.ref.signature_url),
              "relative signature URL");
    }
    for (const auto& cupti : release.cupti)
      Require(expanse::release::IsAbsoluteHttpUrl(cupti.ref.url), "relative CUPTI URL");
  }
  const std::string rendered = expanse::release::RenderManifest(*parsed);
  if (rendered.size() > expanse::release::kMaxManifestBytes)
    return;  // pretty-printing can grow a document near the cap past it
  const expanse::Result<Manifest> reparsed = expanse::release::ParseManifest(rendered);
  Require(reparsed.ok(), "rendered manifest does not parse");
  Require(*reparsed == *parsed, "manifest render/parse round trip changed it");
  Require(expanse::release::RenderManifest(*reparsed) == rendered, "manifest rendering unstable");
}

void CheckReleaseInfo(std::string_view text) {
  using expanse::release::ReleaseInfo;
  const expanse::Result<ReleaseInfo> parsed = expanse::release::ParseReleaseInfo(text);
  if (!parsed.ok()) {
    Require(parsed.status().code() == expanse::StatusCode::kInvalidArgument,
            "release.json refusal is not kInvalidArgument");
    return;
  }
  const std::string rendered = expanse::release::RenderReleaseInfo(*parsed);
  if (rendered.size() > expanse::release::kMaxReleaseInfoBytes)
    return;
  const expanse::Result<ReleaseInfo> reparsed = expanse::release::ParseReleaseInfo(rendered);
  Require(reparsed.ok(), "rendered release.json does not parse");
  Require(*reparsed == *parsed, "release.json render/parse round trip changed it");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckManifest(text);
  CheckReleaseInfo(text);
  return 0;
}
