"""``flightcheck prepare`` without a compile: the plan, the wheelhouse (a PEP 503 index on
127.0.0.1, and none), the bundle's manifest and the offline install with its refusals.
The real compile is tests/conformance/test_prepare_real.py."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
from pathlib import Path

import pytest

from flightcheck._cli.main import main
from flightcheck._collect.toolchain import prepared_bundle
from flightcheck._prepare import plan as _plan
from flightcheck._prepare import wheels as _wheels
from flightcheck._prepare.elf import needed
from flightcheck._vocabulary.intent import Intent


@pytest.fixture
def engine_py(tmp_path: Path, fake_site: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An interpreter that sees the fake site: a link to this Python (outside any venv, so
    it is a child, never this process) with PYTHONPATH at the site."""
    link = tmp_path / "bin" / "python"
    link.parent.mkdir()
    link.symlink_to(os.path.realpath(sys.executable))
    monkeypatch.setenv("PYTHONPATH", str(fake_site))
    return str(link)


def test_dry_run_plans_the_launch_and_names_what_cannot_be_prepared(engine_py: str, capsys) -> None:
    rc = main(
        [
            "prepare",
            "--arch",
            "sm_103a",
            "--python",
            engine_py,
            "--dry-run",
            "--format",
            "json",
            "--",
            "vllm",
            "serve",
            "/no/model",
            "-tp",
            "8",
            "-q",
            "fp8",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["arch"] == "10.3a" and out["flashinfer"] == "0.7.2.post1" and out["torch_cuda"] == "13.0"
    names = [m["name"] for m in out["modules"]]
    assert names[:2] == ["sampling", "topk"]
    assert {"trtllm_comm", "trtllm_mnnvl_comm", "fused_moe_trtllm_sm100"} <= set(names)  # TP 8, FP8 MoE
    assert "flashinfer-jit-cache-sm103a==0.7.2.post1+cu130" in out["wheels"]
    assert out["index_url"] == "https://flashinfer.ai/whl/cu130"
    assert {"what": "DeepGEMM", "avoid": "VLLM_USE_DEEP_GEMM=0"}.items() <= out["not_preparable"][0].items()


def test_dry_run_text_on_a_b200_with_one_gpu(engine_py: str, capsys) -> None:
    assert main(["prepare", "--arch", "10.0", "--python", engine_py, "--dry-run", "--", "vllm", "serve", "m"]) == 0
    text = capsys.readouterr().out
    assert "prepare for SM 10.0a" in text and "trtllm_comm" not in text and "nothing built" in text


@pytest.mark.parametrize("argv", [["--arch", "b300"], ["--arch", "10.3a", "--modules", "nope"], ["--arch", "10.3a"]])
def test_bad_input_is_one_line_and_exit_2(engine_py: str, argv: list[str], capsys) -> None:
    rc = main(["prepare", *argv, "--python", engine_py, "--", "vllm", "serve", "m"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("flightcheck: error:") and err.count("\n") == 1, err


def test_the_node_arch_comes_from_its_snapshot(tmp_path: Path) -> None:
    node = tmp_path / "node.json"
    node.write_text(json.dumps({"gpus": [{"compute_capability": "10.3"}] * 8}))
    assert _plan.arch_from_node(str(node)) == "10.3a"
    from flightcheck._examples import load_example

    node.write_text(json.dumps(load_example("b300")[0][0]))  # a whole `flightcheck collect` snapshot
    assert _plan.arch_from_node(str(node)) == "10.3a"
    node.write_text(json.dumps({"gpus": [{"compute_capability": "10.3"}, {"compute_capability": "10.0"}]}))
    with pytest.raises(Exception, match="several archs"):
        _plan.arch_from_node(str(node))


def test_the_wheelhouse_fills_from_a_local_index(tmp_path: Path, local_index: str) -> None:
    got = _wheels.fetch(
        sys.executable,
        ["flashinfer-cubin==0.7.2.post1", "flashinfer-jit-cache==0.7.2.post1+cu130"],
        local_index,
        str(tmp_path / "wheels"),
        dict(os.environ),
    )
    assert got[0].file == "flashinfer_cubin-0.7.2.post1-py3-none-any.whl"
    assert (tmp_path / "wheels" / got[0].file).is_file()
    assert got[1].file is None and got[1].skipped and "not on" in got[1].skipped


def test_without_network_the_wheels_are_skipped_and_said_so(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    got = _wheels.fetch(
        sys.executable,
        ["flashinfer-cubin==0.7.2.post1"],
        f"http://127.0.0.1:{port}/simple",
        str(tmp_path / "w"),
        dict(os.environ),
    )
    assert got[0].file is None and got[0].skipped.startswith("no network:")


def test_make_bundle_without_modules_writes_the_wheels_and_the_manifest(
    engine_py: str, tmp_path: Path, local_index: str
) -> None:
    from flightcheck._prepare.make import make_bundle

    plan = _plan.make_plan("10.3a", engine_py, Intent(), dict(os.environ), index_url=local_index)
    plan.modules = []  # nothing compiled here: the real compile is the conformance test
    said: list[str] = []
    manifest = make_bundle(plan, str(tmp_path / "b"), dict(os.environ), said.append)
    on_disk = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert on_disk["format"] == 1 and on_disk["flashinfer"] == "0.7.2.post1" and on_disk["torch_cuda"] == "13.0"
    files = [w["file"] for w in manifest["wheels"] if w["file"]]
    assert files == ["flashinfer_cubin-0.7.2.post1-py3-none-any.whl"]
    assert manifest["complete"] is False  # no module built: JIT stays on
    assert any("skipped" in line for line in said)


def _bundle(tmp_path: Path, *, arch: str = "10.3a", cuda: str = "13.0", fi: str = "0.7.2.post1") -> Path:
    b = tmp_path / f"bundle-{arch}-{cuda}-{fi}"
    (b / "aot" / "sampling").mkdir(parents=True)
    so = b / "aot" / "sampling" / "sampling.so"
    so.write_bytes(b"\x7fELF-not-really-a-module")
    manifest = {
        "format": 1,
        "arch": arch,
        "flashinfer": fi,
        "torch_cuda": cuda,
        "complete": True,
        "modules": [
            {
                "name": "sampling",
                "path": "aot/sampling/sampling.so",
                "archs": [arch],
                "sha256": hashlib.sha256(so.read_bytes()).hexdigest(),
            }
        ],
        "not_prepared": [{"what": "DeepGEMM", "why": "-", "avoid": "VLLM_USE_DEEP_GEMM=0"}],
    }
    (b / "manifest.json").write_text(json.dumps(manifest))
    return b


@pytest.mark.parametrize(
    ("kwargs", "gpu", "words"),
    [
        ({"arch": "10.3a"}, "10.0", "error 209"),
        ({"cuda": "12.9"}, None, "error 35"),
        ({"fi": "0.7.1"}, None, "FlashInfer 0.7.1"),
    ],
)
def test_install_refuses_a_bundle_that_does_not_fit(
    engine_py: str, fake_site: Path, tmp_path: Path, kwargs: dict, gpu: str | None, words: str, capsys
) -> None:
    b = _bundle(tmp_path, **kwargs)
    rc = main(["prepare", "install", str(b), "--python", engine_py, *(["--gpu-cc", gpu] if gpu else [])])
    err = capsys.readouterr().err
    assert rc == 2 and words in err
    assert not (fake_site / "flashinfer" / "data" / "aot").exists()  # nothing placed


def test_install_refuses_a_damaged_module(engine_py: str, fake_site: Path, tmp_path: Path, capsys) -> None:
    b = _bundle(tmp_path)
    (b / "aot" / "sampling" / "sampling.so").write_bytes(b"tampered")
    assert main(["prepare", "install", str(b), "--python", engine_py]) == 2
    assert "sha256" in capsys.readouterr().err


def test_install_places_the_modules_and_prints_the_launch_environment(
    engine_py: str, fake_site: Path, tmp_path: Path, capsys
) -> None:
    b = _bundle(tmp_path)
    rc = main(["prepare", "install", str(b), "--python", engine_py, "--gpu-cc", "10.3"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    placed = fake_site / "flashinfer" / "data" / "aot" / "sampling" / "sampling.so"
    assert placed.read_bytes() == (b / "aot" / "sampling" / "sampling.so").read_bytes()
    for line in ("export FLASHINFER_NO_DOWNLOAD=1", "export FLASHINFER_DISABLE_JIT=1", "export VLLM_USE_DEEP_GEMM=0"):
        assert line in out
    assert "no wheels" in err
    # the collector reads the record the install left: what FC131 judges
    got = prepared_bundle({"dirs": {"flashinfer": str(fake_site / "flashinfer")}})
    assert got is not None and got["arch"] == "10.3a" and got["complete"] is True
    assert got["modules"] == [{"name": "sampling", "archs": ["10.3a"], "present": True}]
    placed.unlink()
    assert prepared_bundle({"dirs": {"flashinfer": str(fake_site / "flashinfer")}})["modules"][0]["present"] is False


def test_a_bad_record_is_a_problem_not_a_crash(fake_site: Path) -> None:
    aot = fake_site / "flashinfer" / "data" / "aot"
    aot.mkdir(parents=True)
    (aot / "flightcheck-bundle.json").write_text("[1, 2")
    got = prepared_bundle({"dirs": {"flashinfer": str(fake_site / "flashinfer")}})
    assert got is not None and got["problem"]


def test_needed_libraries_are_read_from_the_dynamic_section(tmp_path: Path) -> None:
    assert "libc.so.6" in needed(os.path.realpath("/bin/ls"))
    bad = tmp_path / "x.so"
    bad.write_bytes(b"\x7fELF\x02\x01" + b"\0" * 10)
    assert needed(str(bad)) == [] and needed(str(tmp_path / "missing")) == []


def test_a_module_name_that_is_a_path_is_refused(engine_py: str, fake_site: Path, tmp_path: Path, capsys) -> None:
    b = _bundle(tmp_path)
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["modules"][0]["name"] = "../../../escape"
    (b / "manifest.json").write_text(json.dumps(manifest))
    assert main(["prepare", "install", str(b), "--python", engine_py]) == 2
    assert "not a FlashInfer module name" in capsys.readouterr().err
    assert not (fake_site / "flashinfer" / "data").exists() and not (tmp_path / "escape").exists()
