// libFuzzer target for gres.conf parsing and the hostlist expressions in it
// (src/attribution/gres_conf.h, src/slurm/hostlist.h).
//
// The input's first line is the node name, the rest the gres.conf text. Beyond "no crash, no
// sanitizer report" it checks, aborting when one fails:
//  1. A parsed node has at most kMaxGresFilesPerNode device files, with distinct GPU minors.
//  2. ExpandHostList and HostListContains accept the same expressions, and every expanded name is
//     contained: the matcher (which does not expand) agrees with the expander.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "attribution/devices_list.h"
#include "attribution/gres_conf.h"
#include "slurm/hostlist.h"

namespace {

constexpr size_t kMaxNamesChecked = 64;

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_gres_conf: property violated: %s\n", what);
    std::abort();
  }
}

void CheckGresConf(std::string_view text, std::string_view node) {
  const expanse::Result<expanse::attribution::NodeGres> parsed =
      expanse::attribution::ParseGresConf(text, node);
  if (!parsed.ok()) {
    return;
  }
  Require(parsed->files.size() <= expanse::attribution::kMaxGresFilesPerNode, "too many files");
  std::set<uint32_t> minors;
  for (const expanse::attribution::GresGpuFile& file : parsed->files) {
    Require(file.minor < expanse::attribution::kFirstNvidiaControlMinor, "control minor as GPU");
    Require(minors.insert(file.minor).second, "duplicate minor");
  }
}

void CheckHostlist(std::string_view expression, std::string_view node) {
  const expanse::Result<std::vector<std::string>> names =
      expanse::slurm::ExpandHostList(expression, kMaxNamesChecked);
  const expanse::Result<bool> contains = expanse::slurm::HostListContains(expression, node);
  const bool syntax_error = names.status().code() == expanse::StatusCode::kInvalidArgument;
  Require(syntax_error == !contains.ok(), "expander and matcher disagree on syntax");
  if (!names.ok()) {
    return;
  }
  bool node_listed = false;
  for (const std::string& name : *names) {
    const expanse::Result<bool> found = expanse::slurm::HostListContains(expression, name);
    Require(found.ok() && *found, "expanded name not contained");
    node_listed = node_listed || name == node;
  }
  Require(*contains == node_listed, "matcher and expander disagree on the node");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string_view node = input.substr(0, newline);
  const std::string_view text =
      newline == std::string_view::npos ? std::string_view() : input.substr(newline + 1);
  CheckGresConf(text, node);
  if (node.size() <= 64 && text.size() <= 256) {
    CheckHostlist(text.substr(0, text.find('\n')), node);
  }
  return 0;
}
