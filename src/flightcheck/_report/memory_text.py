"""The memory block of the text report: one bar per rank a person reads at a glance.

    Memory per GPU (B300, 268.6 GiB x 0.92 = 247.1 GiB usable, TP 8)
      [████████████████████████████▓▓▓▒░░░░░░░░░░░░░░░░░]
       weights 181.6 GiB · KV 8.6 GiB (131,072 tok) · reserve 3.4 GiB · free 53.5 GiB
      max_model_len 131,072; fits up to 1,802,224 · 70,272 B/token (bf16 KV)
      load: 1.56 TB per node

Weights, the KV cache of one max-length sequence, the reserve and what is free, scaled to
the usable memory; what does not fit is drawn past the bar's end in red.
"""

from __future__ import annotations

from typing import Any

from flightcheck._knowledge.units import gib as _gib
from flightcheck._knowledge.units import mem_size
from flightcheck._knowledge.units import si_bytes as _size
from flightcheck._vocabulary.intent import AUTO

WIDTH = 50
_SEGMENTS = (("weights", "█", "blue"), ("kv", "▓", "magenta"), ("reserve", "▒", "yellow"), ("free", "░", "green"))


def bar(parts: dict[str, float], usable: float, width: int = WIDTH) -> tuple[list[tuple[str, str, int]], int]:
    """((char, style, cells) runs filling at most ``width``, cells of overflow past it).

    Each part gets its share of ``usable``; a part that exists gets at least one cell."""
    runs: list[tuple[str, str, int]] = []
    used = 0
    wanted = 0
    for key, ch, style in _SEGMENTS:
        value = max(0.0, parts.get(key, 0.0))
        cells = round(value / usable * width) if usable > 0 else 0
        if value > 0 and cells == 0 and key != "free":
            cells = 1
        wanted += cells if key != "free" else 0
        cells = min(cells, width - used)
        if cells > 0:
            runs.append((ch, style, cells))
            used += cells
    return runs, max(0, wanted - width)


def render_memory(console: Any, memory: dict[str, Any]) -> None:
    """Print the memory block (``console``: a rich Console)."""
    from rich.markup import escape

    per = memory.get("per_rank") or {}
    if memory.get("error"):
        console.print(f"[bold]Memory per GPU[/bold]: not computed ({escape(str(memory['error']))})")
        return
    layout = memory.get("layout") or {}
    lay = (
        f"TP {layout.get('tp', 1)}"
        + (f" x PP {layout['pp']}" if layout.get("pp", 1) > 1 else "")
        + (f" x DP {layout['dp']}" if layout.get("dp", 1) > 1 else "")
        + (" + EP" if layout.get("ep") else "")
    )
    usable = per.get("usable_bytes")
    weights = per.get("weights_bytes") or 0
    gpu = memory.get("gpu") or {}
    if usable is None:
        console.print(
            f"[bold]Memory per GPU[/bold] ({lay}): weights {_gib(weights)}; GPU memory unknown, fit not evaluated"
        )
        _lines(console, memory, per)
        return
    name = (gpu.get("name") or "GPU").removeprefix("NVIDIA ")
    util = memory.get("gpu_memory_utilization")
    console.print(
        f"[bold]Memory per GPU[/bold] ({escape(name)}, "
        f"{_gib(gpu.get('memory_total_bytes') or 0)} x {util:g} = {_gib(usable)} usable, {lay})"
    )
    kv = per.get("kv_bytes_for_max_model_len") or 0
    reserve = per.get("reserve_bytes") or 0
    free = usable - weights - kv - reserve
    parts = {"weights": weights, "kv": kv, "reserve": reserve, "free": max(0.0, free)}
    runs, overflow = bar(parts, usable)
    text = "".join(f"[{style}]{ch * n}[/{style}]" for ch, style, n in runs)
    over = ""
    if free < 0:
        over = f"[bold red]{'✗' * min(10, max(1, overflow))} over by {_gib(-free)}[/bold red]"
    console.print(f"  \\[{text}]{over}")
    length = memory.get("max_model_len")
    tok = f" ({length:,} tok)" if isinstance(length, int) and length > 0 else ""
    console.print(
        f"   [blue]weights[/blue] {_gib(weights)} · [magenta]KV[/magenta] {_gib(kv)}{tok} · "
        f"[yellow]reserve[/yellow] {_gib(reserve)} · [green]free[/green] {_gib(max(0.0, free))}"
    )
    bound = memory.get("kv_budget_bound") or {}
    if bound:
        # the facts not known before the launch: the KV budget as [low, high], term by term
        terms = ", ".join(
            f"{escape(str(k))} -{_gib(t.get('below_bytes') or 0)}/+{_gib(t.get('above_bytes') or 0)}"
            for k, t in (bound.get("terms") or {}).items()
        )
        console.print(
            f"   KV budget {_gib(per.get('kv_budget_bytes') or 0)}, between "
            f"{_gib(bound.get('low_bytes') or 0)} and {_gib(bound.get('high_bytes') or 0)} ({terms})"
        )
    _lines(console, memory, per)


def _lines(console: Any, memory: dict[str, Any], per: dict[str, Any]) -> None:
    length, fit = memory.get("max_model_len"), memory.get("max_model_len_fit")
    bits = []
    if length == AUTO:
        bits.append("max_model_len auto" + (f": up to {fit:,}" if fit else ""))
    elif length:
        bits.append(f"max_model_len {length:,}" + (f"; fits up to {fit:,}" if fit is not None else ""))
    if per.get("kv_bytes_per_token"):
        bits.append(
            f"{per['kv_bytes_per_token']:,} B/token ({memory.get('kv_cache_dtype', 'auto')} KV, "
            f"{memory.get('attention', 'standard')})"
        )
    if bits:
        console.print("   " + " · ".join(bits))
    spec = memory.get("speculative") or {}
    if spec.get("draft_weights_bytes") is not None:
        # the draft is already inside the weights and B/token above; this says how much
        tp = f" at TP {spec['draft_tp']}" if spec.get("draft_tp") else ""
        console.print(
            f"   speculative ({spec.get('method')}): draft {spec.get('draft_layers', 0)} layer(s){tp}, "
            f"{mem_size(spec['draft_weights_bytes'])} of the weights · "
            f"{spec.get('draft_kv_bytes_per_token', 0):,} B/token of the KV"
        )
    load = memory.get("load_bytes")
    if load:
        est = memory.get("load_seconds_estimate")
        rate = memory.get("read_bytes_per_s")
        tail = f" (~{est / 60:.0f} min at {rate / 1e9:.2f} GB/s)" if est and rate else ""
        console.print(f"   load: {_size(load)} per node{tail}")
