#!/usr/bin/env python3
"""layers.py: the master's include graph, checked against its layers.

    scripts/layers.py [--dot] [--strict] [SRCDIR]

The five layers of DESIGN.md ("Layers inside the master"), bottom up; a
module (x.c with x.h) may include its own layer's headers and those
below, never above:

  core      the namespace and the data structures it and the rest use:
            namespace (+ namespace_i, nsattr, nscopy, nspurge, nstrash,
            trash.h),
            chunks, replies (the reply cache lives in the namespace),
            htab, slab, lct, itree, locks
  journal   changelog, checkpoint, mutation (replay and live changes
            go through the same mutation functions)
  request   req (reply, error, defer, the caller's view, commit), perm,
            exports, context (struct master: the handlers' state only
            behind pointers), sessrec (struct session, the counters)
  handlers  one module per family: fsops, dataops, lockops, admin, fsck,
            rmr, snapshot, snapjob, trashops, purge, csrv, deleg, watch,
            metrics, and handlers.h that lists them
  server    server, session, dispatch, group (+ group_i, group_etcd,
            group_thread), catchup, and master (the top: start-up,
            struct master, the hooks that point up)

It fails (exit 1) on:

  - an upward include that is not in DEBT below, and on an entry of DEBT
    that is gone (the list only shrinks: delete the line);
  - a cycle in the module include graph among the request-side modules
    (request, handlers, server) that is not inside CYCLE_DEBT, and on a
    module of CYCLE_DEBT that left the cycle (delete it).

--strict ignores both lists: what the layers will look like when the debt
is paid. Prints each module's includes layer by layer, the cycles found,
or with --dot a Graphviz graph. The core's unit tests link ns_core alone,
so a call upward from the core fails to link; this catches headers."""

import os
import re
import sys

LAYERS = ("core", "journal", "request", "handlers", "server")

MODULES = {
    "core": {"namespace", "namespace_i", "nsattr", "nscopy", "nspurge", "nstrash",
             "trash", "chunks", "replies", "htab", "slab", "lct", "itree",
             "locks"},
    "journal": {"changelog", "checkpoint", "mutation"},
    "request": {"req", "perm", "exports", "context", "sessrec"},
    "handlers": {"fsops", "dataops", "lockops", "admin", "fsck", "rmr",
                 "snapshot", "snapjob", "trashops", "purge", "csrv", "deleg",
                 "watch", "metrics", "handlers", "fileinfo", "health", "xattrops"},
    "server": {"server", "session", "dispatch", "group", "catchup",
               "master"},
}

# Files of a module split in several: one module for the graph.
PARTS = {"group_i": "group", "group_etcd": "group", "group_thread": "group"}

# Upward includes still there, "module -> header": handlers call
# session.c (session.h), queue replies and
# invalidations through server.h, and admin's group requests call
# group.h. (struct master is context.h's, struct session sessrec.h's,
# both in the request layer.) Each line removed is one arrow fewer; a
# new one fails the test.
DEBT = {
    "admin -> session.h", "admin -> group.h",
    "csrv -> server.h",
    "deleg -> server.h", "deleg -> session.h",
    "fsops -> server.h", "fsops -> session.h",
    "watch -> server.h",
}

# The modules of the request side's one include cycle today (handlers
# calling up into session.h, server.h, group.h; master.c, the top,
# including them all): a cycle outside it, or growing it, fails.
CYCLE_DEBT = {"admin", "catchup", "csrv", "dataops", "deleg", "dispatch",
              "group", "health", "master", "server", "session", "snapjob",
              "trashops", "watch"}

REQUEST_SIDE = ("request", "handlers", "server")


def layer_of(mod):
    for i, name in enumerate(LAYERS):
        if mod in MODULES[name]:
            return i
    return None


def read_graph(mdir):
    """{module: {header module, ...}} over master/'s .c and .h files."""
    local = {os.path.splitext(f)[0] for f in os.listdir(mdir)
             if f.endswith(".h")}
    graph = {}
    for f in sorted(os.listdir(mdir)):
        if not f.endswith((".c", ".h")) or f == "main.c":
            continue
        mod = os.path.splitext(f)[0]
        mod = PARTS.get(mod, mod)
        with open(os.path.join(mdir, f)) as fh:
            incs = re.findall(r'^#include "([\w.]+)\.h"', fh.read(), re.M)
        graph.setdefault(mod, set()).update(
            PARTS.get(i, i) for i in incs
            if i in local and PARTS.get(i, i) != mod)
    return graph


def cycles(graph, members):
    """Strongly connected components of @graph restricted to @members
    with more than one module (Tarjan, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    for root in sorted(members):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()) & members)))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())
                                                & members))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.add(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(comp)
    return out


def check(graph, strict):
    errors = []
    unknown = sorted(m for m in graph if layer_of(m) is None)
    for m in unknown:
        errors.append("%s: in no layer (add it to MODULES)" % m)
    up = set()
    for mod, incs in graph.items():
        me = layer_of(mod)
        for i in incs:
            li = layer_of(i)
            if me is not None and li is not None and li > me:
                up.add("%s -> %s.h" % (mod, i))
    debt = set() if strict else DEBT
    for u in sorted(up - debt):
        errors.append("upward include: %s (%s includes %s)" % (
            u, LAYERS[layer_of(u.split()[0])],
            LAYERS[layer_of(u.split()[2][:-2])]))
    for u in sorted(debt - up):
        errors.append("paid debt: %s is gone; delete it from DEBT" % u)
    side = {m for m in graph if layer_of(m) is not None and
            LAYERS[layer_of(m)] in REQUEST_SIDE}
    found = cycles(graph, side)
    allowed = set() if strict else CYCLE_DEBT
    for comp in found:
        if not comp <= allowed:
            errors.append("include cycle: %s" % " ".join(sorted(comp)))
    inside = set().union(*found) if found else set()
    for m in sorted(allowed - inside):
        errors.append("paid debt: %s left the cycle; delete it from "
                      "CYCLE_DEBT" % m)
    return errors, found


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    dot = "--dot" in sys.argv
    strict = "--strict" in sys.argv
    src = args[0] if args else os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "..")
    graph = read_graph(os.path.join(src, "master"))
    errors, found = check(graph, strict)
    if dot:
        print("digraph master {\n  rankdir=BT;")
        for mod, incs in sorted(graph.items()):
            for i in sorted(incs):
                print('  "%s" -> "%s";' % (mod, i))
        print("}")
    else:
        for lv, name in enumerate(LAYERS):
            print("== %s" % name)
            for mod in sorted(graph):
                if layer_of(mod) == lv:
                    print("  %-12s %s" % (mod, " ".join(sorted(
                        graph[mod]))))
        for comp in found:
            print("cycle (%d modules): %s" % (len(comp),
                                              " ".join(sorted(comp))))
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
