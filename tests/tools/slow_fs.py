#!/usr/bin/python3
"""A read-only FUSE file system whose reads are slow, as a loaded parallel file system's are.

The io_wait verdict scenario (tests/integration/cluster/verdict_scenarios.sh) runs a job that
reads `data` from it: each read request sleeps for --delay-ms before it answers, so the job's
reader spends most of its time in the kernel waiting for the page it asked for (uninterruptible
sleep, state D), which is what the sampler's job.uninterruptible_some sees on a node without
cgroup v2 pressure. The file holds zeros and is larger than anything a test reads, so no read
is served from the page cache.

Usage: slow_fs.py MOUNTPOINT [--delay-ms N] [--size-gib N]
Runs in the foreground until the file system is unmounted or the process is signalled. Mounted
with allow_other so that a job's user can read it (root may always ask for that).

Uses Debian's python3-fusepy (module `fusepy`), so run it with /usr/bin/python3.
"""
import argparse
import errno
import stat
import time

from fusepy import FUSE, FuseOSError, Operations


class SlowFs(Operations):
    def __init__(self, delay_s, size):
        self.delay_s = delay_s
        self.size = size
        self.mounted_at = time.time()

    def _times(self):
        return dict(st_ctime=self.mounted_at, st_mtime=self.mounted_at, st_atime=self.mounted_at)

    def getattr(self, path, fh=None):
        if path == "/":
            return dict(st_mode=stat.S_IFDIR | 0o555, st_nlink=2, st_size=0, **self._times())
        if path == "/data":
            return dict(st_mode=stat.S_IFREG | 0o444, st_nlink=1, st_size=self.size,
                        **self._times())
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        if path != "/":
            raise FuseOSError(errno.ENOTDIR)
        return [".", "..", "data"]

    def open(self, path, flags):
        if path != "/data":
            raise FuseOSError(errno.ENOENT)
        return 0

    def read(self, path, size, offset, fh):
        time.sleep(self.delay_s)
        return b"\0" * max(0, min(size, self.size - offset))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mountpoint")
    parser.add_argument("--delay-ms", type=int, default=200)
    parser.add_argument("--size-gib", type=int, default=64)
    args = parser.parse_args()
    FUSE(SlowFs(args.delay_ms / 1000.0, args.size_gib << 30), args.mountpoint, foreground=True,
         allow_other=True, ro=True)


if __name__ == "__main__":
    main()
