#!/usr/bin/env python3
"""Write the commented example configuration of a daemon from its
`--dump-config` (every key, its default and its meaning), so that the
installed /etc/sweepfs/*.cfg never drifts from the code:

    dist/gen_config.py build/master/sweepfs-master > dist/config/master.cfg
    dist/gen_config.py --check build/master/sweepfs-master dist/config/master.cfg

--check exits 1, saying what differs, when FILE is not what the daemon
would write (tests/integration/packaging/install.sh runs it for both daemons).
"""

import subprocess
import sys
import textwrap

HEADER = """\
# {path}: configuration of {prog}, read at start-up
# ({prog} -c FILE; the default is /etc/sweepfs/{name}). One
# `key = value` per line; durations take ms, s, m, h or d (a bare number
# is seconds), sizes k, M, G or T. Every key is listed below with its
# default, commented out: uncomment a line to change it. --set key=value
# on the command line overrides this file.
# See {prog}(8) and sweepfs.cfg(5).
#
# Generated from `{prog} --dump-config` by dist/gen_config.py.
"""


def dump(prog):
    # -c /dev/null: the built-in defaults, whatever /etc holds here.
    out = subprocess.run([prog, "-c", "/dev/null", "--dump-config"],
                         check=True, stdout=subprocess.PIPE,
                         text=True).stdout
    keys = []
    for line in out.splitlines():
        kv, _, help_ = line.partition("\t# ")
        key, _, value = kv.partition(" = ")
        keys.append((key.strip(), value.strip(), help_.strip()))
    return keys


def render(prog):
    name = {"sweepfs-master": "master.cfg",
            "sweepfs-chunkserver": "chunkserver.cfg"}[prog.split("/")[-1]]
    short = prog.split("/")[-1]
    out = [HEADER.format(path="/etc/sweepfs/" + name, prog=short,
                         name=name).rstrip("\n")]
    for key, value, help_ in dump(prog):
        out.append("")
        for line in textwrap.wrap(help_, 76):
            out.append("# " + line)
        out.append(("#%s = %s" % (key, value)).rstrip())
    return "\n".join(out) + "\n"


def main(argv):
    if argv[:1] == ["--check"]:
        prog, path = argv[1:3]
        want = render(prog)
        with open(path) as f:
            got = f.read()
        if got != want:
            import difflib
            sys.stderr.writelines(difflib.unified_diff(
                got.splitlines(True), want.splitlines(True), path,
                "%s --dump-config" % prog))
            sys.stderr.write("%s is out of date: dist/gen_config.py %s > %s\n"
                             % (path, prog, path))
            return 1
        return 0
    sys.stdout.write(render(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
