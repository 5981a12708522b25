"""FC712: a path the command takes needs a FlashInfer API the installed FlashInfer lacks
(issue 21, item 5): vLLM 0.33.0's ``has_flashinfer_nvlink_two_sided()`` requires
``flashinfer.comm.trtllm_alltoall``, which FlashInfer 0.7.4 removed (both read from the
wheels into the release atlas)."""

from __future__ import annotations

from flightcheck._checks.engine.flashinfer_api import missing_apis
from flightcheck._knowledge import atlas
from support.evaluation import assert_fires, facts, statuses
from support.toolchain import sections

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


def test_fc712_names_the_removed_api_before_the_load() -> None:
    (r,) = assert_fires("FC712", _node(), engine="vllm", engine_flags=TWO_SIDED, **LAYOUT)
    assert r.severity.value == "error"
    assert "has_flashinfer_nvlink_two_sided() is False with flashinfer-python 0.7.4" in r.message
    assert "flashinfer.comm.trtllm_alltoall" in r.message
    assert "allgather_reducescatter" in r.fix
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
