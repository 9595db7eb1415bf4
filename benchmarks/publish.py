"""The command line's output: the table on stdout; records, table and plots saved to a folder."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.report import describe_runs, markdown_table, run_stamp, save_record, slug


def show(
    records: Sequence[Mapping[str, Any]], out_dir: Path, stem: str, *, plots: bool
) -> list[Path]:
    """Print the table of `records` and save it (and the plots) as `<stem>.md` / `<stem>-*.png`."""
    text = describe_runs(records) + "\n" + markdown_table(records)
    print(text)
    out_dir.mkdir(parents=True, exist_ok=True)
    table = out_dir / f"{stem}.md"
    table.write_text(text, encoding="utf-8")
    saved = [table]
    if plots:
        from benchmarks.plots import plot_all  # matplotlib takes a second to import

        saved += plot_all(records, out_dir, stem)
    return saved


def publish(
    records: Sequence[Mapping[str, Any]],
    out_dir: Path,
    *,
    label: str,
    plots: bool,
    stamp: str | None = None,
) -> None:
    """Save each record as JSON, show and save the table and plots; list the files on stderr.

    File names start with `stamp` (default: now), so files of one invocation sort together.
    """
    stamp = stamp or run_stamp()
    saved = [save_record(record, out_dir, stamp) for record in records]
    saved += show(records, out_dir, f"{stamp}-{slug(label)}", plots=plots)
    for path in saved:
        print(f"saved {path}", file=sys.stderr)
