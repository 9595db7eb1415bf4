"""The command line takes `vllm serve`'s flags in vLLM's own shapes, beside ours: engine
arguments reach the engine, front-end flags land in our settings of the same meaning, and
the rest is accepted with a one-line notice."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from oai_server.cli import parse_command_line
from oai_server.engine.vllm.flags import engine_arguments
from oai_server.models.entries import ModelsFileError, model_entries
from oai_server.settings import Settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("OAI_"):
            monkeypatch.delenv(name)


def _adapter(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir()
    return path


def test_a_vllm_serve_line_lands_in_our_settings_and_the_engine_arguments() -> None:
    line = parse_command_line(
        ["serve", "Qwen/Qwen2.5-7B-Instruct", "-tp", "2", "--max-model-len", "32k",
         "--quantization", "fp8", "--kv-cache-dtype", "fp8", "--enable-prefix-caching",
         "--speculative-config.method", "ngram", "--port", "9000"]
    )  # fmt: skip
    settings = line.settings
    assert settings.model == ["Qwen/Qwen2.5-7B-Instruct"]
    assert settings.tensor_parallel_size == 2
    assert settings.max_model_len == 32_000  # vLLM's "k" is a thousand
    assert settings.port == 9000
    assert settings.vllm_args == {
        "quantization": "fp8",
        "kv_cache_dtype": "fp8",
        "enable_prefix_caching": True,
        "speculative_config": {"method": "ngram"},
    }
    assert line.notices == []


def test_lora_modules_take_several_values_after_one_flag_in_both_forms(tmp_path: Path) -> None:
    first, second = _adapter(tmp_path, "a"), _adapter(tmp_path, "b")
    settings = parse_command_line(
        ["--lora-modules", f"a={first}", json.dumps({"name": "b", "path": str(second)})]
    ).settings
    assert settings.lora_modules == [f"a={first}", f"b={second}"]
    assert settings.lora_enabled


def test_a_repeated_lora_modules_flag_adds_each_adapter(tmp_path: Path) -> None:
    """One flag per adapter, as many scripts write it: vLLM's parser would keep the last."""
    first, second = _adapter(tmp_path, "a"), _adapter(tmp_path, "b")
    settings = parse_command_line(
        ["--lora-modules", f"a={first}", "--lora-modules", f"b={second}", "--max-lora-rank", "8"]
    ).settings
    assert settings.lora_modules == [f"a={first}", f"b={second}"]


def test_front_end_flags_land_in_our_settings_of_the_same_meaning(tmp_path: Path) -> None:
    settings = parse_command_line(
        ["--allowed-origins", '["https://app.example"]', "--allowed-methods", '["GET", "POST"]',
         "--allow-credentials", "--root-path", "/api", "--uvicorn-log-level", "warning",
         "--ssl-keyfile", str(tmp_path / "key.pem"), "--ssl-certfile", str(tmp_path / "c.pem"),
         "--enable-log-requests", "--api-key", "k1", "k2"]
    ).settings  # fmt: skip
    assert settings.cors_allow_origins == ["https://app.example"]
    assert settings.cors_allow_methods == ["GET", "POST"]
    assert settings.cors_allow_credentials is True
    assert settings.root_path == "/api"
    assert settings.uvicorn_log_level == "warning"
    assert settings.ssl_keyfile == tmp_path / "key.pem"
    assert settings.log_request_text is True
    assert settings.api_key == ["k1", "k2"]
    assert parse_command_line(["--disable-log-requests"]).settings.log_request_text is False


@pytest.mark.parametrize(
    "argv",
    [
        ["--api-key", "k1", "--api-key", "k2", "--served-model-name", "m"],
        ["serve", "org/model", "--max-model-len", "1024", "--api-key=k1", "--api-key=k2"],
        ["--api-key", "k1", "k2", "--enforce-eager"],
        ["--api-key", "k1", "--enforce-eager", "--api-key", "k2"],
    ],
)
def test_every_api_key_is_kept_beside_vllm_flags(argv: list[str], vllm_warnings: list[str]) -> None:
    """Repeated as the docs say, or several after one flag as `vllm serve` takes them: a key
    lost here answers 401 to its clients, and nothing may say a repeat was dropped."""
    assert parse_command_line(argv).settings.api_key == ["k1", "k2"]
    assert vllm_warnings == []


def test_admin_and_environment_keys_are_kept_beside_vllm_flags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OAI_API_KEY", "k1,k2")
    settings = parse_command_line(
        ["--served-model-name", "m", "--admin-api-key", "a1", "--admin-api-key", "a2"]
    ).settings
    assert settings.api_key == ["k1", "k2"]
    assert settings.admin_api_key == ["a1", "a2"]


def test_a_repeated_flag_that_does_not_add_up_is_still_warned_about(
    vllm_warnings: list[str],
) -> None:
    """vLLM's warning stays for the flags whose last value wins."""
    settings = parse_command_line(["--max-model-len", "1024", "--max-model-len", "512"]).settings
    assert settings.max_model_len == 512
    assert vllm_warnings == ["Found duplicate keys --max-model-len"]


@pytest.fixture
def vllm_warnings() -> Iterator[list[str]]:
    """The warnings vLLM's argument parser logs (its logger does not propagate)."""
    seen: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    vllm_logger = logging.getLogger("vllm.utils.argparse_utils")
    vllm_logger.addHandler(handler)
    yield seen
    vllm_logger.removeHandler(handler)


def test_a_flag_without_meaning_here_is_accepted_with_a_notice() -> None:
    line = parse_command_line(["serve", "org/model", "--headless", "--api-server-count", "2"])
    assert line.notices == [
        "--headless is not used by oai-server: ignored",
        "--api-server-count is not used by oai-server: ignored",
    ]
    assert line.settings.model == ["org/model"]


def test_several_served_names_are_all_taken() -> None:
    line = parse_command_line(["org/model", "--served-model-name", "a", "b"])
    assert line.settings.served_model_name == ["a", "b"]
    assert line.notices == []


def test_our_own_flags_still_work_beside_vllm_flags(tmp_path: Path) -> None:
    settings = parse_command_line(
        ["--model", "a=org/a", "--model", "b=org/b", "--no-web-ui", "--store-all",
         "--block-size", "32", "--data-dir", str(tmp_path)]
    ).settings  # fmt: skip
    assert settings.model == ["a=org/a", "b=org/b"]
    assert settings.web_ui is False
    assert settings.store_all is True
    assert settings.data_dir == tmp_path
    assert settings.vllm_args == {"block_size": 32}


def test_an_unknown_flag_stops_the_start(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        parse_command_line(["--no-such-flag", "1"])
    assert stopped.value.code == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


def test_help_lists_vllm_engine_arguments_and_where_our_defaults_differ(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as stopped:
        parse_command_line(["serve", "--help"])
    assert stopped.value.code == 0
    shown = capsys.readouterr().out
    assert "--max-request-tokens" in shown  # ours
    assert "--kv-cache-dtype" in shown
    assert "--speculative-config" in shown
    assert "--enforce-eager: differs from vllm serve because on by default on CPU" in shown


def test_engine_arguments_are_listed_for_the_docs_with_vllms_help() -> None:
    listed = {argument.name: argument for argument in engine_arguments()}
    assert listed["kv_cache_dtype"].flag == "--kv-cache-dtype"
    assert listed["kv_cache_dtype"].group == "CacheConfig"
    assert "fp8" in (listed["kv_cache_dtype"].choices or ())
    assert listed["kv_cache_dtype"].help
    assert listed["kv_cache_dtype"].differs is None
    assert listed["dtype"].differs is not None


def test_vllm_args_from_the_environment_are_checked_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OAI_VLLM_ARGS", '{"quantization": "fp8", "block-size": 32}')
    assert Settings().vllm_args == {"quantization": "fp8", "block_size": 32}
    monkeypatch.setenv("OAI_VLLM_ARGS", '{"quantisation": "fp8"}')
    with pytest.raises(ValidationError, match="not a vLLM engine argument: quantisation"):
        Settings()


def test_a_models_file_takes_any_engine_argument_by_its_name(tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    models.write_text(
        "models:\n"
        "  - name: big\n    model: org/big\n    quantization: fp8\n    kv-cache-dtype: fp8\n"
        "  - name: small\n    model: org/small\n"
    )
    entries = model_entries(Settings(models_file=models))
    assert entries[0].vllm_args == {"quantization": "fp8", "kv_cache_dtype": "fp8"}
    assert entries[1].vllm_args == {}
    models.write_text("models:\n  - name: big\n    model: org/big\n    quantisation: fp8\n")
    with pytest.raises(ModelsFileError, match=r"models\[0\]\.quantisation: unknown key"):
        model_entries(Settings(models_file=models))


def test_command_line_engine_arguments_are_the_chat_models_not_the_embedders() -> None:
    settings = parse_command_line(["org/model", "--quantization", "fp8"]).settings
    chat, embedding = model_entries(settings)
    assert chat.vllm_args == {"quantization": "fp8"}
    assert embedding.kind == "embedding"
    assert embedding.vllm_args == {}


def test_otlp_traces_endpoint_is_ours_as_vllm_serve_names_it() -> None:
    endpoint = "http://collector:4317"
    # With vLLM's flags (read by vLLM's parser) and alone (ours only): the same setting.
    # `--collect-detailed-traces` only serves vLLM's own tracing (the engine would refuse it
    # without the endpoint): a notice, not handed to the engine.
    line = parse_command_line(
        ["serve", "org/model", "--otlp-traces-endpoint", endpoint,
         "--collect-detailed-traces", "model", "--quantization", "fp8"]
    )  # fmt: skip
    mixed = line.settings
    assert mixed.otlp_traces_endpoint == endpoint
    assert mixed.vllm_args == {"quantization": "fp8"}
    assert [n for n in line.notices if "--collect-detailed-traces" in n]
    alone = parse_command_line(["--otlp-traces-endpoint", endpoint]).settings
    assert alone.otlp_traces_endpoint == endpoint
    assert parse_command_line([]).settings.otlp_traces_endpoint is None


def test_vllms_answer_flags_land_in_settings() -> None:
    line = parse_command_line(
        ["serve", "org/model", "--enable-force-include-usage", "--return-tokens-as-token-ids",
         "--max-log-len", "100", "--response-role", "assistant"]
    )  # fmt: skip
    settings = line.settings
    assert settings.enable_force_include_usage is True
    assert settings.return_tokens_as_token_ids is True
    assert settings.max_log_len == 100
    assert line.notices == []  # vLLM's default role is the one answers always carry


def test_another_response_role_is_named_as_not_taken() -> None:
    line = parse_command_line(["serve", "org/model", "--response-role", "narrator"])
    assert line.notices == [
        "--response-role narrator is not used by oai-server: answers' role stays "
        "assistant, the only one OpenAI's schema and SDKs accept"
    ]
