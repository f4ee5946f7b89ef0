#!/usr/bin/env python
"""Exec a program as root of a new user namespace (and a new mount namespace it owns), keeping the PID.

    usernsexec.py HOST_BASE COUNT -- PROGRAM [ARGS...]

Used by hostboot.sh for an unprivileged container: after the privileged set-up (overlay root, /dev, mounts) PID 1
moves into a user namespace whose uid and gid map is `0 HOST_BASE COUNT` (Proxmox: `0 100000 65536`) and execs
systemd there, so the container's root is uid HOST_BASE seen from its node. util-linux's `unshare --map-users`
needs newuidmap (not installed), so a forked child writes the maps from the parent user namespace.
"""
import ctypes
import os
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000


def main(argv):
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write(__doc__)
        return 2
    base, count, prog = int(argv[0]), int(argv[1]), argv[3:]
    libc = ctypes.CDLL(None, use_errno=True)
    rfd, wfd = os.pipe()
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        os.close(wfd)
        os.read(rfd, 1)              # the parent has unshared
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{parent}/{name}", "w", encoding="ascii") as f:
                f.write(f"0 {base} {count}\n")
        os._exit(0)
    os.close(rfd)
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    os.write(wfd, b"x")
    os.close(wfd)
    _pid, status = os.waitpid(child, 0)
    if status != 0:
        sys.stderr.write("usernsexec: writing the id maps failed\n")
        return 1
    os.setgroups([])
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)
    os.execvp(prog[0], prog)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
