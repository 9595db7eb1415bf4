"""PNG plots of records: throughput against latency across a sweep, and the TTFT distribution.

Each server label gets one hue; within a label, heavier load points are drawn darker. The figures
are built with matplotlib's object API (no pyplot state), so no display is needed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import Colormap
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from benchmarks.report import load_order, point_name

PALETTES = ("Blues", "Oranges", "Greens", "Reds", "Purples", "Greys")
Record = Mapping[str, Any]


def by_label(records: Sequence[Record]) -> dict[str, list[Record]]:
    """Records grouped by label (first-seen order), each group sorted from lightest load up."""
    groups: dict[str, list[Record]] = {}
    for record in records:
        groups.setdefault(record["label"], []).append(record)
    for group in groups.values():
        group.sort(key=lambda record: load_order(record["load"]))
    return groups


def _palette(index: int) -> Colormap:
    return colormaps[PALETTES[index % len(PALETTES)]]


def _title_suffix(records: Sequence[Record]) -> str:
    work = records[0]["workload"]
    shapes = {
        (r["workload"].get("input_len"), r["workload"]["output_len"], r["workload"]["dataset"])
        for r in records
    }
    if len(shapes) > 1:
        return "mixed workloads"
    if work["dataset"] == "random":
        return f"random prompts, {work.get('input_len')} in / {work['output_len']} out tokens"
    return f"{Path(work['dataset']).name}, up to {work['output_len']} out tokens"


def _latency_panel(ax: Axes, groups: Mapping[str, list[Record]], metric: str, name: str) -> None:
    for index, (label, group) in enumerate(groups.items()):
        color = _palette(index)(0.75)
        x = [r["metrics"]["output_throughput"] for r in group]
        p50 = [r["metrics"][metric]["p50"] for r in group]
        p99 = [r["metrics"][metric]["p99"] for r in group]
        ax.plot(x, p50, "o-", color=color, label=f"{label} p50")
        ax.plot(x, p99, "^--", color=color, alpha=0.7, label=f"{label} p99")
        for xi, yi, record in zip(x, p50, group, strict=True):
            if yi is not None:
                ax.annotate(
                    point_name(record["load"]),
                    (xi, yi),
                    textcoords="offset points",
                    xytext=(4, 6),
                    fontsize=8,
                    color=color,
                )
    ax.set_title(name)
    ax.set_xlabel("output throughput (tokens/s)")
    ax.set_ylabel(f"{name} (ms)")
    ax.margins(x=0.12, y=0.1)
    ax.set_xlim(left=0)
    ax.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)


def plot_throughput_latency(records: Sequence[Record], path: Path) -> Path:
    """TTFT and TPOT (p50, p99) against output throughput, one line per label across its loads."""
    groups = by_label(records)
    fig = Figure(figsize=(12, 5), layout="constrained")
    ttft_ax, tpot_ax = fig.subplots(1, 2)
    _latency_panel(ttft_ax, groups, "ttft_ms", "TTFT: time to first token")
    _latency_panel(tpot_ax, groups, "tpot_ms", "TPOT: time per output token")
    fig.suptitle(f"Latency against output throughput — {_title_suffix(records)}")
    fig.savefig(path, dpi=110)
    return path


def plot_ttft_distribution(records: Sequence[Record], path: Path) -> Path:
    """The TTFT of every request: histogram and cumulative distribution, per label and load."""
    groups = by_label(records)
    fig = Figure(figsize=(12, 5), layout="constrained")
    hist_ax, cdf_ax = fig.subplots(1, 2)
    every = [v for r in records for v in r["samples"]["ttft_ms"]]
    bins, log_scale = _bins(every)
    for index, (label, group) in enumerate(groups.items()):
        palette = _palette(index)
        for j, record in enumerate(group):
            values = sorted(record["samples"]["ttft_ms"])
            if not values:
                continue
            color = palette(0.95 - 0.45 * (len(group) - 1 - j) / max(1, len(group) - 1))
            name = f"{label} {point_name(record['load'])} (n={len(values)})"
            hist_ax.hist(values, bins=bins, histtype="step", linewidth=1.5, color=color, label=name)
            fractions = [(i + 1) / len(values) for i in range(len(values))]
            cdf_ax.step(values, fractions, where="post", color=color, linewidth=1.5, label=name)
    for fraction, text in ((0.5, "p50"), (0.99, "p99")):
        cdf_ax.axhline(fraction, color="grey", linewidth=0.8, linestyle=":")
        cdf_ax.annotate(
            text,
            (0, fraction),
            xycoords=("axes fraction", "data"),
            xytext=(3, 2),
            textcoords="offset points",
            fontsize=8,
            color="grey",
        )
    hist_ax.set_title("TTFT histogram")
    hist_ax.set_xlabel("time to first token (ms)")
    hist_ax.set_ylabel("requests")
    cdf_ax.set_title("TTFT cumulative distribution")
    cdf_ax.set_xlabel("time to first token (ms)")
    cdf_ax.set_ylabel("fraction of requests at or below")
    cdf_ax.set_ylim(0, 1.02)
    for ax in (hist_ax, cdf_ax):
        ax.grid(True, alpha=0.3)
        if log_scale:
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
            ax.set_xlabel("time to first token (ms, log scale)")
        else:
            ax.set_xlim(left=0)
        ax.legend(fontsize=8)
    fig.suptitle(f"Time to first token — {_title_suffix(records)}")
    fig.savefig(path, dpi=110)
    return path


def _bins(values: Sequence[float], count: int = 40) -> tuple[list[float], bool]:
    """Histogram bins for `values`, and whether they are logarithmic (for a spread of 30x or more:
    TTFTs that include queueing span from milliseconds to seconds)."""
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    if low > 0 and high / low >= 30:
        low, high = low / 1.05, high * 1.05
        return [low * (high / low) ** (i / count) for i in range(count + 1)], True
    top = high * 1.02 or 1.0
    return [top * i / count for i in range(count + 1)], False


def plot_all(records: Sequence[Record], out_dir: Path, stem: str) -> list[Path]:
    """Both plots, as `<stem>-latency.png` and `<stem>-ttft.png` in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return [
        plot_throughput_latency(records, out_dir / f"{stem}-latency.png"),
        plot_ttft_distribution(records, out_dir / f"{stem}-ttft.png"),
    ]
