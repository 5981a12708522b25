"""Tiny stand-ins for the vLLM and SGLang packages, at the module paths and with the APIs
``_collect/engine_reader.py`` calls (vllm 0.33.0 / sglang 0.5.23 shapes, a handful of
options each), so that the reader child can run with the current interpreter and no
engine installed. ``write_fake_engines(root)`` writes them (with ``.dist-info`` metadata,
so that ``importlib.metadata.version`` answers); put ``root`` on the child's PYTHONPATH.

What they model, per engine, is only what the reader's own paths need: the parser the
engine builds (subcommand or plain), its validation, the record made from the namespace
(vLLM: ``AsyncEngineArgs.from_cli_args``, which can fail or swap the model for a local
snapshot), SGLang's backend dispatch and ``prepare_server_args``. Not a conformance test:
the real engines' behaviour is tests/conformance's.
"""

from __future__ import annotations

from pathlib import Path

_VLLM_OPTIONS = """
def add_options(parser):
    parser.add_argument("model_tag", nargs="?", default=None)
    parser.add_argument("--model", default="Qwen/Qwen3-0.6B")
    parser.add_argument("--headless", action="store_true")
    parser.add_argument("-tp", "--tensor-parallel-size", type=int, default=1)
    parser.add_argument("--served-model-name", nargs="+", default=None)
    parser.add_argument("--all2all-backend", default="allgather_reducescatter")
    parser.add_argument("--enforce-eager", action="store_true")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.92)
    parser.add_argument("--enable-dbo", action="store_true")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--max-model-len", type=int, default=None)
    return parser
"""

_FILES: dict[str, str] = {
    "vllm/__init__.py": "",
    "vllm/utils/__init__.py": "",
    "vllm/utils/argparse_utils.py": '''
import argparse


class FlexibleArgumentParser(argparse.ArgumentParser):
    """Underscores for dashes in option names, as vLLM's does."""

    def parse_args(self, args=None, namespace=None):
        args = [a.replace("_", "-") if a.startswith("--") and "=" not in a else a for a in (args or [])]
        return super().parse_args(args, namespace)
''',
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/common/__init__.py": "",
    "vllm/entrypoints/common/options.py": _VLLM_OPTIONS,
    "vllm/entrypoints/common/cli_args.py": """
from vllm.entrypoints.common.options import add_options


def make_arg_parser(parser):
    return add_options(parser)


def validate_parsed_serve_args(args):
    if args.tensor_parallel_size > 64:
        raise ValueError("tensor_parallel_size must be at most 64")
""",
    "vllm/entrypoints/cli/__init__.py": "",
    "vllm/entrypoints/cli/serve.py": """
from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args


class ServeSubcommand:
    name = "serve"

    def subparser_init(self, subparsers):
        return make_arg_parser(subparsers.add_parser("serve"))

    def validate(self, args):
        if args.headless and args.model_tag is None:
            raise ValueError("--headless needs a model")
        validate_parsed_serve_args(args)
""",
    "vllm/platforms/__init__.py": """
class CpuPlatform:
    pass


current_platform = CpuPlatform()
""",
    "vllm/engine/__init__.py": "",
    "vllm/engine/arg_utils.py": """
import dataclasses


@dataclasses.dataclass
class AsyncEngineArgs:
    model: str = "Qwen/Qwen3-0.6B"
    tensor_parallel_size: int = 1
    served_model_name: object = None
    all2all_backend: str = "allgather_reducescatter"
    enforce_eager: bool = False
    gpu_memory_utilization: float = 0.92
    enable_dbo: bool = False
    max_model_len: object = None

    @classmethod
    def from_cli_args(cls, args):
        if args.model.startswith("missing/"):
            raise OSError(f"no local snapshot of {args.model} (HF_HUB_OFFLINE)")
        names = [f.name for f in dataclasses.fields(cls)]
        record = cls(**{n: getattr(args, n) for n in names})
        if record.model.startswith("cached/"):
            record.model = "/snapshots/" + record.model
        return record
""",
    "vllm-0.34.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: vllm\nVersion: 0.34.0\n",
    "sglang/__init__.py": "",
    "sglang/srt/__init__.py": "",
    "sglang/srt/plugins.py": """
LOADED = []


def load_plugins():
    LOADED.append(True)
""",
    "sglang/srt/server_args.py": """
import argparse
import dataclasses


@dataclasses.dataclass
class ServerArgs:
    model_path: str = ""
    tp_size: int = 1
    dp_size: int = 1
    served_model_name: object = None
    mem_fraction_static: object = None
    enable_dp_attention: bool = False
    moe_a2a_backend: str = "none"
    mm_feature_transport: str = "shm"

    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", required=True)
        parser.add_argument("--tp-size", "--tp", dest="tp_size", type=int, default=1)
        parser.add_argument("--dp-size", "--dp", dest="dp_size", type=int, default=1)
        parser.add_argument("--served-model-name", default=None)
        parser.add_argument("--mem-fraction-static", type=float, default=None)
        parser.add_argument("--enable-dp-attention", action="store_true")
        parser.add_argument("--moe-a2a-backend", default="none")
        parser.add_argument("--mm-feature-transport", default="shm")


def prepare_server_args(argv):
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return ServerArgs(**vars(parser.parse_args(argv)))
""",
    "sglang/cli/__init__.py": "",
    "sglang/cli/serve_backends.py": """
import dataclasses


@dataclasses.dataclass
class ServeRequest:
    argv: tuple
    model_path: object
    model_path_is_positional: bool


class Backend:
    def __init__(self, name):
        self.name = name


class Registry:
    def auto_detect(self, request):
        return Backend("diffusion" if "diffusion" in str(request.model_path) else "llm")

    def get(self, name):
        if name not in ("llm", "diffusion"):
            raise ValueError(f"unknown model type {name!r}")
        return Backend(name)
""",
    "sglang/cli/utils.py": """
def try_get_model_path(argv):
    for i, word in enumerate(argv):
        if word == "--model-path" and i + 1 < len(argv):
            return argv[i + 1]
    return None
""",
    "sglang/cli/serve.py": """
from sglang.cli.serve_backends import Registry


def _extract_model_type_override(argv):
    argv = list(argv)
    if "--model-type" in argv:
        i = argv.index("--model-type")
        name = argv[i + 1]
        del argv[i : i + 2]
        return name, argv
    return "auto", argv


def _normalize_positional_model_path(argv):
    if argv and not argv[0].startswith("-"):
        return ["--model-path", argv[0], *argv[1:]], True
    return list(argv), False


def _create_backend_registry():
    return Registry()
""",
    "sglang-0.5.99.dist-info/METADATA": "Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.99\n",
}


def write_fake_engines(root: Path) -> Path:
    """Write both fake engines under ``root`` (a directory for PYTHONPATH); returns it."""
    for rel, text in _FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.lstrip("\n"))
    return root


#: launch lines each reader path is exercised with: accepted, refused by the parser,
#: refused by validation, the record failing or swapping the model, the other entry points
VLLM_LINES: list[list[str]] = [
    ["vllm", "serve", "M", "-tp", "2", "--served-model-name", "a", "b", "--enforce-eager"],
    ["CUDA_VISIBLE_DEVICES=0,1", "/venv/bin/vllm", "serve", "--model", "M", "--all2all-backend", "deepep_low_latency"],
    ["vllm", "serve", "M", "--no-such-flag"],
    ["vllm", "serve", "M", "-tp", "128"],
    ["vllm", "serve", "--headless"],
    ["vllm", "serve", "missing/model"],
    ["vllm", "serve", "cached/model", "--api-key", "sekrit", "--enable_dbo"],
    ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "M", "-tp", "4"],
    ["python", "-m", "vllm.entrypoints.cli.main", "serve", "M", "--gpu-memory-utilization", "0.5"],
    ["python", "-m", "vllm", "serve", "M"],
    ["M", "--max-model-len", "4096"],
    ["serve", "M", "-tp", "x"],
    ["vllm", "serve", "--help"],
]
SGLANG_LINES: list[list[str]] = [
    ["sglang", "serve", "--model-path", "M", "--tp", "2", "--served-model-name", "s"],
    ["sglang", "serve", "M", "--enable-dp-attention", "--dp", "2", "--mem-fraction-static", "0.8"],
    ["python", "-m", "sglang.launch_server", "--model-path", "M", "--moe-a2a-backend", "deepep"],
    ["python3", "-m", "sglang.cli.main", "serve", "--model-path", "M", "--mm-feature-transport", "cuda_ipc"],
    ["python", "-m", "sglang", "serve", "--model-path", "M"],
    ["sglang", "serve", "--model-path", "org/diffusion-model"],
    ["sglang", "serve", "--model-type", "nope", "--model-path", "M"],
    ["sglang", "serve", "--model-path", "M", "--tp", "two"],
    ["--model-path", "M"],
    ["HF_TOKEN=x", "sglang", "serve"],
]
