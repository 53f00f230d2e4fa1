#include "release_cli.h"

#include <iostream>

#include "core/clock.h"

namespace expanse::install {

void AddReleaseCommands(CLI::App& app, ReleaseCommands& c) {
  CLI::App* release =
      app.add_subcommand("release", "Build, sign and check signed releases (builders, mirrors)");
  release->require_subcommand(1);

  c.keygen = release->add_subcommand("keygen", "Create an ECDSA P-256 release signing key pair");
  c.keygen
      ->add_option("--private-key", c.keygen_flags.private_key_path,
                   "Private key file to create (mode 0600; never overwritten)")
      ->capture_default_str();
  c.keygen->add_option("--public-key", c.keygen_flags.public_key_path, "Public key file (PEM)")
      ->capture_default_str();

  c.pack = release->add_subcommand("pack", "Pack a staged directory into a release archive");
  c.pack->add_option("--name", c.pack_flags.name, "Package: expanse-daemon or expanse-cupti")
      ->capture_default_str();
  c.pack->add_option("--version", c.pack_flags.version, "Release version, e.g. 1.4.2")->required();
  c.pack->add_option("--os", c.pack_flags.os, "Operating system")->capture_default_str();
  c.pack->add_option("--arch", c.pack_flags.arch, "Architecture")->capture_default_str();
  c.pack->add_option("--variant", c.pack_flags.variant, "CUPTI variant, e.g. cuda1300");
  c.pack->add_option("--min-driver", c.pack_flags.min_driver,
                     "Oldest NVIDIA driver the CUPTI variant runs on, e.g. 580.65.06");
  c.pack
      ->add_option("--from", c.pack_flags.staging_dir,
                   "Directory whose files (bin/expanse-daemon, bin/py-spy, ...) are packed")
      ->required();
  c.pack->add_option("--output-dir", c.pack_flags.output_dir, "Where the archive is written")
      ->capture_default_str();

  c.sign = release->add_subcommand("sign", "Write a detached signature <file>.sig for each file");
  c.sign->add_option("--key", c.sign_flags.private_key_path, "Private key (PEM)")->required();
  c.sign->add_option("files", c.sign_flags.files, "Files to sign")->required();

  c.manifest = release->add_subcommand(
      "manifest", "Write and sign manifest.json for a directory of signed archives");
  c.manifest->add_option("--dir", c.manifest_flags.dir, "Directory of archives and .sig files")
      ->required();
  c.manifest
      ->add_option("--base-url", c.manifest_flags.base_url,
                   "URL the directory is served at (archive URLs are absolute)")
      ->required();
  c.manifest->add_option("--key", c.manifest_flags.private_key_path, "Private key (PEM)")
      ->required();

  c.verify = release->add_subcommand(
      "verify", "Check a file's detached signature (and a manifest's or archive's contents)");
  c.verify->add_option("file", c.verify_flags.file, "manifest.json, an archive or any file")
      ->required();
  c.verify->add_option("--signature", c.verify_flags.signature_path,
                       "Signature file (default <file>.sig)");
  c.verify->add_option("--key", c.verify_flags.public_key_path,
                       "Public key (PEM; default the embedded release key)");
}

Status RunReleaseCommand(const ReleaseCommands& c) {
  if (c.keygen->parsed())
    return release::RunKeygen(c.keygen_flags, std::cout);
  if (c.pack->parsed())
    return release::RunPack(c.pack_flags, std::cout);
  if (c.sign->parsed())
    return release::RunSign(c.sign_flags, std::cout);
  if (c.manifest->parsed()) {
    SystemClock clock;
    return release::RunManifest(c.manifest_flags, clock, std::cout);
  }
  return release::RunVerify(c.verify_flags, std::cout);
}

}  // namespace expanse::install
