"""`python -m tests.production.fake_server PORT [SETTINGS_JSON]`: the production server,
run exactly as `python -m oai_server` runs it (signals, drain, exit status), but with
the fake engine, which streams a token every `token_delay` seconds."""

from __future__ import annotations

import json
import logging
import sys

from oai_server.__main__ import serve
from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings


def main() -> None:
    port = int(sys.argv[1])
    options = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    token_delay = float(options.pop("token_delay", 0.0))
    settings = Settings(host="127.0.0.1", port=port, **options)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    app = create_app(
        settings, FakeEngine(token_delay=token_delay, scheduling_policy=settings.scheduling_policy)
    )
    sys.exit(serve(app, settings))


if __name__ == "__main__":
    main()
