"""The release atlas (issue 21, item 1): its loader, and the AST extraction of
``scripts/gen_release_atlas.py`` on sources in each style the wheels use (explicit
``add_argument`` calls, options generated from config dataclasses by ``get_kwargs``,
SGLang's ``A[T, Arg(...)]`` fields, vLLM's ``has_flashinfer_*`` helpers)."""

from __future__ import annotations

import importlib.util
import io
import json
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from flightcheck._knowledge import atlas

ROOT = Path(__file__).resolve().parents[2]


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    return _script("gen_release_atlas")


@pytest.fixture(scope="module")
def fetch() -> ModuleType:
    return _script("atlas_fetch")


def test_the_atlas_covers_every_release_from_the_oldest_asked_for() -> None:
    vllm = atlas.releases("vllm")
    assert vllm[0] == "0.6.0" and {"0.8.5.post1", "0.10.1.1", "0.33.0"} <= set(vllm)
    assert atlas.releases("sglang")[0] == "0.4.0" and "0.5.23" in atlas.releases("sglang")
    assert {"0.7.2.post1", "0.7.4"} <= set(atlas.releases("flashinfer"))
    # SGLang's cp312-only wheels and FlashInfer's sdist-only releases (no gap left)
    sglang = atlas.releases("sglang")
    between = sglang[sglang.index("0.5.10.post1") + 1 : sglang.index("0.5.23")]
    assert between == [
        "0.5.11",
        "0.5.12",
        "0.5.12.post1",
        "0.5.13",
        "0.5.13.post1",
        "0.5.14",
        "0.5.15",
        "0.5.15.post1",
        "0.5.16",
        "0.5.17",
        "0.5.18",
        "0.5.19",
        "0.5.20",
        "0.5.21",
        "0.5.22",
    ]
    flashinfer = atlas.releases("flashinfer")
    assert flashinfer[0] == "0.2.0.post1" and flashinfer[flashinfer.index("0.5.0") - 1] == "0.4.1"
    assert len(flashinfer[: flashinfer.index("0.5.0")]) == 31
    for release in flashinfer:  # each release's own public names, read from its sources
        assert "flashinfer" in atlas.flashinfer_modules(release), release
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


def test_the_pins_name_what_each_engine_release_requires() -> None:
    """Requires-Dist (wheel METADATA, sdist PKG-INFO): the FlashInfer, DeepGEMM and torch an
    engine release pins; vLLM pins no triton (torch brings it)."""
    assert atlas.pinned("vllm", "0.33.0", "flashinfer-python") == "==0.7.2.post1"
    assert atlas.pinned("vllm", "0.11.0", "flashinfer_python") == "==0.3.1"
    assert atlas.pinned("vllm", "0.33.0", "triton") is None
    assert atlas.pinned("sglang", "0.5.15", "flashinfer-python") == "==0.6.12"  # flashinfer_python[cu13]
    assert atlas.pinned("sglang", "0.5.15", "sgl-deep-gemm") == "==0.1.4"
    assert atlas.pinned("sglang", "0.5.22", "torch") == "==2.14.1"
    assert "torch" in atlas.pins("flashinfer", "0.3.1")  # PKG-INFO of the sdist


def test_merge_keeps_the_other_releases_byte_identical(gen: ModuleType) -> None:
    a = {"options": [{"o": 1}, {"o": 2}], "pins": ["x"]}
    b = {"options": [{"o": 2}], "pins": ["y"]}
    doc = gen.pack("sglang", {"0.1.0": a, "0.3.0": b})
    before = json.dumps(doc, sort_keys=True)
    merged = gen.merge(json.loads(before), {"0.2.0": {"options": [{"o": 3}, {"o": 1}], "pins": ["x"]}, "0.3.0": a})
    assert merged["rows"][: len(doc["rows"])] == doc["rows"]  # rows only appended
    assert merged["releases"]["0.1.0"] == doc["releases"]["0.1.0"]
    assert [merged["rows"][i] for i in merged["releases"]["0.2.0"]["options"]] == [{"o": 3}, {"o": 1}]
    assert [merged["rows"][i] for i in merged["releases"]["0.3.0"]["options"]] == [{"o": 1}, {"o": 2}]
    assert json.dumps(doc, sort_keys=True) == before  # the input is not changed


def _tarball(path: Path, members: list[tuple[str, bytes | None, str | None]]) -> Path:
    """A .tar.gz of (name, data, link target): data None and a target -> a symlink."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data, link in members:
            info = tarfile.TarInfo(name)
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tar.addfile(info)
            else:
                info.size = len(data or b"")
                tar.addfile(info, io.BytesIO(data or b""))
    return path


def test_sdist_extraction_keeps_the_package_sources_and_pkg_info(fetch: ModuleType, tmp_path: Path) -> None:
    archive = _tarball(
        tmp_path / "sglang-0.5.15.tar.gz",
        [
            ("sglang-0.5.15/PKG-INFO", b"Metadata-Version: 2.1\nRequires-Dist: torch==2.11.0\n", None),
            ("sglang-0.5.15/python/pyproject.toml", b"[project]\n", None),
            ("sglang-0.5.15/python/sglang/__init__.py", b"", None),
            ("sglang-0.5.15/python/sglang/srt/server_args.py", b"class ServerArgs: ...\n", None),
            ("sglang-0.5.15/python/sglang/srt/kernel.cu", b"// not kept\n", None),
            ("sglang-0.5.15/test/sglang/__init__.py", b"", None),  # a deeper tree of the same name
            ("sglang-0.5.15/setup.py", b"raise SystemExit('never run')\n", None),
        ],
    )
    target = tmp_path / "cache" / "sglang" / "0.5.15"
    fetch.extract_sdist(archive, "sglang", target)
    kept = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert kept == ["METADATA", "pyproject.toml", "sglang/__init__.py", "sglang/srt/server_args.py"]
    assert "torch==2.11.0" in (target / "METADATA").read_text()


@pytest.mark.parametrize(
    "hostile",
    [
        ("flashinfer-0.3.1/../../escape.py", b"x = 1\n", None),
        ("flashinfer-0.3.1/flashinfer/evil.py", None, "/etc/passwd"),
        ("/abs/flashinfer/x.py", b"", None),
    ],
    ids=["dotdot", "symlink", "absolute"],
)
def test_sdist_extraction_refuses_a_hostile_tarball(
    fetch: ModuleType, tmp_path: Path, hostile: tuple[str, bytes | None, str | None]
) -> None:
    archive = _tarball(
        tmp_path / "flashinfer_python-0.3.1.tar.gz",
        [
            ("flashinfer-0.3.1/PKG-INFO", b"Metadata-Version: 2.1\n", None),
            ("flashinfer-0.3.1/flashinfer/__init__.py", b"", None),
            hostile,
        ],
    )
    target = tmp_path / "cache" / "flashinfer" / "0.3.1"
    with pytest.raises(fetch.HostileArchive):
        fetch.extract_sdist(archive, "flashinfer", target)
    assert not target.exists() and not (tmp_path / "escape.py").exists()  # nothing was written


def test_sdist_extraction_refuses_a_member_past_the_bound(fetch: ModuleType, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(fetch, "MAX_MEMBER_BYTES", 16)
    archive = _tarball(tmp_path / "x.tar.gz", [("x-1/x/__init__.py", b"#" * 17, None)])
    with pytest.raises(fetch.HostileArchive, match="member of 17 bytes"):
        fetch.extract_sdist(archive, "x", tmp_path / "out")


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


def test_choices_from_a_set_are_sorted_so_a_regeneration_is_reproducible(gen: ModuleType) -> None:
    """SGLang 0.5.11+ ``SAMPLING_BACKEND_CHOICES = {"flashinfer", "pytorch", "ascend"}``: a
    set's order is PYTHONHASHSEED's, so the reader sorts it (argparse only tests membership)."""
    src = {
        "sglang/srt/server_args.py": (
            'CHOICES = {"pytorch", "flashinfer", "ascend"}\n'
            "class ServerArgs:\n"
            "    @staticmethod\n"
            "    def add_cli_args(parser):\n"
            '        parser.add_argument("--sampling-backend", choices=CHOICES)\n'
        )
    }
    (row,) = gen.sglang_release(src.get, sorted(src))["options"]
    assert row["choices"] == ["ascend", "flashinfer", "pytorch"]


_OLD_ARG_UTILS = """
from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
from vllm.reasoning import ReasoningParserManager
class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--quantization", "-q", choices=[*QUANTIZATION_METHODS, None], default=None)
        parser.add_argument("--reasoning-parser", choices=list(ReasoningParserManager.reasoning_parsers),
                            **kw["reasoning_backend"])
        return parser
class AsyncEngineArgs(EngineArgs):
    @staticmethod
    def add_cli_args(parser):
        return EngineArgs.add_cli_args(parser)
"""


def _old_vllm(**files: str) -> dict[str, str]:
    src = {
        "vllm/engine/arg_utils.py": _OLD_ARG_UTILS,
        "vllm/model_executor/layers/quantization/__init__.py": (
            'QUANTIZATION_METHODS: Dict[str, Type[QuantizationConfig]] = {"awq": AWQConfig, "fp8": Fp8Config}\n'
        ),
        "vllm/reasoning/__init__.py": (
            "from .abs_reasoning_parsers import ReasoningParserManager\nfrom .r1 import R1\nfrom .granite import G\n"
        ),
        "vllm/reasoning/abs_reasoning_parsers.py": "class ReasoningParserManager:\n    reasoning_parsers = {}\n",
        "vllm/reasoning/r1.py": '@ReasoningParserManager.register_module("deepseek_r1")\nclass R1: ...\n',
        "vllm/reasoning/granite.py": '@ReasoningParserManager.register_module(["granite", "g2"])\nclass G: ...\n',
        # not imported by vllm/reasoning/__init__.py: not registered when the parser is built
        "vllm/reasoning/unused.py": '@ReasoningParserManager.register_module("unused")\nclass U: ...\n',
    }
    src.update(files)
    return src


def test_choices_spread_from_an_imported_dict_and_a_registry(gen: ModuleType) -> None:
    """vLLM 0.6.0 vllm/engine/arg_utils.py ``choices=[*QUANTIZATION_METHODS, None]`` (a dict
    literal in vllm/model_executor/layers/quantization/__init__.py): its keys, then None;
    vLLM 0.8.5 .. 0.11.0 ``choices=list(ReasoningParserManager.reasoning_parsers)``: the names
    the modules vllm/reasoning/__init__.py imports register; the explicit choices win over
    the ``**kwargs`` the call also spreads."""
    src = _old_vllm()
    rows = {o["dest"]: o for o in gen.vllm_release(src.get, sorted(src))["options"]}
    assert rows["quantization"]["choices"] == ["awq", "fp8", None]
    assert rows["reasoning_parser"]["choices"] == ["deepseek_r1", "granite", "g2"]
    # 0.8.5's ``QUANTIZATION_METHODS = list(get_args(QuantizationMethods))`` is no literal:
    # not read (never guessed), and a registration the reader cannot spell leaves the list unread
    src = _old_vllm(
        **{
            "vllm/model_executor/layers/quantization/__init__.py": "QUANTIZATION_METHODS = list(get_args(M))\n",
            "vllm/reasoning/r1.py": "@ReasoningParserManager.register_module(NAME)\nclass R1: ...\n",
        }
    )
    rows = {o["dest"]: o for o in gen.vllm_release(src.get, sorted(src))["options"]}
    assert rows["quantization"]["choices"] is None and rows["reasoning_parser"]["choices"] is None
    # 0.6.5 .. 0.8.4: ``QUANTIZATION_METHODS: List[str] = [...]``, a list literal: its items
    src = _old_vllm(
        **{"vllm/model_executor/layers/quantization/__init__.py": 'QUANTIZATION_METHODS: List[str] = ["awq", "fp8"]\n'}
    )
    rows = {o["dest"]: o for o in gen.vllm_release(src.get, sorted(src))["options"]}
    assert rows["quantization"]["choices"] == ["awq", "fp8", None]


def test_serve_model_option_is_read_per_release(gen: ModuleType) -> None:
    """How ``vllm serve --model X`` is taken, from FlexibleArgumentParser.parse_args."""
    refused = (
        "class FlexibleArgumentParser:\n    def parse_args(self, args=None):\n"
        "        if args and args[0] == 'serve':\n            if any(arg == '--model' for arg in args):\n"
        "                raise ValueError('With `vllm serve`, you should provide the model as a positional')\n"
    )
    moved = (
        "class FlexibleArgumentParser:\n    def parse_args(self, args=None):\n"
        "        i = next(i for i, a in enumerate(args) if re.match(r'^--model(=.+|$)', a))\n"
    )
    plain = "class FlexibleArgumentParser:\n    def parse_args(self, args=None):\n        return args\n"
    scripts = 'serve_parser.add_argument("model_tag", type=str, help="The model tag to serve")\n'
    assert gen.serve_model_option({"vllm/utils.py": refused}.get) == "refused"  # 0.8.5 .. 0.11.0
    assert gen.serve_model_option({"vllm/utils/argparse_utils.py": moved}.get) is None  # 0.11.1 ..
    assert gen.serve_model_option({"vllm/utils.py": plain, "vllm/scripts.py": scripts}.get) == "positional"  # 0.6.0
    optional = scripts.replace("type=str", 'nargs="?", type=str')
    assert gen.serve_model_option({"vllm/utils.py": plain, "vllm/scripts.py": optional}.get) is None
    # the default is not written, so a release read the newest way stays byte-identical
    src = _old_vllm(**{"vllm/utils/argparse_utils.py": moved})
    assert "serve_model" not in gen.vllm_release(src.get, sorted(src))
    src = _old_vllm(**{"vllm/utils.py": refused})
    assert gen.vllm_release(src.get, sorted(src))["serve_model"] == "refused"


def test_the_committed_atlas_records_the_serve_model_handling() -> None:
    """Regenerated from the wheels: vLLM 0.6.0 (its venv's sources) and 0.8.5 .. 0.11.0."""
    assert atlas.serve_model("vllm", "0.6.0") == "positional"
    for release in ("0.8.5", "0.9.2", "0.10.2", "0.11.0"):
        assert atlas.serve_model("vllm", release) == "refused", release
    for release in ("0.11.1", "0.20.0", "0.33.0"):
        assert atlas.serve_model("vllm", release) is None, release
    assert atlas.serve_model("sglang", "0.4.0") is None


def _choices(engine: str, release: str, option: str) -> list[Any] | None:
    row = next(o for o in atlas.options(engine, release) if option in o["option_strings"])
    return row["choices"]


def test_the_old_releases_regenerated_from_their_wheels() -> None:
    """vLLM 0.6.1 .. 0.8.4 and SGLang 0.4.0.post1 .. 0.5.10.post1, regenerated from their
    wheels: vLLM 0.7.3 vllm/entrypoints/cli/serve.py ``model_tag`` is a required positional
    (0.8.3 makes it ``nargs='?'`` and vllm/utils.py refuses ``--model``); ``--quantization``
    takes 0.7.3's ``QUANTIZATION_METHODS`` list (vllm/model_executor/layers/quantization/
    __init__.py, 23 names) or None; 0.8.3 reads ``--reasoning-parser`` from the
    vllm/reasoning registry. SGLang 0.5.3 sglang/srt/server_args.py ``DeprecatedAction``
    refuses ``--enable-ep-moe``; 0.4.9 has no sglang/cli (only ``python -m
    sglang.launch_server``), 0.5.5 has one."""
    assert atlas.serve_model("vllm", "0.7.3") == "positional"
    assert atlas.serve_model("vllm", "0.8.3") == "refused"
    quant = _choices("vllm", "0.7.3", "--quantization")
    assert quant is not None and len(quant) == 24 and quant[-1] is None
    assert {"awq", "gptq", "fp8", "gguf", "bitsandbytes"} <= set(quant)
    assert _choices("vllm", "0.8.3", "--reasoning-parser") == ["deepseek_r1", "granite"]
    ep = next(o for o in atlas.options("sglang", "0.5.3") if "--enable-ep-moe" in o["option_strings"])
    assert ep["refuses"].startswith("ValueError: NOTE: --enable-ep-moe is deprecated.")
    assert atlas.serve_launcher("sglang", "0.4.9") is False
    assert atlas.serve_launcher("sglang", "0.5.5") is True


def test_sglang_deprecated_actions_and_a_missing_cli_are_read(gen: ModuleType) -> None:
    """SGLang 0.4.0 sglang/srt/server_args.py: ``DeprecatedAction.__call__`` raises
    ``ValueError(self.help)``: the row records the refusal; no sglang/cli: no ``sglang serve``."""
    server_args = (
        "class DeprecatedAction(argparse.Action):\n"
        "    def __init__(self, option_strings, dest, nargs=0, **kwargs):\n"
        "        super().__init__(option_strings, dest, nargs=nargs, **kwargs)\n"
        "    def __call__(self, parser, namespace, values, option_string=None):\n"
        "        raise ValueError(self.help)\n"
        "class ServerArgs:\n"
        "    @staticmethod\n"
        "    def add_cli_args(parser):\n"
        '        parser.add_argument("--tp", type=int, default=1)\n'
        '        parser.add_argument("--disable-x", action=DeprecatedAction, help="\'--disable-x\' is deprecated.")\n'
    )
    src = {"sglang/srt/server_args.py": server_args}
    entry = gen.sglang_release(src.get, sorted(src))
    tp, old = entry["options"]
    assert "refuses" not in tp and old["nargs"] == 0
    assert old["refuses"] == "ValueError: '--disable-x' is deprecated."
    assert entry["serve_launcher"] is False
    src["sglang/cli/main.py"] = "def main(): ...\n"
    assert "serve_launcher" not in gen.sglang_release(src.get, sorted(src))  # the default: not written
    assert atlas.serve_launcher("sglang", "0.4.0") is False
