"""The Prometheus alert rules and the Grafana dashboard (``recipes/prometheus``,
``recipes/grafana``) are valid, their unit tests pass under promtool, and every metric,
label and label value they name is one flightcheck writes: the recipes cannot drift from
the exporter (``_report/prometheus_format.py``, ``_report/cluster_formats.py``). The live
test against a real Prometheus and node exporter is ``test_prometheus_live.py``."""

from __future__ import annotations

import re
import shlex
import subprocess
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import yaml

from flightcheck._cli.main import parse_args
from support import REPO
from support.prometheus import (
    DASHBOARD,
    RULES,
    RULES_TEST,
    Selector,
    binary,
    cluster_run,
    dashboard,
    dashboard_targets,
    node_runs,
    panels,
    parse_textfile,
    selectors,
    substitute,
    write_textfiles,
)

RECIPE_README = REPO / "recipes" / "prometheus" / "README.md"
#: what node exporter itself serves that the recipes may use (its textfile collector's)
NODE_EXPORTER_METRICS = ("node_textfile_scrape_error",)
#: labels Prometheus adds to every scraped series
TARGET_LABELS = {"instance", "job"}


@pytest.fixture(scope="module")
def emitted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, set[str]]]:
    """metric -> label -> values, over what flightcheck writes for every kind of node and
    for a cluster run: the vocabulary the recipes may use."""
    tmp = tmp_path_factory.mktemp("emitted")
    runs = {**node_runs(tmp), "cluster": cluster_run()}
    vocabulary: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in write_textfiles(runs, tmp).values():
        for s in parse_textfile(path.read_text()):
            labels = vocabulary[s.name]
            for k, v in s.labels.items():
                labels[k].add(v)
    for name in NODE_EXPORTER_METRICS:
        vocabulary[name] = defaultdict(set)  # present, with no labels of its own
    return vocabulary


def rules() -> list[dict]:
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def assert_known(sel: Selector, emitted: dict[str, dict[str, set[str]]], where: str) -> None:
    assert sel.metric in emitted, f"{where}: {sel.metric} is not a metric flightcheck writes"
    labels = emitted[sel.metric]
    for label, (op, value) in sel.matchers.items():
        if label in TARGET_LABELS:
            continue
        assert label in labels, f"{where}: {sel.metric} has no label {label} (it has {sorted(labels)})"
        if op in ("=", "!="):
            assert value in labels[label], f"{where}: {sel.metric}{{{label}}} is never {value!r}"


# ---------------------------------------------------------------- promtool


def test_alert_rules_pass_promtool_check():
    proc = subprocess.run(
        [binary("promtool"), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(rules())} rules found" in proc.stdout


def test_alert_rules_unit_tests_pass_promtool_test():
    """Healthy, fallbacks, not ready, unknown, stale, missing and cluster series: which
    alerts fire when (recipes/prometheus/flightcheck-alerts.test.yml)."""
    proc = subprocess.run(
        [binary("promtool"), "test", "rules", RULES_TEST.name],
        cwd=RULES_TEST.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_promtool_unit_tests_cover_every_alert():
    doc = yaml.safe_load(RULES_TEST.read_text())
    fired = {t["alertname"] for test in doc["tests"] for t in test.get("alert_rule_test", []) if t.get("exp_alerts")}
    assert fired == {r["alert"] for r in rules()}


# ---------------------------------------------------------------- the rules


def test_alert_rules_have_durations_severities_and_annotations():
    for r in rules():
        assert re.fullmatch(r"Flightcheck[A-Z]\w+", r["alert"]), r["alert"]
        assert re.fullmatch(r"\d+[mh]", r["for"]), (r["alert"], r.get("for"))
        assert r["labels"]["severity"] in ("critical", "warning"), r["alert"]
        assert {"summary", "description"} <= set(r["annotations"]), r["alert"]
    failing = next(r for r in rules() if r["alert"] == "FlightcheckErrorCheckFailing")
    # the alert says which check and how to find its fix
    assert {"code", "name", "subject"} <= set(re.findall(r"\$labels\.(\w+)", failing["annotations"]["summary"]))
    assert "flightcheck explain {{ $labels.code }}" in failing["annotations"]["description"]


def test_every_metric_and_label_the_rules_use_is_emitted(emitted):
    for r in rules():
        sels, grouping = selectors(r["expr"])
        assert sels, r["alert"]
        for sel in sels:
            assert_known(sel, emitted, r["alert"])
        known = TARGET_LABELS | {k for sel in sels for k in emitted[sel.metric]}
        assert grouping <= TARGET_LABELS | known, (r["alert"], grouping)
        # the annotations' $labels.x exist on the alert's series
        templated = set(re.findall(r"\$labels\.(\w+)", " ".join(r["annotations"].values())))
        assert templated <= known, (r["alert"], templated - known)


def test_every_series_of_the_promtool_tests_is_one_flightcheck_writes(emitted):
    doc = yaml.safe_load(RULES_TEST.read_text())
    for test in doc["tests"]:
        for series in test["input_series"]:
            (sel,), _ = selectors(series["series"])
            assert_known(sel, emitted, series["series"])
            absent = set(emitted[sel.metric]) - set(sel.matchers) - {"node"}
            assert not absent, f"{series['series']} lacks the labels {absent}"


# ---------------------------------------------------------------- the dashboard


def test_dashboard_is_valid_grafana_structure():
    dash = dashboard()
    assert dash["schemaVersion"] >= 36 and dash["uid"] and dash["title"]
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    ds = variables["datasource"]
    assert ds["type"] == "datasource" and ds["query"] == "prometheus"
    node = variables["instance"]
    assert node["type"] == "query" and node["datasource"]["uid"] == "${datasource}"
    assert node["includeAll"] and node["multi"] and node["allValue"] == ".*"

    all_panels = list(panels(dash))
    ids = [p["id"] for p in all_panels]
    assert len(ids) == len(set(ids)), Counter(ids).most_common(3)
    occupied: dict[tuple[int, int], str] = {}
    for p in all_panels:
        g = p["gridPos"]
        assert all(isinstance(g[k], int) for k in "xywh") and g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in occupied, f"{p['title']} overlaps {occupied[(x, y)]}"
                occupied[(x, y)] = p["title"]
        if p["type"] == "row":
            continue
        assert p["title"] and p["description"], p["id"]
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"], p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            assert t["expr"].strip() and t["datasource"] == p["datasource"], (p["title"], t["refId"])
            substitute(t["expr"], dash)  # every variable it names is defined

    titles = {p["title"] for p in all_panels}
    for wanted in ("Ready nodes", "Ready ratio", "Verdict per node", "Failing checks", "Failing checks by code"):
        assert wanted in titles
    assert {"Fallback steps", "Time since last run", "Run duration"} <= titles


def test_every_metric_and_label_the_dashboard_uses_is_emitted(emitted):
    dash = dashboard()
    for title, ref, target in dashboard_targets(dash):
        sels, grouping = selectors(substitute(target["expr"], dash))
        assert sels, (title, ref)
        for sel in sels:
            assert_known(sel, emitted, f"{title} {ref}")
        known = TARGET_LABELS | {k for sel in sels for k in emitted[sel.metric]}
        assert grouping <= known, (title, ref, grouping - known)
        legend = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")))
        assert legend <= known, (title, ref, legend)
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            m = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", v["query"]["query"])
            assert m and m.group(1) in emitted and m.group(2) in TARGET_LABELS | set(emitted[m.group(1)]), v


def test_dashboard_tables_show_the_labels_of_a_failing_check():
    dash = dashboard()
    by_title = {p["title"]: p for p in panels(dash)}
    failing = by_title["Failing checks"]
    (target,) = failing["targets"]
    assert target["format"] == "table" and target["instant"]
    (sel,), _ = selectors(substitute(target["expr"], dash))
    assert sel.metric == "flightcheck_check_status"
    shown = failing["transformations"][0]["options"]["indexByName"]
    assert {"instance", "code", "name", "severity", "subject"} <= set(shown)


# ---------------------------------------------------------------- the README


def test_recipe_readme_commands_parse_and_name_the_files():
    text = RECIPE_README.read_text()
    commands = [
        line.strip().removeprefix("$ ")
        for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", text, re.DOTALL)
        for line in block.splitlines()
        if line.strip().removeprefix("$ ").startswith("flightcheck ")
    ]
    assert commands, "the README shows no flightcheck command"
    textfile_dirs = set(re.findall(r"--collector\.textfile\.directory[= ](\S+)", text))
    assert textfile_dirs, "the README shows no --collector.textfile.directory"
    for command in commands:
        argv = shlex.split(command)
        ns = parse_args(argv[1:])
        assert ns.format == "prometheus", command
        assert str(Path(ns.output).parent) in textfile_dirs, (command, textfile_dirs)
    for path in (RULES, RULES_TEST, DASHBOARD):
        assert path.name in text, path.name
