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


def test_compaction_compares_a_chain_with_and_without(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["compaction", "--turns", "6", "--answer", "50", "--summary", "10", "--delay", "0",
            "--threshold", "600"]  # fmt: skip
    assert main(argv) == 0
    without, with_ = capsys.readouterr().out.splitlines()[1:3]
    assert "0 compactions" in without
    assert " 0 compactions" not in with_
