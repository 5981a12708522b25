"""The release atlas (issue 21, item 1): its loader, and the AST extraction of
``scripts/gen_release_atlas.py`` on sources in each style the wheels use (explicit
``add_argument`` calls, options generated from config dataclasses by ``get_kwargs``,
SGLang's ``A[T, Arg(...)]`` fields, vLLM's ``has_flashinfer_*`` helpers)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from flightcheck._knowledge import atlas

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_release_atlas", ROOT / "scripts" / "gen_release_atlas.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_atlas_covers_every_release_from_the_oldest_asked_for() -> None:
    vllm = atlas.releases("vllm")
    assert vllm[0] == "0.6.0" and {"0.8.5.post1", "0.10.1.1", "0.33.0"} <= set(vllm)
    assert atlas.releases("sglang")[0] == "0.4.0" and "0.5.23" in atlas.releases("sglang")
    assert {"0.7.2.post1", "0.7.4"} <= set(atlas.releases("flashinfer"))
    for release in vllm:
        strings = {s for o in atlas.options("vllm", release) for s in o["option_strings"]}
        assert {"--tensor-parallel-size", "-tp", "--max-model-len"} <= strings, release


def test_nearest_release_relations() -> None:
    assert atlas.nearest_release("vllm", "0.8.5") == ("0.8.5", atlas.EXACT)
    assert atlas.nearest_release("vllm", "0.33.0+cu130") == ("0.33.0", atlas.EXACT)
    assert atlas.nearest_release("vllm", "0.8.6") == ("0.8.5.post1", atlas.BETWEEN)
    newest = atlas.releases("vllm")[-1]
    assert atlas.nearest_release("vllm", "99.0.0") == (newest, atlas.NEWER)
    assert atlas.nearest_release("vllm", "0.5.5") == (None, atlas.OLDER)
    assert atlas.nearest_release("vllm", "not-a-version")[0] is None
    assert atlas.version_key("0.8.5.post1") > atlas.version_key("0.8.5")  # type: ignore[operator]
    assert atlas.version_key("0.10.1.1") > atlas.version_key("0.10.1")  # type: ignore[operator]


def test_the_committed_data_is_compact() -> None:
    """Interned rows: the whole atlas (three engines, ~230 releases) stays well under 1 MB."""
    total = sum((ROOT / "src/flightcheck/_knowledge/atlas_data" / f"{e}.json").stat().st_size for e in atlas.EXTRACTED)
    assert total < 1_500_000


VLLM_SRC = {
    "vllm/config/parallel.py": """
from typing import Literal
from dataclasses import field
Backend = Literal["naive", "pplx"]
@config
class PassConfig:
    fuse_norm: bool = False
@config
class ParallelConfig:
    tensor_parallel_size: int = 1
    all2all_backend: Backend = "naive"
    enable_expert_parallel: bool = False
    devices: list[int] | None = None
    pass_config: PassConfig = field(default_factory=PassConfig)
""",
    "vllm/engine/arg_utils.py": """
import argparse
from vllm.config.parallel import ParallelConfig
def get_kwargs(cls):
    kwargs["x"]["action"] = argparse.BooleanOptionalAction
class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        parallel_kwargs = get_kwargs(ParallelConfig)
        group = parser.add_argument_group()
        group.add_argument("--tensor-parallel-size", "-tp", **parallel_kwargs["tensor_parallel_size"])
        group.add_argument("--all2all-backend", **parallel_kwargs["all2all_backend"])
        group.add_argument("--enable-expert-parallel", **parallel_kwargs["enable_expert_parallel"])
        group.add_argument("--devices", **parallel_kwargs["devices"])
        group.add_argument("--pass-config", **parallel_kwargs["pass_config"])
        parser.add_argument("--swap-space", type=float, default=4)
        parser.add_argument("--disable-log-stats", action="store_true")
        return parser
class AsyncEngineArgs(EngineArgs):
    @staticmethod
    def add_cli_args(parser):
        parser = EngineArgs.add_cli_args(parser)
        parser.add_argument("--disable-log-requests", action="store_true")
        return parser
""",
    "vllm/utils/flashinfer.py": """
def has_flashinfer_nvlink_two_sided():
    required_functions = [("flashinfer.comm", "Mapping"), ("flashinfer.comm.trtllm_alltoall", "MnnvlMoe")]
""",
}


def test_vllm_extraction_of_explicit_and_generated_options(gen: ModuleType) -> None:
    entry = gen.vllm_release(VLLM_SRC.get, sorted(VLLM_SRC))
    rows = {o["option_strings"][0] if o["option_strings"] else o["dest"]: o for o in entry["options"]}
    assert list(rows) == [
        "model_tag",
        "--tensor-parallel-size",
        "--all2all-backend",
        "--enable-expert-parallel",
        "--devices",
        "--pass-config",
        "--swap-space",
        "--disable-log-stats",
        "--disable-log-requests",
    ]
    assert rows["--tensor-parallel-size"]["option_strings"] == ["--tensor-parallel-size", "-tp"]
    assert rows["--tensor-parallel-size"]["type"] == "int" and rows["--tensor-parallel-size"]["default"] == 1
    assert rows["--all2all-backend"]["choices"] == ["naive", "pplx"]
    assert rows["--enable-expert-parallel"]["action"] == "BooleanOptionalAction"
    # optional_type(int): "None" is a value too, so the reader keeps the text
    assert rows["--devices"]["nargs"] == "+" and rows["--devices"]["type"] == "str"
    assert rows["--pass-config"]["record"] == "PassConfig"
    assert entry["records"]["PassConfig"] == ["fuse_norm"]
    assert rows["--swap-space"]["type"] == "float" and rows["--disable-log-stats"]["nargs"] == 0
    assert entry["flashinfer_probes"] == {
        "has_flashinfer_nvlink_two_sided": [
            ["flashinfer.comm", "Mapping"],
            ["flashinfer.comm.trtllm_alltoall", "MnnvlMoe"],
        ]
    }


SGLANG_SRC = {
    "sglang/srt/server_args.py": """
from typing import Literal, Optional
class ServerArgs:
    tp_size: A[int, Arg(help="TP", aliases=["--tensor-parallel-size"], cli_name="--tp-size")] = 1
    mode: A[Literal["a", "b"], "the mode"] = "a"
    flag: A[bool, "a flag"] = False
    hidden: A[int, Arg(no_cli=True)] = 0
    @staticmethod
    def add_cli_args(parser):
        add_cli_args_from_dataclass(parser, ServerArgs)
        parser.add_argument("--mem-fraction-static", type=float, default=None)
""",
}


def test_sglang_extraction_of_arg_fields_and_explicit_options(gen: ModuleType) -> None:
    entry = gen.sglang_release(SGLANG_SRC.get, sorted(SGLANG_SRC))
    rows = {o["option_strings"][0]: o for o in entry["options"]}
    assert list(rows) == ["--tp-size", "--mode", "--flag", "--mem-fraction-static"]
    assert rows["--tp-size"]["option_strings"] == ["--tp-size", "--tensor-parallel-size"]
    assert rows["--tp-size"]["dest"] == "tp_size" and rows["--tp-size"]["type"] == "int"
    assert rows["--mode"]["choices"] == ["a", "b"] and rows["--flag"]["action"] == "store_true"


def test_flashinfer_extraction_of_module_names(gen: ModuleType) -> None:
    src = {
        "flashinfer/comm/__init__.py": "from .mapping import Mapping\n",
        "flashinfer/comm/trtllm_alltoall.py": (
            "class MnnvlMoe: ...\ntry:\n    def helper(): ...\nexcept ImportError:\n    pass\n"
        ),
    }
    modules = gen.flashinfer_release(src.get, sorted(src))["modules"]
    assert modules["flashinfer.comm"] == ["Mapping"]
    assert modules["flashinfer.comm.trtllm_alltoall"] == ["MnnvlMoe", "helper"]


def test_skip_validation_and_type_checking_else_aliases(gen: ModuleType) -> None:
    """pydantic's SkipValidation[X] is X to the parser; ``if TYPE_CHECKING: import N`` with
    ``else: N = Any`` is Any when the parser is built (vLLM 0.10.2 vllm/config/__init__.py)."""
    src = {
        "vllm/config/__init__.py": """
from typing import TYPE_CHECKING, Any, Literal
from pydantic import SkipValidation
from vllm.quant import Methods
if TYPE_CHECKING:
    from vllm.quant import Methods
else:
    Methods = Any
@config
class SchedulerConfig:
    enable_chunked_prefill: SkipValidation[bool] = None
    max_num_seqs: SkipValidation[int] = None
    quantization: SkipValidation[Methods | None] = None
""",
        "vllm/quant.py": 'Methods = Literal["awq", "fp8"]\n',
        "vllm/engine/arg_utils.py": """
import argparse
from vllm.config import SchedulerConfig
def get_kwargs(cls):
    kwargs["x"]["action"] = argparse.BooleanOptionalAction
class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        kw = get_kwargs(SchedulerConfig)
        parser.add_argument("--enable-chunked-prefill", **kw["enable_chunked_prefill"])
        parser.add_argument("--max-num-seqs", **kw["max_num_seqs"])
        parser.add_argument("--quantization", **kw["quantization"])
        return parser
class AsyncEngineArgs(EngineArgs):
    @staticmethod
    def add_cli_args(parser):
        return EngineArgs.add_cli_args(parser)
""",
    }
    entry = gen.vllm_release(src.get, sorted(src))
    rows = {o["dest"]: o for o in entry["options"]}
    assert rows["enable_chunked_prefill"]["action"] == "BooleanOptionalAction"
    assert rows["max_num_seqs"]["type"] == "int"
    assert rows["quantization"]["choices"] is None
