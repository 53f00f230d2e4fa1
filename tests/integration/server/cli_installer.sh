#!/usr/bin/env bash
# `curl -fsSL <server>/install | sh` for real (docs/install.md, "Getting the CLI"): a real
# expanse-server over TLS whose release mirror holds the build's CLI as an archive signed by the
# site's own key, and the installer piped from curl into Debian's sh in a root of its own (an
# overlay over this machine's root, so /usr/local is written for real and thrown away). It
# installs the CLI and pins the site's key, which that CLI then trusts; PREFIX moves it; a
# tampered archive, a machine without openssl and a plain-HTTP URL off loopback are refused
# with nothing installed.
# Usage: cli_installer.sh BUILD_DIR
set -euo pipefail
BUILD="$(cd "${1:?build directory}" && pwd)"
TEST_NAME=cli_installer
fail() { printf 'FAIL [%s]: %s\n' "$TEST_NAME" "$*" >&2; exit 1; }
pass() { printf 'ok   [%s]: %s\n' "$TEST_NAME" "$*"; }
# shellcheck source=../lib/overlay_root.sh
. "$(dirname "$0")/../lib/overlay_root.sh"

EXPANSE="$BUILD/bin/expanse"
SERVER="$BUILD/bin/expanse-server"
DIR="$(mktemp -d /tmp/expanse-cli-installer.XXXXXX)"
chmod 755 "$DIR"
# shellcheck source=../lib/expanse_server.sh
. "$(dirname "$0")/../lib/expanse_server.sh"
trap 'server_stop; rm -rf "$DIR"' EXIT
version="$("$EXPANSE" --version | awk '{print $2}')"

# The site's mirror: its own key, the CLI packed and signed with it, the public half beside.
mkdir -p "$DIR/releases" "$DIR/stage/bin"
cp "$EXPANSE" "$DIR/stage/bin/expanse"
"$EXPANSE" release keygen --private-key "$DIR/site.key" --public-key "$DIR/site.pub" >/dev/null
"$EXPANSE" release pack --name expanse --version "$version" --from "$DIR/stage" \
  --output-dir "$DIR/releases" >/dev/null
archive="expanse_${version}_linux_amd64.tar.gz"
"$EXPANSE" release sign --key "$DIR/site.key" "$DIR/releases/$archive" >/dev/null
cp "$DIR/site.pub" "$DIR/releases/release.pub"
SERVER_EXTRA_ARGS="--releases-dir $DIR/releases" server_start || fail "expanse-server did not start"
chmod 755 "$DIR/tls" && chmod 644 "$CA_FILE"
pass "server at $CP_URL mirrors the CLI $version signed by the site's key"

cat >"$DIR/inside.sh" <<INSIDE
#!/usr/bin/env bash
# Runs as root inside the overlay root.
set -uo pipefail
fail() { printf 'FAIL [$TEST_NAME]: %s\n' "\$*" >&2; exit 1; }
pass() { printf 'ok   [$TEST_NAME]: %s\n' "\$*"; }
export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin CURL_CA_BUNDLE="$CA_FILE"
[[ ! -e /usr/local/bin/expanse ]] || fail "/usr/local/bin/expanse exists before the install"

# Refusals: each says why and that nothing was installed, and installs nothing.
refused() { # WHAT PREFIX EXPECTED [ENV...]
  local what="\$1" prefix="\$2" expected="\$3"
  shift 3
  curl -fsSL "$CP_URL/install" | env PREFIX="\$prefix" "\$@" sh >/tmp/out 2>&1 &&
    fail "\$what: the install succeeded"
  grep -q "\$expected" /tmp/out || fail "\$what: not said why: \$(cat /tmp/out)"
  grep -q "nothing was installed" /tmp/out || fail "\$what: not said that nothing was installed"
  [[ ! -e "\$prefix" ]] || fail "\$what: \$prefix was written"
  pass "\$what: refused (\$(tail -1 /tmp/out))"
}

if [[ "\${1:-}" == refused ]]; then
  refused "\$2" /opt/refused "does not verify with this server's release key"
  [[ ! -e /usr/local/bin/expanse && ! -e /usr/local/etc/expanse ]] || fail "\$2: /usr/local was written"
  exit 0
fi

# What an operator types (sh is Debian's dash).
curl -fsSL --cacert "$CA_FILE" "$CP_URL/install" | sh >/tmp/out 2>&1 ||
  fail "curl | sh failed: \$(cat /tmp/out)"
grep -q "signature verified" /tmp/out || fail "no verification reported: \$(cat /tmp/out)"
[[ "\$(/usr/local/bin/expanse --version | awk '{print \$2}')" == "$version" ]] ||
  fail "/usr/local/bin/expanse is not the CLI $version: \$(cat /tmp/out)"
[[ "\$(stat -c %a /usr/local/bin/expanse)" == 755 ]] || fail "the CLI's mode"
cmp -s /usr/local/etc/expanse/release.pub "$DIR/site.pub" || fail "the site's key was not pinned"
grep -q "installed /usr/local/bin/expanse: expanse $version" /tmp/out &&
  grep -q "^expanse-install: next: " /tmp/out || fail "no version or next step printed: \$(cat /tmp/out)"
pass "curl | sh installed /usr/local/bin/expanse $version and pinned the site's key"

# That CLI trusts the site's key without --cosign-key; the one in the build does not.
expanse release verify "$DIR/releases/$archive" >/tmp/verify 2>&1 ||
  fail "the installed CLI does not trust the pinned key: \$(cat /tmp/verify)"
grep -q "signature OK (/usr/local/bin/../etc/expanse/release.pub)" /tmp/verify ||
  fail "the pinned key was not the one used: \$(cat /tmp/verify)"
! "$EXPANSE" release verify "$DIR/releases/$archive" >/dev/null 2>&1 ||
  fail "the build's CLI trusts the site's archive with the embedded key"
pass "the installed CLI verifies the site's releases with the pinned key"

curl -fsSL "$CP_URL/install" | PREFIX=/opt/expanse sh >/tmp/out 2>&1 || fail "PREFIX: \$(cat /tmp/out)"
[[ -x /opt/expanse/bin/expanse && -f /opt/expanse/etc/expanse/release.pub ]] || fail "PREFIX ignored"
pass "PREFIX=/opt/expanse installs there"

refused "plain HTTP off loopback" /opt/http "refusing http://192.0.2.1:8443: not an https:// URL" \
  EXPANSE_URL=http://192.0.2.1:8443
rm -f /usr/bin/openssl  # in the overlay only
refused "a machine without openssl" /opt/no-openssl "openssl is needed to check the CLI's signature"
INSIDE
chmod 755 "$DIR/inside.sh"
run_in_overlay_root "$DIR" "$DIR/inside.sh" || fail "the installer did not behave (above)"
# What the server serves goes wrong on its disk; each is refused in a fresh overlay root, where
# /usr/local has no CLI yet. Every case is put back before the next.
cp -p "$DIR/releases/$archive" "$DIR/good.tar.gz"
cp -p "$DIR/releases/$archive.sig" "$DIR/good.sig"
tamper() { # WHAT
  run_in_overlay_root "$DIR" "$DIR/inside.sh" refused "$1" || fail "$1 was not refused"
  cp -p "$DIR/good.tar.gz" "$DIR/releases/$archive"
  cp -p "$DIR/good.sig" "$DIR/releases/$archive.sig"
  cp -p "$DIR/site.pub" "$DIR/releases/release.pub"
}
printf 'x' >>"$DIR/releases/$archive"
tamper "an archive with a byte appended"
head -c 4096 "$DIR/good.tar.gz" >"$DIR/releases/$archive"
tamper "a truncated download"
python3 - "$DIR/releases/$archive.sig" <<'PY'
import base64, sys
path = sys.argv[1]
der = bytearray(base64.b64decode(open(path).read()))
der[-5] ^= 0x01  # inside the signature's s value: still well-formed DER, another signature
open(path, "w").write(base64.b64encode(bytes(der)).decode() + "\n")
PY
tamper "a signature with one byte flipped"
"$EXPANSE" release keygen --private-key "$DIR/other.key" --public-key "$DIR/other.pub" >/dev/null
cp "$DIR/other.pub" "$DIR/releases/release.pub"
tamper "a mirror key that did not sign the archive"
[[ ! -e /usr/local/etc/expanse/release.pub ]] || fail "the install leaked onto the machine"
[[ -x /usr/bin/openssl ]] || fail "the machine lost its openssl"
pass "nothing leaked out of the overlay root"
