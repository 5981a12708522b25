"""gpt-oss in vLLM's memory profile (``flightcheck._knowledge.vllm.memory_gptoss``): the MXFP4
MoE backend by release and GPU, what each backend holds for the experts and allocates in the
profile run, the sampler FlashInfer's presence decides, and the public logs they explain."""

from __future__ import annotations

import pytest

from flightcheck._knowledge import vllm
from flightcheck._knowledge.vllm._versions import _release
from flightcheck._memory.bound import bound_terms
from flightcheck._memory.budget import Batch, forward_peak
from flightcheck._memory.config import parse
from flightcheck._memory.weights import Layout, mxfp4_padding
from support.memory_accuracy import GiB, _config, evaluate, load

H100 = int(79.19 * GiB)


def _cfg(name: str):
    _, configs = load()
    return parse(_config(configs[name]))


@pytest.mark.parametrize(
    ("version", "cc", "expected"),
    [
        # 0.10.1.1 pins torch 2.7.1: Marlin on Hopper (point 29's warning)
        ("0.10.1.1", "9.0", ("marlin",)),
        ("0.10.1.1", "8.0", ("marlin",)),
        ("0.10.1.1", "10.0", ("flashinfer", "triton")),  # FlashInfer an optional extra
        # torch 2.8 from 0.10.2; triton_kernels optional until 0.12.0 vendors it
        ("0.10.2", "9.0", ("marlin", "triton")),
        ("0.11.2", "9.0", ("marlin", "triton")),  # point 112: Marlin; issue 33155 (0.14.1): Triton
        ("0.11.2", "10.0", ("flashinfer",)),  # FlashInfer a dependency from 0.11.1
        ("0.12.0", "9.0", ("triton",)),
        ("0.19.0", "9.0", ("triton",)),
        ("0.33.0", "9.0", ("triton",)),
        ("0.19.0", "8.0", ("marlin",)),  # point 39: A100, 13.72 GiB of Marlin-padded weights
        ("0.13.0", "12.1", ("marlin",)),  # point 11: GB10, 13.72 GiB
        ("0.11.2", "12.0", ("marlin", "triton")),  # no (9, 0) <= cc < (11, 0) limit before 0.12.0
    ],
)
def test_mxfp4_backend_by_release_and_gpu(version: str, cc: str, expected: tuple[str, ...]) -> None:
    assert vllm.mxfp4_backends(_release(version), cc) == expected


def test_mxfp4_backend_marlin_forced_and_unknowns() -> None:
    assert vllm.mxfp4_backends(_release("0.19.0"), "9.0", {"VLLM_MXFP4_USE_MARLIN": "1"}) == ("marlin",)
    # unknown GPU or release: Marlin first (the larger experts: less KV), Triton left open
    assert vllm.mxfp4_backends(None, "9.0") == ("marlin", "triton")
    assert vllm.mxfp4_backends(_release("0.19.0"), None) == ("marlin", "triton")
    assert not vllm.memory_gptoss.runs_mxfp4(_release("0.10.0")) and vllm.memory_gptoss.runs_mxfp4(_release("0.10.1"))


def _stored_and_experts(cfg) -> tuple[float, float]:
    """gpt-oss's stored bytes (GiB) and its experts' share, from config.json's shapes: MXFP4
    blocks (16 bytes per 32 values) + one scale byte per 32 values + bf16 biases; attention,
    router, embeddings and the LM head in bf16."""
    h, i, e, n = cfg.hidden, cfg.moe_intermediate, cfg.experts, cfg.layers
    experts = n * e * ((2 * i * h + i * h) * 17 / 32 + (2 * i + h) * 2)
    attn = n * 2 * (h * (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim + cfg.heads * cfg.head_dim * h)
    rest = 2 * 2 * cfg.vocab * h + n * 2 * h * e
    return (experts + attn + rest) / GiB, experts / GiB


def test_expert_weights_by_backend_match_the_logged_weights() -> None:
    """Marlin's padded shapes give the 65.9651 GiB of points 29 / 112 (gpt-oss-120b) and the
    13.72 of points 11 / 39 (gpt-oss-20b); the Triton path's second copy of the scales the
    64.38 of point 58 / issue 33155 and the 13.47 of point 57, short by the swizzled layouts'
    own padding (not derived)."""
    for name, marlin_logged, triton_logged in (("gpt-oss-120b", 65.9651, 64.38), ("gpt-oss-20b", 13.72, 13.47)):
        cfg = _cfg(name)
        assert cfg.quant.method == "mxfp4"
        stored, experts = _stored_and_experts(cfg)
        marlin = stored + experts * (mxfp4_padding(cfg, Layout(1), "marlin") - 1)
        triton = stored + experts * (mxfp4_padding(cfg, Layout(1), "triton") - 1)
        assert abs(marlin - marlin_logged) < 0.1, (name, marlin)
        assert -0.3 < triton - triton_logged < 0.0, (name, triton)
    assert vllm.expert_weight_factor("marlin", 2880, 2880) == pytest.approx((3072 / 2880) * (2944 / 2880))
    assert vllm.expert_weight_factor("triton", 2880, 2880) == pytest.approx(18 / 17)
    # TP 4: the per-rank intermediate 720 is padded to 768 on Marlin (128) and Triton (64)
    assert vllm.expert_weight_factor("triton", 2880, 720) == pytest.approx(18 / 17 * 768 / 720)


def test_moe_transient_by_backend() -> None:
    # Marlin: top_k x (max(2N, K) + N) over the padded N = 2944, K = 3072; Triton: top_k x N
    assert vllm.moe_transient_per_token("marlin", 2880, 2880, 4) == 4 * (2 * 2944 + 2944)
    assert vllm.moe_transient_per_token("triton", 2880, 2880, 4) == 4 * 2880
    assert vllm.moe_transient_per_token("flashinfer", 2880, 2880, 4) is None
    cfg = _cfg("gpt-oss-120b")
    generic, marlin, triton = (forward_peak(cfg, Layout(1), 8192, b) for b in ("", "marlin", "triton"))
    assert triton < generic < marlin
    # neither backend chunks: past VLLM_FUSED_MOE_CHUNK_SIZE the transient keeps growing
    big = 2 * vllm.FUSED_MOE_CHUNK_TOKENS
    assert forward_peak(cfg, Layout(1), big, "marlin") > forward_peak(cfg, Layout(1), big, "")
    # a checkpoint that is not MXFP4 keeps the fused_moe estimate whatever the backend says
    qwen = _cfg("qwen3-30b-a3b")
    assert forward_peak(qwen, Layout(1), 8192, "triton") == forward_peak(qwen, Layout(1), 8192)


@pytest.mark.parametrize(
    ("version", "env", "open_"),
    [
        ("0.10.1.1", None, True),
        ("0.11.0", None, True),
        ("0.8.0", None, True),
        ("0.11.2", None, False),  # opt-in from 0.11.2
        ("0.19.0", None, False),
        ("0.10.1.1", {"VLLM_USE_FLASHINFER_SAMPLER": "0"}, False),
        ("0.10.1.1", {"VLLM_USE_FLASHINFER_SAMPLER": "1"}, True),  # still only if it imports
    ],
)
def test_sampler_install_open(version: str, env: dict[str, str] | None, open_: bool) -> None:
    assert vllm.sampler_install_open(_release(version), env) is open_
    assert vllm.sampler_install_open(_release(version), env, v0=True) is False
    assert vllm.sampler_install_open(None) is False


def test_bound_terms_for_the_sampler_and_the_backend() -> None:
    cfg = _cfg("gpt-oss-120b")
    lay = Layout(1)
    fi = Batch(8192, 1024, sampler="flashinfer", mxfp4_backend="marlin")
    acts = max(forward_peak(cfg, lay, 8192, "marlin"), 0)
    from flightcheck._memory.budget import activations

    fi_peak = activations(cfg, lay, fi.tokens, fi.seqs, "flashinfer", "marlin")
    sort_peak = activations(cfg, lay, fi.tokens, fi.seqs, "sort", "marlin")
    # 1024 requests x 201,088 x (38 - 14) bytes: 4.6 GiB
    assert (sort_peak - fi_peak) / GiB == pytest.approx(1024 * 201088 * 24 / GiB, abs=0.01)
    one_h100 = {
        "engine_version": "0.10.1.1",
        "total": H100,
        "utilization_set": True,
        "cudagraphs_counted": False,
        "tp": 1,
        "comm": None,
        "lazy_connect": False,
    }
    terms = bound_terms(
        **one_h100,
        activations=max(acts, fi_peak),
        sampler_open=sort_peak - fi_peak,
        mxfp4_open=(0, int(1.6 * GiB)),
    )
    assert terms["sampler_install"].below == sort_peak - fi_peak and terms["sampler_install"].above == 0
    assert terms["mxfp4_backend"].above == int(1.6 * GiB) and terms["mxfp4_backend"].below == 0
    assert "topk_topp_sampler.py" in terms["sampler_install"].source
    plain = bound_terms(**one_h100)
    assert "sampler_install" not in plain and "mxfp4_backend" not in plain


def test_the_public_gpt_oss_points() -> None:
    rows = {r.index: r for r in evaluate()}
    # 112: gpt-oss-120b, one H100, 98,304 tokens, 0.11.2, Marlin, max_num_seqs 6: the activation
    # peak is the MoE transient of 8,192 tokens (0.65 GiB), not a 1,024-request sampler (7.3 GiB)
    r = rows[112]
    assert r.logged_gib == 8.99 and r.predicted_gib is not None and abs(r.predicted_gib - 8.99) < 0.3
    assert r.inside
    # 57: gpt-oss-20b on an H100 (~0.11.0): the PyTorch sort over 1,024 requests, 7.38 GiB logged
    r57 = rows[57]
    assert r57.terms is not None and abs(r57.terms["activations"][0] - 7.38) < 0.1
    # 28 / 29: gpt-oss-120b on one H100 that found no KV room: FC402 stops both
    assert rows[28].within and rows[29].within
    assert rows[28].predicted_stop and rows[29].predicted_stop
    # 5: TP 4 across nodes on A100s (0.10.1.1, Marlin): within
    assert rows[5].within


def test_memory_model_counts_the_backend(tmp_path) -> None:
    """The tool's own weights follow the backend: Triton on Hopper from 0.12.0, Marlin on
    0.10.1.1; 0.11.2 on Hopper leaves it open (the ``mxfp4_backend`` term of the bound)."""
    from flightcheck._checkpoint import load as load_ckpt
    from flightcheck._memory import build
    from flightcheck._vocabulary.intent import Intent
    from support.ckptgen import load_config, write_checkpoint

    path = write_checkpoint(tmp_path / "oss", load_config("gpt-oss-120b"), shards=8)
    ck = load_ckpt(str(path), cache_env={"FLIGHTCHECK_NO_CACHE": "1"})

    def model(version: str):
        return build(
            ck,
            Intent(model=str(path), max_model_len=16384),
            total=H100,
            engine_version=version,
            gpu_name="NVIDIA H100 80GB HBM3",
            compute_capability="9.0",
        )

    marlin, open_, triton = model("0.10.1.1"), model("0.11.2"), model("0.19.0")
    assert marlin.batch.mxfp4_backend == "marlin" and triton.batch.mxfp4_backend == "triton"
    assert triton.weights() < marlin.weights()
    # logged: 65.9651 (Marlin, points 29 / 112) - 64.38 (Triton, point 58 / issue 33155) = 1.59
    assert (marlin.weights() - triton.weights()) / GiB == pytest.approx(1.59, abs=0.25)
    assert "mxfp4_backend" in open_.bound_terms() and open_.bound_terms()["mxfp4_backend"].above > 0
    assert "mxfp4_backend" not in triton.bound_terms()
    # 0.10.1.1 counts FlashInfer's sampler installed; without it the profile sorts
    assert marlin.bound_terms()["sampler_install"].below > 4 * GiB


@pytest.mark.parametrize(
    ("version", "chunked", "expected"),
    [
        # 0.10.1.1 - 0.11.0: without chunked prefill the batch is the context; max_num_seqs capped by it
        ("0.10.1.1", False, (98304, 1024)),
        ("0.11.0", None, (8192, 1024)),
        # from 0.11.1: max(context, default), then at most max_num_seqs x context
        ("0.11.2", False, (98304, 1024)),
        ("0.33.0", False, (98304, 1024)),
        ("0.11.2", None, (8192, 1024)),
        ("0.10.0", False, (8192, 1024)),  # not read: unchanged
    ],
)
def test_batch_by_length(version: str, chunked: bool | None, expected: tuple[int, int]) -> None:
    assert vllm.batch_by_length(_release(version), 8192, 1024, 98304, chunked_prefill=chunked) == expected


def test_batch_by_length_caps_and_launch_values() -> None:
    # a short context: without chunked prefill 0.10.1.1 profiles 2,048 tokens and at most 2,048 requests
    assert vllm.batch_by_length(_release("0.10.1.1"), 8192, 1024, 2048, chunked_prefill=False) == (2048, 1024)
    assert vllm.batch_by_length(_release("0.10.1.1"), 8192, 1024, 512, chunked_prefill=False) == (512, 512)
    # 0.11.1+: the default batch never exceeds max_num_seqs x max_model_len (6 x 1,024 here)
    assert vllm.batch_by_length(_release("0.11.2"), 8192, 6, 1024) == (6144, 6)
    # the launch's --max-num-batched-tokens stands
    assert vllm.batch_by_length(_release("0.11.2"), 4096, 6, 98304, chunked_prefill=False, tokens_given=True) == (
        4096,
        6,
    )


def test_no_chunked_prefill_flag_reaches_the_batch() -> None:
    """``--no-enable-chunked-prefill`` (read once, ``memory_options``) makes the profile run
    the whole 98,304-token context: gpt-oss-120b's Marlin MoE transient is then ~7 GiB."""
    from flightcheck._knowledge.vllm.command import engine_options
    from flightcheck._memory import batch_for
    from flightcheck._vocabulary.intent import Intent

    assert engine_options(["--no-enable-chunked-prefill"])["memory_options"] == {"enable_chunked_prefill": False}
    assert engine_options(["--no-enable-chunked-prefill", "--enable-chunked-prefill"])["memory_options"] == {
        "enable_chunked_prefill": True
    }
    assert engine_options([])["memory_options"] == {}
    off = Intent(model="m", max_model_len=98304, memory_options={"enable_chunked_prefill": False})
    on = Intent(model="m", max_model_len=98304)
    args = (H100, "NVIDIA H100 80GB HBM3", "0.11.2", "9.0")
    assert batch_for(off, *args).tokens == 98304 and batch_for(on, *args).tokens == 8192
    cfg = _cfg("gpt-oss-120b")
    assert forward_peak(cfg, Layout(1), 98304, "marlin") / GiB > 6.5
