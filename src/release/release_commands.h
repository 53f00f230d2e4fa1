// `expanse release ...`: the release manager's commands, as functions behind a thin CLI.
// Each writes a line per thing it did to `out` and returns a Status whose message is meant
// for the operator as it is.
//
//   keygen    a new P-256 key pair (private key 0600; never overwrites)
//   pack      a staging directory -> <name>_<version>[_<variant>]_linux_<arch>.tar.gz
//   sign      <file> -> <file>.sig (cosign sign-blob format)
//   manifest  a directory of signed archives -> manifest.json + manifest.json.sig
//   verify    <file> + <file>.sig with a public key; manifests are parsed and archives
//             checked against their release.json as well

#ifndef EXPANSE_RELEASE_RELEASE_COMMANDS_H_
#define EXPANSE_RELEASE_RELEASE_COMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace expanse::release {

struct KeygenFlags {
  std::string private_key_path = "expanse-release.key";
  std::string public_key_path = "expanse-release.pub";
};
// kAlreadyExists (naming the file) when either file exists; nothing is written then.
Status RunKeygen(const KeygenFlags& flags, std::ostream& out);

struct PackFlags {
  std::string name = "expanse-daemon";
  std::string version{};
  std::string os = "linux";
  std::string arch = "amd64";
  std::string variant{};  // CUPTI builds, with min_driver
  std::string min_driver{};
  std::string staging_dir{};  // its regular files, by relative path, become the archive
  std::string output_dir = ".";
};
Status RunPack(const PackFlags& flags, std::ostream& out);

struct SignFlags {
  std::string private_key_path{};
  std::vector<std::string> files{};  // each gets <file>.sig, replaced atomically
};
Status RunSign(const SignFlags& flags, std::ostream& out);

struct ManifestFlags {
  std::string dir{};       // the archives with their .sig files; manifest.json goes here too
  std::string base_url{};  // where `dir` is served, e.g. https://releases.example.com/expanse
  std::string private_key_path{};  // signs manifest.json; its public half checks every .sig
};
// Builds manifest.json (BuildManifest; new versions dated clock.NowMs()) and signs it.
Status RunManifest(const ManifestFlags& flags, Clock& clock, std::ostream& out);

struct VerifyFlags {
  std::string file{};
  std::string signature_path{};   // "" = file + ".sig"
  std::string public_key_path{};  // "" = the embedded release key
};
// Verifies the signature; a file named manifest.json must also parse, and a *.tar.gz must pass
// InspectArchive (every entry, and release.json against the files).
Status RunVerify(const VerifyFlags& flags, std::ostream& out);

}  // namespace expanse::release

#endif  // EXPANSE_RELEASE_RELEASE_COMMANDS_H_
