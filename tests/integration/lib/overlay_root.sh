# run_in_overlay_root WORK SCRIPT [ARGS...] — runs SCRIPT as root, chrooted into a root of its
# own: an overlay over this machine's root in a private mount namespace. The machine's files are
# the read-only lower layer; every write (dpkg's database, /usr/local, /etc/passwd) lands in a
# tmpfs under WORK/ov that goes with the namespace. The network is the machine's, so a server
# on loopback outside is reachable inside. WORK must be on the root file system (SCRIPT and
# anything else it needs are then visible inside at the same paths) and must exist.
run_in_overlay_root() {
  local work="$1"
  shift
  unshare -m --propagation private bash -euo pipefail -c '
    work="$1"
    shift
    mkdir -p "$work/ov"
    mount -t tmpfs -o size=1g tmpfs "$work/ov"
    mkdir -p "$work/ov/upper" "$work/ov/work" "$work/ov/root"
    mount -t overlay overlay -o "lowerdir=/,upperdir=$work/ov/upper,workdir=$work/ov/work" "$work/ov/root"
    mount -t proc proc "$work/ov/root/proc"
    mount --rbind /dev "$work/ov/root/dev"
    mount -t tmpfs tmpfs "$work/ov/root/run"
    exec chroot "$work/ov/root" "$@"
  ' overlay "$work" "$@"
}
