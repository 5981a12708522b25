"""--limit-mm-per-prompt / --language-model-only as flightcheck reads them
(``flightcheck._knowledge.vllm.mm_profiling`` / ``mm_limit``) against the installed vLLM's
own ``MultiModalConfig.get_limit_per_prompt`` (config/multimodal.py), in its interpreter."""

from __future__ import annotations

import json
import subprocess

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
    run = subprocess.run(
        [engine_python, "-c", PROBE, json.dumps(kwargs)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    theirs = json.loads(run.stdout.strip().splitlines()[-1])
    for (flags, _), got in zip(CASES, theirs):
        skip, limits = vllm.mm_profiling(flags)
        assert skip is None
        assert [vllm.mm_limit(limits, m) for m in ("image", "video", "audio")] == got
    # --language-model-only: every modality 0 in vLLM; flightcheck skips the encoder's profile
    assert theirs[-1] == [0, 0, 0]
    assert vllm.mm_profiling(["--language-model-only"])[0] == "--language-model-only"
