#!/usr/bin/env python3
"""A master's cold start: checkpoint load and changelog replay.

    bench/coldstart.py --data DIR [--build B]... [--rounds R]

DIR holds a checkpoint and the changelog after it, as a crashed master
leaves them (made once, e.g. `sweepfs-nsbench make DIR 34000000 5000000 2
create`: 34 M files, then 5 M creates to replay, the most
checkpoint_changes lets pile up). For each build B in turn (--rounds
times, alternating, so that old and new binaries see the same machine), a
master starts from a copy of DIR (the checkpoint hard-linked, never
changed; the changelog copied, since a master appends to it) and is
killed once it has loaded: its own log line says how long it took, how
many nodes it loaded and how many changes it replayed, each in how long.
Issue 29 asks for 2 M nodes/s, 1 M changes/s, and 34 M files in under
20 s on the 2-core VM this project runs on.

A JSON line per run on stdout; the context once, first.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cluster  # noqa: E402

LINE = re.compile(r"metadata at version (\d+) \(checkpoint (\d+), (\d+) "
                  r"changes replayed\): (\d+) nodes in ([0-9.]+) s \((\d+) "
                  r"nodes loaded in ([0-9.]+) s, changes replayed in "
                  r"([0-9.]+) s\)")


def start(build, data, port, timeout=600):
    """One cold start of @build's master from a copy of @data."""
    work = tempfile.mkdtemp(prefix="sweepfs-cold-")
    log = os.path.join(work, "log")
    proc = None
    try:
        for name in sorted(os.listdir(data)):
            src = os.path.join(data, name)
            if name.startswith("checkpoint."):
                os.link(src, os.path.join(work, name))
            elif name.startswith("changelog."):
                shutil.copyfile(src, os.path.join(work, name))
        os.sync()
        with open(log, "w") as out:
            proc = subprocess.Popen(
                [os.path.join(build, "master", "sweepfs-master"), "-f",
                 "-d", work, "-l", "127.0.0.1:%d" % port, "-v", "notice"],
                stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(log) as f:
                m = LINE.search(f.read())
            if m:
                return {"nodes": int(m.group(4)),
                        "seconds": float(m.group(5)),
                        "loaded_nodes": int(m.group(6)),
                        "load_s": float(m.group(7)),
                        "changes": int(m.group(3)),
                        "replay_s": float(m.group(8))}
            if proc.poll() is not None:
                with open(log) as f:
                    raise RuntimeError("master exited: " + f.read()[-400:])
            time.sleep(0.1)
        raise RuntimeError("no start within %d s" % timeout)
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--build", action="append")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--port", type=int, default=29871)
    a = ap.parse_args()
    builds = a.build or [os.path.join(HERE, "..", "build")]
    print(json.dumps({"context": cluster.context(builds[0], {
        "benchmark": "coldstart", "data": a.data, "builds": builds,
        "rounds": a.rounds})}), flush=True)
    for r in range(a.rounds):
        for b in builds:
            res = start(b, a.data, a.port)
            res.update({"build": b, "round": r,
                        "nodes_per_s": res["loaded_nodes"] / res["load_s"]
                        if res["load_s"] else None,
                        "changes_per_s": res["changes"] / res["replay_s"]
                        if res["replay_s"] else None})
            print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
