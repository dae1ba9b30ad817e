#!/usr/bin/env python3
"""Checks deploy/monitoring against docs/metrics.md (MonitoringCLITests runs it).

  python3 monitoring_check.py REPOSITORY_ROOT [PROMTOOL]

1. `promtool check rules deploy/monitoring/alerts.yml` and `promtool test rules
   deploy/monitoring/alerts_test.yml` (skipped, with a line saying so, when PROMTOOL is not given).
2. The Grafana dashboard (deploy/monitoring/vault-dashboard.json) against a JSON schema of what
   Grafana needs of it: title, panels and schemaVersion; every panel a type, a title and targets
   each with a PromQL `expr`.
3. Every metric name in an alert expression or a panel expression is a family of docs/metrics.md
   (a histogram's `_bucket`, `_sum` and `_count` series count as its family), and every alert
   named in docs/metrics.md's alert column is a rule of alerts.yml and the other way round.
4. With PROMTOOL, every panel expression parses as PromQL (`promtool check rules` over them
   written as recording rules).

Prints one line per problem and a last line `monitoring: N checks, M problems`; exits 1 on any.
"""
import json
import os
import re
import subprocess
import sys

import jsonschema

DASHBOARD_SCHEMA = {
    "type": "object",
    "required": ["title", "panels", "schemaVersion"],
    "properties": {
        "title": {"type": "string", "minLength": 1},
        "schemaVersion": {"type": "integer", "minimum": 30},
        "uid": {"type": "string"},
        "panels": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["type", "title", "targets"],
                "properties": {
                    "type": {"type": "string", "minLength": 1},
                    "title": {"type": "string", "minLength": 1},
                    "gridPos": {
                        "type": "object",
                        "required": ["h", "w", "x", "y"],
                        "properties": {k: {"type": "integer", "minimum": 0} for k in ["h", "w", "x", "y"]},
                    },
                    "targets": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["expr", "refId"],
                            "properties": {"expr": {"type": "string", "minLength": 1}, "refId": {"type": "string"}},
                        },
                    },
                },
            },
        },
    },
}

METRIC = re.compile(r"\bvault_[a-z0-9_]+\b")


def documented(root):
    """docs/metrics.md's families: name -> (type, served by); and the alert names its rows name."""
    families, alerts = {}, set()
    section = None
    with open(os.path.join(root, "docs/metrics.md"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                section = line.strip()
            if not line.startswith("| `vault_") and not (section and section.startswith("## Alerts") and line.startswith("| Vault")):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if line.startswith("| `vault_"):
                families[cells[0].strip("`")] = (cells[1], cells[3])
                alerts.update(re.findall(r"\bVault[A-Za-z]+\b", cells[5]))
            else:
                alerts.add(cells[0])
    return families, alerts


def family_of(name, families):
    if name in families:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        base = name[: -len(suffix)] if name.endswith(suffix) else None
        if base and families.get(base, ("",))[0] == "histogram":
            return base
    return None


def main():
    root = sys.argv[1]
    promtool = sys.argv[2] if len(sys.argv) > 2 else None
    monitoring = os.path.join(root, "deploy/monitoring")
    problems, checks = [], 0

    def problem(text):
        problems.append(text)
        print("problem: " + text)

    families, doc_alerts = documented(root)
    checks += 1
    if len(families) < 20:
        problem(f"docs/metrics.md lists only {len(families)} families")

    # 1. promtool
    if promtool:
        for args in (["check", "rules", "alerts.yml"], ["test", "rules", "alerts_test.yml"]):
            checks += 1
            r = subprocess.run([promtool] + args, cwd=monitoring, capture_output=True, text=True)
            print(f"promtool {' '.join(args)}: exit {r.returncode}")
            if r.returncode != 0:
                problem(f"promtool {' '.join(args)} failed:\n{r.stdout}{r.stderr}")
    else:
        print("promtool: not given, rules not checked")

    # 2. the dashboard's shape
    with open(os.path.join(monitoring, "vault-dashboard.json"), encoding="utf-8") as f:
        dashboard = json.load(f)
    checks += 1
    for error in jsonschema.Draft202012Validator(DASHBOARD_SCHEMA).iter_errors(dashboard):
        problem(f"vault-dashboard.json: {'/'.join(map(str, error.absolute_path))}: {error.message}")
    ids = [p.get("id") for p in dashboard.get("panels", [])]
    checks += 1
    if len(ids) != len(set(ids)):
        problem("vault-dashboard.json: panel ids repeat")

    # 3. every expression names documented families only
    used = set()
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets", []):
            for name in METRIC.findall(target.get("expr", "")):
                checks += 1
                family = family_of(name, families)
                if family is None:
                    problem(f"vault-dashboard.json: panel '{panel.get('title')}' uses {name}, not in docs/metrics.md")
                used.add(family)
    with open(os.path.join(monitoring, "alerts.yml"), encoding="utf-8") as f:
        rules_text = f.read()
    for line in rules_text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        for name in METRIC.findall(line):
            checks += 1
            family = family_of(name, families)
            if family is None:
                problem(f"alerts.yml uses {name}, not in docs/metrics.md")
    rule_alerts = set(re.findall(r"^\s*- alert:\s*(\S+)", rules_text, re.M))
    checks += 1
    if rule_alerts != doc_alerts:
        problem(f"alerts in alerts.yml and docs/metrics.md differ: only in alerts.yml {sorted(rule_alerts - doc_alerts)}, "
                f"only in docs {sorted(doc_alerts - rule_alerts)}")
    # 4. every panel expression parses as PromQL: promtool checks them as recording rules
    if promtool:
        import tempfile
        exprs = [t.get("expr", "") for p in dashboard.get("panels", []) for t in p.get("targets", [])]
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "dashboard-rules.yml")
            with open(path, "w", encoding="utf-8") as f:
                f.write("groups:\n  - name: dashboard\n    rules:\n")
                for i, expr in enumerate(exprs):
                    f.write(f"      - record: vault:dashboard:expr{i}\n        expr: {json.dumps(expr)}\n")
            checks += 1
            r = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True)
            print(f"promtool check rules (dashboard expressions): exit {r.returncode}")
            if r.returncode != 0:
                problem(f"a dashboard expression is not PromQL:\n{r.stdout}{r.stderr}")
    print(f"dashboard: {len(dashboard.get('panels', []))} panels over {len(used)} families; alerts: {len(rule_alerts)} rules")
    print(f"monitoring: {checks} checks, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
