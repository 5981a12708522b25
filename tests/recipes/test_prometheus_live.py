"""The Prometheus and Grafana recipes end to end: the textfiles real ``flightcheck check``
runs write, served by real node exporters (one per node, textfile collector only), scraped
every second by a real Prometheus with ``recipes/prometheus/flightcheck-alerts.yml`` loaded,
all on 127.0.0.1 ports the test picks. Every query of the Grafana dashboard then answers
with the series and values the nodes' runs imply, and the alerts the failing nodes raise
are pending (their ``for:`` is minutes; ``promtool test rules`` tests them firing).

Nodes: healthy (b300), fallbacks (b300-multicast-401), failing (b300-no-toolkit), unknown
(the driver unread: exit 3), stale (b300, its run moved 8 hours back) and missing (node
exporter with an empty textfile directory). Skips where prometheus or node exporter is not
installed. About 5-10 s on one core, most of it Prometheus starting."""

from __future__ import annotations

import json
import math
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from flightcheck import __version__
from support.prometheus import (
    RULES,
    Sample,
    binary,
    dashboard,
    dashboard_targets,
    node_runs,
    parse_textfile,
    substitute,
    write_textfiles,
)

STALE_BY_S = 8 * 3600
DEADLINE_S = 60.0  # generous on a loaded CI machine; a healthy run takes a few seconds


def free_ports(n: int) -> list[int]:
    """n distinct ports free on 127.0.0.1 (bound to port 0 together, then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def http_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:  # a server this test started, on 127.0.0.1
        return json.load(resp)


def settle(probe: Callable[[], Any], done: Callable[[Any], bool]) -> Any:
    """Poll ``probe`` until ``done`` says its value is the one awaited, or the deadline
    passes: the last value either way (the caller asserts on it, so a miss shows it)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            value = probe()
        except OSError as exc:  # not listening yet
            value = exc
        if (not isinstance(value, OSError) and done(value)) or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


@dataclass
class Stack:
    """The running Prometheus, what each node's file holds, and how to ask."""

    url: str
    samples: dict[str, list[Sample]]  # node -> its textfile's samples (the missing node: none)
    logs: Callable[[], str]

    def query(self, expr: str) -> list[dict[str, Any]]:
        body = http_json(f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        assert body["status"] == "success", body
        return body["data"]["result"]

    def query_range(self, expr: str, seconds: float = 10) -> list[dict[str, Any]]:
        end = time.time()
        args = {"query": expr, "start": end - seconds, "end": end, "step": "1"}
        body = http_json(f"{self.url}/api/v1/query_range?" + urllib.parse.urlencode(args))
        assert body["status"] == "success", body
        return body["data"]["result"]

    def value(self, node: str, metric: str, **labels: str) -> float:
        """A sample of a node's file."""
        (s,) = [s for s in self.samples[node] if s.name == metric and labels.items() <= s.labels.items()]
        return s.value

    def checks(self, status: int) -> set[tuple[str, str, str, str]]:
        """(node, code, severity, subject) of every check with this status, from the files."""
        return {
            (node, s.labels["code"], s.labels["severity"], s.labels["subject"])
            for node, samples in self.samples.items()
            for s in samples
            if s.name == "flightcheck_check_status" and s.value == status
        }


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus = binary("prometheus")
    node_exporter = binary("prometheus-node-exporter")
    tmp = tmp_path_factory.mktemp("prometheus-live")

    paths = write_textfiles(node_runs(tmp), tmp / "textfiles")
    stale = paths["stale"]
    stale.write_text(
        "\n".join(
            f"flightcheck_last_run_timestamp_seconds {float(line.split()[1]) - STALE_BY_S}"
            if line.startswith("flightcheck_last_run_timestamp_seconds ")
            else line
            for line in stale.read_text().splitlines()
        )
        + "\n"
    )
    (tmp / "textfiles" / "missing").mkdir()
    dirs = {p.parent.name: p.parent for p in paths.values()} | {"missing": tmp / "textfiles" / "missing"}
    samples = {node: parse_textfile(p.read_text()) for node, p in paths.items()} | {"missing": []}

    ports = free_ports(len(dirs) + 1)
    procs: list[subprocess.Popen[bytes]] = []
    log_files: list[Path] = []

    def start(name: str, argv: list[str]) -> None:
        log = tmp / f"{name}.log"
        log_files.append(log)
        with log.open("wb") as fh:
            procs.append(subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, cwd=tmp))

    def logs() -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in log_files)

    targets = []
    try:
        for (node, directory), port in zip(dirs.items(), ports, strict=False):
            start(
                f"node-exporter-{node}",
                [
                    node_exporter,
                    "--collector.disable-defaults",
                    "--collector.textfile",
                    f"--collector.textfile.directory={directory}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--web.disable-exporter-metrics",
                    "--log.level=warn",
                ],
            )
            # the instance label is the node's name, as a relabelled fleet would have it
            targets.append({"targets": [f"127.0.0.1:{port}"], "labels": {"instance": node}})
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(RULES)],
            "scrape_configs": [{"job_name": "node", "static_configs": targets}],
        }
        (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
        url = f"http://127.0.0.1:{ports[-1]}"
        start(
            "prometheus",
            [
                prometheus,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{ports[-1]}",
                "--log.level=warn",
            ],
        )

        def health() -> dict[str, str]:
            active = http_json(f"{url}/api/v1/targets")["data"]["activeTargets"]
            return {t["labels"]["instance"]: t["health"] for t in active}

        up = settle(health, lambda h: h == dict.fromkeys(dirs, "up"))
        assert up == dict.fromkeys(dirs, "up"), f"the node exporters were not all scraped: {up!r}\n{logs()}"
        yield Stack(url, samples, logs)
    finally:
        _stop(procs)


# ---------------------------------------------------------------- alerts


#: (alert, node, code) the nodes raise: the failing node's every failing error check
def expected_alerts(stack: Stack) -> set[tuple[str, str, str]]:
    errors = {(node, code) for node, code, severity, _ in stack.checks(1) if severity == "error"}
    assert {("failing", "FC101"), ("failing", "FC103")} <= errors  # b300-no-toolkit: no nvcc, no ninja
    return {
        ("FlightcheckNodeNotReady", "failing", ""),
        *{("FlightcheckErrorCheckFailing", node, code) for node, code in errors},
        ("FlightcheckFallbacksApplied", "fallbacks", ""),
        ("FlightcheckUnknown", "unknown", ""),
        ("FlightcheckMetricsStale", "stale", ""),
        ("FlightcheckMetricsMissing", "missing", ""),
    }


def test_alerts_are_pending_for_exactly_the_failing_nodes(stack):
    expected = expected_alerts(stack)

    def alerts() -> set[tuple[str, str, str, str]]:
        return {
            (a["metric"]["alertname"], a["metric"]["instance"], a["metric"].get("code", ""), a["metric"]["alertstate"])
            for a in stack.query("ALERTS")
        }

    # every rule has a `for:` of minutes: pending, not yet firing; the healthy node raises nothing
    want = {(*a, "pending") for a in expected}
    assert settle(alerts, lambda got: got == want) == want, stack.logs()


def test_every_rule_evaluates_without_error(stack):
    wanted = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}

    def rules() -> list[dict[str, Any]]:
        return [r for g in http_json(f"{stack.url}/api/v1/rules")["data"]["groups"] for r in g["rules"]]

    def not_ready(rules: list[dict[str, Any]]) -> set[str]:
        (rule,) = [r for r in rules if r["name"] == "FlightcheckNodeNotReady"]
        return {a["labels"]["instance"] for a in rule["alerts"]}

    # evaluated after every node was scraped: the failing node's alert is there
    rules = settle(rules, lambda rs: not_ready(rs) == {"failing"})
    assert {r["name"] for r in rules} == wanted
    for r in rules:
        assert r["health"] == "ok" and not r.get("lastError"), r
    by_name = {r["name"]: r for r in rules}
    assert by_name["FlightcheckClusterNotReady"]["state"] == "inactive"  # no cluster file here
    assert not_ready(rules) == {"failing"}  # the unknown node is FlightcheckUnknown's, not a stop


# ---------------------------------------------------------------- the dashboard


def by_label(result: list[dict[str, Any]], label: str) -> dict[str, float]:
    out = {r["metric"].get(label, ""): float(r["value"][1]) for r in result}
    assert len(out) == len(result), result  # one series per value of the label
    return out


def single(result: list[dict[str, Any]]) -> float:
    (r,) = result
    return float(r["value"][1])


NODES_REPORTING = ("healthy", "fallbacks", "failing", "unknown", "stale")


def expectations(s: Stack) -> dict[tuple[str, str], Callable[[list[dict[str, Any]]], None]]:
    """(panel, refId) -> an assert on the instant query's result, from the nodes' files."""
    ready = sum(s.value(n, "flightcheck_ready") for n in NODES_REPORTING)
    assert ready == 3  # healthy, fallbacks, stale

    def equal(expected: Any, read: Callable[[list[dict[str, Any]]], Any]) -> Callable[[list[dict[str, Any]]], None]:
        def check(result: list[dict[str, Any]]) -> None:
            assert read(result) == expected

        return check

    def per_node(metric: str, **labels: str) -> dict[str, float]:
        return {n: s.value(n, metric, **labels) for n in NODES_REPORTING}

    def ages(result: list[dict[str, Any]]) -> None:
        age = by_label(result, "instance")
        assert set(age) == set(NODES_REPORTING)
        assert STALE_BY_S <= age["stale"] < STALE_BY_S + DEADLINE_S + 600
        assert all(0 <= age[n] < 600 for n in NODES_REPORTING if n != "stale"), age

    def oldest(result: list[dict[str, Any]]) -> None:
        assert STALE_BY_S <= single(result) < STALE_BY_S + DEADLINE_S + 600

    def checks_table(status: int) -> Callable[[list[dict[str, Any]]], None]:
        def check(result: list[dict[str, Any]]) -> None:
            rows = {
                (r["metric"]["instance"], r["metric"]["code"], r["metric"]["severity"], r["metric"]["subject"])
                for r in result
            }
            assert rows == s.checks(status) and len(rows) == len(result)
            assert all(r["metric"]["name"] for r in result)

        return check

    failing = s.checks(1)
    assert ("fallbacks", "FC304", "warning", "host") in failing  # the broken multicast team
    assert ("unknown", "FC201", "error", "host") in s.checks(2)  # the driver unread

    def by_code(result: list[dict[str, Any]]) -> None:
        counts = {(r["metric"]["code"], r["metric"]["severity"]): float(r["value"][1]) for r in result}
        expected: dict[tuple[str, str], float] = {}
        for _, code, severity, _ in failing:
            expected[code, severity] = expected.get((code, severity), 0) + 1
        assert counts == expected and counts["FC101", "error"] == 1

    def severities(result: list[dict[str, Any]]) -> None:
        got = by_label(result, "severity")
        assert got == {sev: sum(per_node("flightcheck_failures", severity=sev).values()) for sev in got}
        assert got["error"] == 2 and set(got) == {"error", "warning", "info"}

    def durations(result: list[dict[str, Any]]) -> None:
        got = by_label(result, "instance")
        assert got == pytest.approx(per_node("flightcheck_run_duration_seconds")) and all(v > 0 for v in got.values())

    return {
        ("Ready nodes", "A"): equal(ready, single),
        ("Ready nodes", "B"): equal(len(NODES_REPORTING), single),
        ("Ready ratio", "A"): equal(pytest.approx(ready / len(NODES_REPORTING)), single),
        ("Nodes by verdict", "A"): equal(
            {"ready": 2, "ready-with-fallbacks": 1, "not-ready": 1, "unknown": 1}, lambda r: by_label(r, "verdict")
        ),
        ("Nodes without flightcheck metrics", "A"): equal(1, single),
        ("Oldest run", "A"): oldest,
        ("Verdict per node", "A"): equal(
            {"healthy": "ready", "fallbacks": "ready-with-fallbacks", "failing": "not-ready"}
            | {"unknown": "unknown", "stale": "ready"},
            lambda r: {x["metric"]["instance"]: x["metric"]["verdict"] for x in r},
        ),
        ("Verdict per node", "B"): equal(
            {"healthy": 0, "fallbacks": 0, "failing": 1, "unknown": 3, "stale": 0}, lambda r: by_label(r, "instance")
        ),
        ("Verdict per node", "C"): equal(
            per_node("flightcheck_failures", severity="error"), lambda r: by_label(r, "instance")
        ),
        ("Verdict per node", "D"): equal(
            per_node("flightcheck_failures", severity="warning"), lambda r: by_label(r, "instance")
        ),
        ("Verdict per node", "E"): equal(per_node("flightcheck_fallback_steps"), lambda r: by_label(r, "instance")),
        ("Verdict per node", "F"): ages,
        ("Failing checks", "A"): checks_table(1),
        ("Failing checks by code", "A"): by_code,
        ("Unknown checks", "A"): checks_table(2),
        ("Fallback steps", "A"): equal(per_node("flightcheck_fallback_steps"), lambda r: by_label(r, "instance")),
        ("Failing checks by severity", "A"): severities,
        ("Time since last run", "A"): ages,
        ("Run duration", "A"): durations,
        ("flightcheck versions", "A"): equal(
            {(__version__, "vllm"): 5.0},
            lambda r: {(x["metric"]["version"], x["metric"]["engine"]): float(x["value"][1]) for x in r},
        ),
    }


def test_every_dashboard_query_answers_with_the_nodes_values(stack):
    dash = dashboard()
    checks = expectations(stack)
    targets = dashboard_targets(dash)
    # a new panel needs its expectation here, and a removed one takes it along
    assert {(title, ref) for title, ref, _ in targets} == set(checks)
    for title, ref, target in targets:
        expr = substitute(target["expr"], dash)
        result = stack.query(expr)
        assert result, f"{title} {ref}: {expr} answers nothing"
        checks[title, ref](result)
        if target.get("range"):
            # a time series panel asks over a range: every step has a value
            series = stack.query_range(expr, seconds=3)
            assert len(series) == len(result), (title, ref)
            assert all(not math.isnan(float(v)) for s in series for _, v in s["values"]), (title, ref)


def test_the_node_variable_lists_every_reporting_node(stack):
    (variable,) = [v for v in dashboard()["templating"]["list"] if v["name"] == "instance"]
    metric = variable["query"]["query"].removeprefix("label_values(").split(",")[0]
    body = http_json(f"{stack.url}/api/v1/label/instance/values?" + urllib.parse.urlencode({"match[]": metric}))
    assert sorted(body["data"]) == sorted(NODES_REPORTING)
