#!/usr/bin/env python3
"""layers.py: the master's include graph, checked against its layers.

    scripts/layers.py [--dot] [SRCDIR]

Layers, bottom up (a file may include its own layer's headers and those
below, never above):

  core      the namespace and its persistence (ns_core in
            master/meson.build): namespace, nscopy, nstrash/trash.h,
            chunks, mutation, changelog, checkpoint, replies, and the
            data structures they use
  request   req.h, dispatch.h, handlers.h and everything else in master/

Prints each file's includes, layer by layer, or with --dot a Graphviz
graph; exits 1 naming every include that points upwards (the link of the
core's unit tests catches calls upwards; this catches headers)."""

import os
import re
import sys

CORE = {"trash", "changelog", "checkpoint", "chunks", "htab", "lct", "mutation",
        "namespace", "namespace_i", "nsattr", "nscopy", "nstrash", "perm",
        "replies", "slab"}


def layer(fname):
    """0: core, 1: above. trash.h is the core's; trash.c is requests."""
    stem, ext = os.path.splitext(fname)
    return 0 if stem in CORE or fname == "trash.h" else 1


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    dot = "--dot" in sys.argv
    src = args[0] if args else os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "..")
    mdir = os.path.join(src, "master")
    local = {os.path.splitext(f)[0] for f in os.listdir(mdir)
             if f.endswith(".h")}
    graph = {}
    for f in sorted(os.listdir(mdir)):
        if not f.endswith((".c", ".h")) or f == "main.c":
            continue
        with open(os.path.join(mdir, f)) as fh:
            incs = re.findall(r'^#include "([\w.]+)\.h"', fh.read(), re.M)
        graph[f] = [i for i in incs if i in local]
    bad = []
    for f, incs in graph.items():
        me = layer(f)
        for i in incs:
            if layer(i + ".h") > me:
                bad.append("%s (%s) includes %s.h (%s)" % (
                    f, ("core", "request")[me], i,
                    ("core", "request")[layer(i + ".h")]))
    if dot:
        print("digraph master {\n  rankdir=BT;")
        for f, incs in graph.items():
            for i in incs:
                print('  "%s" -> "%s.h";' % (f, i))
        print("}")
    else:
        for lv, title in ((0, "core"), (1, "request and above")):
            print("== %s" % title)
            for f, incs in graph.items():
                if layer(f) == lv:
                    print("  %-14s %s" % (f, " ".join(incs)))
    for b in bad:
        print("upward include: " + b, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
