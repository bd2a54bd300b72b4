#!/usr/bin/env python3
"""That scripts/layers.py can fail: it passes on a copy of master/ as it
is, and fails on the same copy with one upward arrow put back, an
include (watch.c includes server.h) or a call alone (watch.c calls
conn_notify() without the header), or a module of no layer.

    tests/unit/test_layers.py SRCDIR"""

import os
import shutil
import subprocess
import sys
import tempfile


def run(script, root):
    p = subprocess.run([sys.executable, script, root], capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stderr


def edit(root, name, old, new):
    path = os.path.join(root, "master", name)
    with open(path) as f:
        text = f.read()
    if old not in text:
        raise SystemExit("%s: %r not found; update this test" % (name, old))
    with open(path, "w") as f:
        f.write(text.replace(old, new, 1))


def main():
    src = sys.argv[1]
    script = os.path.join(src, "scripts", "layers.py")
    cases = [
        ("an upward include", "watch.c", '#include "context.h"\n',
         '#include "context.h"\n#include "server.h"\n',
         "upward include: watch -> server.h"),
        ("an upward call", "watch.c", "req_notify(m, s->conn,",
         "conn_notify(s->conn,", "upward call: watch -> conn_notify()"),
        ("a module of no layer", "req.c", "#define TAG", "#define TAG",
         "stray: in no layer"),
    ]
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for what, name, old, new, expect in cases:
            root = os.path.join(tmp, "src")
            shutil.rmtree(root, ignore_errors=True)
            shutil.copytree(os.path.join(src, "master"),
                            os.path.join(root, "master"))
            rc, err = run(script, root)
            if rc != 0:
                print("FAIL: the copy as it is fails:\n" + err)
                return 1
            edit(root, name, old, new)
            if what == "a module of no layer":
                open(os.path.join(root, "master", "stray.c"), "w").close()
            rc, err = run(script, root)
            ok = rc == 1 and expect in err
            print("%s: %s (exit %d)" % ("ok" if ok else "FAIL", what, rc))
            if not ok:
                print(err)
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
