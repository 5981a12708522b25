"""The load-format tables of _knowledge (which weight files each engine's loader reads)
against the installed engines' source, read as text (never imported)."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from flightcheck._knowledge import sglang, vllm

pytestmark = pytest.mark.conformance


@pytest.fixture(scope="module")
def site(engine_python: str) -> Path:
    out = subprocess.run(
        [engine_python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return Path(out.stdout.strip())


def _function(path: Path, name: str) -> str:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_source_segment(path.read_text(), node) or ""
    raise AssertionError(f"no {name} in {path}")


def test_vllm_load_formats_and_their_loaders(site: Path) -> None:
    tree = ast.parse((site / "vllm/model_executor/model_loader/__init__.py").read_text())
    table = next(
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.AnnAssign)
        and isinstance(n.target, ast.Name)
        and n.target.id == "_LOAD_FORMAT_TO_MODEL_LOADER"
    )
    assert isinstance(table, ast.Dict)
    loaders = {
        ast.literal_eval(k): v.id
        for k, v in zip(table.keys, table.values, strict=False)
        if k and isinstance(v, ast.Name)
    }
    default = {fmt for fmt, cls in loaders.items() if cls == "DefaultModelLoader"}
    assert default == set(vllm.LOAD_FORMAT_FILES), "the formats the default loader globs for"
    assert {fmt for fmt, cls in loaders.items() if cls == "DummyModelLoader"} == set(vllm.NO_WEIGHT_LOAD_FORMATS)


def test_vllm_default_loader_patterns(site: Path) -> None:
    src = _function(site / "vllm/model_executor/model_loader/default_loader.py", "_prepare_weights")
    assert 'allow_patterns = ["*.safetensors", "*.bin"]' in src  # "hf" (and "auto")
    assert 'allow_patterns += ["*.pt"]' in src  # the fall-back
    assert 'allow_patterns = ["*.pt"]' in src and 'allow_patterns = ["*.bin"]' in src  # pt, npcache
    assert '"mistral"' in src and f'allow_patterns=["{vllm.MISTRAL_FILES}"]' in src  # auto -> mistral
    assert f'index_file = "{vllm.MISTRAL_INDEX}"' in src
    assert vllm.LOAD_FORMAT_FILES["auto"] == ("*.safetensors", "*.bin", "*.pt")
    blacklist = _function(
        site / "vllm/model_executor/model_loader/weight_utils.py", "filter_files_not_needed_for_inference"
    )
    for name in vllm.NOT_WEIGHT_FILES:
        assert f'"{name}"' in blacklist


def test_sglang_load_formats_and_patterns(site: Path) -> None:
    path = site / "sglang/srt/configs/load_config.py"
    tree = ast.parse(path.read_text())
    enum = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "LoadFormat")
    values = {
        ast.literal_eval(s.value) for s in enum.body if isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant)
    }
    assert set(sglang.LOAD_FORMAT_FILES) | set(sglang.NO_WEIGHT_LOAD_FORMATS) <= values
    src = _function(site / "sglang/srt/model_loader/loader.py", "_prepare_weights")
    assert 'allow_patterns = ["*.safetensors", "*.bin"]' in src and 'allow_patterns += ["*.pt"]' in src
    assert f'allow_patterns = ["{sglang.MISTRAL_FILES}"]' in src


def test_vllm_reads_gguf_only_for_the_architectures_named(site: Path) -> None:
    """GGUF_ARCHITECTURES: the models whose vLLM code finds a *.gguf (find_gguf_file) and
    reads it with gguf.GGUFReader; no model_loader of its own reads GGUF; more than one
    *.gguf in the directory is refused (GGUF_SINGLE_FILE)."""
    vl = site / "vllm"
    loaders = "\n".join(p.read_text() for p in (vl / "model_executor/model_loader").glob("*.py"))
    assert "GGUFReader" not in loaders and "gguf_loader" not in loaders
    users = sorted(
        p.relative_to(vl).as_posix() for p in vl.rglob("*.py") if "find_gguf_file(" in p.read_text(errors="replace")
    )
    assert users == ["models/flint/gguf_nvfp4.py", "models/flint/model.py"], users
    registry = (vl / "model_executor/models/registry.py").read_text()
    for arch in vllm.GGUF_ARCHITECTURES:
        assert f'"{arch}": ("vllm.models.flint"' in registry, arch
    finder = _function(vl / "models/flint/gguf_nvfp4.py", "find_gguf_file")
    assert "Expected one GGUF file" in finder and vllm.GGUF_SINGLE_FILE
    # glob without include_hidden: every entry but the hidden ones (the reader counts so)
    assert 'glob.glob(os.path.join(model_path, "*.gguf"))' in finder
    assert "gguf.GGUFReader(path)" in (vl / "models/flint/gguf_nvfp4.py").read_text()
    assert 'allow_patterns_overrides = ["*.gguf"]' in (vl / "models/flint/model.py").read_text()


def _constant(path: Path, name: str) -> object:
    """A module-level constant of ``path`` (``NAME = <literal>`` or ``frozenset({...})``)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = node.value
            if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "frozenset":
                return frozenset(ast.literal_eval(value.args[0]) if value.args else ())
            return ast.literal_eval(value)
    raise AssertionError(f"no {name} in {path}")


def test_vllm_flint_gguf_names_and_allocation(site: Path) -> None:
    """FLINT_GGUF_*: the name tables of Flint's GGUF loader, the NVFP4 type it repacks, the
    tensors it dequantizes, the dtypes of the parameters that receive the rest; and the
    load formats under which the GGUF alone is loaded (the default loader, which globs
    only the model's allow_patterns_overrides)."""
    flint = site / "vllm/models/flint"
    loader = flint / "gguf_nvfp4.py"
    assert _constant(loader, "_GLOBAL_NAMES") == vllm.FLINT_GGUF_GLOBAL
    assert _constant(loader, "_LAYER_NAMES") == vllm.FLINT_GGUF_LAYER
    assert _constant(loader, "_EXPERT_NAMES") == vllm.FLINT_GGUF_EXPERTS
    assert _constant(loader, "_GGUF_NVFP4") == vllm.FLINT_GGUF_NVFP4
    src = loader.read_text()
    assert 'name.endswith(".scale")' in src and 'tensors[base + ".scale"]' in src  # the scale rides along
    assert "GGMLQuantizationType.BF16" in src and "GGMLQuantizationType.F32" in src
    assert "Unsupported GGUF tensor type" in src and "Unexpected tensor in Flint GGUF" in src
    model = (flint / "model.py").read_text()
    assert _constant(flint / "model.py", "_GGUF_DEQUANTIZED") == vllm.FLINT_GGUF_DEQUANTIZED
    assert "model_config.dtype == torch.bfloat16" in model
    assert "make_attention_sink(self.num_heads, torch.float32)" in model
    assert all(p.startswith("self_attn.") for p in vllm.FLINT_FP32_PARAMS) and "self.softmax_offset =" in model
    assert "find_gguf_file(" in model and 'self.allow_patterns_overrides = ["*.gguf"]' in model
    prepare = _function(site / "vllm/model_executor/model_loader/default_loader.py", "_prepare_weights")
    assert "allow_patterns = allow_patterns_overrides" in prepare
    assert vllm.GGUF_LOAD_FORMATS == frozenset(vllm.LOAD_FORMAT_FILES)  # DefaultModelLoader's (test above)


def test_vllm_flint_maps_gguf_names_as_flightcheck_does(engine_python: str) -> None:
    """ggufnames.map_name against vLLM's own ``_map_name``, run in the engine's interpreter
    (a child: the checking process never imports vLLM): every tensor name of a Flint-shaped
    GGUF (support.ggufgen.flint_model; NVFP4 tensors by their base name) and names it refuses."""
    import json

    from flightcheck._checkpoint.ggufnames import map_name
    from support.ggufgen import NVFP4_T, flint_model

    names = [
        n.removesuffix(".weight") if t == NVFP4_T else n for n, _, t in flint_model()[1] if not n.endswith(".scale")
    ]
    names += [
        "rope_freqs.weight",
        "blk.0.attn_qkv",
        "output.weight",
        "token_embd",
        "blk.0.ffn_up_exps.weight",
        "blk.x.attn_q",
    ]
    code = (
        "import json, sys\n"
        "from vllm.models.flint.gguf_nvfp4 import _map_name\n"
        "out = {}\n"
        "for n in json.loads(sys.stdin.read()):\n"
        "    try:\n"
        "        out[n] = list(_map_name(n))\n"
        "    except ValueError:\n"
        "        out[n] = None\n"
        "print(json.dumps(out))\n"
    )
    got = subprocess.run(
        [engine_python, "-c", code], input=json.dumps(names), capture_output=True, text=True, timeout=300, check=True
    )
    theirs = json.loads(got.stdout.strip().splitlines()[-1])
    ours = {n: (None if (m := map_name(n)) is None else [m[0], m[2]]) for n in names}
    assert ours == theirs
    assert sum(v is None for v in theirs.values()) == 6  # the six added names are refused
