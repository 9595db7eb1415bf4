"""One real server with the test vision-language model, for the module's tests (an
engine start is expensive), and a local image server the fetch is allowed to reach."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import Server, run_server, sdk_http

__all__ = ["sdk_http"]  # the integration suite's spec-checking client, for the SDK tests
from tests.vision import build_test_vlm
from tests.vision.images import BLUE, RED

# The name the served model answers to.
VLM = "test-vlm"
# What one image adds to a prompt: its placeholder expands into the image's tokens
# between a fake token on each side and the global-image tag.
IMAGE_PROMPT_TOKENS = build_test_vlm.IMAGE_SEQ_LEN + 3
IMAGE_LIMIT = 3


class _Images(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.startswith("/redirect?to="):
            self.send_response(302)
            self.send_header("Location", self.path.removeprefix("/redirect?to="))
            self.end_headers()
            return
        body = {"/red.png": RED, "/blue.png": BLUE}.get(self.path)
        if body is None:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="session")
def image_server() -> Iterator[str]:
    """`http://localhost:PORT`: serves /red.png, /blue.png and /redirect?to=URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Images)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://localhost:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def vlm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("test-vlm")
    # As reviewers run it: its own process (transformers' warnings stay out of this one).
    subprocess.run([sys.executable, build_test_vlm.__file__, str(out)], check=True)
    return out


@pytest.fixture(scope="session")
def vlm_server(tmp_path_factory: pytest.TempPathFactory, vlm_dir: Path) -> Iterator[Server]:
    """The test VLM served as any model is, with images from localhost allowed and the
    response cache on."""
    with run_server(
        tmp_path_factory.mktemp("vlm-server"),
        "--model",
        str(vlm_dir),
        "--served-model-name",
        VLM,
        "--limit-mm-per-prompt",
        f'{{"image": {IMAGE_LIMIT}}}',
        "--allowed-media-domains",
        "localhost",
        "--response-cache",
        "memory",
        "--media-max-bytes",
        "100000",
    ) as running:
        yield running
