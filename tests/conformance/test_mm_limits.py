"""--limit-mm-per-prompt / --language-model-only as flightcheck reads them
(``flightcheck._knowledge.vllm.mm_profiling`` / ``mm_limit`` / ``mm_image_size``) against
the installed vLLM's own ``MultiModalConfig`` (config/multimodal.py), and JSON-object
flags in their JSON and dotted spellings (``vllm._json_arg``) against its own
``FlexibleArgumentParser`` (utils/argparse_utils.py), in its interpreter."""

from __future__ import annotations

from flightcheck._knowledge import vllm

PROBE = r"""
import json, sys
from vllm.config.multimodal import MultiModalConfig
out = []
for kwargs in json.loads(sys.argv[1]):
    c = MultiModalConfig(**kwargs)
    out.append([c.get_limit_per_prompt(m) for m in ("image", "video", "audio")])
print(json.dumps(out))
"""

CASES = [
    (
        ['--limit-mm-per-prompt={"image": 2, "video": {"count": 0, "num_frames": 8}}'],
        {"image": 2, "video": {"count": 0, "num_frames": 8}},
    ),
    (['--limit-mm-per-prompt={"image": 0}'], {"image": 0}),
    ([], {}),
]


def test_limits_match_the_installed_vllm(conformance, engine_python: str, tmp_path) -> None:
    kwargs = [{"limit_per_prompt": doc} for _, doc in CASES] + [{"language_model_only": True}]
    theirs = conformance.probe(engine_python, PROBE, kwargs, tmp_path)
    for (flags, _), got in zip(CASES, theirs, strict=False):
        skip, limits = vllm.mm_profiling(flags)
        assert skip is None
        assert [vllm.mm_limit(limits, m) for m in ("image", "video", "audio")] == got
    # --language-model-only: every modality 0 in vLLM; flightcheck skips the encoder's profile
    assert theirs[-1] == [0, 0, 0]
    assert vllm.mm_profiling(["--language-model-only"])[0] == "--language-model-only"


PARSE_PROBE = r"""
import json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.engine.arg_utils import EngineArgs
from vllm.config.multimodal import MultiModalConfig
out = []
for argv in json.loads(sys.argv[1]):
    args = EngineArgs.add_cli_args(FlexibleArgumentParser()).parse_args(argv)
    image = MultiModalConfig(limit_per_prompt=args.limit_mm_per_prompt).limit_per_prompt.get("image")
    size = [getattr(image, "width", None), getattr(image, "height", None)]
    out.append([args.limit_mm_per_prompt, args.speculative_config, size])
print(json.dumps(out))
"""

#: (option, value) pairs, as a command line gives them
SPELLINGS = [
    [("--limit-mm-per-prompt", '{"image": {"count": 1, "width": 512, "height": 384}, "video": 0}')],
    [("--limit-mm-per-prompt.image.width", "512"), ("--limit-mm-per-prompt.image.count", "1")],
    # the dotted keys are appended as one JSON after everything else: they replace the JSON
    [("--limit-mm-per-prompt", '{"video": 0}'), ("--limit-mm-per-prompt.image", "2")],
    [("--limit-mm-per-prompt.image", "2"), ("--limit-mm-per-prompt", '{"image": {"width": 640}}')],
    [("--limit-mm-per-prompt.image", '{"count": 1, "height": 300}'), ("--limit-mm-per-prompt.image.width", "200")],
    [("--speculative-config.method", "mtp"), ("--speculative-config", '{"num_speculative_tokens": 2}')],
    [("--speculative-config", '{"method": "eagle3", "model": "d"}'), ("--speculative-config", '{"method": "mtp"}')],
    [("--speculative-config.method", "mtp"), ("--speculative-config.num_speculative_tokens", "3")],
]


def test_json_flags_read_as_the_installed_parser_reads_them(conformance, engine_python: str, tmp_path) -> None:
    """vllm._json_arg (and mm_image_size on it) against vLLM's own FlexibleArgumentParser
    and MultiModalConfig: the JSON form, the dotted form, and the two mixed."""
    argvs = [[w for pair in case for w in pair] for case in SPELLINGS]
    theirs = conformance.probe(engine_python, PARSE_PROBE, argvs, tmp_path)
    for case, (limits, spec, size) in zip(SPELLINGS, theirs, strict=True):
        flags = [f"{name}={value}" for name, value in case]
        mine_limits, err = vllm._json_arg(flags, vllm.LIMIT_MM_PER_PROMPT_FLAG)
        assert err is None
        assert (mine_limits or {}) == limits, case
        mine_spec, err = vllm._json_arg(flags, vllm.SPECULATIVE_CONFIG_FLAG)
        assert err is None and mine_spec == spec, case
        got = vllm.mm_image_size(flags)
        assert list(got or (None, None)) == size, case
