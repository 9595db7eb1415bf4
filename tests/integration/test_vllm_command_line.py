"""A `vllm serve` command line that is valid on CPU, run as `oai-server serve ...` on the
real engine with the embedded model's directory: it starts, serves HTTPS with a certificate
made here, under a root path, and answers for the model and both adapters."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from benchmarks.fixtures.lora_adapter import write_adapter
from oai_server.models.embedded_model import ensure_embedded_model
from oai_server.settings import Settings
from tests.integration.conftest import START_TIMEOUT_S, STOP_TIMEOUT_S, _free_port

# The start alone took 4 minutes on a loaded 2-core machine (LoRA, float32): more than
# the suite's 10 minutes per test once other tests share the cores.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(2 * START_TIMEOUT_S)]

MAX_TOKENS = 8


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
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ssl.SSLContext, Path]]:
    """The server, its HTTPS root (under /api) and the TLS context that trusts it."""
    root = tmp_path_factory.mktemp("vllm-line")
    model = ensure_embedded_model(Settings().cache_dir, "float32")
    key, cert = _certificate(root)
    first = write_adapter(root / "first", seed=1)
    second = write_adapter(root / "second", seed=2)
    port = _free_port()
    line = [
        "serve", str(model), "--tokenizer", str(model), "--load-format", "safetensors",
        "--hf-overrides", '{"architectures": ["LlamaForCausalLM"]}', "--block-size", "32",
        "--max-logprobs", "5", "--enable-prefix-caching", "--max-model-len", "2048",
        "--enable-lora", "--max-lora-rank", "8",
        "--lora-modules", f"a={first}", f"b={second}", "--served-model-name", "smol", "tiny",
        "--root-path", "/api", "--ssl-keyfile", str(key), "--ssl-certfile", str(cert),
        "--host", "127.0.0.1", "--port", str(port), "--embedding-model", "none",
    ]  # fmt: skip
    log = root / "server.log"
    env = {**os.environ, "OAI_LOG_LEVEL": "info", "OAI_DRAIN_TIMEOUT": "5"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "oai_server", *line],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    context = ssl.create_default_context(cafile=str(cert))
    base = f"https://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert proc.poll() is None, log.read_text()[-4000:]
            assert time.monotonic() < deadline, log.read_text()[-4000:]
            try:
                if httpx.get(f"{base}/health", verify=context, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        yield base, context, log
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_the_line_serves_https_and_answers_the_model_and_each_adapter(
    served: tuple[str, ssl.SSLContext, Path],
) -> None:
    base, context, log = served
    with httpx.Client(base_url=base, verify=context, timeout=60) as client:
        listed = [m["id"] for m in client.get("/v1/models").json()["data"]]
        assert listed == ["smol", "a", "b"]
        for model in ("smol", "a", "b"):
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
            body = reply.json()
            assert body["model"] == model
            assert body["choices"][0]["message"]["content"]
            assert len(body["choices"][0]["logprobs"]["content"][0]["top_logprobs"]) == 5
    # Plain HTTP is not served, and the alias is named as not served yet, in one line.
    with pytest.raises(httpx.TransportError):
        httpx.get(base.replace("https", "http") + "/health", timeout=5)
    assert "aliases (tiny) are not served yet" in log.read_text()
