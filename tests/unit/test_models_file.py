"""Which models a server serves: `--model` given more than once, or a `--models-file`; and
the bad ones, each of which stops the start with one line naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic_settings import CliApp

from oai_server.__main__ import main
from oai_server.models.entries import ModelsFileError, first_chat, model_entries
from oai_server.settings import Settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("OAI_"):
            monkeypatch.delenv(name)


def parse(*args: str) -> Settings:
    return CliApp.run(Settings, cli_args=list(args))


def _weights(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir()
    (path / "config.json").write_text("{}")
    return path


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(text)
    return path


def test_model_given_twice_serves_two_chat_models_named_as_asked(tmp_path: Path) -> None:
    weights = _weights(tmp_path, "weights")
    settings = parse(
        "--model", "org/first", "--served-model-name", "one", "--model", f"two={weights}",
        "--max-model-len", "1024", "--embedding-model", "none",
    )  # fmt: skip
    entries = model_entries(settings)
    assert [(e.name, e.kind, e.model) for e in entries] == [
        ("one", "chat", "org/first"),
        ("two", "chat", str(weights)),
    ]
    # The engine flags are each --model's.
    assert [e.max_model_len for e in entries] == [1024, 1024]
    assert first_chat(entries).name == "one"


def test_the_embedding_model_comes_after_the_chat_models() -> None:
    entries = model_entries(parse("--model", "a=org/a", "--model", "b=org/b"))
    assert [(e.name, e.kind) for e in entries] == [
        ("a", "chat"),
        ("b", "chat"),
        ("all-minilm-l6-v2", "embedding"),
    ]


def test_a_models_file_gives_each_model_its_own_engine_settings(tmp_path: Path) -> None:
    weights = _weights(tmp_path, "smol-copy")
    path = _file(
        tmp_path,
        f"""
models:
  - name: smol
    max_model_len: 1024
    cpu_kvcache_space: 1
  - name: other
    model: {weights}
    dtype: float32
    cpu_threads_bind: "0"
  - name: minilm
    kind: embedding
""",
    )
    entries = model_entries(parse("--models-file", str(path)))
    smol, other, minilm = entries
    assert (smol.name, smol.model, smol.max_model_len, smol.cpu_kvcache_space) == (
        "smol", None, 1024, 1
    )  # fmt: skip
    assert (other.model, other.dtype, other.cpu_threads_bind) == (str(weights), "float32", "0")
    # A key left out is its default, not another entry's.
    assert other.max_model_len is None
    assert (minilm.kind, minilm.model) == ("embedding", None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("models:\n  - name: a\n    max_len: 10\n", "models[0].max_len: unknown key"),
        ("models:\n  - name: a\n  - name: a\n", "two models are served as 'a'"),
        ("models:\n  - model: org/x\n", "models[0].name: missing"),
        ("models:\n  - name: a\n    max_model_len: lots\n", "models[0].max_model_len: "),
        (
            "models:\n  - name: a\n    model: /nonexistent/m\n",
            "no model directory at /nonexistent/m",
        ),
        ("models: [name: a\n", "not valid YAML at line"),
        ("model:\n  - name: a\n", "a list under 'models'"),
        ("models:\n  - {name: e, kind: embedding}\n", "no chat model is served"),
        (
            "models:\n  - {name: a}\n  - {name: e, kind: embedding}\n"
            "  - {name: f, kind: embedding}\n",
            "'e' and 'f' are both embedding models",
        ),
    ],
)
def test_a_bad_models_file_stops_start_up_with_one_line(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(SystemExit) as exited:
        main(["--models-file", str(path)])
    message = str(exited.value.code)
    assert message.startswith("oai-server: "), message
    assert expected in message
    assert "\n" not in message


def test_the_embedded_embedding_model_is_named_by_its_name(tmp_path: Path) -> None:
    text = "models:\n  - name: a\n  - {name: e, kind: embedding, model: all-minilm-l6-v2}\n"
    entries = model_entries(parse("--models-file", str(_file(tmp_path, text))))
    assert (entries[1].kind, entries[1].model) == ("embedding", None)


def test_the_first_model_named_twice_stops_start_up() -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--model", "a=org/a", "--served-model-name", "b"])
    assert "named twice: 'a' (name=path) and 'b' (--served-model-name)" in str(exited.value.code)


def test_a_models_file_and_model_flags_are_not_mixed(tmp_path: Path) -> None:
    path = _file(tmp_path, "models:\n  - name: a\n")
    with pytest.raises(ModelsFileError, match="leave out --model, --embedding-model"):
        model_entries(
            parse("--models-file", str(path), "--model", "org/x", "--embedding-model", "none")
        )


def test_a_models_file_that_is_not_there_stops_start_up(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--models-file", str(tmp_path / "missing.yaml")])
    assert "cannot read it" in str(exited.value.code)


def test_two_models_served_under_one_name_stop_start_up() -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--model", "same=org/a", "--model", "same=org/b"])
    assert str(exited.value.code) == "oai-server: two models are served as 'same'"
    with pytest.raises(SystemExit) as exited:
        main(["--model", "all-minilm-l6-v2=org/a"])
    assert "two models are served as 'all-minilm-l6-v2'" in str(exited.value.code)


def test_a_second_model_directory_that_is_not_there_stops_start_up() -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--model", "org/a", "--model", "b=/nonexistent/b"])
    message = str(exited.value.code)
    assert message == "oai-server: invalid settings: --model: no model directory at /nonexistent/b"


def _start(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oai_server", *args],
        capture_output=True,
        text=True,
        # An unknown key of a models file is looked up among vLLM's engine arguments, which
        # imports vllm: seconds alone, a minute and more on a loaded 2-core machine.
        timeout=240,
        env={**os.environ, **(env or {})},
    )


def test_a_hub_id_that_cannot_be_reached_stops_the_process_with_one_line(
    tmp_path: Path,
) -> None:
    # Offline with an empty cache: what a machine without the hub sees.
    offline = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    done = _start("--model", "no-such-org/no-such-model", "--embedding-model", "none", env=offline)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == (
        "oai-server: cannot load the model 'no-such-org/no-such-model' from the Hugging Face "
        "hub: not in the local cache, and the hub cannot be reached"
    )
    assert "Traceback" not in done.stderr


def test_an_unknown_key_in_a_models_file_stops_the_process_with_one_line(
    tmp_path: Path,
) -> None:
    path = _file(tmp_path, "models:\n  - name: a\n    kv_cache: 2\n")
    done = _start("--models-file", str(path))
    assert done.returncode != 0
    assert (
        done.stderr.strip() == f"oai-server: --models-file {path}: models[0].kv_cache: unknown key"
    )
