"""`/v1/messages` picks what `model` names, as `/v1/chat/completions` does: one of several
models, each on its own engine, or a LoRA adapter on its base."""

from __future__ import annotations

from pathlib import Path

import anthropic

from benchmarks.fixtures.lora_adapter import write_adapter
from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.engine.router import EngineRouter
from oai_server.settings import Settings
from tests.anthropic.conftest import MODEL, client
from tests.live import serve


def _text(sdk: anthropic.Anthropic, model: str) -> tuple[str, str]:
    message = sdk.messages.create(
        model=model, max_tokens=32, messages=[{"role": "user", "content": "Who are you?"}]
    )
    (block,) = message.content
    assert block.type == "text"
    return message.model, block.text


def test_each_model_answers_from_its_own_engine() -> None:
    engines = {
        "first": FakeEngine(reply="I am the first model."),
        "second": FakeEngine(reply="I am the second model."),
    }
    settings = Settings(model=["first=org/first", "second=org/second"])
    with serve(create_app(settings, EngineRouter(engines))) as root:
        sdk = client(root)
        assert _text(sdk, "second") == ("second", "I am the second model.")
        assert _text(sdk, "first") == ("first", "I am the first model.")
    assert [len(engine.calls) for engine in engines.values()] == [1, 1]


def test_an_adapter_named_by_model_answers_on_its_base(tmp_path: Path) -> None:
    path = str(write_adapter(tmp_path / "ad1", seed=3))
    engine = FakeEngine(reply="Hello.", adapters={"ad1": path})
    with serve(create_app(Settings(lora_modules=[f"ad1={path}"]), engine)) as root:
        sdk = client(root)
        assert _text(sdk, "ad1") == ("ad1", "[ad1] Hello.")
        assert _text(sdk, MODEL) == (MODEL, "Hello.")
    assert [call.options.adapter for call in engine.calls] == ["ad1", None]


def test_either_service_tier_is_served_at_the_default_tier() -> None:
    # Under `priority` scheduling, where OpenAI's `priority` tier would run ahead (below 0).
    engine = FakeEngine(scheduling_policy="priority")
    with serve(create_app(Settings(scheduling_policy="priority"), engine)) as root:
        sdk = client(root)
        for tier in ("auto", "standard_only"):
            sdk.messages.create(
                model=MODEL,
                max_tokens=8,
                service_tier=tier,
                messages=[{"role": "user", "content": "Hi"}],
            )
    assert [call.options.priority for call in engine.calls] == [0, 0]
