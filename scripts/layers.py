#!/usr/bin/env python3
"""layers.py: the master's include and call graph, checked against its
layers.

    scripts/layers.py [--dot] [--strict] [SRCDIR]

The five layers of DESIGN.md ("Layers inside the master"), bottom up; a
module (x.c with x.h) may include its own layer's headers and those
below, never above, and may name (call, or take the address of) the
functions defined in its own layer's .c files and those below, never
above:

  core      the namespace and the data structures it and the rest use:
            namespace (+ namespace_i, nsahead, nsattr, nscopy, nsdigest,
            nsload, nspurge, nstrash, trash.h),
            chunks, replies (the reply cache lives in the namespace),
            htab, slab, lct, itree, locks, bucket (token buckets)
  journal   changelog, checkpoint, mutation (replay and live changes
            go through the same mutation functions), bootlog (their
            progress lines at start-up)
  request   req (reply, error, defer, the caller's view, commit, and the
            wrappers of the hooks that reach the server and the group),
            perm, exports, context (struct master: the handlers' state
            only behind pointers), sessrec (struct session, the
            counters), sesstab (the session table, opens, grants,
            cursors)
  handlers  one module per family: fsops, dataops, lockops, admin, fsck,
            rmr, snapshot, snapjob, trashops, purge, csrv, deleg, watch,
            metrics, and handlers.h that lists them
  server    server, session, dispatch, group (+ group_i, group_etcd,
            group_thread), catchup, and master (the top: start-up,
            struct master, the hooks that point up)

It fails (exit 1) on:

  - an upward include (module -> header of a higher layer);
  - an upward call: a lower module's .c naming a function that a higher
    module's .c defines (not static). Comments and strings do not count,
    nor a member or a tag named alike (after . or ->, struct). What goes up goes through
    the hooks master.c wires (struct req_hooks, the core's ns hooks);
  - a cycle in the graph of includes and calls together that spans more
    than one layer. Modules of one layer may use each other (csrv and
    dataops, the server layer's modules); such cycles are printed, not
    failed: DESIGN's rule is that nothing points up.

DEBT and CYCLE_DEBT are empty: there is no upward arrow left to excuse.
A line added to either is a new upward arrow, and a line there that no
longer matches fails too ("paid debt"); --strict ignores them. Prints
each module's includes and calls layer by layer, the cycles found, or
with --dot a Graphviz graph. The core's unit tests also link ns_core
alone, so a call upward from the core fails to link."""

import os
import re
import sys

LAYERS = ("core", "journal", "request", "handlers", "server")

MODULES = {
    "core": {"namespace", "namespace_i", "nsahead", "nsattr", "nscopy",
             "nsdigest", "nsload",
             "nspurge", "nstrash", "trash", "chunks", "replies", "htab",
             "slab", "lct", "itree", "locks", "bucket"},
    "journal": {"changelog", "checkpoint", "mutation", "bootlog"},
    "request": {"req", "perm", "exports", "context", "sessrec", "sesstab"},
    "handlers": {"fsops", "dataops", "lockops", "admin", "fsck", "rmr",
                 "snapshot", "snapjob", "trashops", "purge", "csrv", "deleg",
                 "watch", "metrics", "handlers", "fileinfo", "health", "xattrops"},
    "server": {"server", "session", "dispatch", "group", "catchup",
               "master"},
}

# Files of a module split in several: one module for the graph.
PARTS = {"group_i": "group", "group_etcd": "group", "group_thread": "group"}

# Upward arrows excused, "module -> header.h" or "module -> function()":
# none. Handlers reach the server and the group through req.h's hooks
# (req_notify(), req_inval_*(), req_group_*(), ...) and the session table
# through sesstab.h. A line here is a new arrow up; it must not be added.
DEBT = set()

# Modules excused from the rule on cycles across layers: none.
CYCLE_DEBT = set()


def layer_of(mod):
    for i, name in enumerate(LAYERS):
        if mod in MODULES[name]:
            return i
    return None


def module_of(f):
    mod = os.path.splitext(f)[0]
    return PARTS.get(mod, mod)


def sources(mdir):
    """master/'s .c and .h files but main.c (the daemon's, above all)."""
    return [f for f in sorted(os.listdir(mdir))
            if f.endswith((".c", ".h")) and f != "main.c"]


def read_graph(mdir):
    """{module: {header module, ...}} over master/'s .c and .h files."""
    local = {os.path.splitext(f)[0] for f in os.listdir(mdir)
             if f.endswith(".h")}
    graph = {}
    for f in sources(mdir):
        mod = module_of(f)
        with open(os.path.join(mdir, f)) as fh:
            incs = re.findall(r'^#include "([\w.]+)\.h"', fh.read(), re.M)
        graph.setdefault(mod, set()).update(
            PARTS.get(i, i) for i in incs
            if i in local and PARTS.get(i, i) != mod)
    return graph


def strip_c(text):
    """@text without comments, string and character literals, nor
    #include lines (kept as blanks, so that nothing joins)."""
    out = re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|'
                 r"'(?:\\.|[^'\\\n])*'",
                 lambda m: " " * 0 + ("\n" * m.group(0).count("\n")) + " ",
                 text, flags=re.S)
    return re.sub(r'^[ \t]*#[ \t]*include[^\n]*', " ", out, flags=re.M)


def definitions(code):
    """Names of the functions @code (stripped) defines at file scope and
    does not make static: what other files may call."""
    names = set()
    depth = 0
    start = 0
    for m in re.finditer(r'[{};]', code):
        ch = m.group(0)
        if ch == "{":
            if depth == 0:
                head = code[start:m.start()]
                d = re.search(r'\b([A-Za-z_]\w*)\s*\(([^()]|\([^()]*\))*\)'
                              r'\s*$', head)
                if d and not re.match(r'\s*(static|typedef)\b', head) \
                        and "=" not in head:
                    names.add(d.group(1))
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                start = m.end()
        elif depth == 0:
            start = m.end()
    return names


def read_calls(mdir):
    """({module: {module, ...}}, [(module, function, module it is
    defined in), ...]): which functions of other modules each module's
    .c files name, resolved to the module that defines them."""
    code = {}
    defined = {}
    for f in sources(mdir):
        if not f.endswith(".c"):
            continue
        with open(os.path.join(mdir, f)) as fh:
            code[f] = strip_c(fh.read())
        for name in definitions(code[f]):
            defined[name] = module_of(f)
    graph, uses = {}, []
    for f, text in code.items():
        mod = module_of(f)
        text = re.sub(r'\b(?:struct|union|enum)\s+\w+', " ", text)
        names = set(re.findall(r'(?<![\w.>])([A-Za-z_]\w*)\b', text))
        for name in sorted(names):
            to = defined.get(name)
            if to is not None and to != mod:
                graph.setdefault(mod, set()).add(to)
                uses.append((mod, name, to))
    return graph, uses


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


def check(graph, calls, uses, strict):
    errors = []
    mods = set(graph) | set(calls)
    unknown = sorted(m for m in mods if layer_of(m) is None)
    for m in unknown:
        errors.append("%s: in no layer (add it to MODULES)" % m)
    up = set()
    for mod, incs in graph.items():
        me = layer_of(mod)
        for i in incs:
            li = layer_of(i)
            if me is not None and li is not None and li > me:
                up.add("%s -> %s.h" % (mod, i))
    for mod, name, to in uses:
        me, lt = layer_of(mod), layer_of(to)
        if me is not None and lt is not None and lt > me:
            up.add("%s -> %s()" % (mod, name))
    debt = set() if strict else DEBT
    for u in sorted(up - debt):
        mod, what = u.split(" -> ")
        to = what[:-2] if what.endswith(".h") else \
            next(t for m, n, t in uses if m == mod and n + "()" == what)
        errors.append("upward %s: %s (%s %s %s)" % (
            "include" if what.endswith(".h") else "call", u,
            LAYERS[layer_of(mod)],
            "includes" if what.endswith(".h") else "calls into",
            LAYERS[layer_of(to)]))
    for u in sorted(debt - up):
        errors.append("paid debt: %s is gone; delete it from DEBT" % u)
    both = {m: set(graph.get(m, ())) | set(calls.get(m, ())) for m in mods}
    known = {m for m in mods if layer_of(m) is not None}
    found = cycles(both, known)
    allowed = set() if strict else CYCLE_DEBT
    across = [c for c in found if len({layer_of(m) for m in c}) > 1]
    for comp in across:
        if not comp <= allowed:
            errors.append("cycle across layers: %s" % " ".join(sorted(comp)))
    inside = set().union(*across) if across else set()
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
    mdir = os.path.join(src, "master")
    graph = read_graph(mdir)
    calls, uses = read_calls(mdir)
    errors, found = check(graph, calls, uses, strict)
    if dot:
        print("digraph master {\n  rankdir=BT;")
        for mod, incs in sorted(graph.items()):
            for i in sorted(incs):
                print('  "%s" -> "%s";' % (mod, i))
        for mod, tos in sorted(calls.items()):
            for t in sorted(tos - graph.get(mod, set())):
                print('  "%s" -> "%s" [style=dashed];' % (mod, t))
        print("}")
    else:
        for lv, name in enumerate(LAYERS):
            print("== %s" % name)
            for mod in sorted(set(graph) | set(calls)):
                if layer_of(mod) == lv:
                    print("  %-12s includes %s" % (mod, " ".join(sorted(
                        graph.get(mod, ())))))
                    print("  %-12s calls    %s" % ("", " ".join(sorted(
                        calls.get(mod, ())))))
        for comp in found:
            print("cycle inside %s (%d modules): %s" % (
                "/".join(sorted({LAYERS[layer_of(m)] for m in comp})),
                len(comp), " ".join(sorted(comp))))
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
