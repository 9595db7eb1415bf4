"""Fixtures of the harness tests: a stub OpenAI-like server on a real socket."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks.stub_server import StubConfig, create_stub_app
from tests.live import serve


@pytest.fixture
def stub_url() -> Iterator[str]:
    """A stub with two tokens per chunk after a role chunk: cases TTFT and ITL must get right."""
    with serve(create_stub_app(StubConfig(tokens_per_chunk=2, token_delay=0.002))) as root:
        url = f"{root}/v1"
        yield url
