"""API keys: several of them, from flags, env and a file; every route but the open ones."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import websockets
from websockets.exceptions import InvalidStatus

from oai_server.app import OPEN
from oai_server.auth import key_id, load_keys
from oai_server.secret import ServerSecret
from oai_server.settings import Settings
from tests.conformance import async_validating_client
from tests.live import serve_async
from tests.production.conftest import MODEL, WS_PATH, chat_body, make_app, new_key
from tests.realtime.conftest import checked


def _bearer(key: str, scheme: str = "Bearer") -> dict[str, str]:
    return {"authorization": f"{scheme} {key}"}


def test_keys_come_from_flags_env_and_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys_file = tmp_path / "keys"
    keys_file.write_text("# the team's keys\nfile-key-1\n\n file-key-2  # rotated monthly\n")
    secret = ServerSecret(b"the deployment's secret")
    ring = load_keys(["flag-key"], keys_file, secret)
    assert [ident for _, ident in ring.keys] == [
        key_id(k, secret) for k in ("flag-key", "file-key-1", "file-key-2")
    ]
    assert ring.match(b"file-key-2") == key_id("file-key-2", secret)
    assert ring.match(b"file-key") is None
    monkeypatch.setenv("OAI_API_KEY", "env-a,env-b")
    assert Settings().api_key == ["env-a", "env-b"]
    monkeypatch.delenv("OAI_API_KEY")
    settings = Settings(_cli_parse_args=["--api-key", "a", "--api-key", "b"])
    assert settings.api_key == ["a", "b"]


def test_key_id_is_short_and_not_the_key() -> None:
    ident = key_id("sk-secret", ServerSecret(b"the deployment's secret"))
    assert re.fullmatch(r"key-[0-9a-f]{12}", ident)
    assert "secret" not in ident
    # Keyed: no plain hash of a guessed key finds it, and another secret names it otherwise.
    assert ident != "key-" + hashlib.sha256(b"sk-secret").hexdigest()[:12]
    assert ident != key_id("sk-secret", ServerSecret(b"another deployment's"))


async def test_every_route_but_the_open_ones_needs_a_key(tmp_path: Path) -> None:
    flag_key, file_key = new_key(), new_key()
    (tmp_path / "keys").write_text(f"{file_key}\n")
    app = make_app(api_key=[flag_key], api_keys_file=tmp_path / "keys")
    async with serve_async(app) as root, async_validating_client(base_url=root) as http:
        for method, path in [
            ("POST", "/v1/chat/completions"),
            ("GET", "/v1/models"),
            ("POST", "/tokenize"),
            ("POST", "/detokenize"),
            ("GET", "/openapi.json"),
            ("GET", "/no-such-route"),
        ]:
            for headers in ({}, _bearer("wrong"), {"authorization": flag_key}):
                response = await http.request(method, path, headers=headers, json={})
                assert response.status_code == 401, (method, path, headers)
                assert response.json()["error"]["code"] == "invalid_api_key"
        for path in sorted(OPEN.paths):
            assert (await http.get(path)).status_code == 200, path
        assert (await http.get("/ui/app.css")).status_code == 200  # the chat page's files

        # Both keys work; the scheme in any case (RFC 7235).
        for key, scheme in [(flag_key, "Bearer"), (file_key, "bearer"), (flag_key, "BEARER")]:
            ok = await http.post(
                "/v1/chat/completions", json=chat_body(), headers=_bearer(key, scheme)
            )
            assert ok.status_code == 200, scheme
            tokens = await http.post("/tokenize", json={"prompt": "ab"}, headers=_bearer(key))
            assert tokens.json()["tokens"] == [97, 98]


async def test_websocket_routes_need_a_key() -> None:
    key = new_key()
    async with serve_async(make_app(api_key=[key])) as root:
        url = root.replace("http://", "ws://") + WS_PATH
        with pytest.raises(InvalidStatus) as refused:
            async with websockets.connect(url):
                pass
        assert refused.value.response.status_code == 401
        assert b"invalid_api_key" in refused.value.response.body
        async with websockets.connect(url, additional_headers=_bearer(key, "bearer")) as ws:
            await ws.send("ping")
            assert await ws.recv() == "ping"
        # A browser's way: the key as a subprotocol, as OpenAI's Realtime clients send it.
        realtime = root.replace("http://", "ws://") + "/v1/realtime?model=" + MODEL
        with pytest.raises(InvalidStatus):
            async with websockets.connect(realtime, subprotocols=["realtime"]):  # type: ignore[list-item]
                pass
        offered = ["realtime", f"openai-insecure-api-key.{key}"]
        async with websockets.connect(realtime, subprotocols=offered) as ws:  # type: ignore[arg-type]
            assert checked(await ws.recv())["type"] == "session.created"


async def test_without_keys_everything_is_open() -> None:
    async with serve_async(make_app()) as root, async_validating_client(base_url=root) as http:
        assert (await http.post("/tokenize", json={"prompt": "a"})).status_code == 200
        assert (await http.get("/openapi.json")).status_code == 200
