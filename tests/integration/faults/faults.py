#!/usr/bin/env python3
"""Workload and checker for faults.sh.

    faults.py storm DIR SEED OKLOG FAILLOG STOPFILE MAXOPS
        One client's mix of namespace changes in DIR (which it owns),
        until STOPFILE exists or MAXOPS operations were tried:
          create NAME          open(O_CREAT|O_EXCL) + close
          mkdir NAME           mkdir
          rename OLD NEW       rename of a file this client created (and
                               saw acknowledged) to a new name, in DIR or
                               in one of its acknowledged subdirectories
          data NAME LEN SHA    open(O_CREAT|O_EXCL), write LEN bytes,
                               fsync, close: the content is a function of
                               (SEED, NAME), SHA its sha256
        A line goes to OKLOG (appended) only after every system call of
        the operation returned success: the operation is acknowledged.
        A failure goes to FAILLOG as "OP NAMES... ERRNO" and its names
        are never used again. Names are unique (op letter + counter), so
        no call can fail with EEXIST.

    faults.py verify DIR OKLOG FAILLOG
        What must hold after any number of crashes: every acknowledged
        name exists with its type (a renamed file under its new name
        only), every acknowledged data file holds exactly its bytes, the
        tree holds no name that was never tried, a failed rename left
        exactly one of its two names, and every failure is EIO. Prints
        "checked N acknowledged ops (M failed calls), lost 0" or the
        problems (exit status 1, with "lost K").

    faults.py fill DIR
        Fill the filesystem DIR is on: a file DIR/filler written in
        1 MiB, then 4 KiB, pieces until ENOSPC. Prints the bytes written.

Seeds are printed by faults.sh, so a failing run can be replayed (the
choices, not the timing).
"""
import errno
import hashlib
import os
import random
import stat
import sys


def content(seed, name, length):
    out = bytearray()
    h = hashlib.sha256(("%s/%s" % (seed, name)).encode()).digest()
    while len(out) < length:
        out += h
        h = hashlib.sha256(h).digest()
    return bytes(out[:length])


def errname(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def storm(d, seed, oklog, faillog, stopfile, maxops):
    rng = random.Random("storm/%s" % seed)
    okfd = os.open(oklog, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    failfd = os.open(faillog, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    created = []  # acknowledged plain files not yet renamed (relative)
    dirs = [""]   # acknowledged directories (relative; "" is DIR)

    def ok(*words):
        os.write(okfd, (" ".join(map(str, words)) + "\n").encode())

    def failed(e, *words):
        os.write(failfd, (" ".join(map(str, words)) + " " + errname(e) +
                          "\n").encode())

    for i in range(maxops):
        if i % 16 == 0 and os.path.exists(stopfile):
            break
        k = rng.random()
        if k < 0.2 and created:
            old = created.pop(rng.randrange(len(created)))
            new = os.path.join(rng.choice(dirs), "r%06d" % i)
            try:
                os.rename(os.path.join(d, old), os.path.join(d, new))
            except OSError as e:
                failed(e, "rename", old, new)
                continue
            ok("rename", old, new)
        elif k < 0.35:
            name = os.path.join(rng.choice(dirs), "d%06d" % i)
            try:
                os.mkdir(os.path.join(d, name))
            except OSError as e:
                failed(e, "mkdir", name)
                continue
            ok("mkdir", name)
            dirs.append(name)
        elif k < 0.55:
            name = os.path.join(rng.choice(dirs), "w%06d" % i)
            data = content(seed, name, rng.randint(1, 20000))
            fd = -1
            try:
                fd = os.open(os.path.join(d, name),
                             os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                done = 0
                while done < len(data):
                    done += os.write(fd, data[done:])
                os.fsync(fd)
                os.close(fd)
                fd = -1
            except OSError as e:
                if fd >= 0:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                failed(e, "data", name)
                continue
            ok("data", name, len(data), hashlib.sha256(data).hexdigest())
        else:
            name = os.path.join(rng.choice(dirs), "f%06d" % i)
            try:
                os.close(os.open(os.path.join(d, name),
                                 os.O_CREAT | os.O_EXCL | os.O_WRONLY,
                                 0o644))
            except OSError as e:
                failed(e, "create", name)
                continue
            ok("create", name)
            created.append(name)
    os.close(okfd)
    os.close(failfd)


def read_lines(path):
    with open(path) as f:
        return [l.split() for l in f if l.strip()]


def verify(d, oklog, faillog):
    problems = []
    lost = []
    want = {}       # relative path -> ("file"|"dir"|("data", len, sha))
    maybe = set()   # names a failed call may or may not have left
    pairs = []      # (old, new) of failed renames: exactly one exists
    oks = read_lines(oklog)
    fails = read_lines(faillog)
    for w in oks:
        op = w[0]
        if op == "create":
            want[w[1]] = "file"
        elif op == "mkdir":
            want[w[1]] = "dir"
        elif op == "data":
            want[w[1]] = ("data", int(w[2]), w[3])
        elif op == "rename":
            want[w[2]] = want.pop(w[1])
        else:
            problems.append("unknown log line %r" % (w,))
    for w in fails:
        op, names, err = w[0], w[1:-1], w[-1]
        if err != "EIO":
            problems.append("%s %s failed with %s, not EIO" %
                            (op, " ".join(names), err))
        if op == "rename":
            # the file was acknowledged under its old name: now it is
            # under one of the two, which one depends on whether the
            # master committed the rename before the crash
            old, new = names
            want.pop(old, None)
            pairs.append((old, new))
            maybe.update(names)
        else:
            maybe.update(names)
    listed = {}
    for root, dnames, fnames in os.walk(d):
        rel = os.path.relpath(root, d)
        for n in dnames + fnames:
            p = n if rel == "." else os.path.join(rel, n)
            listed[p] = n in dnames
    for p, kind in sorted(want.items()):
        path = os.path.join(d, p)
        try:
            st = os.lstat(path)
        except OSError as e:
            lost.append("%s: %s" % (p, errname(e)))
            continue
        if p not in listed:
            problems.append("%s exists but readdir does not list it" % p)
        if kind == "dir":
            if not stat.S_ISDIR(st.st_mode):
                lost.append("%s: not a directory (mode %o)" % (p, st.st_mode))
            continue
        if not stat.S_ISREG(st.st_mode):
            lost.append("%s: not a file (mode %o)" % (p, st.st_mode))
            continue
        if kind == "file":
            continue
        _, length, sha = kind
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            lost.append("%s: read: %s" % (p, errname(e)))
            continue
        if len(data) != length or hashlib.sha256(data).hexdigest() != sha:
            lost.append("%s: %d bytes, sha256 %s; acknowledged %d bytes, %s" %
                        (p, len(data), hashlib.sha256(data).hexdigest()[:16],
                         length, sha[:16]))
    for old, new in pairs:
        n = (old in listed) + (new in listed)
        if n != 1:
            lost.append("failed rename %s -> %s: %d of the two names exist" %
                        (old, new, n))
    unknown = sorted(p for p in listed if p not in want and p not in maybe)
    if unknown:
        problems.append("%d names never acknowledged nor tried: %s" %
                        (len(unknown), unknown[:10]))
    problems += ["lost: " + x for x in lost]
    print("checked %d acknowledged ops (%d failed calls, %d names now), "
          "lost %d" % (len(oks), len(fails), len(listed), len(lost)))
    for p in problems[:40]:
        print("PROBLEM: " + p, file=sys.stderr)
    return 1 if problems else 0


def fill(d):
    total = 0
    fd = os.open(os.path.join(d, "filler"), os.O_WRONLY | os.O_CREAT, 0o644)
    for size in (1 << 20, 4096, 512):
        buf = b"\xa5" * size
        while True:
            try:
                n = os.write(fd, buf)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                break
            total += n
            if n < size:
                break
    os.close(fd)
    print(total)


def main(argv):
    if len(argv) == 8 and argv[1] == "storm":
        storm(argv[2], argv[3], argv[4], argv[5], argv[6], int(argv[7]))
        return 0
    if len(argv) == 5 and argv[1] == "verify":
        return verify(argv[2], argv[3], argv[4])
    if len(argv) == 3 and argv[1] == "fill":
        fill(argv[2])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
