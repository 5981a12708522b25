"""The arch FlashInfer's JIT builds for SM 12.x, by release (``_knowledge/flashinfer.py``
``jit_arch``), as read in the sdists of 0.2.0.post1-0.4.1 and the wheels from 0.5.0: torch's
flags (plain ``120``) up to 0.3.0.post1, ``CompilationContext``'s ``a`` suffix from 0.3.1,
the ``120f`` family from 0.6.7."""

from __future__ import annotations

import pytest

from flightcheck._knowledge import atlas
from flightcheck._knowledge import flashinfer as fi


@pytest.mark.parametrize(
    ("version", "built"),
    [
        ("0.2.0.post1", "120"),  # jit/core.py: torch.utils.cpp_extension.load
        ("0.2.14.post1", "120"),  # jit/cpp_ext.py: _get_cuda_arch_flags
        ("0.3.0.post1", "120"),
        ("0.3.1", "120a"),  # compilation_context.py: major >= 9 -> "a"
        ("0.3.1.post1", "120a"),
        ("0.4.1", "120a"),
        ("0.5.3", "120a"),
        ("0.6.6", "120a"),
        ("0.6.7", "120f"),
        ("0.7.4", "120f"),
        ("0.3.1+cu128", "120a"),
    ],
)
def test_sm120_jit_arch_by_release(version: str, built: str) -> None:
    assert fi.jit_arch("120f", version) == built


def test_other_archs_and_unknown_versions_are_left_as_named() -> None:
    assert fi.jit_arch("100a", "0.2.5") == "100a"
    assert fi.jit_arch("120f", None) == "120f"
    assert fi.jit_arch("120f", "not-a-version") == "120f"


def test_the_rule_covers_the_releases_the_atlas_read() -> None:
    """The rule was read from the oldest FlashInfer release the atlas holds, and each
    release where it changes is one the atlas holds (the one before it was read too)."""
    read = atlas.releases("flashinfer")
    assert fi.JIT_ARCH_READ_IN[0] == read[0] and fi.JIT_ARCH_READ_IN[1] in read
    assert {fi.SM12_SUFFIX_A_SINCE, fi.SM12_FAMILY_SINCE, fi.COMPANIONS_READ_SINCE} <= set(read)
    assert read.index(fi.SM12_SUFFIX_A_SINCE) == read.index("0.3.0.post1") + 1
