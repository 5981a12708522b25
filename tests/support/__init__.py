"""Helpers the test modules share; no test module imports another.

``tests`` is on ``sys.path`` through pytest's ``pythonpath`` setting, so these import as
``support.<module>`` from any folder under ``tests`` whatever the working directory.

- ``support.evaluation``: recorded hosts as facts, and evaluating checks on them
- ``support.cli``: running ``python -m flightcheck`` in a fresh process
- ``support.ckptgen``: safetensors checkpoints generated from published configs
- ``support.checkpoints``: ways a checkpoint on disk breaks, a tiny valid checkpoint
- ``support.fake_cuda`` / ``support.fake_engine``: fake CUDA toolkits and engine venvs
- ``support.toolchain``: recorded toolchain states, this machine's CUDA toolkit
- ``support.launch``: recorded launch deltas and the facts file of a healthy node

Recorded data stays under ``tests/fixtures`` (and the fake drivers under ``tests/fakes``);
the paths below are the only way helpers and tests find them. Tests never read
``../shared`` (users do not have it).
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"
HOSTS = FIXTURES / "hosts"
FAKES = TESTS / "fakes"
EXAMPLES = REPO / "src" / "flightcheck" / "_examples"
