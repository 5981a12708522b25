"""``--mm-encoder-tp-mode data`` against the installed vLLM: which architectures' classes
support it (``flightcheck._knowledge.vllm.ENCODER_TP_DATA_SINCE``, every multimodal
architecture's class imported and asked for ``supports_encoder_tp_data``), and how many
equal items the busiest rank encodes (model_executor/models/vision.py
``get_load_balance_assignment``, which ``encoder_terms`` takes as ``ceil(items / tp)``)."""

from __future__ import annotations

from flightcheck._knowledge import vllm

PROBE = r"""
import importlib, json, sys
from vllm.model_executor.models.registry import _MULTIMODAL_MODELS
from vllm.model_executor.models.vision import get_load_balance_assignment
from vllm.config.multimodal import MultiModalConfig
supported, failed = [], {}
for arch, (mod, name) in sorted(_MULTIMODAL_MODELS.items()):
    try:
        module = importlib.import_module(mod if mod.startswith("vllm.") else "vllm.model_executor.models." + mod)
        cls = getattr(module, name)
    except Exception as exc:  # an optional dependency this CPU venv lacks
        failed[arch] = type(exc).__name__
        continue
    if getattr(cls, "supports_encoder_tp_data", False):
        supported.append(arch)
busiest = {}
for items, tp in json.loads(sys.argv[1]):
    _, counts, loads = get_load_balance_assignment([1000] * items, tp)
    busiest[f"{items},{tp}"] = max(counts)
print(json.dumps({"supported": supported, "failed": failed, "busiest": busiest,
                  "default": MultiModalConfig().mm_encoder_tp_mode}))
"""

SPLITS = [(1, 8), (2, 8), (8, 8), (9, 8), (3, 2), (5, 4), (16, 4)]


def test_supporting_architectures_and_the_busiest_rank_match_the_installed_vllm(
    conformance, engine_python: str, tmp_path
) -> None:
    got = conformance.probe(engine_python, PROBE, SPLITS, tmp_path, timeout=600)
    assert got["default"] == "weights"
    # the classes that could not be imported here are few, and none is in the table
    assert len(got["failed"]) <= 5, got["failed"]
    assert not set(got["failed"]) & set(vllm.ENCODER_TP_DATA_SINCE), got["failed"]
    v = tuple(int(x) for x in conformance.pinned_versions()["vllm"].split("."))
    mine = {a for a in vllm.ENCODER_TP_DATA_SINCE if vllm.encoder_data_parallel(v, (a,), "data")}
    assert mine == set(got["supported"]), (sorted(mine - set(got["supported"])), sorted(set(got["supported"]) - mine))
    for items, tp in SPLITS:
        assert got["busiest"][f"{items},{tp}"] == -(-items // tp), (items, tp)
