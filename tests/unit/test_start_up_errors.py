"""A setting that can never work stops the start with one line naming it, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from oai_server.__main__ import main


def test_a_bad_flag_stops_start_up_with_one_clear_line() -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--generation-config", "/nonexistent/generation", "--port", "80"])
    message = str(exited.value.code)
    assert message.startswith("oai-server: invalid settings: --generation-config: ")
    assert "/nonexistent/generation" in message
    assert "\n" not in message


def test_a_model_directory_that_is_not_there_stops_start_up() -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--model", "/nonexistent/chat", "--embedding-model", "./nonexistent-embedder"])
    message = str(exited.value.code)
    assert "--model: no model directory at /nonexistent/chat" in message
    assert "--embedding-model: no model directory at ./nonexistent-embedder" in message
    assert "\n" not in message


def test_a_directory_that_holds_no_model_stops_start_up(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(SystemExit) as exited:
        main(["--model", str(tmp_path)])
    message = str(exited.value.code)
    assert message == (
        f"oai-server: invalid settings: --model: no model in {tmp_path}: "
        "it has no config.json or params.json"
    )
