#include "deploy/cli_installer.h"

#include <map>

#include "core/shell_quote.h"
#include "core/version_compare.h"
#include "deploy/plane_url.h"

namespace expanse::deploy {
namespace {

constexpr std::string_view kPrefix = "expanse_";
constexpr std::string_view kSuffix = ".tar.gz";
constexpr std::string_view kPemBegin = "-----BEGIN PUBLIC KEY-----\n";
constexpr std::string_view kPemEnd = "-----END PUBLIC KEY-----\n";

// Everything the operator runs, inside main() so that sh has read the whole script before any
// of it runs (a download cut short runs nothing). Values come in as single-quoted words.
constexpr std::string_view kScript = R"SH(#!/bin/sh
# Installs the Expanse command-line tool from an Expanse server's release mirror:
#   curl -fsSL @BASE@/install | sh
# The archive's signature is checked with openssl against the mirror's release key (below)
# before anything is installed. Installs ${PREFIX:-/usr/local}/bin/expanse and pins the key in
# ${PREFIX:-/usr/local}/etc/expanse/release.pub, where that expanse looks for it first.
# EXPANSE_URL overrides the server's address (https://, or http:// on loopback only).
# A server with a self-signed certificate: export CURL_CA_BUNDLE=<its ca.pem> first.
set -eu

main() {
  default_base=@BASE_WORD@
  base="${EXPANSE_URL:-$default_base}"
  base="${base%/}"
  prefix="${PREFIX:-/usr/local}"
  key=@KEY@

  case "$base" in
    *@*) fail "refusing $base: a URL with a user part (@) is not this server's" ;;
    https://?*) ;;
    http://127.0.0.1 | http://127.0.0.1[:/]* | http://localhost | http://localhost[:/]* | \
      http://\[::1\] | http://\[::1\][:/]*)
      say "note: $base is plain HTTP, accepted on loopback only" ;;
    *) fail "refusing $base: not an https:// URL (plain http:// is accepted only on loopback: 127.0.0.1, localhost, [::1])" ;;
  esac

  for tool in curl openssl tar base64 mktemp uname install cmp; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      if [ "$tool" = openssl ]; then
        fail "openssl is needed to check the CLI's signature before it is installed (Debian: apt-get install openssl)"
      fi
      fail "$tool is needed and not found"
    fi
  done

  [ "$(uname -s)" = Linux ] || fail "the CLI is built for Linux, not $(uname -s)"
  case "$(uname -m)" in
    x86_64 | amd64) arch=amd64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) fail "no CLI for the architecture $(uname -m)" ;;
  esac
  case "$arch" in
@CASES@    *) fail "this server's mirror has no CLI for linux/$arch" ;;
  esac

  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  trap 'exit 1' HUP INT TERM
  say "downloading $file from $base/releases/"
  curl -fsSL --proto '=https,http' -o "$tmp/$file" "$base/releases/$file" ||
    fail "cannot download $base/releases/$file"
  curl -fsSL --proto '=https,http' -o "$tmp/$file.sig" "$base/releases/$file.sig" ||
    fail "cannot download $base/releases/$file.sig"
  printf '%s\n' "$key" >"$tmp/release.pub"
  base64 -d "$tmp/$file.sig" >"$tmp/signature.der" 2>/dev/null ||
    fail "$file.sig is not a base64 signature"
  openssl dgst -sha256 -verify "$tmp/release.pub" -signature "$tmp/signature.der" "$tmp/$file" \
    >/dev/null 2>&1 || fail "the signature of $file does not verify with this server's release key"
  say "signature verified with the server's release key"

  mkdir "$tmp/unpacked"
  tar -xzf "$tmp/$file" -C "$tmp/unpacked" bin/expanse 2>/dev/null ||
    fail "$file holds no bin/expanse"
  mkdir -p "$prefix/bin" "$prefix/etc/expanse" 2>/dev/null ||
    fail "cannot create $prefix/bin and $prefix/etc/expanse (run as root, or set PREFIX)"
  # Both files are written beside their names first and checked (the CLI runs from there, not
  # from a temporary directory that may be noexec), then renamed into place together.
  install -m 0755 "$tmp/unpacked/bin/expanse" "$prefix/bin/.expanse.new" &&
    install -m 0644 "$tmp/release.pub" "$prefix/etc/expanse/.release.pub.new" || {
    rm -f "$prefix/bin/.expanse.new" "$prefix/etc/expanse/.release.pub.new"
    fail "cannot write into $prefix/bin and $prefix/etc/expanse"
  }
  version="$("$prefix/bin/.expanse.new" --version 2>/dev/null)" || {
    rm -f "$prefix/bin/.expanse.new" "$prefix/etc/expanse/.release.pub.new"
    fail "the downloaded expanse does not run on this machine"
  }
  if [ -f "$prefix/etc/expanse/release.pub" ] &&
    ! cmp -s "$prefix/etc/expanse/release.pub" "$tmp/release.pub"; then
    say "note: replacing the release key pinned in $prefix/etc/expanse/release.pub with this server's"
  fi
  mv -f "$prefix/bin/.expanse.new" "$prefix/bin/expanse" &&
    mv -f "$prefix/etc/expanse/.release.pub.new" "$prefix/etc/expanse/release.pub" ||
    fail "cannot rename the new files into $prefix"
  say "installed $prefix/bin/expanse: $version"
  say "release key pinned in $prefix/etc/expanse/release.pub"
  say "next: in the console, Computes > Add compute gives the install script for your cluster;"
  say "      on the slurmctld host, 'expanse compute install --help' lists every flag"
}

say() { printf 'expanse-install: %s\n' "$*"; }
fail() {
  printf 'expanse-install: %s; nothing was installed\n' "$*" >&2
  exit 1
}

main "$@"
)SH";

// The template with each @NAME@ replaced by its value, in one pass over the template: a value is
// never scanned again, so one that holds a placeholder's name (a URL may hold '@') stays text.
std::string Fill(std::string_view text, const std::map<std::string, std::string>& values) {
  std::string out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t open = text.find('@', at);
    if (open == std::string_view::npos)
      break;
    const size_t close = text.find('@', open + 1);
    if (close == std::string_view::npos)
      break;
    const auto value = values.find(std::string(text.substr(open + 1, close - open - 1)));
    if (value == values.end()) {
      out.append(text.substr(at, open + 1 - at));  // not a placeholder: keep the '@', go on
      at = open + 1;
      continue;
    }
    out.append(text.substr(at, open - at));
    out.append(value->second);
    at = close + 1;
  }
  out.append(text.substr(at));
  return out;
}

// One PEM block of base64 lines: the text goes into the script inside single quotes, and
// openssl parses it; anything else is refused here.
bool IsPublicKeyPem(std::string_view pem) {
  if (!pem.starts_with(kPemBegin) || !pem.ends_with(kPemEnd) || pem.size() > 4096)
    return false;
  const std::string_view body =
      pem.substr(kPemBegin.size(), pem.size() - kPemBegin.size() - kPemEnd.size());
  if (body.empty())
    return false;
  for (const char c : body) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '+' || c == '/' || c == '=' || c == '\n';
    if (!ok)
      return false;
  }
  return true;
}

bool IsArch(std::string_view arch) {
  if (arch.empty() || arch.size() > 16)
    return false;
  for (const char c : arch) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  }
  return true;
}

}  // namespace

std::vector<CliArchive> PickCliArchives(const std::vector<std::string>& names) {
  std::map<std::string, bool> present;
  for (const std::string& n : names)
    present[n] = true;
  std::map<std::string, CliArchive> newest;  // by arch
  for (const std::string& name : names) {
    if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix) || !present.contains(name + ".sig"))
      continue;
    // expanse_<version>_linux_<arch>.tar.gz; versions hold no '_' (release-archive.md).
    const std::string_view middle = std::string_view(name).substr(
        kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
    const size_t first = middle.find('_');
    if (first == std::string_view::npos)
      continue;
    const std::string_view version = middle.substr(0, first);
    const std::string_view rest = middle.substr(first + 1);
    if (!rest.starts_with("linux_"))
      continue;
    const std::string_view arch = rest.substr(6);
    if (!IsValidVersion(version) || !IsArch(arch))
      continue;
    auto it = newest.find(std::string(arch));
    if (it != newest.end() && CompareVersions(it->second.version, version) >= 0)
      continue;
    newest[std::string(arch)] = {std::string(arch), std::string(version), name};
  }
  std::vector<CliArchive> out;
  for (auto& [arch, archive] : newest)
    out.push_back(std::move(archive));
  return out;
}

Result<std::string> RenderCliInstaller(const CliInstallerValues& values) {
  EXPANSE_RETURN_IF_ERROR(CheckPlaneUrl("the control plane URL", values.base_url));
  // The script refuses a URL with '@' (a user part curl would honour): never render one.
  if (values.base_url.find('@') != std::string::npos) {
    return InvalidArgumentError("the control plane URL holds '@', which the installer refuses")
        .WithReason("invalid_url");
  }
  if (!IsPublicKeyPem(values.key_pem)) {
    return InvalidArgumentError("the mirror's release.pub is not one PEM public key block")
        .WithReason("key_invalid");
  }
  if (values.archives.empty()) {
    return NotFoundError(
               "the release mirror holds no signed CLI archive "
               "(expanse_<version>_linux_<arch>.tar.gz with its .sig)")
        .WithReason("no_cli_archive");
  }
  std::string cases;
  for (const CliArchive& a : values.archives) {
    if (!IsArch(a.arch) || a.file.find('\'') != std::string::npos)
      return InvalidArgumentError("not a CLI archive: " + a.file);
    cases += "    " + a.arch + ") file=" + ShellQuote(a.file) + " ;;\n";
  }
  std::string base(values.base_url);
  while (base.ends_with('/'))
    base.pop_back();
  // The URL passed CheckPlaneUrl, so it holds no newline and may stand in the comment as it is;
  // the code gets it as one quoted word ($, ' and ( are URL characters).
  const std::string script =
      Fill(kScript, {{"CASES", cases},
                     {"KEY", ShellQuote(values.key_pem.substr(0, values.key_pem.size() - 1))},
                     {"BASE_WORD", ShellQuote(base)},
                     {"BASE", base}});
  return script;
}

std::string CliInstallLine(std::string_view base_url) {
  std::string url(base_url);
  while (url.ends_with('/'))
    url.pop_back();
  url += "/install";
  // Quoted only when a character of the URL means something to the shell.
  const bool plain = url.find_first_not_of(
                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                         "0123456789-._~:/[]@%+,=") == std::string::npos;
  return "curl -fsSL " + (plain ? url : ShellQuote(url)) + " | sh";
}

}  // namespace expanse::deploy
