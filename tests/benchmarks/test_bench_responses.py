"""`python -m benchmarks responses`: both measurements run end to end, on a tiny load."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.cli import main


def test_stream_compares_responses_with_chat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    argv = ["responses", "stream", "--store-url", url, "--concurrency", "2", "--requests", "4",
            "--rounds", "1", "--max-tokens", "4", "--token-delay", "0", "--store"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "responses/chat: throughput" in out
    assert " 0 tok/s" not in out


def test_rebuild_times_a_stored_chain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    argv = ["responses", "rebuild", "--store-url", url, "--turns", "3", "--queries", "5"]
    assert main(argv) == 0
    assert "3 turns (6 items), 5 rebuilds" in capsys.readouterr().out
