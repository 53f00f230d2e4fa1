#!/usr/bin/python3
# -*- coding: utf-8 -*-
"""Ansible module: set or remove several KEY=value lines of /etc/expanse/daemon.env at once.

One module run for all the role's lines instead of one lineinfile run per line: on a
loaded node each module run costs seconds of SSH and interpreter start-up, and the role
owns half a dozen lines. Lines the role does not own (the installer's proxy and CA, an
operator's own settings, comments) are kept as they are, in their place.

Values are written plain when that is unambiguous, else double-quoted with \\ " ` $ escaped,
as docs/formats/env-file.md describes; an empty value removes the line. The file is
replaced atomically (temporary file in the same directory, then rename) with the requested
owner, group and mode (state absent keeps the file's own). Check mode and diff mode are
supported.
"""

import grp
import os
import pwd
import re
import tempfile

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
---
module: expanse_env_lines
short_description: Set or remove the role's KEY=value lines in an environment file
options:
  path: {type: path, required: true}
  lines:
    type: list
    elements: dict
    required: true
    description: Items with key and value; an empty value (or state absent) removes the key.
  state: {type: str, choices: [present, absent], default: present}
  owner: {type: str, default: root}
  group: {type: str, default: root}
  mode: {type: str, default: "0640"}
"""

KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PLAIN_RE = re.compile(r"^[A-Za-z0-9_./:,@%+=-]*$")


def render(key, value):
    if PLAIN_RE.match(value):
        return "%s=%s" % (key, value)
    quoted = (value.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`")
              .replace("$", "\\$"))
    return '%s="%s"' % (key, quoted)


ASSIGN_RE = re.compile(r"[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*=[ \t]*")


def line_end(text, i):
    """The index just past the line break at or after i (\n, \r\n or a lone \r, as the
    daemon's reader takes them), or len(text)."""
    n = len(text)
    while i < n and text[i] not in "\r\n":
        i += 1
    if i < n and text[i] == "\r" and i + 1 < n and text[i + 1] == "\n":
        return i + 2
    return min(i + 1, n)


class Malformed(ValueError):
    """A file the daemon refuses too (docs/formats/env-file.md): rewriting around it would
    lose or corrupt the lines after the broken value."""

    def __init__(self, text, at, what):
        line = text.count("\n", 0, at) + 1
        super().__init__("line %d: %s" % (line, what))


def entries(text):
    """The file as (key, raw text) pieces, one per logical line: an assignment's piece runs
    over every physical line its value spans (a quoted value with line breaks, a backslash
    continuation), so a line inside a value is never taken for an assignment of its own.
    Comments, blank and other lines have key None. Joined, the pieces are `text` again."""
    out, i, n = [], 0, len(text)
    while i < n:
        m = ASSIGN_RE.match(text, i)
        if not m:
            end = line_end(text, i)
            out.append((None, text[i:end]))
            i = end
            continue
        j = m.end()
        if j < n and text[j] == "'":
            close = text.find("'", j + 1)
            if close < 0:
                raise Malformed(text, i, "unterminated single quote in the value of %s" % m.group(1))
            j = close + 1
        elif j < n and text[j] == '"':
            j += 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                raise Malformed(text, i, "unterminated double quote in the value of %s" % m.group(1))
            j += 1
        else:
            while j < n and text[j] not in "\r\n":
                j += 1
                if text[j - 1] != "\\":
                    continue
                # A backslash takes the next character, or joins the next line; one that ends
                # the file would join whatever line is appended later.
                if j < n:
                    j += 2 if text.startswith("\r\n", j) else 1
                if j >= n and (text[j - 1] in "\r\n" or text[j - 1] == "\\" and j - 1 >= i):
                    raise Malformed(text, i, "the value of %s ends in a line continuation at "
                                    "the end of the file" % m.group(1))
        end = line_end(text, j)
        out.append((m.group(1), text[i:end]))
        i = end
    return out


def converge(text, wanted):
    """The file's new text: each wanted key's logical line replaced in place (its first
    occurrence; later duplicates dropped) or appended, keys with value None removed; every
    other piece kept byte for byte, line breaks included."""
    out, placed = [], set()
    for key, raw in entries(text):
        if key is None or key not in wanted:
            out.append(raw)
            continue
        if wanted[key] is not None and key not in placed:
            out.append(render(key, wanted[key]) + "\n")
        placed.add(key)
    for key, value in wanted.items():
        if value is not None and key not in placed:
            if out and not out[-1].endswith(("\n", "\r")):
                out.append("\n")
            out.append(render(key, value) + "\n")
    return "".join(out)


# Keys whose values may hold a secret (a proxy URL's password, a token): --diff shows them as
# <hidden>, since a diff goes to terminals and CI logs while the file itself is 0640.
SECRETISH_RE = re.compile(r"PROXY|PASSWORD|PASSWD|TOKEN|SECRET|CREDENTIAL", re.IGNORECASE)


def masked(text):
    """`text` with the values of secret-looking keys replaced by <hidden>, for --diff."""
    out = []
    for key, raw in entries(text):
        if key is not None and SECRETISH_RE.search(key):
            body = raw.rstrip("\r\n")
            out.append("%s=<hidden>%s" % (key, raw[len(body):]))
        else:
            out.append(raw)
    return "".join(out)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            lines=dict(type="list", elements="dict", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            owner=dict(type="str", default="root"),
            group=dict(type="str", default="root"),
            mode=dict(type="str", default="0640"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    wanted = {}
    for item in p["lines"]:
        key = str(item.get("key", ""))
        value = "" if item.get("value") is None else str(item.get("value"))
        if not KEY_RE.match(key):
            module.fail_json(msg="expanse_env_lines: %r is not a variable name" % key)
        if "\n" in value or "\r" in value or "\0" in value:
            module.fail_json(msg="expanse_env_lines: the value of %s has a line break" % key)
        wanted[key] = value if p["state"] == "present" and value != "" else None

    path = p["path"]
    exists = os.path.exists(path)
    before = ""
    if exists:
        try:
            # newline="" keeps \r\n and lone \r as they are: only the role's lines change.
            with open(path, encoding="utf-8", newline="") as f:
                before = f.read()
        except UnicodeDecodeError as e:
            module.fail_json(msg="expanse_env_lines: %s is not valid UTF-8 (byte %d); the "
                             "daemon refuses such a file too: fix it by hand" % (path, e.start))
        except OSError as e:
            module.fail_json(msg="expanse_env_lines: cannot read %s: %s" % (path, e))
    try:
        after = converge(before, wanted)
    except Malformed as e:
        module.fail_json(msg="expanse_env_lines: %s %s; the daemon refuses this file too: fix "
                         "it by hand" % (path, e))
    try:
        uid = pwd.getpwnam(p["owner"]).pw_uid
        gid = grp.getgrnam(p["group"]).gr_gid
    except KeyError as e:
        module.fail_json(msg="expanse_env_lines: unknown owner or group: %s" % e)
    mode = int(p["mode"], 8)
    # Absent on a missing file, or nothing to write into one that does not exist: no change.
    if not exists and after == "":
        module.exit_json(changed=False)
    st = os.stat(path) if exists else None
    if p["state"] == "absent":
        # Removing lines keeps the file's owner and mode as the installer or operator set them.
        uid, gid, mode = st.st_uid, st.st_gid, st.st_mode & 0o7777
    attrs_differ = st is None or (st.st_uid, st.st_gid, st.st_mode & 0o7777) != (uid, gid, mode)
    changed = after != before or attrs_differ
    diff = {"before": masked(before), "after": masked(after), "before_header": path,
            "after_header": path}
    if changed and not module.check_mode:
        directory = os.path.dirname(path) or "."
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".daemon.env.", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
                f.write(after)
                f.flush()
                os.fsync(f.fileno())
            os.chown(tmp, uid, gid)
            os.chmod(tmp, mode)
            os.rename(tmp, path)
        except Exception as e:  # leave nothing half-written behind
            if os.path.exists(tmp):
                os.unlink(tmp)
            module.fail_json(msg="expanse_env_lines: writing %s failed: %s" % (path, e))
    module.exit_json(changed=changed, diff=diff)


if __name__ == "__main__":
    main()
