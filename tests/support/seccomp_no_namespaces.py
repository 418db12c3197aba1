#!/usr/bin/python3
"""Runs a program under a seccomp filter that forbids every way into a new namespace or mount.

    /usr/bin/python3 tests/support/seccomp_no_namespaces.py PROGRAM [ARG...]

The filter makes `unshare`, `setns`, `mount`, `umount2`, `pivot_root`, `chroot`, the new mount
API (`fsopen`, `fsmount`, `fsconfig`, `move_mount`, `open_tree`, `mount_setattr`) and `clone`
with any CLONE_NEW* flag fail with EPERM; `clone3` fails with ENOSYS, as under Docker's default
profile: its flags sit in a struct that a filter cannot read, and ENOSYS makes glibc fall back to
`clone`, whose flags it can. Everything else is allowed. The filter is inherited across `exec` and
by every thread and child, and loading it needs no privilege (libseccomp sets no_new_privs
first), so PROGRAM and all it starts live under it.

wasmsand's tests run `sandboxd` through it (tests/e2e/sandboxd/nested.rs) to show that the
sandbox keeps every limit without namespaces or mounts; an operator can run it the same way
(docs/security.md, "Running nested").

Needs Debian's python3-seccomp (the `seccomp` module of libseccomp), which is built for the
system's interpreter: run this with /usr/bin/python3, not a virtualenv's or pyenv's.
"""

import errno
import os
import sys

import seccomp

# linux/sched.h; Python's os module names only some of them before 3.12. CLONE_NEWTIME is
# missing on purpose: clone() reads that bit as part of the exit signal, only clone3() and
# unshare() take it, and both are denied outright.
CLONE_NEW = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}

DENIED = [
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
]


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    f = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in DENIED:
        f.add_rule(seccomp.ERRNO(errno.EPERM), name)
    # One rule per flag: a rule's argument tests are ANDed, and any one flag must be enough.
    for flag in CLONE_NEW.values():
        f.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    f.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    f.load()
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    except OSError as e:
        print(f"seccomp_no_namespaces: {sys.argv[1]}: {e.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
