#!/usr/bin/env python3
"""File contents for the data scenarios (data.sh, faults.sh, removal.sh).

Every file's content is a function of (size, seed, mode), so a reader can
check it without a copy:

  write PATH SIZE SEED [MODE] [--fsync]
      write the file and print the sha256 of what it must contain.
      MODE: seq     one pass, front to back, in pieces of random sizes;
            random  (default) the pieces in random order, some of them
                    first written with garbage and then again with the
                    real bytes, so writes land at random offsets, before
                    and after the end of file, and overwrite each other;
            sparse  like random, but about a third of the pieces are
                    never written: holes, which must read as zeros.
  expect SIZE SEED [MODE [OFFSET LENGTH]]
      print the sha256 the file (or LENGTH bytes of it at OFFSET) must
      have, without writing anything.
  read PATH [OFFSET LENGTH]
      read (all, or LENGTH bytes at OFFSET) and print "OK SHA256" or the
      errno name of the failure ("EIO").
  append PATH SEED LOG BLOCK COUNT [STOPFILE]
      append COUNT blocks of BLOCK bytes; after each block's write and
      fsync both succeed, append "INDEX OFFSET LENGTH SHA256" to LOG (and
      fsync LOG): the acknowledged blocks. A failed write or fsync is
      reported on stderr and the same block is written again after 0.1 s
      (for at most 120 s in a row). Stops early when STOPFILE exists.
  verify PATH LOG
      check every block LOG lists; print "OK N blocks" or the mismatches
      (exit status 1).

Seeds are printed by the callers, so a failure can be replayed.
"""
import errno
import hashlib
import os
import random
import sys
import time

MiB = 1 << 20


def pieces(size, rng):
    """Split [0, size) into pieces of mixed sizes: bytes, KiBs, MiBs."""
    out = []
    off = 0
    while off < size:
        k = rng.random()
        if k < 0.2:
            n = rng.randint(1, 4096)
        elif k < 0.6:
            n = rng.randint(4096, 256 << 10)
        else:
            n = rng.randint(256 << 10, 4 * MiB)
        n = min(n, size - off)
        out.append((off, n))
        off += n
    return out


def plan(size, seed, mode):
    """The content and the list of (offset, bytes) writes that make it."""
    rng = random.Random("%d/%d/%s" % (size, seed, mode))
    data = bytearray(rng.randbytes(size))
    ps = pieces(size, rng)
    writes = []
    if mode == "seq":
        writes = [(o, n, False) for o, n in ps]
    else:
        holes = set()
        if mode == "sparse":
            holes = {i for i in range(len(ps)) if rng.random() < 0.33}
            # the last piece stays a hole sometimes: size by ftruncate
        order = [i for i in range(len(ps)) if i not in holes]
        rng.shuffle(order)
        seq = []
        for i in order:
            if rng.random() < 0.15:
                # garbage first, somewhere before the real write
                seq.insert(rng.randint(0, len(seq)), (i, True))
            seq.append((i, False))
        for i, garbage in seq:
            writes.append((ps[i][0], ps[i][1], garbage))
        for i in holes:
            o, n = ps[i]
            data[o:o + n] = bytes(n)
    return data, writes, rng


def cmd_write(path, size, seed, mode, do_fsync):
    data, writes, rng = plan(size, seed, mode)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        mv = memoryview(data)
        for o, n, garbage in writes:
            buf = rng.randbytes(n) if garbage else mv[o:o + n]
            done = 0
            while done < n:
                done += os.pwrite(fd, buf[done:], o + done)
        os.ftruncate(fd, size)
        if do_fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    print(hashlib.sha256(data).hexdigest())


def cmd_expect(size, seed, mode, off=0, length=None):
    data, _, _ = plan(size, seed, mode)
    if length is None:
        length = size
    print(hashlib.sha256(memoryview(data)[off:off + length]).hexdigest())


def errname(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def cmd_read(path, off=None, length=None):
    h = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            pos = off or 0
            left = length if length is not None else None
            while left is None or left > 0:
                n = MiB if left is None else min(MiB, left)
                b = os.pread(fd, n, pos)
                if not b:
                    break
                h.update(b)
                pos += len(b)
                if left is not None:
                    left -= len(b)
        finally:
            os.close(fd)
    except OSError as e:
        print(errname(e))
        return
    print("OK", h.hexdigest())


def block_data(seed, i, n):
    return random.Random("%d/block/%d" % (seed, i)).randbytes(n)


def cmd_append(path, seed, logpath, block, count, stopfile):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    log = open(logpath, "a")
    i = 0
    failing_since = None
    while i < count:
        if stopfile and os.path.exists(stopfile):
            break
        data = block_data(seed, i, block)
        try:
            done = 0
            while done < block:
                done += os.pwrite(fd, data[done:], i * block + done)
            os.fsync(fd)
        except OSError as e:
            now = time.monotonic()
            failing_since = failing_since or now
            sys.stderr.write("append: block %d: %s\n" % (i, errname(e)))
            if now - failing_since > 120:
                sys.exit("append: failing for 120 s")
            time.sleep(0.1)
            continue
        failing_since = None
        log.write("%d %d %d %s\n" % (i, i * block, block,
                                     hashlib.sha256(data).hexdigest()))
        log.flush()
        os.fsync(log.fileno())
        i += 1
    os.close(fd)
    log.close()


def cmd_verify(path, logpath):
    bad = 0
    n = 0
    fd = os.open(path, os.O_RDONLY)
    with open(logpath) as f:
        for line in f:
            i, off, length, want = line.split()
            off, length = int(off), int(length)
            try:
                got = os.pread(fd, length, off)
            except OSError as e:
                print("block %s: %s" % (i, errname(e)))
                bad += 1
                continue
            n += 1
            if len(got) != length or hashlib.sha256(got).hexdigest() != want:
                print("block %s at %d: %d bytes, wrong content" %
                      (i, off, len(got)))
                bad += 1
    os.close(fd)
    if bad:
        print("%d of %d acknowledged blocks bad" % (bad, n))
        sys.exit(1)
    print("OK %d blocks" % n)


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    cmd, a = argv[1], argv[2:]
    if cmd == "write":
        fs = "--fsync" in a
        a = [x for x in a if x != "--fsync"]
        cmd_write(a[0], int(a[1]), int(a[2]), a[3] if len(a) > 3 else "random", fs)
    elif cmd == "expect":
        cmd_expect(int(a[0]), int(a[1]), a[2] if len(a) > 2 else "random",
                   *[int(x) for x in a[3:5]])
    elif cmd == "read":
        if len(a) > 1:
            cmd_read(a[0], int(a[1]), int(a[2]))
        else:
            cmd_read(a[0])
    elif cmd == "append":
        cmd_append(a[0], int(a[1]), a[2], int(a[3]), int(a[4]),
                   a[5] if len(a) > 5 else None)
    elif cmd == "verify":
        cmd_verify(a[0], a[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
