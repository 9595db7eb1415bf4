"""Settings: one class, reachable from the command line and from OAI_* variables."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError
from pydantic_settings import CliApp

from oai_server.models.entries import first_chat, model_entries
from oai_server.settings import EMBEDDED_MODEL_NAME, Settings


def chat_name(settings: Settings) -> str:
    """The name a request without a model of its own gets, as the server works it out."""
    return first_chat(model_entries(settings)).name


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings read the environment: keep the caller's OAI_* variables out."""
    for name in list(os.environ):
        if name.upper().startswith("OAI_"):
            monkeypatch.delenv(name)


def parse(*args: str) -> Settings:
    return CliApp.run(Settings, cli_args=list(args))


def test_flags_land_in_fields() -> None:
    settings = parse(
        "--max-model-len", "4096", "--enforce-eager", "--served-model-name", "x", "--port", "9000"
    )
    assert settings.max_model_len == 4096
    assert settings.enforce_eager is True
    assert settings.served_model_name == ["x"]
    assert chat_name(settings) == "x"
    assert settings.port == 9000


def test_defaults() -> None:
    settings = parse()
    assert chat_name(settings) == EMBEDDED_MODEL_NAME == "smollm2-135m-instruct"
    assert settings.model == []
    assert settings.enforce_eager is None
    assert settings.max_model_len is None
    assert settings.host == "127.0.0.1"
    assert settings.port == 8000
    assert settings.api_key == []


def test_model_name_follows_model_unless_served_name_given() -> None:
    assert chat_name(parse("--model", "Qwen/Qwen2.5-0.5B")) == "Qwen/Qwen2.5-0.5B"
    named = parse("--model", "Qwen/Qwen2.5-0.5B", "--served-model-name", "qwen")
    assert chat_name(named) == "qwen"


def test_boolean_flags_can_be_turned_off() -> None:
    assert parse("--no-enforce-eager").enforce_eager is False
    assert parse("--trust-remote-code").trust_remote_code is True
    assert parse().trust_remote_code is False


def test_more_flags() -> None:
    settings = parse(
        "--host", "0.0.0.0",
        "--api-key", "secret",
        "--tensor-parallel-size", "2",
        "--gpu-memory-utilization", "0.5",
        "--chat-template", "templates/t.jinja",
        "--log-level", "debug",
        "--max-request-bytes", "1000",
    )  # fmt: skip
    assert settings.host == "0.0.0.0"
    assert settings.api_key == ["secret"]
    assert settings.tensor_parallel_size == 2
    assert settings.gpu_memory_utilization == 0.5
    assert settings.chat_template == Path("templates/t.jinja")
    assert settings.log_level == "debug"
    assert settings.max_request_bytes == 1000


def test_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OAI_PORT", "9100")
    monkeypatch.setenv("OAI_MAX_MODEL_LEN", "1024")
    monkeypatch.setenv("OAI_ENFORCE_EAGER", "true")
    monkeypatch.setenv("OAI_SERVED_MODEL_NAME", "from-env")
    for settings in (Settings(), parse()):
        assert settings.port == 9100
        assert settings.max_model_len == 1024
        assert settings.enforce_eager is True
        assert chat_name(settings) == "from-env"


def test_flag_beats_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OAI_PORT", "9100")
    assert parse("--port", "9200").port == 9200


def test_bad_values_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValidationError):
        parse("--port", "not-a-port")
    with pytest.raises(ValidationError):
        parse("--log-level", "loud")
    monkeypatch.setenv("OAI_PORT", "eighty")
    with pytest.raises(ValidationError):
        Settings()


def test_unknown_flag_is_an_error() -> None:
    with pytest.raises(SystemExit):
        parse("--no-such-flag", "1")


def test_response_cache_redis_is_the_shared_redis_url() -> None:
    shared = "redis://redis:6379/0"
    assert parse("--redis-url", shared, "--response-cache", "redis").response_cache_redis == shared
    own = "redis://cache:6379/1"
    assert parse("--redis-url", shared, "--response-cache", own).response_cache_redis == own
    assert parse("--redis-url", shared, "--response-cache", "memory").response_cache_redis is None


def test_response_cache_redis_needs_a_redis_url() -> None:
    with pytest.raises(ValidationError, match="--redis-url"):
        Settings(response_cache="redis")
