#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""grafana_check.py DASHBOARD.json SCRAPE.txt: checks that a Grafana
dashboard asks only for what the proxy exports.

Every PromQL expression of the dashboard (each panel's targets, nested rows
included, and the template variables' queries) is read with a small PromQL
tokenizer; each metric it names must be a sample name of SCRAPE.txt (a
/metrics answer: a histogram is NAME_bucket, NAME_sum and NAME_count), and
each label a selector matches on ({route="web"}) must be a label of that
metric. With promtool installed, every expression (Grafana's variables
replaced) must also parse as PromQL (`promtool check rules`).

Prints each problem, then one line `N expressions checked, M metric names`;
exits 0 when there is no problem, 1 otherwise (2 for bad arguments).
Used by tests/integration/test_status.c (integ/grafana_dashboard_*)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
                "count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
LABEL_LIST_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS = LABEL_LIST_KEYWORDS | {"offset", "bool", "and", "or", "unless", "atan2", "inf", "nan"}
IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
# labels Prometheus adds to every series it scrapes (the target's)
TARGET_LABELS = {"instance", "job"}


def substitute(expr):
    """Grafana's variables replaced by what PromQL accepts where they stand."""
    expr = re.sub(r"\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}",
                  "5m", expr)
    expr = re.sub(r"\$\{[A-Za-z0-9_]+(:[a-z]+)?\}|\$[A-Za-z_][A-Za-z0-9_]*|\[\[[A-Za-z0-9_]+\]\]",
                  ".*", expr)
    return expr


def skip_string(s, i):
    quote = s[i]
    i += 1
    while i < len(s) and s[i] != quote:
        i += 2 if s[i] == "\\" and quote != "`" else 1
    return i + 1


def skip_group(s, i, open_ch, close_ch):
    """From s[i] == open_ch to just past its close_ch (strings skipped)."""
    depth = 0
    while i < len(s):
        c = s[i]
        if c in "\"'`":
            i = skip_string(s, i)
            continue
        if c == open_ch:
            depth += 1
        elif c == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError("unbalanced %s%s" % (open_ch, close_ch))


def matcher_labels(body):
    """The label names of a {...} selector body: a="x", b=~"y", ..."""
    names = []
    i = 0
    while i < len(body):
        c = body[i]
        if c in "\"'`":
            i = skip_string(body, i)
            continue
        m = IDENT.match(body, i)
        if m:
            rest = body[m.end():].lstrip()
            if rest[:1] in ("=", "!"):
                names.append(m.group(0))
            i = m.end()
            continue
        i += 1
    return names


def metrics_of(expr):
    """[(metric, [labels its selector matches on])] named by a PromQL expression."""
    found = []
    s = expr
    i = 0
    while i < len(s):
        c = s[i]
        if c in "\"'`":
            i = skip_string(s, i)
        elif c == "[":
            i = skip_group(s, i, "[", "]")
        elif c == "{":  # a selector without a name: {__name__="x"} or labels only
            body_end = skip_group(s, i, "{", "}")
            body = s[i + 1:body_end - 1]
            m = re.search(r'__name__\s*=\s*"([^"]+)"', body)
            if m:
                found.append((m.group(1), [n for n in matcher_labels(body) if n != "__name__"]))
            i = body_end
        elif c.isdigit() or (c == "." and i + 1 < len(s) and s[i + 1].isdigit()):
            while i < len(s) and (s[i].isalnum() or s[i] in "._"):
                i += 1
        elif IDENT.match(s, i):
            word = IDENT.match(s, i).group(0)
            i += len(word)
            j = i
            while j < len(s) and s[j].isspace():
                j += 1
            nxt = s[j] if j < len(s) else ""
            if word in LABEL_LIST_KEYWORDS:
                if nxt == "(":
                    i = skip_group(s, j, "(", ")")
            elif word in KEYWORDS or word in AGGREGATIONS or nxt == "(":
                pass  # an operator, a function or an aggregation
            else:
                labels = []
                if nxt == "{":
                    end = skip_group(s, j, "{", "}")
                    labels = matcher_labels(s[j + 1:end - 1])
                    i = end
                found.append((word, labels))
        else:
            i += 1
    return found


def template_expr(query):
    """The PromQL inside a template variable's query, or None."""
    if isinstance(query, dict):
        query = query.get("query", "")
    if not isinstance(query, str) or not query.strip():
        return None
    q = query.strip()
    m = re.match(r"label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)$", q, re.S)
    if m:
        return m.group(1)
    m = re.match(r"query_result\((.*)\)$", q, re.S)
    if m:
        return m.group(1)
    if re.match(r"(label_values|label_names|metrics)\(", q):
        return None  # names no metric
    return q


def expressions(dash):
    """[(where, expr)] of every panel target and template variable."""
    out = []

    def panels(items, path):
        for p in items or []:
            title = p.get("title", "?")
            for t in p.get("targets", []) or []:
                if isinstance(t, dict) and t.get("expr"):
                    out.append(("panel '%s%s' %s" % (path, title, t.get("refId", "")), t["expr"]))
            panels(p.get("panels"), path + title + " / ")

    panels(dash.get("panels"), "")
    for v in (dash.get("templating") or {}).get("list", []):
        if v.get("type") == "query":
            e = template_expr(v.get("query")) or template_expr(v.get("definition"))
            if e:
                out.append(("variable '%s'" % v.get("name"), e))
    return out


def exported(scrape_text):
    """{sample name: set of its label names} of a /metrics answer."""
    names = {}
    for line in scrape_text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = IDENT.match(line)
        if not m:
            continue
        labels = set(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="', line[m.end():].split("} ")[0]))
        names.setdefault(m.group(0), set()).update(labels)
    return names


def promtool_check(exprs, problems):
    tool = shutil.which("promtool")
    if not tool:
        print("promtool not installed: expressions not parsed (Debian package prometheus)")
        return
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "rules.yml")
        with open(path, "w") as f:
            f.write("groups:\n- name: dashboard\n  rules:\n")
            for n, (_, e) in enumerate(exprs):
                f.write("  - record: dashboard_expr_%d\n    expr: %s\n" % (n, json.dumps(substitute(e))))
        r = subprocess.run([tool, "check", "rules", path], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            problems.append("promtool check rules: %s%s" % (r.stdout, r.stderr))


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        dash = json.load(f)
    with open(argv[2]) as f:
        have = exported(f.read())
    problems = []
    exprs = expressions(dash)
    used = set()
    for where, e in exprs:
        try:
            named = metrics_of(substitute(e))
        except ValueError as err:
            problems.append("%s: %s: %s" % (where, err, e))
            continue
        if not named:
            problems.append("%s: names no metric: %s" % (where, e))
        for metric, labels in named:
            used.add(metric)
            if metric not in have:
                problems.append("%s: %s is not exported: %s" % (where, metric, e))
                continue
            for label in labels:
                if label not in have[metric] and label not in TARGET_LABELS:
                    problems.append("%s: %s has no label %s: %s" % (where, metric, label, e))
    if not exprs:
        problems.append("no expression in the dashboard")
    promtool_check(exprs, problems)
    for p in problems:
        print(p)
    families = {re.sub(r"_(bucket|sum|count)$", "", n) for n in have}
    unused = sorted(f for f in families if not any(u == f or u.startswith(f + "_") for u in used))
    if unused:
        print("exported but not on the dashboard: %s" % ", ".join(unused))
    print("%d expressions checked, %d metric names%s" %
          (len(exprs), len(used), ", all exported" if not problems else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
