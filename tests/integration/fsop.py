#!/usr/bin/env python3
"""One system call from the command line, for the integration scenarios.

    fsop.py OP ARGS...

Prints "OK" (followed by a result for queries) when the call succeeds, or
the errno name ("EACCES") when it fails, and exits 0 either way, so that a
shell script can compare the outcome with the errno it expects. Exit status
2 means a usage error.

Operations:
    mkdir PATH [MODE]            mknod PATH MODE         create PATH [MODE]
    open PATH FLAGS              (FLAGS: r, w, rw, plus t for O_TRUNC,
                                  d for O_DIRECTORY, n for O_NONBLOCK,
                                  c for O_CREAT;
                                  e.g. "wt")
    exec PATH                    (run it, without arguments)
    unlink PATH                  rmdir PATH              rename OLD NEW
    rename2 OLD NEW FLAGS        (FLAGS: noreplace, exchange, whiteout, N)
    link OLD NEW                 symlink TARGET PATH     readlink PATH
    chmod PATH MODE              chown PATH UID GID      (-1: unchanged)
    utime PATH ATIME MTIME       (seconds, may be fractional)
    utime_now PATH               truncate PATH SIZE      access PATH MASK
    setxattr PATH NAME VALUE     getxattr PATH NAME      listxattr PATH
    removexattr PATH NAME        listdir PATH            stat PATH
"""
import ctypes
import errno
import os
import subprocess
import sys

RENAME_FLAGS = {"noreplace": 1, "exchange": 2, "whiteout": 4}


def renameat2(old, new, flags):
    libc = ctypes.CDLL(None, use_errno=True)
    fn = libc.renameat2
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                   ctypes.c_char_p, ctypes.c_uint]
    AT_FDCWD = -100
    rc = fn(AT_FDCWD, os.fsencode(old), AT_FDCWD, os.fsencode(new), flags)
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def open_flags(spec):
    acc = {"r": os.O_RDONLY, "w": os.O_WRONLY, "rw": os.O_RDWR}
    base = spec.rstrip("tdcn")
    flags = acc[base]
    if "t" in spec[len(base):]:
        flags |= os.O_TRUNC
    if "d" in spec[len(base):]:
        flags |= os.O_DIRECTORY
    if "n" in spec[len(base):]:
        flags |= os.O_NONBLOCK
    if "c" in spec[len(base):]:
        flags |= os.O_CREAT
    return flags


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    op, a = argv[1], argv[2:]
    out = ""
    if op == "mkdir":
        os.mkdir(a[0], int(a[1], 8) if len(a) > 1 else 0o777)
    elif op == "mknod":
        os.mknod(a[0], int(a[1], 8))
    elif op == "create":
        fd = os.open(a[0], os.O_CREAT | os.O_EXCL | os.O_WRONLY,
                     int(a[1], 8) if len(a) > 1 else 0o666)
        os.close(fd)
    elif op == "open":
        fd = os.open(a[0], open_flags(a[1]))
        os.close(fd)
    elif op == "exec":
        subprocess.run([a[0]], stdout=subprocess.DEVNULL, check=False)
    elif op == "unlink":
        os.unlink(a[0])
    elif op == "rmdir":
        os.rmdir(a[0])
    elif op == "rename":
        os.rename(a[0], a[1])
    elif op == "rename2":
        flags = 0
        for f in a[2].split(","):
            flags |= RENAME_FLAGS[f] if f in RENAME_FLAGS else int(f)
        renameat2(a[0], a[1], flags)
    elif op == "link":
        os.link(a[0], a[1])
    elif op == "symlink":
        os.symlink(a[0], a[1])
    elif op == "readlink":
        out = os.readlink(a[0])
    elif op == "chmod":
        os.chmod(a[0], int(a[1], 8))
    elif op == "chown":
        os.chown(a[0], int(a[1]), int(a[2]))
    elif op == "utime":
        os.utime(a[0], ns=(int(float(a[1]) * 1e9), int(float(a[2]) * 1e9)))
    elif op == "utime_now":
        os.utime(a[0], None)
    elif op == "truncate":
        os.truncate(a[0], int(a[1]))
    elif op == "access":
        ok = os.access(a[0], int(a[1]))
        if not ok:
            # os.access hides errno; ask again through the syscall.
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.access(os.fsencode(a[0]), int(a[1])) != 0:
                raise OSError(ctypes.get_errno(), "access")
    elif op == "setxattr":
        os.setxattr(a[0], a[1], a[2].encode())
    elif op == "getxattr":
        out = os.getxattr(a[0], a[1]).decode(errors="replace")
    elif op == "listxattr":
        out = ",".join(sorted(os.listxattr(a[0])))
    elif op == "removexattr":
        os.removexattr(a[0], a[1])
    elif op == "listdir":
        out = ",".join(sorted(os.listdir(a[0])))
    elif op == "stat":
        st = os.lstat(a[0])
        out = "%o %d %d %d %d" % (st.st_mode, st.st_nlink, st.st_uid,
                                  st.st_gid, st.st_size)
    else:
        print("unknown op " + op, file=sys.stderr)
        return 2
    print(("OK " + out) if out else "OK")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except OSError as e:
        print(errno.errorcode.get(e.errno, str(e.errno)))
        sys.exit(0)
    except (IndexError, KeyError, ValueError) as e:
        print("usage error: %r" % (e,), file=sys.stderr)
        sys.exit(2)
