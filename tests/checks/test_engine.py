"""FC701–FC702 on recorded nodes: the engine is where it will run, with the FlashInfer it
declares."""

from __future__ import annotations

from flightcheck._checks.engine.flashinfer_api import missing_apis
from flightcheck._knowledge import atlas
from support.evaluation import assert_fires, assert_silent, facts, host_doc, results, statuses
from support.toolchain import sections

TP8 = {"tensor_parallel_size": 8}


def test_healthy_engine():
    f = facts("b300", **sections("healthy-cu131"))
    assert statuses(f, "FC701", **TP8) == {"pass"}
    assert statuses(f, "FC702", **TP8) == {"pass"}


def test_fc701_engine_missing_names_the_interpreter_and_the_other_engine():
    f = facts("b300", **sections("sglang-only"))
    (r,) = assert_fires("FC701", f, engine="vllm", **TP8)
    assert (
        r.message == "vllm is not installed in /opt/serve/venv/bin/python3 (sglang 0.5.23 is there: --engine sglang?)"
    )
    assert r.fix.endswith("/opt/serve/venv/bin/python3 -m pip install vllm")
    assert "--python" in r.fix
    assert_silent("FC701", f, engine="sglang", **TP8)
    assert statuses(f, "FC702", engine="vllm", **TP8) == {"skip"}


def test_fc701_unknown_interpreter_is_unknown_not_a_pass():
    doc = sections("healthy-cu131")
    doc["python"] = {"executable": "/opt/serve/venv/bin/python3", "packages": None}
    doc["unavailable"] = {
        "python.packages": "the engine's interpreter /opt/serve/venv/bin/python3 could not run: timed out after 20.0s"
    }
    assert statuses(facts("b300", **doc), "FC701", **TP8) == {"unknown"}


def test_fc702_flashinfer_other_than_declared_by_metadata():
    doc = sections("healthy-cu131")
    doc["python"]["packages"]["flashinfer-python"] = "0.7.1"
    (r,) = assert_fires("FC702", facts("b300", **doc), **TP8)
    assert r.severity.value == "warning"
    assert r.message == "flashinfer-python 0.7.1; vllm 0.33.0 declares flashinfer-python==0.7.2.post1 (vllm's metadata)"
    assert r.fix.startswith("/opt/serve/venv/bin/python3 -m pip install flashinfer-python==0.7.2.post1")
    assert "FC110" in r.fix  # cubin installed too: keep it in step


def test_fc702_declared_range_is_honoured():
    doc = sections("healthy-cu131")
    doc["python"]["engine_requires"] = "flashinfer-python>=0.7,<0.8"
    assert_silent("FC702", facts("b300", **doc), **TP8)
    doc["python"]["packages"]["flashinfer-python"] = "0.8.0"
    (r,) = assert_fires("FC702", facts("b300", **doc), **TP8)
    assert "'flashinfer-python<0.8,>=0.7'" in r.fix or "'flashinfer-python>=0.7,<0.8'" in r.fix


def test_fc702_table_is_used_for_snapshots_without_engine_requires():
    doc = sections("healthy-cu131")
    doc["python"]["engine"] = doc["python"]["engine_requires"] = None  # recorded before both fields existed
    doc["python"]["packages"]["flashinfer-python"] = "0.6.12"
    (r,) = assert_fires("FC702", facts("b300", **doc), **TP8)
    assert "requirements/cuda.txt" in r.message
    doc["python"]["packages"]["vllm"] = "0.34.0"  # not in the table: say so, do not guess
    assert statuses(facts("b300", **doc), "FC702", **TP8) == {"skip"}


def test_fc702_metadata_that_declares_no_flashinfer_is_not_overridden_by_the_table():
    doc = sections("healthy-cu131")
    doc["python"]["engine_requires"] = None  # collected for vllm: its metadata names no flashinfer-python
    doc["python"]["packages"]["flashinfer-python"] = "0.6.12"
    (r,) = results(facts("b300", **doc), **TP8)["FC702"]
    assert r.status.value == "skip" and "declares no flashinfer-python requirement" in r.message


def test_fc702_requirement_recorded_for_another_engine_is_not_applied():
    doc = sections("healthy-cu131")
    doc["python"]["engine"] = "sglang"
    doc["python"]["engine_requires"] = "flashinfer-python==0.1.0"
    assert_silent("FC702", facts("b300", **doc), **TP8)


def test_engine_headline():
    from flightcheck import Intent, evaluate

    rep = evaluate(facts("b300", **sections("healthy-cu131")), Intent(tensor_parallel_size=8))
    assert (
        rep.summaries["FC7"] == "vllm 0.33.0, flashinfer 0.7.2.post1, torch 2.14.0+cu130 (/opt/serve/venv/bin/python3)"
    )


def test_fc711_unreadable_engine_config_blocks_the_launch():
    """A --config the engine cannot read makes the engine refuse to start: a blocking
    failure, never a warning that lets the launch go on unchecked."""
    f = facts("b300", **sections("healthy-cu131"))
    (r,) = assert_fires("FC711", f, config_problem="--config /x.yaml: cannot read: No such file or directory", **TP8)
    assert r.severity.value == "error"
    assert r.message == "--config /x.yaml: cannot read: No such file or directory: the engine would refuse to start"
    assert_silent("FC711", f, **TP8)


def _env(**extra: str | None) -> dict:
    doc = host_doc("b300")
    env = dict(doc.get("env") or {})
    env.update(extra)
    return {"env": env}


def test_fc703_engine_refuses_command_fires_only_on_a_refusal():
    f = facts("b300")
    refused = ["unrecognized arguments: --swap-space 4"]
    (r,) = assert_fires("FC703", f, reader="engine", refused=refused, **TP8)
    assert r.message == "vllm will refuse this command: unrecognized arguments: --swap-space 4"
    assert statuses(f, "FC703", reader="engine", **TP8) == {"pass"}
    # the built-in reader judges the release of its tables only
    installed = f.python.packages.get("vllm") if f.python and f.python.packages else None
    assert statuses(f, "FC703", reader="built-in", refused=refused, **TP8) == (
        {"fail"} if installed == "0.33.0" else {"unknown"}
    )
    assert statuses(f, "FC703", **TP8) == {"skip"}  # check without a command: nothing to read


def test_fc704_vllm_plugins_without_flightcheck():
    (r,) = assert_fires("FC704", facts("b300", **_env(VLLM_PLUGINS="lora_resolver")), **TP8)
    assert "export VLLM_PLUGINS=lora_resolver,flightcheck" in r.fix
    assert statuses(facts("b300", **_env(VLLM_PLUGINS="a,flightcheck")), "FC704", **TP8) == {"pass"}
    assert statuses(facts("b300", **_env(VLLM_PLUGINS=None)), "FC704", **TP8) == {"pass"}
    assert statuses(facts("b300", **_env(VLLM_PLUGINS="x")), "FC704", engine="sglang", **TP8) == {"skip"}


def _pinned(**packages: str) -> dict:
    doc = sections("healthy-cu131")
    # vLLM 0.33.0's own Requires-Dist (read from its METADATA in the conformance venv)
    doc["python"]["engine_pins"] = {"transformers": "<5.21.0,>=5.16.1", "torch": "==2.14.0"}
    doc["python"]["packages"].update(transformers="5.20.2", torch="2.14.0+cu130")
    doc["python"]["packages"].update(packages)
    return doc


def test_fc710_transformers_outside_the_engines_range_is_a_warning_with_the_pip_line():
    (r,) = assert_fires("FC710", facts("b300", **_pinned(transformers="5.22.0")), **TP8)
    assert r.severity.value == "warning"
    assert "transformers 5.22.0 (needs <5.21.0,>=5.16.1)" in r.message
    assert r.fix == "/opt/serve/venv/bin/python3 -m pip install 'transformers<5.21.0,>=5.16.1'"


def test_fc710_silent_within_the_ranges_and_a_local_build_tag_is_the_release():
    assert statuses(facts("b300", **_pinned()), "FC710", **TP8) == {"pass"}  # torch 2.14.0+cu130 meets ==2.14.0
    (r,) = assert_fires("FC710", facts("b300", **_pinned(torch="2.13.1")), **TP8)
    assert "torch 2.13.1 (needs ==2.14.0)" in r.message


def test_fc710_skips_a_snapshot_recorded_without_the_engines_pins():
    assert statuses(facts("b300", **sections("healthy-cu131")), "FC710", **TP8) == {"skip"}


def test_fc703_does_not_stop_a_command_vllm_accepts():
    """A real line vLLM 0.33 serves (flags from its docs), read by the built-in reader:
    nothing refused, so FC703 passes and the launch goes on."""
    from flightcheck._launch import parse_command

    line = "vllm serve Qwen/Qwen3-0.6B -tp 8 --max-model-len 32k --enable-expert-parallel --gpu-memory-utilization 0.9"
    intent = parse_command(line.split()).intent
    assert intent.refused == [] and intent.max_model_len == 32_000
    f = facts("b300", **sections("healthy-cu131"))
    assert statuses(f, "FC703", reader=intent.reader or "built-in", refused=intent.refused, **TP8) == {"pass"}


def test_fc711_does_not_stop_a_launch_whose_config_file_the_engine_reads(tmp_path):
    """``--config serve.yaml`` with flat keys, as vLLM's docs show it: read, no problem."""
    from flightcheck._launch import parse_command

    cfg = tmp_path / "serve.yaml"
    cfg.write_text("tensor-parallel-size: 8\nmax-model-len: 32768\n")
    intent = parse_command(["vllm", "serve", "Qwen/Qwen3-0.6B", "--config", str(cfg)]).intent
    assert intent.config_problem is None and intent.tensor_parallel_size == 8
    f = facts("b300", **sections("healthy-cu131"))
    # nothing to judge: it skips (FC711 fails only on a --config the engine cannot read)
    assert statuses(f, "FC711", config_problem=intent.config_problem, **TP8) == {"skip"}


# ---- FC712: a path needs a FlashInfer API the installed FlashInfer lacks (issue 21) ----
# vLLM 0.33.0 has_flashinfer_nvlink_two_sided() needs flashinfer.comm.trtllm_alltoall,
# which FlashInfer 0.7.4 removed (both read from the wheels into the release atlas).

TWO_SIDED = ["--all2all-backend=flashinfer_nvlink_two_sided", "--enable-expert-parallel"]
LAYOUT = {"tensor_parallel_size": 4, "data_parallel_size": 2, "enable_expert_parallel": True}


def _node(vllm: str = "0.33.0", flashinfer: str = "0.7.4"):
    doc = sections("healthy-cu131")
    doc["python"]["packages"].update({"vllm": vllm, "flashinfer-python": flashinfer})
    return facts("b300", **doc)


def test_the_atlas_holds_what_the_rule_reads() -> None:
    probes = atlas.flashinfer_probes("0.33.0")
    assert ("flashinfer.comm.trtllm_alltoall", "MnnvlMoe") in probes["has_flashinfer_nvlink_two_sided"]
    assert "MnnvlMoe" in atlas.flashinfer_modules("0.7.2.post1")["flashinfer.comm.trtllm_alltoall"]
    assert "flashinfer.comm.trtllm_alltoall" not in atlas.flashinfer_modules("0.7.4")
    assert missing_apis("0.33.0", "has_flashinfer_nvlink_two_sided", "0.7.2.post1") == []
    gone = missing_apis("0.33.0", "has_flashinfer_nvlink_two_sided", "0.7.4")
    assert gone and all(m.startswith("flashinfer.comm.trtllm_alltoall") for m in gone)


def test_the_atlas_judges_a_vllm_that_pins_a_flashinfer_0_3_with_that_release() -> None:
    """vLLM 0.11.0 pins flashinfer-python 0.3.1 (an sdist-only release, now in the atlas):
    its has_flashinfer_all2all() needs flashinfer.comm, which 0.3.1 has and 0.2.5 lacks."""
    assert atlas.pinned("vllm", "0.11.0", "flashinfer-python") == "==0.3.1"
    assert atlas.nearest_release("flashinfer", "0.3.1") == ("0.3.1", atlas.EXACT)
    assert missing_apis("0.11.0", "has_flashinfer_all2all", "0.3.1") == []
    gone = missing_apis("0.11.0", "has_flashinfer_all2all", "0.2.5")
    assert gone == ["flashinfer.comm", "flashinfer.comm.mnnvl", "flashinfer.comm.trtllm_alltoall"]


def test_fc712_names_the_removed_api_before_the_load() -> None:
    (r,) = assert_fires("FC712", _node(), engine="vllm", engine_flags=TWO_SIDED, **LAYOUT)
    assert r.severity.value == "error"
    assert "has_flashinfer_nvlink_two_sided() is False with flashinfer-python 0.7.4" in r.message
    assert "flashinfer.comm.trtllm_alltoall" in r.message
    assert "allgather_reducescatter" in r.fix
    # the pin of vLLM 0.33.0's wheel (Requires-Dist, in the atlas) is what it says to install
    assert r.fix.startswith("pip install flashinfer-python==0.7.2.post1 (the release vLLM 0.33.0 declares)")
    # the deprecated alias takes the same path
    alias = ["--all2all-backend=flashinfer_all2allv", "--enable-expert-parallel"]
    assert statuses(_node(), "FC712", engine="vllm", engine_flags=alias, **LAYOUT) == {"fail"}


def test_fc712_does_not_stop_the_same_path_with_the_flashinfer_that_has_it() -> None:
    assert statuses(_node(flashinfer="0.7.2.post1"), "FC712", engine="vllm", engine_flags=TWO_SIDED, **LAYOUT) == {
        "pass"
    }


def test_fc712_does_not_stop_other_backends_or_layouts_without_all2all() -> None:
    other = ["--all2all-backend=allgather_reducescatter", "--enable-expert-parallel"]
    assert statuses(_node(), "FC712", engine="vllm", engine_flags=other, **LAYOUT) == {"skip"}
    assert statuses(_node(), "FC712", engine="vllm", engine_flags=[], **LAYOUT) == {"skip"}
    # no DP and no PCP: vLLM 0.33 builds no all2all manager (ParallelConfig.use_all2all)
    single = {"tensor_parallel_size": 8, "enable_expert_parallel": True}
    assert statuses(_node(), "FC712", engine="vllm", engine_flags=TWO_SIDED, **single) == {"pass"}
    assert statuses(_node(), "FC712", engine="sglang", engine_flags=TWO_SIDED, **LAYOUT) == {"skip"}


def test_fc712_is_unknown_for_a_flashinfer_the_atlas_did_not_read_and_warns_past_the_newest_vllm() -> None:
    assert statuses(_node(flashinfer="0.7.3.dev1"), "FC712", engine="vllm", engine_flags=TWO_SIDED, **LAYOUT) == {
        "unknown"
    }
    newest = atlas.releases("vllm")[-1]
    major, minor = newest.split(".")[:2]
    later = f"{major}.{int(minor) + 1}.0"
    (r,) = assert_fires("FC712", _node(vllm=later), engine="vllm", engine_flags=TWO_SIDED, **LAYOUT)
    assert r.severity.value == "warning" and f"rules of vLLM {newest} applied to {later}" in r.message
