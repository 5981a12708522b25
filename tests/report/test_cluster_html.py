"""``flightcheck cluster --format html``: the page's structure and counts, hostile names
made inert, nothing that could reach the network, and the page as headless Chromium
renders it (a screenshot and the DOM after the script ran) for 2, 16 and 256 nodes.

The fleets come from ``scripts/gen_fleet.py`` (the bundled examples with varied failures
and some skew); every page is rendered in this process except one run through the CLI."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, ClassVar

import pytest

from flightcheck import Intent
from flightcheck._checks.cluster.evaluate import ClusterReport, evaluate_cluster
from flightcheck._cluster.snapshots import load_dir
from flightcheck._report.cluster_html import esc, render
from support import REPO
from support.cli import cli
from support.png import read_png

if TYPE_CHECKING:
    from collections.abc import Callable


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_fleet", REPO / "scripts" / "gen_fleet.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gen = _load_generator()

#: a hostname and a file name an attacker chose: markup, a terminal escape (clear screen,
#: set the title), a right-to-left override
EVIL_HOST = "<script>document.documentElement.setAttribute('data-pwned','1')</script>\x1b[2J\x1b]0;own\x07\u202e"
EVIL_FILE = '"><img src=x onerror=alert(1)>'
EVIL_DRIVER = "590.48.01\"><script>alert('driver')</script>\x1b[31m"


@pytest.fixture(scope="module")
def fleets(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int, bool], tuple[ClusterReport, str]]:
    """(report, page) of an ``n``-node fleet, made once per module (256 nodes: ~0.4 s)."""
    made: dict[tuple[int, bool], tuple[ClusterReport, str]] = {}

    def get(n: int, hostile: bool = False) -> tuple[ClusterReport, str]:
        if (n, hostile) not in made:
            made[n, hostile] = fleet(tmp_path_factory.mktemp("fleet"), n, hostile=hostile)
        return made[n, hostile]

    return get


def fleet(tmp_path: Path, n: int, *, hostile: bool = False) -> tuple[ClusterReport, str]:
    """(report, page) of an ``n``-node fleet; ``hostile``: one node's hostname, file name
    and driver version are an attacker's."""
    d = tmp_path / f"fleet{n}"
    gen.write(n, d)
    if hostile:
        doc = json.loads((d / "node000.json").read_text())
        doc["host"]["hostname"] = EVIL_HOST
        doc["driver"]["version"] = EVIL_DRIVER
        (d / "node000.json").unlink()
        (d / f"{EVIL_FILE}.json").write_text(json.dumps(doc))
    loaded = load_dir(d)
    nodes = {name: facts for name, (facts, _p) in loaded.items()}
    source = {"kind": "facts-dir", "path": str(d), "files": {name: str(p) for name, (_f, p) in loaded.items()}}
    intent = Intent(tensor_parallel_size=8, data_parallel_size=n, nnodes=n)
    report = evaluate_cluster(nodes, intent, source=source)
    return report, render(report, now=0)


@dataclass
class El:
    tag: str
    attrs: dict[str, str]
    children: list[El] = field(default_factory=list)
    text: str = ""

    def all(self) -> list[El]:
        return [self, *(d for c in self.children for d in c.all())]

    def find(self, tag: str | None = None, **attrs: str) -> list[El]:
        want = {k.rstrip("_"): v for k, v in attrs.items()}
        return [
            e
            for e in self.all()
            if (tag is None or e.tag == tag)
            and all((v in e.attrs.get(k, "").split()) if k == "class" else e.attrs.get(k) == v for k, v in want.items())
        ]

    def content(self) -> str:
        return self.text + "".join(c.content() for c in self.children)


class _Tree(HTMLParser):
    VOID: ClassVar[frozenset[str]] = frozenset({"meta", "input", "br", "img", "link", "hr"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = El("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        el = El(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(el)
        if tag not in self.VOID:
            self.stack.append(el)

    def handle_endtag(self, tag: str) -> None:
        while len(self.stack) > 1:
            if self.stack.pop().tag == tag:
                break

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(El("#text", {}, text=data))


def parse(page: str) -> El:
    tree = _Tree()
    tree.feed(page)
    tree.close()
    return tree.root


def node_states(root: El) -> list[str]:
    return [e.attrs["data-state"] for e in root.find("details", class_="node")]


def row(root: El, name: str) -> El:
    [el] = [e for e in root.find("details", class_="node") if e.find("span", class_="n")[0].content() == name]
    return el


def chip(root: El, state: str) -> int:
    [button] = root.find("button", id=f"n-{state}")
    [num] = button.find("b", class_="num")
    return int(num.content())


# ------------------------------------------------------------------ structure and counts


def test_sixteen_nodes_grid_counts_order_and_fixes(fleets: Callable[..., tuple[ClusterReport, str]]) -> None:
    report, page = fleets(16)
    root = parse(page)
    states = node_states(root)
    verdicts = Counter(rep.verdict for rep in report.nodes.values())
    assert len(states) == 16 and Counter(states) == verdicts
    assert verdicts == {"ready": 11, "not-ready": 3, "unknown": 1, "ready-with-fallbacks": 1}
    for state in ("ready", "ready-with-fallbacks", "not-ready", "unknown"):
        assert chip(root, state) == verdicts[state]
    # the nodes the cross-node checks single out: FC801 (two of them) and FC804
    assert chip(root, "across") == 3
    [verdict] = root.find(id="verdict")
    assert verdict.attrs["data-verdict"] == "not-ready" and "exit 1" in verdict.content()

    # failing first: the not-ready nodes, and the ready ones FC801 singles out, lead the grid
    names = [e.find("span", class_="n")[0].content() for e in root.find("details", class_="node")]
    lead = set(names[:5])
    assert lead == {"gpu-b300-001", "gpu-b300-003", "gpu-b300-005", "gpu-b300-006", "gpu-b300-009"}
    assert names[5] == "gpu-b300-014" and names[6] == "gpu-b300-002"  # unknown, then fallbacks
    assert names[7:] == sorted(names[7:])  # the ready ones by name

    # a column per family some node evaluated, a glyph (not only a colour) in every cell
    header = [h.content() for h in root.find(class_="hd")[0].find("span", class_="h")]
    assert header == ["Node", "Verdict", "Toolchain", "GPUs", "Fabric", "Host", "Engine", "Across", "Findings"]
    n001 = row(root, "gpu-b300-001")
    cells = n001.find("span", class_="c")
    assert [c.content() for c in cells] == ["✗", "✓", "✓", "✓", "✓", "✓"]
    assert "k-fail" in cells[0].attrs["class"] and "FC101" in cells[0].attrs["title"]

    # the details hold each failing check with its fix
    body = n001.find(class_="body")[0].content()
    assert "FC101" in body and "FC103" in body and "export PATH=/srv/vllm/.venv/bin:$PATH" in body
    n005 = row(root, "gpu-b300-005")
    assert "mount -o remount,size=16G /dev/shm" in n005.content()
    # the dozen checks a missing GPU section leaves unknown read as one line
    n014 = row(root, "gpu-b300-014")
    assert len(n014.find(class_="body")[0].find(class_="f")) == 1

    # skew: the rows that differ first, each value with its nodes
    rows = root.find("table", class_="skew")[0].find("tr")[1:]
    differs = [r.find("th")[0].content() for r in rows if "differs" in r.attrs["class"]]
    assert differs == ["driver", "GPUs (visible)", "vllm", "fabric manager", "nvcc"]
    assert [r.attrs["class"] for r in rows[: len(differs)]] == ["differs"] * len(differs)
    driver = rows[0].content()
    assert "590.48.01" in driver and "580.95.05" in driver and "on 1 node: gpu-b300-003" in driver
    across = root.find(id="across")[0].content()
    assert "FC801" in across and "gpu-b300-006 runs vllm 0.32.1" in across and "FC804" in across
    findings = root.find(id="findings")[0].content()
    assert findings.count("FC601") == 1 and "on 1 node" in findings
    assert root.find(id="plan")  # FC304's fallback plan


def test_256_nodes_stay_compact_and_every_node_is_a_row(fleets: Callable[..., tuple[ClusterReport, str]]) -> None:
    report, page = fleets(256)
    root = parse(page)
    states = node_states(root)
    assert len(states) == 256 and Counter(states) == Counter(r.verdict for r in report.nodes.values())
    ranks = ["not-ready", "unreachable", "unknown", "ready-with-fallbacks", "ready", "skipped"]
    order = [
        ranks.index(e.attrs["data-state"])
        for e in root.find("details", class_="node")
        if e.attrs["data-across"] in ("ok", "none")
    ]
    singled = [e for e in root.find("details", class_="node") if e.attrs["data-across"] == "fail"]
    assert order == sorted(order) and singled  # failing first, among the nodes no cross-node check singles out
    # a node list that long folds into "and N more" (all names still in the page)
    assert "and 2" in root.find("table", class_="skew")[0].content()
    assert len(page.encode()) < 600_000  # measured 330 KB


def test_unreachable_and_skipped_nodes_get_rows(tmp_path: Path) -> None:
    d = tmp_path / "f"
    gen.write(2, d)
    nodes = {name: facts for name, (facts, _p) in load_dir(d).items()}
    report = evaluate_cluster(
        nodes,
        Intent(tensor_parallel_size=8, nnodes=4),
        unreachable={"gpu-b300-099": "timed out after 60 s"},
        skipped={"cpu-head": "no GPU"},
        expected=4,
        source={"kind": "ray", "address": "10.0.0.1:6379"},
    )
    root = parse(render(report))
    assert Counter(node_states(root))["unreachable"] == 1 and chip(root, "unreachable") == 1
    assert chip(root, "skipped") == 1
    [gone] = root.find("details", class_="node", **{"data-state": "unreachable"})
    assert "FC803" in gone.content() and "timed out after 60 s" in gone.content()
    assert "Ray cluster 10.0.0.1:6379" in page_text(root)


def page_text(root: El) -> str:
    return root.find("header")[0].content()


# ------------------------------------------------------------------ hostile input, no network


def test_hostile_names_and_versions_are_inert(fleets: Callable[..., tuple[ClusterReport, str]]) -> None:
    _report, page = fleets(2, True)
    for raw in (
        EVIL_HOST,
        EVIL_FILE,
        EVIL_DRIVER,
        "<script>alert",
        "<img",
        "onerror=alert(1)>",
        "\x1b",
        "\x07",
        "\u202e",
    ):
        assert raw not in page, raw
    assert page.count("<script") == 1  # ours
    assert "&lt;script&gt;document.documentElement" in page  # the name shown, as text
    assert "\\x1b[2J" in page and "\\u202e" in page  # the escape sequence and the override, visible
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;.json" in page  # the file name, as text
    root = parse(page)
    assert not root.find("img") and len(root.find("script")) == 1
    assert esc("a<b>&\"'\x1b\x9b\u200f") == "a&lt;b&gt;&amp;&quot;&#x27;\\x1b\\x9b\\u200f"


def test_nothing_in_the_page_can_reach_the_network(fleets: Callable[..., tuple[ClusterReport, str]]) -> None:
    _report, page = fleets(16)
    root = parse(page)
    for el in root.all():
        for name, value in el.attrs.items():
            if name in ("src", "href", "action", "formaction", "data", "poster", "srcset", "background", "xlink:href"):
                assert name == "href" and value.startswith("#"), (el.tag, name, value)
    assert not root.find("link") and not root.find("img") and not root.find("iframe") and not root.find("object")
    assert all("src" not in s.attrs for s in root.find("script"))
    [style] = root.find("style")
    [script] = root.find("script")
    css, js = style.content(), script.content()
    assert "url(" not in css and "@import" not in css and "@font-face" not in css
    assert not re.search(r"https?://", css + js) and "fetch(" not in js and "XMLHttpRequest" not in js
    # the policy lets nothing load and runs only this style and this script
    [csp] = root.find("meta", **{"http-equiv": "Content-Security-Policy"})
    policy = csp.attrs["content"]
    assert "default-src 'none'" in policy and "img-src 'none'" in policy

    def sha(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    assert f"style-src {sha(css)};" in policy and f"script-src {sha(js)};" in policy


def test_cli_writes_the_page_and_refuses_an_unknown_format(tmp_path: Path) -> None:
    d = tmp_path / "facts"
    gen.write(2, d)
    out = tmp_path / "fleet.html"
    proc = cli("cluster", "--facts-dir", str(d), "-tp", "8", "--format", "html", "-o", str(out))
    assert proc.returncode == 1 and proc.stdout == "" and "Traceback" not in proc.stderr, proc.stderr
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert Counter(node_states(parse(page))) == {"ready": 1, "not-ready": 1}
    bad = cli("cluster", "--facts-dir", str(d), "--format", "pdf")
    assert bad.returncode == 2 and "html" in bad.stderr and "Traceback" not in bad.stderr
    assert "self-contained page" in cli("cluster", "--help").stdout


def test_the_readme_shows_the_screenshot_and_the_command_that_made_it() -> None:
    readme = (REPO / "README.md").read_text()
    shot = REPO / "docs" / "img" / "cluster-html-16.png"
    assert "](docs/img/cluster-html-16.png)" in readme and "--screenshot=docs/img/cluster-html-16.png" in readme
    assert "python scripts/gen_fleet.py 16 facts" in readme and "--format html -o fleet.html" in readme
    data = shot.read_bytes()
    assert len(data) < 300_000
    png = read_png(data, rows=0)
    assert (png.width, png.height) == (1400, 1250)


# ------------------------------------------------------------------ in headless Chromium

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

#: the light theme's fills of a passing and of a failing cell (--okb, --failb)
OK_FILL, FAIL_FILL = bytes.fromhex("dafbe1"), bytes.fromhex("ffebe9")


def chromium(tmp_path: Path, page: Path, png: Path, fragment: str = "") -> str:
    """The DOM after load (script run) and a 1400x900 screenshot of ``page``."""
    assert CHROMIUM
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home), "XDG_CACHE_HOME": str(home)}
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--screenshot={png}",
        "--window-size=1400,900",
        "--dump-dom",
        page.as_uri() + fragment,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
@pytest.mark.parametrize("n", [2, 16, 256])
def test_the_page_in_headless_chromium(
    tmp_path: Path, n: int, fleets: Callable[..., tuple[ClusterReport, str]]
) -> None:
    report, html = fleets(n, n == 2)
    page = tmp_path / "fleet.html"
    page.write_text(html)
    png = tmp_path / "fleet.png"
    # 256 nodes: through a link to the failing nodes only (one Chromium run less)
    fragment = "#only=not-ready" if n == 256 else ""
    dom = chromium(tmp_path, page, png, fragment)
    # the script ran (the policy's hash matched) and counted the nodes it shows
    html_tag = re.search(r"<html[^>]*>", dom)
    assert html_tag and html_tag.group() == '<html lang="en" data-js="ready">'  # and no data-pwned
    shown = sum(rep.verdict == "not-ready" for rep in report.nodes.values()) if fragment else n
    assert f'<b id="shown">{shown}</b>' in dom and dom.count("<script") == 1
    rows = re.findall(r'<details class="node[^>]*>', dom)
    assert len(rows) == n and sum(" hidden" in r for r in rows) == n - shown
    assert ('aria-pressed="true"' in dom) == bool(fragment)
    shot = read_png(png.read_bytes(), rows=450)
    assert (shot.width, shot.height) == (1400, 900)
    # not blank, and styled: the stylesheet applied (its hash matched), cells filled
    assert len(shot.colours) > 50 and OK_FILL in shot.colours and FAIL_FILL in shot.colours
