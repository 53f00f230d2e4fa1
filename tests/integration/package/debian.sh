#!/usr/bin/env bash
# The Debian packages for real (docs/packages.md): cpack builds expanse, expanse-daemon and
# expanse-server from this build tree, lintian checks them, and dpkg installs, upgrades, removes
# and purges them in a root of its own: an overlay over this machine's root in a private mount
# namespace (the machine's own files are the read-only lower layer, every write lands in a
# scratch tmpfs thrown away afterwards). dpkg, adduser and the maintainer scripts run there as
# they would on a server; nothing is copied by hand.
# Usage: debian.sh BUILD_DIR
set -euo pipefail
BUILD="$(cd "${1:?build directory}" && pwd)"
TEST_NAME=package_debian
fail() { printf 'FAIL [%s]: %s\n' "$TEST_NAME" "$*" >&2; exit 1; }
pass() { printf 'ok   [%s]: %s\n' "$TEST_NAME" "$*"; }
# shellcheck source=../lib/overlay_root.sh
. "$(dirname "$0")/../lib/overlay_root.sh"

for tool in cpack lintian dpkg-deb unshare; do
  command -v "$tool" >/dev/null || fail "$tool is required (scripts/setup installs it)"
done
version="$(cat "$(dirname "$0")/../../../VERSION")"
IFS=. read -r major minor patch <<<"$version"
next="$major.$minor.$((patch + 1))"

work="$(mktemp -d /tmp/expanse-package.XXXXXX)"
trap 'rm -rf "$work"' EXIT

# --- build -------------------------------------------------------------------------------
(cd "$work" && cpack --config "$BUILD/CPackConfig.cmake" -B "$work/v1" >"$work/cpack1.log" 2>&1) ||
  fail "cpack failed: $(tail -20 "$work/cpack1.log")"
(cd "$work" && EXPANSE_PACKAGE_VERSION="$next" cpack --config "$BUILD/CPackConfig.cmake" \
  -B "$work/v2" >"$work/cpack2.log" 2>&1) || fail "cpack (upgrade) failed: $(tail -20 "$work/cpack2.log")"
for p in expanse expanse-daemon expanse-server; do
  [[ -f "$work/v1/${p}_${version}_amd64.deb" ]] || fail "no $p package: $(ls "$work/v1")"
  [[ -f "$work/v2/${p}_${next}_amd64.deb" ]] || fail "no $p $next package: $(ls "$work/v2")"
done
deb() { echo "$work/$1/${2}_$([[ $1 == v1 ]] && echo "$version" || echo "$next")_amd64.deb"; }
server_depends="$(dpkg-deb -f "$(deb v1 expanse-server)" Depends)"
[[ "$server_depends" == *adduser* ]] || fail "expanse-server does not depend on adduser"
[[ "$server_depends" == *libsqlite3* && "$server_depends" == *libssl3* ]] ||
  fail "expanse-server's Depends lacks the libraries dpkg-shlibdeps found: $server_depends"
[[ "$(dpkg-deb -f "$(deb v1 expanse-daemon)" Recommends)" == expanse ]] ||
  fail "expanse-daemon does not recommend expanse"
server_files="$(dpkg-deb -c "$(deb v1 expanse-server)")"
for f in ./lib/systemd/system/expanse-server.service ./etc/expanse-server/expanse-server.env \
  ./usr/bin/expanse-server ./usr/share/man/man1/expanse-server.1.gz \
  ./usr/share/doc/expanse-server/copyright ./usr/share/doc/expanse-server/changelog.gz; do
  [[ "$server_files" == *" $f"$'\n'* || "$server_files" == *" $f" ]] || fail "expanse-server lacks $f"
done
[[ "$(dpkg-deb --ctrl-tarfile "$(deb v1 expanse-server)" | tar -xOf - ./conffiles)" == \
  /etc/expanse-server/expanse-server.env ]] || fail "the environment file is not a conffile"
pass "cpack built the three packages, $version and $next, with their dependencies"

# A developer's install into a prefix of their own writes only there: the unit and the
# configuration are a package's (or an install into /usr's) business.
out="$(cmake --install "$BUILD" --component server --prefix "$work/prefix" 2>&1)" ||
  fail "cmake --install --prefix failed: $out"
[[ -x "$work/prefix/bin/expanse-server" ]] || fail "cmake --install --prefix: no bin/expanse-server"
[[ "$out" == *"Not installing expanse-server.service"* ]] ||
  fail "cmake --install --prefix did not say it left the unit out: $out"
[[ ! -e /lib/systemd/system/expanse-server.service && ! -e /etc/expanse-server ]] ||
  fail "cmake --install --prefix $work/prefix wrote /lib/systemd/system or /etc/expanse-server"
pass "cmake --install --prefix writes only below its prefix"

# --- lintian -----------------------------------------------------------------------------
# A sanitizer build (what the test suite builds) lacks the hardening of an optimised one
# (_FORTIFY_SOURCE does not mix with ASan); those tags alone are expected there. Everything else
# lintian says is either fixed or explained in the package's own overrides file.
suppress=()
if grep -q '^EXPANSE_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt"; then
  suppress=(--suppress-tags hardening-no-fortify-functions)
fi
if ! lintian --fail-on error,warning --display-info "${suppress[@]}" "$work"/v1/*.deb \
  >"$work/lintian.log" 2>&1; then
  fail "lintian: $(cat "$work/lintian.log")"
fi
if grep -E '^[EW]: ' "$work/lintian.log"; then
  fail "lintian reported errors or warnings"
fi
pass "lintian: no error or warning ($(grep -c '^[IN]: ' "$work/lintian.log" || true) informational tags)"

# --- install, upgrade, remove, purge in an overlay root --------------------------------
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
cat >"$work/inside.sh" <<INSIDE
#!/usr/bin/env bash
# Runs as root inside the overlay root.
set -euo pipefail
fail() { printf 'FAIL [$TEST_NAME]: %s\n' "\$*" >&2; exit 1; }
pass() { printf 'ok   [$TEST_NAME]: %s\n' "\$*"; }
export DEBIAN_FRONTEND=noninteractive PATH=/usr/sbin:/usr/bin:/sbin:/bin
! getent passwd expanse-server >/dev/null || fail "the account exists before the install"
# Every path of the system, to compare after the purge, but for dpkg's and apt's own records,
# logs and caches, and what the rest of the suite may change meanwhile on the machine's root
# (the overlay's lower layer): the cluster harness's state under /var/tmp, the Ansible test's
# CLIs in /usr/local/bin, byte-compiled Python, and what the installer tests' real
# `expanse compute install` runs on the controller write (its journal and state in
# /var/lib/expanse-install, SLURM's state directory's .expanse). None of them is anything the
# packages touch: installing a package runs no install.
listing() {
  find /etc /usr /lib /opt /srv /var -xdev \( -path /var/lib/dpkg -o -path /var/log \
    -o -path /var/cache -o -path /var/lib/apt -o -path /var/tmp -o -path /usr/local \
    -o -path /var/lib/expanse-install -o -path /var/lib/slurm \
    -o -name __pycache__ \) -prune -o -print | sort
}
listing >/tmp/listing.before

dpkg -i $(deb v1 expanse) $(deb v1 expanse-daemon) $(deb v1 expanse-server) >/tmp/dpkg.log 2>&1 ||
  fail "dpkg -i: \$(cat /tmp/dpkg.log)"
for p in expanse expanse-daemon expanse-server; do
  [[ "\$(dpkg-query -W -f='\${Status} \${Version}' \$p)" == "install ok installed $version" ]] ||
    fail "\$p: \$(dpkg-query -W -f='\${Status} \${Version}' \$p)"
done
expanse --version | grep -q "^expanse $version " || fail "expanse --version: \$(expanse --version)"
/usr/lib/expanse/expanse-daemon --version | grep -q "^expanse-daemon $version " || fail "no daemon"
expanse-server --version | grep -q "^expanse-server $version " || fail "no server"
man -w expanse >/dev/null && man -w expanse-server >/dev/null || fail "no manual pages"
pass "dpkg -i installed the three packages; the programs and manual pages are in place"

IFS=: read -r _ _ uid _ _ home shell < <(getent passwd expanse-server)
(( uid < 1000 )) || fail "expanse-server is not a system account (uid \$uid)"
[[ "\$home" == /var/lib/expanse-server && "\$shell" == /usr/sbin/nologin ]] ||
  fail "account home \$home shell \$shell"
[[ "\$(stat -c '%U:%G %a' /var/lib/expanse-server)" == "expanse-server:expanse-server 750" ]] ||
  fail "state directory: \$(stat -c '%U:%G %a' /var/lib/expanse-server)"
[[ "\$(stat -c '%U:%G %a' /etc/expanse-server/expanse-server.env)" == "root:expanse-server 640" ]] ||
  fail "configuration: \$(stat -c '%U:%G %a' /etc/expanse-server/expanse-server.env)"
[[ -L /etc/systemd/system/multi-user.target.wants/expanse-server.service ]] ||
  fail "the unit was not enabled"
SYSTEMD_LOG_LEVEL=info systemd-analyze verify --man=no --generators=no \
  /lib/systemd/system/expanse-server.service >/tmp/verify.log 2>&1 && [[ ! -s /tmp/verify.log ]] ||
  fail "systemd-analyze: \$(cat /tmp/verify.log)"
pass "postinst made the system account, its 0750 state, its configuration and enabled the unit"

# The unit's command as systemd runs it: the account, the environment file, the state directory.
set -a; . /etc/expanse-server/expanse-server.env; set +a
EXPANSE_SERVER_OPTS="\${EXPANSE_SERVER_OPTS/0.0.0.0:8443/127.0.0.1:$port}"
setpriv --reuid=expanse-server --regid=expanse-server --init-groups \
  /usr/bin/expanse-server serve --db /var/lib/expanse-server/db.sqlite \$EXPANSE_SERVER_OPTS \
  >/tmp/serve.log 2>&1 &
server=\$!
for _ in \$(seq 1 100); do grep -q 'console API' /tmp/serve.log && break; sleep 0.1; done
curl -fsS --cacert /var/lib/expanse-server/tls/ca.pem "https://127.0.0.1:$port/healthz" >/tmp/health ||
  fail "the packaged server does not answer: \$(cat /tmp/serve.log)"
setpriv --reuid=expanse-server --regid=expanse-server --init-groups env EXPANSE_ADMIN_PASSWORD='pw for test 1' \
  expanse-server admin bootstrap --db /var/lib/expanse-server/db.sqlite --org acme \
  --org-name Acme --email ops@acme.example >/tmp/boot.json || fail "admin bootstrap as the account failed"
kill \$server; wait \$server || true
[[ "\$(stat -c %U /var/lib/expanse-server/db.sqlite)" == expanse-server ]] || fail "db not the account's"
pass "the server runs as its account with the packaged settings (self-signed TLS, /healthz, bootstrap)"

# An operator's change to the configuration survives the upgrade; the state stays.
echo '# site setting' >>/etc/expanse-server/expanse-server.env
dpkg -i $(deb v2 expanse) $(deb v2 expanse-daemon) $(deb v2 expanse-server) >/tmp/dpkg.log 2>&1 ||
  fail "upgrade: \$(cat /tmp/dpkg.log)"
[[ "\$(dpkg-query -W -f='\${Version}' expanse-server)" == "$next" ]] || fail "not upgraded"
grep -q '^# site setting' /etc/expanse-server/expanse-server.env || fail "the upgrade lost the operator's change"
[[ -f /var/lib/expanse-server/db.sqlite ]] || fail "the upgrade lost the database"
[[ "\$(getent passwd expanse-server | cut -d: -f3)" == "\$uid" ]] || fail "the account changed"
pass "upgrade to $next kept the operator's configuration, the database and the account"

dpkg -r expanse-server >/tmp/dpkg.log 2>&1 || fail "remove: \$(cat /tmp/dpkg.log)"
[[ ! -e /usr/bin/expanse-server && ! -e /lib/systemd/system/expanse-server.service ]] ||
  fail "remove left the program or the unit"
[[ -f /etc/expanse-server/expanse-server.env && -f /var/lib/expanse-server/db.sqlite ]] ||
  fail "remove took the configuration or the state"
[[ "\$(readlink /etc/systemd/system/expanse-server.service)" == /dev/null ]] ||
  fail "remove did not mask the unit"
# Installed again over its kept configuration: the mask goes, the unit is enabled again.
dpkg -i $(deb v2 expanse-server) >/tmp/dpkg.log 2>&1 || fail "reinstall after remove: \$(cat /tmp/dpkg.log)"
[[ ! -e /etc/systemd/system/expanse-server.service ]] || fail "the reinstall left the unit masked"
[[ -L /etc/systemd/system/multi-user.target.wants/expanse-server.service ]] ||
  fail "the reinstall did not enable the unit"
grep -q '^# site setting' /etc/expanse-server/expanse-server.env || fail "the reinstall lost the configuration"
pass "remove masked the unit and kept configuration and state; reinstalling unmasked and enabled it"
# An operator who deleted the conffile (dpkg does not bring it back): configuring again succeeds.
rm /etc/expanse-server/expanse-server.env
dpkg -i $(deb v2 expanse-server) >/tmp/dpkg.log 2>&1 ||
  fail "reinstall without the conffile: \$(cat /tmp/dpkg.log)"
[[ "\$(dpkg-query -W -f='\${Status}' expanse-server)" == "install ok installed" ]] ||
  fail "not configured without its conffile: \$(dpkg-query -W -f='\${Status}' expanse-server)"
pass "a deleted conffile leaves the package configurable"
dpkg -P expanse-server expanse expanse-daemon >/tmp/dpkg.log 2>&1 || fail "purge: \$(cat /tmp/dpkg.log)"
for p in expanse expanse-daemon expanse-server; do
  ! dpkg-query -W -f='\${Status}' \$p 2>/dev/null | grep -q installed || fail "\$p still known to dpkg"
done
for f in /usr/bin/expanse /usr/lib/expanse /usr/share/doc/expanse-server /etc/expanse-server \
  /var/lib/expanse-server /etc/systemd/system/multi-user.target.wants/expanse-server.service; do
  [[ ! -e \$f ]] || fail "purge left \$f"
done
getent passwd expanse-server >/dev/null || fail "purge removed the system account"
listing >/tmp/listing.after
diff /tmp/listing.before /tmp/listing.after >/tmp/listing.diff ||
  fail "the purge left these paths behind or took these: \$(cat /tmp/listing.diff)"
pass "remove kept configuration and state; purge took them and every file (the system's listing is as before), and kept the account"
INSIDE
chmod 755 "$work/inside.sh"

run_in_overlay_root "$work" "$work/inside.sh" ||
  fail "the packages did not install, upgrade and purge cleanly (above)"
# Nothing of it reached this machine.
! getent passwd expanse-server >/dev/null || fail "the install leaked onto the machine"
[[ ! -e /usr/bin/expanse-server ]] || fail "the install leaked onto the machine"
pass "nothing leaked out of the overlay root"
