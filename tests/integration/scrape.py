#!/usr/bin/python3
"""Scrape a sweepfs metrics endpoint and check it, for metrics.sh.

    scrape.py URL [CHECK...]

The text is parsed with Prometheus' own parser (prometheus_client, from
Debian's python3-prometheus-client), so anything a Prometheus server would
refuse fails here. Every histogram must be well formed: buckets that never
decrease, ending with +Inf, which equals _count. Each CHECK is a Python
expression that must hold, with:

    v(name, **labels)   the value of the one sample of name with labels
                        (the sum when several match)
    n(name)             how many samples name has
    fams                the set of metric family names

Prints one line per family, with its samples, to stdout (the test log).
Exit status 1 on the first check that fails, saying which and why.
"""

import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def main():
    url, checks = sys.argv[1], sys.argv[2:]
    with urllib.request.urlopen(url, timeout=10) as r:
        ctype = r.headers.get("Content-Type", "")
        text = r.read().decode()
    if not ctype.startswith("text/plain; version=0.0.4"):
        sys.exit(f"{url}: Content-Type {ctype!r}")
    families = list(text_string_to_metric_families(text))
    samples = [s for f in families for s in f.samples]
    fams = {f.name for f in families}

    for f in families:
        print(f"{f.name} ({f.type}): {len(f.samples)} samples")
        if f.type != "histogram":
            continue
        series = {}
        for s in f.samples:
            key = tuple(sorted((k, v) for k, v in s.labels.items()
                               if k != "le"))
            series.setdefault(key, {"b": [], "count": None})
            if s.name.endswith("_bucket"):
                series[key]["b"].append((float(s.labels["le"]), s.value))
            elif s.name.endswith("_count"):
                series[key]["count"] = s.value
        for key, h in series.items():
            les = [le for le, _ in h["b"]]
            counts = [c for _, c in h["b"]]
            if les != sorted(les) or les[-1] != float("inf"):
                sys.exit(f"{f.name}{key}: bucket bounds {les}")
            if counts != sorted(counts):
                sys.exit(f"{f.name}{key}: buckets decrease: {counts}")
            if counts[-1] != h["count"]:
                sys.exit(f"{f.name}{key}: +Inf {counts[-1]} != "
                         f"count {h['count']}")

    def v(name, **labels):
        got = [s.value for s in samples if s.name == name and
               all(s.labels.get(k) == str(x) for k, x in labels.items())]
        if not got:
            raise LookupError(f"no sample {name}{labels}")
        return sum(got)

    def n(name):
        return sum(1 for s in samples if s.name == name)

    for check in checks:
        try:
            ok = eval(check, {"v": v, "n": n, "fams": fams})
        except LookupError as e:
            sys.exit(f"check {check!r}: {e}")
        if not ok:
            names = [w for w in fams if w in check]
            detail = "; ".join(f"{s.name}{s.labels} = {s.value}"
                               for s in samples
                               if any(s.name.startswith(w) for w in names)
                               and not s.name.endswith("_bucket"))
            sys.exit(f"check failed: {check}\n  {detail[:2000]}")


if __name__ == "__main__":
    main()
