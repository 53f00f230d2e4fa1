#!/usr/bin/python3
# -*- coding: utf-8 -*-
"""Ansible module: converge one node's Expanse install through `expanse compute`.

The decision comes from what the installer itself recorded on the host, not from guesses:
/var/lib/expanse-install/{controller,sampler}.json (docs/formats/install-state.md). The module
compares that record with the requested settings and runs `expanse compute install`,
`install --reinstall` or `uninstall` only when they differ, so a second run changes nothing.
In check mode it runs nothing and reports what it would do; in diff mode it shows the
recorded settings against the requested ones.

The install token travels only in this module's arguments (no_log in the argument spec) and
in the environment of the one `expanse` process that needs it, which takes it out of its
environment at start-up. It is never on a command line or in a file.
"""

import json
import os
import re
import stat
import tarfile

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
---
module: expanse_compute
short_description: Install, update or remove Expanse on a SLURM node with the expanse CLI
description:
  - Reads the installer's state file, compares it with the requested settings and runs
    C(expanse compute install) (fresh, or C(--reinstall) keeping the compute identity),
    C(--role sampler) on workers, or C(expanse compute uninstall).
  - Supports check mode and diff mode.
options:
  state: {type: str, choices: [present, absent], default: present}
  role: {type: str, choices: [controller, sampler], default: controller}
  cli: {type: path, required: true, description: The expanse CLI.}
  shared_prefix: {type: path, required: true}
  install_token: {type: str, description: Used for a fresh install or with replace_credential.}
  replace_credential: {type: bool, default: false}
  token_step:
    type: bool
    default: false
    description:
      - false, when the plan needs the token, only reports it (token_needed) and changes nothing,
        so this step can run without no_log and show its diff; true runs the install with
        install_token.
notes:
  - The remaining options mirror the flags of C(expanse compute install); see the role's
    defaults/main.yml.
"""

STATE_DIR = "/var/lib/expanse-install"
DEFAULT_CONFIG = "/var/lib/slurm/.expanse/config.json"
UNITS = {"controller": "expanse-daemon.service", "sampler": "expanse-sampler.service"}
# A release version as the CLI accepts it: a leading v and +build metadata are dropped.
VERSION_RE = re.compile(r"^v?([0-9]+(?:\.[0-9]+)*(?:-[0-9A-Za-z.-]+)?)(?:\+[0-9A-Za-z.-]+)?$")


def canonical_version(text):
    m = VERSION_RE.match(text or "")
    return m.group(1) if m else text


# Where a job's Prolog leaves a sampler on a worker no sampler install ran on (the default
# --sampler-bootstrap=prolog): its copy of the shared unit, or the pid file of one it started.
SAMPLER_UNIT = "/etc/systemd/system/expanse-sampler.service"
SAMPLER_PID_FILE = "/var/lib/expanse/sampler/sampler.pid"
UNIT_HEADER = b"# Managed by `expanse compute install`"


def prolog_sampler(unit=SAMPLER_UNIT, pid_file=SAMPLER_PID_FILE, proc="/proc"):
    """What `compute uninstall --role sampler` stops on such a worker, in words, or None: our
    unit (an operator's own under that name is left alone, so it must not keep the host
    "changed"), or a live process that is a sampler (a stale pid file names none)."""
    try:
        with open(unit, "rb") as f:
            if f.read(len(UNIT_HEADER)) == UNIT_HEADER:
                return "the sampler unit a job's Prolog installed at %s" % unit
    except OSError:
        pass
    try:
        # The daemon account owns that directory: no link is followed and a FIFO (which would
        # block this root run) or anything else but a file is not read.
        fd = os.open(pid_file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            pid = int(os.read(fd, 256).split()[0])
        finally:
            os.close(fd)
        with open("%s/%d/cmdline" % (proc, pid), "rb") as f:
            if pid > 1 and b"--role\0sampler" in f.read(65536):
                return "the sampler a job's Prolog started (pid %d)" % pid
    except (OSError, ValueError, IndexError):
        pass
    return None


def load_state(module, role):
    path = os.path.join(module.params["state_dir"], role + ".json")
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        module.fail_json(msg="%s: cannot read the install state: %s" % (path, e))
    if not isinstance(doc, dict) or doc.get("format") != 1:
        module.fail_json(msg="%s: not a format-1 install state" % path)
    return doc


def staged_version(module, archive):
    """The version a staged daemon archive carries in its release.json; "" for a bare binary."""
    if not archive.endswith(".tar.gz"):
        return ""
    if not os.path.isfile(archive):
        if module.check_mode:
            return "(unreadable: %s)" % archive
        module.fail_json(msg="expanse_daemon_binary %s does not exist on this host" % archive)
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                if member.isfile() and member.name.lstrip("./") == "release.json":
                    info = json.load(tar.extractfile(member))
                    return canonical_version(str(info.get("version", "")))
    except (OSError, tarfile.TarError, ValueError) as e:
        module.fail_json(msg="%s: cannot read release.json: %s" % (archive, e))
    module.fail_json(msg="%s: no release.json in the archive" % archive)
    return ""


def file_sha256(module, path):
    return module.sha256(path) if os.path.isfile(path) else ""


def desired_settings(module):
    """The settings the installer records, as this run asks for them."""
    p = module.params
    want = {
        "shared_prefix": p["shared_prefix"],
        "user": p["user"],
        "cupti_mode": p["cupti_mode"],
        "profiling_agent": p["profiling_agent"],
        "cupti_variant": p["cupti_variant"],
        "unit_name": UNITS[p["role"]] if p["systemd"] else "",
    }
    if p["role"] == "controller":
        want["bundled_pyspy"] = p["bundled_pyspy"]
        want["sampler_bootstrap"] = p["sampler_bootstrap"]
        want["config_path"] = p["config"] or DEFAULT_CONFIG
        if p["daemon_version"]:
            want["daemon_version"] = canonical_version(p["daemon_version"])
        elif p["daemon_binary"]:
            want["daemon_version"] = staged_version(module, p["daemon_binary"])
        if p["patch_slurm_conf"] and p["slurm_conf"]:
            want["slurm_conf"] = p["slurm_conf"]
    return want


def differences(module, current, want):
    """Names of the settings that differ, each with its recorded and requested value."""
    p = module.params
    diffs = []
    for key, value in sorted(want.items()):
        # A member an older installer did not record reads as what it did: the defaults.
        have = current.get(key, True if key in ("profiling_agent", "bundled_pyspy") else "")
        if key == "daemon_version":
            have = canonical_version(have)
        if have != value:
            diffs.append((key, have, value))
    if p["role"] == "controller":
        # Hooks asked for but only printed last time (no --patch-slurm-conf then).
        if p["patch_slurm_conf"] and not current.get("slurm_conf"):
            diffs.append(("slurm_conf wiring", "not wired", "wired"))
        # A bare binary records no version: compare the installed bytes instead.
        if p["daemon_binary"] and not p["daemon_binary"].endswith(".tar.gz"):
            have = file_sha256(module, os.path.join(p["shared_prefix"], "bin", "expanse-daemon"))
            new = file_sha256(module, p["daemon_binary"])
            if have != new:
                diffs.append(("daemon binary sha256", have, new))
    else:
        # The controller replaced the shared binary (an upgrade or a repair) after this sampler
        # was installed: re-running the sampler install puts the new one into service now
        # rather than at the next job's Prolog.
        binary = os.path.join(p["shared_prefix"], "bin", "expanse-daemon")
        if os.path.exists(binary):
            mtime_ms = int(os.stat(binary).st_mtime * 1000)
            if mtime_ms > int(current.get("installed_ms") or 0):
                diffs.append(("shared daemon binary", "installed before it changed",
                              "the binary of %s" % binary))
    return diffs


def render(settings):
    return "".join("%s: %s\n" % (k, json.dumps(v)) for k, v in sorted(settings.items()))


def install_argv(module, reinstall):
    p = module.params
    argv = [p["cli"], "compute", "install", "--type", "slurm", "--role", p["role"],
            "--shared-prefix", p["shared_prefix"], "--user", p["user"],
            "--cupti-mode", p["cupti_mode"],
            "--profiling-agent=%s" % str(p["profiling_agent"]).lower(),
            "--systemd=%s" % str(p["systemd"]).lower()]
    if p["cupti_variant"]:
        argv += ["--cupti-variant", p["cupti_variant"]]
    if p["role"] == "sampler":
        return argv
    if p["daemon_version"]:
        argv += ["--daemon-version", p["daemon_version"]]
    if p["daemon_binary"]:
        argv += ["--daemon-binary", p["daemon_binary"]]
    for flag, key in (("--control-plane", "control_plane"), ("--data-plane", "data_plane"),
                      ("--config", "config"), ("--slurm-conf", "slurm_conf"),
                      ("--releases-url", "releases_url"), ("--cosign-key", "cosign_key"),
                      ("--heartbeat-timeout", "heartbeat_timeout"),
                      ("--sampler-bootstrap", "sampler_bootstrap")):
        if p[key]:
            argv += [flag, p[key]]
    for flag, key in (("--patch-slurm-conf", "patch_slurm_conf"),
                      ("--reconfigure", "reconfigure"), ("--bundled-pyspy", "bundled_pyspy"),
                      ("--allow-downgrade", "allow_downgrade")):
        argv.append("%s=%s" % (flag, str(p[key]).lower()))
    if reinstall:
        argv.append("--reinstall")
    return argv


def uninstall_argv(module):
    p = module.params
    argv = [p["cli"], "compute", "uninstall", "--type", "slurm", "--role", p["role"],
            "--shared-prefix", p["shared_prefix"], "--user", p["user"]]
    if p["role"] == "controller":
        for flag, key in (("--config", "config"), ("--slurm-conf", "slurm_conf")):
            if p[key]:
                argv += [flag, p[key]]
        argv.append("--reconfigure=%s" % str(p["reconfigure"]).lower())
        argv.append("--keep-identity=%s" % str(p["keep_identity"]).lower())
    return argv


def network_environment(module, token):
    """What the installer reads from its environment: proxy and CA (seeded into daemon.env)
    and, only when it is to be exchanged, the install token."""
    p = module.params
    env = {}
    for var, key in (("HTTPS_PROXY", "https_proxy"), ("NO_PROXY", "no_proxy"),
                     ("SSL_CERT_FILE", "ssl_cert_file")):
        if p[key]:
            env[var] = p[key]
    if token:
        env["EXPANSE_INSTALL_TOKEN"] = token
    return env


def unit_active(module, unit):
    rc, _, _ = module.run_command(["systemctl", "is-active", "--quiet", unit])
    return rc == 0


def plan(module):
    """(action, reasons, before, after, token_needed) for this host."""
    p = module.params
    role = p["role"]
    current = load_state(module, role)
    config = p["config"] or (current or {}).get("config_path") or DEFAULT_CONFIG
    if p["state"] == "absent":
        has_config = role == "controller" and os.path.exists(config)
        left = prolog_sampler() if role == "sampler" and current is None else None
        if current is None and not has_config and not left:
            return "none", [], "", "", False
        if current:
            before = render(current)
        else:
            before = "credential config: %s\n" % config if has_config else left + "\n"
        return "uninstall", ["state: absent"], before, "", False

    want = desired_settings(module)
    after = render(want)
    if current is None:
        if role == "controller" and os.path.exists(config):
            # A credential without an install (credential-only, or uninstall --keep-identity):
            # install keeping that identity.
            return "reinstall", ["a credential config exists at %s but no install" % config], \
                "credential config: %s\n" % config, after, False
        return "install", ["not installed"], "", after, role == "controller"
    before = render({k: current.get(k) for k in want})
    if p["replace_credential"]:
        return "reinstall", ["replace_credential: exchange a re-issued token"], before, after, True
    diffs = differences(module, current, want)
    if diffs or p["force"]:
        reasons = ["%s: %s -> %s" % d for d in diffs] or ["force_reinstall"]
        return ("reinstall" if role == "controller" else "install"), reasons, before, after, False
    unit = current.get("unit_name") or ""
    if unit and p["systemd"] and not unit_active(module, unit):
        return "start", ["%s is not active" % unit], before, after, False
    return "none", [], before, after, False


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["present", "absent"], default="present"),
            role=dict(type="str", choices=["controller", "sampler"], default="controller"),
            cli=dict(type="path", required=True),
            shared_prefix=dict(type="path", required=True),
            user=dict(type="str", default="slurm"),
            config=dict(type="path", default=""),
            daemon_version=dict(type="str", default=""),
            daemon_binary=dict(type="path", default=""),
            releases_url=dict(type="str", default=""),
            cosign_key=dict(type="path", default=""),
            cupti_variant=dict(type="str", default=""),
            allow_downgrade=dict(type="bool", default=False),
            control_plane=dict(type="str", default=""),
            data_plane=dict(type="str", default=""),
            install_token=dict(type="str", default="", no_log=True),
            replace_credential=dict(type="bool", default=False),
            patch_slurm_conf=dict(type="bool", default=True),
            slurm_conf=dict(type="path", default=""),
            reconfigure=dict(type="bool", default=True),
            sampler_bootstrap=dict(type="str", choices=["prolog", "off"], default="prolog"),
            systemd=dict(type="bool", default=True),
            heartbeat_timeout=dict(type="str", default=""),
            cupti_mode=dict(type="str", choices=["perfmon", "sysadmin", "none"],
                            default="perfmon"),
            profiling_agent=dict(type="bool", default=True),
            bundled_pyspy=dict(type="bool", default=True),
            https_proxy=dict(type="str", default=""),
            no_proxy=dict(type="str", default=""),
            ssl_cert_file=dict(type="path", default=""),
            keep_identity=dict(type="bool", default=False),
            force=dict(type="bool", default=False),
            token_step=dict(type="bool", default=False),
            state_dir=dict(type="path", default=STATE_DIR),
        ),
        supports_check_mode=True,
    )
    p = module.params
    # Checked here rather than with mutually_exclusive, which counts a key passed as "".
    if p["daemon_version"] and p["daemon_binary"]:
        module.fail_json(msg="daemon_version and daemon_binary exclude each other")
    action, reasons, before, after, token_needed = plan(module)
    state_path = os.path.join(p["state_dir"], p["role"] + ".json")
    result = dict(changed=action != "none", action=action, reasons=reasons,
                  token_needed=token_needed,
                  diff=dict(before=before, after=after, before_header=state_path,
                            after_header=state_path))
    if action == "none":
        module.exit_json(**result)
    if token_needed and not p["token_step"]:
        # The role runs this module twice: first without the token (a task whose output, diff
        # included, can be shown), then, only when this says the token is needed, with it in
        # a no_log task. Here the first run stops: in check mode it reports what would change.
        result["changed"] = module.check_mode
        module.exit_json(**result)

    if action == "start":
        argv = ["systemctl", "start", UNITS[p["role"]]]
    elif action == "uninstall":
        argv = uninstall_argv(module)
    else:
        argv = install_argv(module, reinstall=action == "reinstall")
    result["command"] = argv
    token = p["install_token"] if token_needed else ""
    if token_needed and not token:
        module.fail_json(msg="%s needs the install token from the console (set "
                             "expanse_install_token, e.g. from Ansible Vault)" % action, **result)
    if module.check_mode:
        module.exit_json(**result)
    if argv[0] == p["cli"] and not os.access(p["cli"], os.X_OK):
        module.fail_json(msg="the expanse CLI is not installed at %s" % p["cli"], **result)

    env = network_environment(module, token)
    rc, out, err = module.run_command(argv, environ_update=env)
    token = ""
    env.pop("EXPANSE_INSTALL_TOKEN", None)
    result.update(rc=rc, stdout=out, stderr=err, stdout_lines=out.splitlines(),
                  stderr_lines=err.splitlines())
    if rc != 0:
        module.fail_json(msg="%s failed (exit %d): %s" % (" ".join(argv[1:3]), rc,
                                                          (err.strip() or out.strip())[-2000:]),
                         **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
