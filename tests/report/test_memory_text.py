"""The memory block of the text report: the bar and the lines around it."""

from __future__ import annotations

import io

GiB = 1 << 30


def test_memory_text_bar() -> None:
    from rich.console import Console

    from flightcheck._report.memory_text import bar, render_memory

    runs, over = bar({"weights": 50, "kv": 25, "reserve": 5, "free": 20}, 100, width=20)
    assert [(c, n) for c, _, n in runs] == [("█", 10), ("▓", 5), ("▒", 1), ("░", 4)] and over == 0
    runs, over = bar({"weights": 80, "kv": 60, "reserve": 5, "free": 0}, 100, width=20)
    assert sum(n for _, _, n in runs) == 20 and over == 9
    buf = io.StringIO()
    mem = {
        "per_rank": {
            "weights_bytes": 120 * GiB,
            "kv_bytes_per_token": 70272,
            "kv_budget_bytes": 4 * GiB,
            "usable_bytes": 129 * GiB,
            "reserve_bytes": 5 * GiB,
            "kv_bytes_for_max_model_len": 8 * GiB,
        },
        "max_model_len": 131072,
        "max_model_len_fit": 61136,
        "load_bytes": 1_030_000_000_000,
        "load_seconds_estimate": 600.0,
        "read_bytes_per_s": 1_700_000_000,
        "layout": {"tp": 8},
        "gpu": {"name": "NVIDIA H200", "memory_total_bytes": 140 * GiB},
        "gpu_memory_utilization": 0.92,
        "kv_cache_dtype": "auto",
        "attention": "mla",
    }
    render_memory(Console(file=buf, width=100, no_color=True), mem)
    text = buf.getvalue()
    assert "H200, 140.0 GiB x 0.92 = 129.0 GiB usable, TP 8" in text and "over by 4.0 GiB" in text
    assert (
        "max_model_len 131,072; fits up to 61,136" in text and "load: 1.03 TB per node (~10 min at 1.70 GB/s)" in text
    )
