"""The server secret: kept in the data dir, it keys the ids `/metrics` names API keys by."""

from __future__ import annotations

import hashlib
import re
import stat
import subprocess
import sys
from pathlib import Path

from oai_server.auth import key_id
from oai_server.secret import ServerSecret
from tests.conformance import async_validating_client
from tests.live import serve_async
from tests.production.conftest import chat_body, make_app, new_key


async def _label(key: str, data_dir: Path, **settings: object) -> str:
    """The `api_key_id` label a server on `data_dir` puts on `key`'s usage in /metrics."""
    app = make_app(api_key=[key], data_dir=data_dir, **settings)
    auth = {"authorization": f"Bearer {key}"}
    async with serve_async(app) as root, async_validating_client(base_url=root) as http:
        assert (await http.post("/v1/chat/completions", json=chat_body(), headers=auth)).is_success
        metrics = (await http.get("/metrics")).text
    assert key not in metrics
    (label,) = set(re.findall(r'oai_usage_requests_total\{api_key_id="([^"]*)"', metrics))
    return label


async def test_key_labels_are_keyed_and_survive_a_restart(tmp_path: Path) -> None:
    key = new_key()
    first = await _label(key, tmp_path / "a")
    assert re.fullmatch(r"key-[0-9a-f]{12}", first)
    # A scrape gives nothing to test a guessed key against: not the key's plain SHA-256.
    assert first != "key-" + hashlib.sha256(key.encode()).hexdigest()[:12]
    secret = tmp_path / "a" / "secret"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    # The same data dir after a restart: the same secret, the same label.
    assert await _label(key, tmp_path / "a") == first
    # Another deployment's secret names the key otherwise; a given one is used as given.
    assert await _label(key, tmp_path / "b") != first
    given = await _label(key, tmp_path / "c", secret_key="a shared secret of replicas")
    assert await _label(key, tmp_path / "d", secret_key="a shared secret of replicas") == given
    assert not (tmp_path / "c" / "secret").exists()
    assert first == key_id(key, ServerSecret.load(None, tmp_path / "a"))


def test_key_id_prints_the_label_of_a_key(tmp_path: Path) -> None:
    """The operator's way from a key to its label: the server's data dir, or its secret."""
    keys = [new_key(), new_key()]
    expected = [key_id(k, ServerSecret.load(None, tmp_path)) for k in keys]
    for flags in (
        ["--data-dir", str(tmp_path)],
        ["--secret-key", (tmp_path / "secret").read_text().strip()],
    ):
        printed = subprocess.run(
            [sys.executable, "-m", "oai_server", "key-id", *keys, *flags],
            capture_output=True,
            text=True,
            check=True,
        )
        assert printed.stdout.split() == expected


def test_a_secret_file_cut_short_stops_the_start_with_a_reason(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("")  # a crash between creating and writing it
    started = subprocess.run(
        [sys.executable, "-m", "oai_server", "key-id", "sk-any", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert started.returncode == 1
    assert started.stderr.startswith("oai-server: ")
    assert "delete the file" in started.stderr
    assert "Traceback" not in started.stderr
    # Not replaced behind the operator's back: every key's id would change.
    assert (tmp_path / "secret").read_text() == ""
