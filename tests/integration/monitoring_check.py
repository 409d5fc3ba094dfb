"""monitoring_check.py - every metric name that deploy/monitoring/'s
Prometheus rules and Grafana dashboard use exists in real nodes' /metrics.

usage: monitoring_check.py RULES.yml DASHBOARD.json METRICS-FILE...

A name is any identifier in an expression that begins with cairn_ or
process_ (our families), plus `up` (Prometheus' own); each must be a
sample name of some node's scrape. Exits 1 naming the missing ones."""
import json
import re
import sys

NAME = re.compile(r"\b((?:cairn|process)_[a-zA-Z0-9_:]*)")


def rule_exprs(path):
    out = []
    for line in open(path):
        m = re.match(r"\s*expr:\s*(.*)$", line)
        if m:
            out.append(m.group(1))
    return out


def dashboard_exprs(path):
    d = json.load(open(path))
    out = [v.get("definition", "") for v in d["templating"]["list"]]
    for p in d["panels"]:
        out.extend(t["expr"] for t in p.get("targets", []))
    return out


def scraped(paths):
    names = set()
    for p in paths:
        for line in open(p):
            if line.startswith("#") or not line.strip():
                continue
            names.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    return names


def main():
    rules, dash, metrics = sys.argv[1], sys.argv[2], sys.argv[3:]
    have = scraped(metrics)
    exprs = [("rules", e) for e in rule_exprs(rules)] + [("dashboard", e) for e in dashboard_exprs(dash)]
    if len(exprs) < 10:
        sys.exit("only %d expressions found: the files were not read" % len(exprs))
    missing = []
    used = set()
    for where, e in exprs:
        for name in NAME.findall(e):
            used.add(name)
            if name not in have:
                missing.append("%s: %s in %s" % (where, name, e))
    if missing:
        print("metrics used but not exported:\n  " + "\n  ".join(missing))
        sys.exit(1)
    print("%d expressions, %d metric names, all exported" % (len(exprs), len(used)))


main()
