#!/usr/bin/python3
"""Check dist/monitoring against running daemons, for health.sh.

    dist_metrics.py RULES.yml DASHBOARD.json URL...

Every PromQL expression of the alert rules and of the dashboard's panels
must name only metrics that one of the URLs (a master's and a
chunkserver's /metrics) serves, parsed with Prometheus' own parser; the
only other name allowed is Prometheus' `up`. The rules must have the
shape Prometheus loads (groups of rules with alert, expr, labels.severity
and annotations.summary), the dashboard panels a datasource and targets.
Prints what it checked; exit status 1 on the first thing wrong, saying
what.
"""

import json
import re
import sys
import urllib.request

import yaml
from prometheus_client.parser import text_string_to_metric_families

# Names that are not metrics: PromQL functions, keywords, Prometheus'
# own series.
ALLOWED = {"up"}
METRIC = re.compile(r"\b(sweepfs_[a-zA-Z0-9_]+|up)\b(?!\s*\()")


def served(urls):
    names = set()
    for url in urls:
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        for fam in text_string_to_metric_families(text):
            names.add(fam.name)
            if fam.type == "counter":
                names.add(fam.name + "_total")
            if fam.type == "histogram":
                names.update(fam.name + s for s in ("_bucket", "_sum", "_count"))
            names.update(s.name for s in fam.samples)
    return names


def strip_labels(expr):
    """The expression without label matchers and strings, where a label
    value may look like a metric name."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    return re.sub(r"\{[^}]*\}", "{}", expr)


def check(where, expr, names, used):
    if not isinstance(expr, str) or not expr.strip():
        sys.exit(f"{where}: no expression")
    found = METRIC.findall(strip_labels(expr))
    if not found:
        sys.exit(f"{where}: names no metric: {expr}")
    for name in found:
        if name not in names and name not in ALLOWED:
            sys.exit(f"{where}: {name} is served by no daemon: {expr}")
        used.add(name)


def main():
    rules_path, dash_path, urls = sys.argv[1], sys.argv[2], sys.argv[3:]
    names = served(urls)
    used = set()
    with open(rules_path) as f:
        rules = yaml.safe_load(f)
    n = 0
    for g in rules["groups"]:
        if not g.get("name") or not g.get("rules"):
            sys.exit(f"{rules_path}: a group without a name or rules")
        for r in g["rules"]:
            where = f"{rules_path}: alert {r.get('alert')}"
            if not r.get("alert") or not r.get("labels", {}).get("severity") \
                    or not r.get("annotations", {}).get("summary"):
                sys.exit(f"{where}: needs alert, labels.severity, annotations.summary")
            check(where, r.get("expr"), names, used)
            n += 1
    with open(dash_path) as f:
        dash = json.load(f)
    t = 0
    for p in dash["panels"]:
        if p.get("type") == "row":
            continue
        if not p.get("datasource") or not p.get("targets"):
            sys.exit(f"{dash_path}: panel {p.get('title')!r} has no datasource or targets")
        for tg in p["targets"]:
            check(f"{dash_path}: panel {p['title']!r}", tg.get("expr"), names, used)
            t += 1
    print(f"{n} alert rules and {t} dashboard queries name {len(used)} metrics, "
          f"all served: {' '.join(sorted(used))}")


if __name__ == "__main__":
    main()
