"""Restrictions a process that will run candidate code puts on itself before it imports any, layered
on the OS sandbox: no new privileges, not dumpable (no ptrace, no /proc/<pid>/mem of it), and
Landlock: writes only below one directory (and the device nodes and the private /tmp)."""

import ctypes
import os


def restrict_self(writable_dir):
    """Best effort, layered on the OS sandbox: returns the layers that held."""
    held = []
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_NO_NEW_PRIVS, PR_SET_DUMPABLE = 38, 4
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0:
            held.append("no_new_privs")
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0:
            held.append("not_dumpable")
        abi = libc.syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, VERSION)
        if abi >= 1:
            # Handle only write-type rights: reads stay open (the mount namespace is read-only
            # anyway), writes are allowed only below writable_dir.
            write_rights = (1 << 1) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | \
                (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12)
            if abi >= 2:
                write_rights |= 1 << 13  # REFER
            if abi >= 3:
                write_rights |= 1 << 14  # TRUNCATE
            attr = ctypes.c_uint64(write_rights)
            ruleset = libc.syscall(444, ctypes.byref(attr), 8, 0)
            if ruleset >= 0:
                fd = os.open(writable_dir, os.O_PATH | os.O_DIRECTORY)

                class PathBeneath(ctypes.Structure):
                    _pack_ = 1
                    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

                rule = PathBeneath(write_rights, fd)
                ok = libc.syscall(445, ruleset, 1, ctypes.byref(rule), 0) == 0  # PATH_BENEATH
                # Device nodes (the GPU's /dev/nvidia*, /dev/null) are opened for writing; /dev
                # inside the sandbox holds only those, so writes there stay allowed.
                # /tmp and /dev/shm are private tmpfs mounts of this sandbox alone.
                for extra in ("/dev", "/tmp"):
                    extra_fd = os.open(extra, os.O_PATH | os.O_DIRECTORY)
                    extra_rule = PathBeneath(write_rights, extra_fd)
                    ok = ok and libc.syscall(445, ruleset, 1, ctypes.byref(extra_rule), 0) == 0
                    os.close(extra_fd)
                if ok and libc.syscall(446, ruleset, 0) == 0:  # landlock_restrict_self
                    held.append(f"landlock_abi_{abi}")
                os.close(fd)
                os.close(ruleset)
    except Exception as error:  # a missing layer is reported, not fatal
        held.append(f"restrict_error:{type(error).__name__}")
    return held
