#!/usr/bin/env python3
"""mount_replies.py: the mount answers the kernel from its operations only.

    scripts/mount_replies.py [SRCDIR]

Only mount/ops.c (the FUSE operations) and mount/reply.c (their reply
point, reply.h) may call libfuse's fuse_reply_*(); every other file of the
mount returns its result to the operation or hands it to reply.h. Exits 1
naming each call elsewhere, with its line; prints the count per file.
Comments are skipped, so a file may still say what it leaves to ops.c."""

import os
import re
import sys

ALLOWED = {"ops.c", "reply.c"}
CALL = re.compile(r"\bfuse_reply_[a-z_]+\s*\(")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def calls(path):
    """(line, text) of each fuse_reply_*() call in @path, comments aside."""
    with open(path, encoding="utf-8") as f:
        src = f.read()
    # Blank out comments but keep their newlines, so line numbers hold.
    src = COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), src)
    for no, line in enumerate(src.split("\n"), 1):
        if CALL.search(line):
            yield no, line.strip()


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else "."
    mount = os.path.join(top, "mount")
    bad = 0
    for name in sorted(os.listdir(mount)):
        if not name.endswith(".c"):
            continue
        found = list(calls(os.path.join(mount, name)))
        if not found:
            continue
        print(f"{name}: {len(found)} fuse_reply_*() calls")
        if name in ALLOWED:
            continue
        for no, text in found:
            print(f"mount/{name}:{no}: replies to the kernel outside the "
                  f"operations: {text}", file=sys.stderr)
            bad += 1
    if bad:
        print(f"{bad} calls outside {', '.join(sorted(ALLOWED))}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
