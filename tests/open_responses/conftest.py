"""The session's real server (the embedded model), shared with the integration suite, for
the ported Open Responses checks."""

from __future__ import annotations

from tests.integration.conftest import server, trace_receiver

__all__ = ["server", "trace_receiver"]
