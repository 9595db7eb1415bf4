"""`--served-model-name a b`, as `vllm serve` takes it: every name serves the model, a
request may use any of them, and `/v1/models` lists each as a model of its own (vLLM's
`OpenAIServingModels` lists one card per name, the same `root`, no `parent`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from oai_server.cli import parse_command_line
from oai_server.engine.fake import FakeEngine
from oai_server.models.entries import ModelsFileError, model_entries
from oai_server.settings import Settings
from tests.unit.conftest import serve

CHAT = "/v1/chat/completions"


def _chat(model: str) -> dict[str, object]:
    return {"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}


def test_every_name_after_the_first_is_an_alias() -> None:
    settings = parse_command_line(
        ["serve", "org/model", "--served-model-name", "a", "b", "c"]
    ).settings
    assert settings.served_model_name == ["a", "b", "c"]
    (entry,) = [e for e in model_entries(settings) if e.kind == "chat"]
    assert (entry.name, entry.aliases, entry.model) == ("a", ["b", "c"], "org/model")


def test_an_alias_may_not_name_another_model() -> None:
    settings = Settings(model=["org/a", "b=org/b"], served_model_name=["a", "b"])
    with pytest.raises(ModelsFileError, match="two models are served as 'b'"):
        model_entries(settings)


def test_a_models_file_entry_takes_aliases(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - name: a\n    aliases: [b]\n")
    entries = model_entries(Settings(models_file=path))
    assert [(e.name, e.aliases) for e in entries if e.kind == "chat"] == [("a", ["b"])]


async def test_requests_may_name_any_alias_and_models_lists_each() -> None:
    engine = FakeEngine(reply="Hello there.")
    settings = parse_command_line(
        ["serve", "HuggingFaceTB/SmolLM2-135M-Instruct", "--served-model-name", "a", "b"]
    ).settings
    async with serve(engine, **dict(settings)) as client:
        first = await client.post(CHAT, json=_chat("a"))
        second = await client.post(CHAT, json=_chat("b"))
        completion = await client.post(
            "/v1/completions", json={"model": "b", "prompt": "Hi", "max_tokens": 4}
        )
        unknown = await client.post(CHAT, json=_chat("c"))
        listed = (await client.get("/v1/models")).json()["data"]
        one = (await client.get("/v1/models/b")).json()
    assert first.status_code == second.status_code == completion.status_code == 200
    assert second.json()["choices"][0]["message"]["content"] == "Hello there."
    assert len(engine.calls) == 3
    assert unknown.status_code == 404
    assert "'a', 'b'" in unknown.json()["error"]["message"]
    assert [(m["id"], m["root"], m["parent"]) for m in listed] == [
        ("a", "HuggingFaceTB/SmolLM2-135M-Instruct", None),
        ("b", "HuggingFaceTB/SmolLM2-135M-Instruct", None),
    ]
    assert one["id"] == "b"
    assert one["max_model_len"] == listed[0]["max_model_len"]
