#!/usr/bin/env python3
"""Creator and checker for crash.sh.

    crash.py create DIR COUNT THREADS OKLOG FAILLOG
        Create entries e00000.. in DIR from THREADS threads: files, and
        every tenth name a directory, a symlink or a fifo. A name goes to
        OKLOG (one line, appended) only after its system call returned
        success; a failure goes to FAILLOG as "name ERRNO". Never retries a
        name, so no call can fail with EEXIST.

    crash.py verify DIR OKLOG FAILLOG MAXFAIL
        Check what the master kept: every name in OKLOG exists with the
        right type; readdir lists each name once, and only names that were
        tried; every listed name can be looked up; DIR's nlink is 2 + its
        subdirectories; failures are EIO and at most MAXFAIL. Prints a
        summary; exits 1 with the reasons when a check fails.
"""
import collections
import errno
import os
import stat
import sys
import threading

KINDS = ("file",) * 7 + ("dir", "symlink", "fifo")


def kind_of(name):
    if not name.startswith("e"):
        return "dir"  # crash.sh's own torn_keep, torn_lost
    return KINDS[int(name[1:]) % len(KINDS)]


def make(path, kind):
    if kind == "file":
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.close(fd)
    elif kind == "dir":
        os.mkdir(path, 0o755)
    elif kind == "symlink":
        os.symlink("target-of-" + os.path.basename(path), path)
    else:
        os.mkfifo(path, 0o644)


def create(d, count, threads, oklog, faillog):
    okfd = os.open(oklog, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    failfd = os.open(faillog, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def work(t):
        for i in range(t, count, threads):
            name = "e%05d" % i
            try:
                make(os.path.join(d, name), kind_of(name))
            except OSError as e:
                os.write(failfd, ("%s %s\n" % (
                    name, errno.errorcode.get(e.errno, e.errno))).encode())
                continue
            # Only now, after the call returned success.
            os.write(okfd, (name + "\n").encode())

    ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    os.close(okfd)
    os.close(failfd)


def read_lines(path):
    with open(path) as f:
        return [l.split() for l in f if l.strip()]


def verify(d, oklog, faillog, maxfail):
    problems = []
    ok = [l[0] for l in read_lines(oklog)]
    failed = {l[0]: l[1] for l in read_lines(faillog)}
    okset = set(ok)
    if len(ok) != len(okset):
        problems.append("the creator logged a name twice")
    listing = os.listdir(d)
    counts = collections.Counter(listing)
    dups = [n for n, c in counts.items() if c > 1]
    if dups:
        problems.append("readdir listed %d names more than once: %s" %
                        (len(dups), sorted(dups)[:10]))
    listed = set(listing)
    missing = sorted(okset - listed)
    if missing:
        problems.append("%d acknowledged names are not listed: %s" %
                        (len(missing), missing[:10]))
    unknown = sorted(listed - okset - set(failed))
    if unknown:
        problems.append("%d listed names were never created: %s" %
                        (len(unknown), unknown[:10]))
    want_mode = {"file": stat.S_ISREG, "dir": stat.S_ISDIR,
                 "symlink": stat.S_ISLNK, "fifo": stat.S_ISFIFO}
    subdirs = 0
    bad = []
    for name in sorted(listed | okset):
        try:
            st = os.lstat(os.path.join(d, name))
        except OSError as e:
            bad.append("%s: lstat: %s" % (name, errno.errorcode[e.errno]))
            continue
        if not want_mode[kind_of(name)](st.st_mode):
            bad.append("%s: mode %o, wanted a %s" % (name, st.st_mode,
                                                     kind_of(name)))
        if stat.S_ISDIR(st.st_mode):
            subdirs += 1
    if bad:
        problems.append("%d names fail lookup or have the wrong type: %s" %
                        (len(bad), bad[:10]))
    nlink = os.lstat(d).st_nlink
    if nlink != 2 + subdirs:
        problems.append("nlink of %s is %d, but it has %d subdirectories" %
                        (d, nlink, subdirs))
    not_eio = {n: e for n, e in failed.items() if e != "EIO"}
    if not_eio:
        problems.append("failures other than EIO: %s" %
                        sorted(not_eio.items())[:10])
    if len(failed) > maxfail:
        problems.append("%d calls failed, more than the %d that can be in "
                        "flight at a crash" % (len(failed), maxfail))
    present = len(set(failed) & listed)
    print("%d acknowledged, %d failed (%d of them present anyway), %d "
          "listed, %d subdirectories" % (len(okset), len(failed), present,
                                          len(listing), subdirs))
    for p in problems:
        print("PROBLEM: " + p, file=sys.stderr)
    return 1 if problems else 0


def main(argv):
    if argv[1] == "create" and len(argv) == 7:
        create(argv[2], int(argv[3]), int(argv[4]), argv[5], argv[6])
        return 0
    if argv[1] == "verify" and len(argv) == 6:
        return verify(argv[2], argv[3], argv[4], int(argv[5]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
