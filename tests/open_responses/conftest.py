"""The real servers the ported Open Responses checks run against: the session's server
(the embedded model) and the test VLM's, shared with the suites that define them."""

from __future__ import annotations

from tests.integration.conftest import server, trace_receiver
from tests.vision.conftest import image_server, vlm_dir, vlm_server

__all__ = ["image_server", "server", "trace_receiver", "vlm_dir", "vlm_server"]
