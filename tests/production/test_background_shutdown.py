"""SIGTERM with a background response generating: it is stored whole, as failed, and a
restarted server reports it so (never left `in_progress` with half its output)."""

from __future__ import annotations

import signal
from pathlib import Path

from oai_server.engine.fake import FakeEngine
from tests.production.conftest import MODEL
from tests.production.processes import fake_server
from tests.store.conftest import sdk


def test_a_background_response_in_flight_at_sigterm_is_reported_after_a_restart(
    tmp_path: Path,
) -> None:
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    # Eight words, one a second: still generating when the signal comes.
    with fake_server(tmp_path, token_delay=1.0, store_url=store_url) as server:
        with sdk(server.root) as client:
            queued = client.responses.create(model=MODEL, input="Hi", background=True)
            # The store says `queued` until the run ends: its stream shows the words.
            for event in client.responses.retrieve(queued.id, stream=True):
                if event.type == "response.output_text.delta":
                    break
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(30) == 0
        log = server.log.read_text()
    assert "Traceback" not in log

    with fake_server(tmp_path, store_url=store_url) as restarted, sdk(restarted.root) as client:
        got = client.responses.retrieve(queued.id)
        items = list(client.responses.input_items.list(queued.id))
    assert got.status == "failed"
    assert got.error is not None
    assert "shutting down" in got.error.message
    assert got.output, "the words generated before the signal are kept"
    assert all(item.status != "in_progress" for item in got.output)  # type: ignore[union-attr]
    assert FakeEngine.reply.startswith(got.output_text)
    assert len(got.output_text) < len(FakeEngine.reply)
    assert [item.type for item in items] == ["message"]
