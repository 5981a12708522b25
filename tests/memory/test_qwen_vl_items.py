"""Qwen-VL's profiled item by vLLM release (``flightcheck._knowledge.vllm.qwen_vl_item``),
its processor configs read from the checkpoint (``_memory.config.qwen_processor``) and the
encoder terms it gives (``_memory.budget.encoder_terms``)."""

from __future__ import annotations

from flightcheck._knowledge import vllm
from flightcheck._knowledge.vllm import QwenVisionProcessor, qwen_vl_item
from flightcheck._launch.intent_read import read_options
from flightcheck._memory.budget import Batch, encoder_terms
from flightcheck._memory.config import parse
from flightcheck._memory.weights import Layout
from support.qwen_vl import IMAGE, QWEN3_CONFIG, VIDEO

R = vllm._release
#: Qwen3-VL's processors: 4096 x 4096 images, 25,165,824-pixel videos, 16-pixel patches
QWEN3 = QwenVisionProcessor(True, 16, 2, 2, 65536, 16777216, 4096, 25165824, 2)


def test_qwen3_vl_before_0_13_counts_12_5_tokens_per_video_token() -> None:
    # 24,576 frames (the cap) fit 65,536 tokens; the video processor shrinks them to 32 x 32,
    # one token per two frames: 12,288 tokens, x 12.5 = 153,600 (what public 0.11.0 logs of
    # Qwen3-VL print: "Encoder cache will be initialized with a budget of 153600 tokens")
    for release in ("0.11.0", "0.11.2", "0.12.0"):
        item = qwen_vl_item(R(release), QWEN3, 65536)
        assert (item.modality, item.budget_tokens, item.encoder_tokens) == ("video", 153600, 12288)
        assert vllm.encoder_output_padded(R(release))


def test_qwen3_vl_from_0_13_neither_multiplies_nor_pads() -> None:
    # the 4096 x 4096 image's (256 x 256 patches) / 4 = 16,384 tokens beat the video's 12,288
    for release in ("0.13.0", "0.14.0", "0.15.0", "0.17.0", "0.33.0"):
        item = qwen_vl_item(R(release), QWEN3, 65536)
        assert (item.modality, item.budget_tokens, item.encoder_tokens) == ("image", 16384, 16384)
        assert not vllm.encoder_output_padded(R(release))
    assert not vllm.encoder_output_padded(R("0.10.2")) and not vllm.encoder_output_padded(None)


def test_qwen3_vl_video_by_release_when_it_beats_the_image() -> None:
    # 1024 x 1024 images (1,024 tokens) against 8 x 1024^2-pixel videos: the video wins
    p = QwenVisionProcessor(True, 16, 2, 2, 4096, 1 << 20, 4096, 8 << 20, 2)
    # 0.13.0 - 0.14.0: the most frames whose tokens fit max_model_len (the frames shrink
    # together once 8 MiB pixels bind, down to 32 x 32 each: one token per two frames)
    old = qwen_vl_item(R("0.14.0"), p, 4096)
    assert old.modality == "video" and old.budget_tokens == old.encoder_tokens == 4096
    # from 0.15.0: two frames of the largest image under 8 MiB / 2 pixels: 2048 x 2048 -> 4,096
    assert qwen_vl_item(R("0.15.0"), p, 4096) == vllm.QwenItem("video", 4096, 4096)
    # a short max_model_len bounds the old search, not the two-frame video
    assert qwen_vl_item(R("0.14.0"), p, 2048).budget_tokens <= 2048
    assert qwen_vl_item(R("0.15.0"), p, 2048).budget_tokens == 4096


def test_qwen2_vl_video_frames_fit_max_model_len() -> None:
    # Qwen2.5-VL: 3584 x 3584 images, 16,384 tokens a frame pair; at most 14 frames (7 pairs)
    p = QwenVisionProcessor(False, 14, 2, 2, 3136, 12845056, 3136, 12845056, 2)
    assert qwen_vl_item(R("0.33.0"), p, 4096).budget_tokens == 16384  # the image
    assert qwen_vl_item(R("0.33.0"), p, 32768) == vllm.QwenItem("video", 32768, 32768)  # 4 frames
    assert qwen_vl_item(R("0.33.0"), p, 1 << 20).budget_tokens == 7 * 16384  # the 14-frame cap


def test_processor_configs_are_read_and_required() -> None:
    cfg = parse(QWEN3_CONFIG, None, IMAGE, VIDEO)
    assert cfg.tower is not None and cfg.tower.qwen == QWEN3
    # no guessing: without the video processor's limits Qwen3-VL has no item
    assert parse(QWEN3_CONFIG, None, IMAGE, None).tower.qwen is None  # type: ignore[union-attr]
    # min_pixels / max_pixels win over size (vLLM's _get_vision_size)
    legacy = {**IMAGE, "min_pixels": 3136, "max_pixels": 1003520}
    assert parse(QWEN3_CONFIG, None, legacy, VIDEO).tower.qwen.image_max == 1003520  # type: ignore[union-attr]


def test_0_12_holds_the_padded_outputs() -> None:
    cfg = parse(QWEN3_CONFIG, None, IMAGE, VIDEO)
    _, held_012 = encoder_terms(cfg, Layout(2, 1), Batch(8192, 256, max_model_len=65536, release=R("0.12.0")))
    _, held_033 = encoder_terms(cfg, Layout(2, 1), Batch(8192, 256, max_model_len=65536, release=R("0.33.0")))
    # one video padded to 153,600 tokens x 8,192 values (2,048 x (1 + 3 deepstack)) x 2 bytes
    assert held_012 == 153600 * 8192 * 2
    # 0.33.0: one 16,384-token image as encoded
    assert held_033 == 16384 * 8192 * 2


def test_flags_that_turn_the_encoder_profile_off_or_limit_it() -> None:
    """--skip-mm-profiling and --language-model-only skip the encoder run; --limit-mm-per-prompt
    in each spelling vLLM takes gives per-modality counts (0.33.0 config/multimodal.py, the
    last flag winning)."""
    assert vllm.mm_profiling([]) == (None, None)
    assert vllm.mm_profiling(["--skip-mm-profiling"]) == ("--skip-mm-profiling", None)
    assert vllm.mm_profiling(["--skip-mm-profiling", "--no-skip-mm-profiling"]) == (None, None)
    assert vllm.mm_profiling(["--language-model-only"])[0] == "--language-model-only"
    _, limits = vllm.mm_profiling(['--limit-mm-per-prompt={"image": 2, "video": {"count": 0, "num_frames": 8}}'])
    assert limits == {"image": 2, "video": 0}
    _, limits = vllm.mm_profiling(["--limit-mm-per-prompt.video=0"])
    assert limits == {"video": 0}
    assert vllm.mm_limit(limits, "video") == 0 and vllm.mm_limit(limits, "image") == 999
    assert vllm.mm_profiling(["--limit-mm-per-prompt=not json"]) == (None, None)


def test_a_modality_limited_to_zero_is_not_profiled() -> None:
    cfg = parse(QWEN3_CONFIG, None, IMAGE, VIDEO)
    lay = Layout(2, 1)
    # 0.12.0 profiles the padded video (test_0_12_holds_the_padded_outputs); with videos
    # limited to 0 the image is the item, as encoded: 16,384 tokens
    no_video = Batch(8192, 256, max_model_len=65536, release=R("0.12.0"), mm_limits={"video": 0})
    assert encoder_terms(cfg, lay, no_video)[1] == 16384 * 8192 * 2
    assert qwen_vl_item(R("0.12.0"), QWEN3, 65536, {"video": 0}) == vllm.QwenItem("image", 16384, 16384)
    # both limited to 0 (what --language-model-only does): nothing is profiled
    assert qwen_vl_item(R("0.33.0"), QWEN3, 65536, {"image": 0, "video": 0}) is None
    none = Batch(8192, 256, max_model_len=65536, release=R("0.33.0"), mm_limits={"image": 0, "video": 0})
    assert encoder_terms(cfg, lay, none) == (0, 0)


def test_the_count_caps_the_items_per_prompt() -> None:
    # 576-token items, a 16,384-token budget: 28 items, unless one sequence of 576 tokens may
    # carry only one image (limit 1) and 8 sequences run: 8 items
    assert vllm.encoder_items(576, 16384, 8, 32768) == 28
    assert vllm.encoder_items(576, 16384, 8, 32768, limit=1) == 8


def test_a_tie_between_image_and_video_goes_by_release() -> None:
    # encoder_budget.py get_modality_with_max_tokens: max by tokens (the first, the image,
    # on a tie) before 0.17.0; by (tokens, name) from it (the video on a tie)
    p = QwenVisionProcessor(True, 16, 2, 2, 65536, 16777216, 4096, 16777216 * 2, 2)
    old, new = qwen_vl_item(R("0.16.0"), p, 65536), qwen_vl_item(R("0.17.0"), p, 65536)
    assert old is not None and new is not None
    assert old.budget_tokens == new.budget_tokens == 16384
    assert (old.modality, new.modality) == ("image", "video")


def test_the_launch_flags_reach_the_profile_run() -> None:
    from flightcheck._memory import batch_for
    from flightcheck._vocabulary.intent import Intent

    def batch(*flags: str) -> Batch:
        return batch_for(
            read_options(Intent(engine_flags=list(flags))), 80 << 30, "NVIDIA H100 80GB HBM3", "0.33.0", "9.0"
        )

    assert batch().encoder and batch().mm_limits is None
    assert not batch("--skip-mm-profiling").encoder
    assert not batch("--language-model-only").encoder
    limited = batch('--limit-mm-per-prompt={"video": 0}')
    assert limited.encoder and limited.mm_limits == {"video": 0}
    # the reserve without the encoder's profile: the text model's alone
    cfg = parse(QWEN3_CONFIG, None, IMAGE, VIDEO)
    from flightcheck._memory.budget import default_reserve

    _, on = default_reserve(cfg, Layout(2), "vllm", batch=batch())
    _, off = default_reserve(cfg, Layout(2), "vllm", batch=batch("--skip-mm-profiling"))
    assert on["vision_encoder"] > 0 and "vision_encoder" not in off


def test_the_image_options_cut_the_dummy_image_from_0_11_1() -> None:
    """--limit-mm-per-prompt's image width / height: the dummy image is the largest cut to
    min(largest, given) per side, then smart_resize'd; the budget's item keeps the largest
    image's tokens (vllm.MM_DUMMY_SIZE_SINCE)."""
    # 4096 x 4096 largest (16,384 tokens); cut to 512 x 512: 32 x 32 patches / 4 = 256
    item = qwen_vl_item(R("0.33.0"), QWEN3, 65536, None, (512, 512))
    assert item == vllm.QwenItem("image", 16384, 256)
    # one side given: 4096 high x 1024 wide, 256 x 64 patches / 4
    assert qwen_vl_item(R("0.33.0"), QWEN3, 65536, None, (1024, None)) == vllm.QwenItem("image", 16384, 4096)
    # larger than the largest image: vLLM warns and keeps the largest
    assert qwen_vl_item(R("0.33.0"), QWEN3, 65536, None, (100000, 100000)) == vllm.QwenItem("image", 16384, 16384)
    # below the processor's min_pixels (65,536): smart_resize grows 64 x 64 to 256 x 256, 64 tokens
    assert qwen_vl_item(R("0.33.0"), QWEN3, 65536, None, (64, 64)) == vllm.QwenItem("image", 16384, 64)
    # the release: 0.11.0 has no image options (the video is the item there unless limited to 0)
    assert qwen_vl_item(R("0.11.0"), QWEN3, 65536, {"video": 0}, (512, 512)) == vllm.QwenItem("image", 16384, 16384)
    assert qwen_vl_item(R("0.11.1"), QWEN3, 65536, {"video": 0}, (512, 512)) == vllm.QwenItem("image", 16384, 256)
    # the video still wins where it did: the options do not change the modality chosen
    video = qwen_vl_item(R("0.12.0"), QWEN3, 65536, None, (512, 512))
    assert video is not None and video.modality == "video"


def test_the_image_options_shrink_what_the_encoder_holds_not_how_many_items() -> None:
    cfg = parse(QWEN3_CONFIG, None, IMAGE, VIDEO)
    lay = Layout(2, 1)
    full = Batch(32768, 256, max_model_len=65536, release=R("0.33.0"))
    cut = Batch(32768, 256, max_model_len=65536, release=R("0.33.0"), mm_image_size=(512, 512))
    # 32,768 // 16,384 = 2 items either way, each 16,384 or 256 tokens x 8,192 values x 2 bytes
    assert encoder_terms(cfg, lay, full)[1] == 2 * 16384 * 8192 * 2
    assert encoder_terms(cfg, lay, cut)[1] == 2 * 256 * 8192 * 2
    assert encoder_terms(cfg, lay, cut)[0] < encoder_terms(cfg, lay, full)[0] / 32
    # 0.12.0 pads each output to the budget's item: the held outputs do not shrink there
    padded = Batch(
        32768, 256, max_model_len=65536, release=R("0.12.0"), mm_limits={"video": 0}, mm_image_size=(512, 512)
    )
    assert encoder_terms(cfg, lay, padded)[1] == 2 * 16384 * 8192 * 2


def test_the_image_options_are_read_in_every_spelling() -> None:
    assert vllm.mm_image_size(['--limit-mm-per-prompt={"image": {"count": 1, "width": 512, "height": 384}}']) == (
        512,
        384,
    )
    assert vllm.mm_image_size(["--limit-mm-per-prompt.image.width=512", "--limit-mm-per-prompt.image.count=1"]) == (
        512,
        None,
    )
    assert vllm.mm_image_size(['--limit-mm-per-prompt={"image": 2}']) is None
    assert vllm.mm_image_size(['--limit-mm-per-prompt={"image": {"count": 2}}']) is None
    assert vllm.mm_image_size(['--limit-mm-per-prompt={"video": {"width": 512}}']) is None
    assert vllm.mm_image_size(["--limit-mm-per-prompt=not json"]) is None
    # vLLM appends the dotted keys as one JSON after every other argument: they replace a JSON given
    assert (
        vllm.mm_image_size(['--limit-mm-per-prompt={"image": {"width": 512}}', "--limit-mm-per-prompt.video=0"]) is None
    )
    # and the launch's flags reach the profile run's batch
    from flightcheck._memory import batch_for
    from flightcheck._vocabulary.intent import Intent

    b = batch_for(
        read_options(Intent(engine_flags=['--limit-mm-per-prompt={"image": {"count": 1, "width": 512}}'])),
        80 << 30,
        "NVIDIA H100 80GB HBM3",
        "0.33.0",
        "9.0",
    )
    assert b.mm_image_size == (512, None) and b.mm_limits == {"image": 1}
