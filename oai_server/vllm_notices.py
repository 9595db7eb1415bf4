"""vLLM's Triton notice, dropped in every process of the server, the spawned ones included.

vLLM's CPU build logs "Triton is installed, but doesn't include CPU backend. Disabling
Triton." when it is imported (`vllm/triton_utils/importing.py`): nothing a user can act on.
In the server's own process `startup.configure_logging` keeps vLLM at ERROR. Each engine's
core and worker are spawned (vLLM's CPU platform forces `spawn`) and import vLLM while they
unpickle their target, before vLLM configures their logging, so Python's last-resort
handler prints the notice there: two lines per engine before the server is ready.

A spawned process first runs its parent's main module (as `__mp_main__`), then unpickles:
importing this module there drops the notice, with a filter on that one logger, before
vLLM is imported. multiprocessing skips a package's `__main__` (`python -m oai_server`), so
`import_first_in_spawned_processes` names this module as the main module to run instead.
"""

from __future__ import annotations

import importlib.util
import logging
import sys

TRITON_NOTICE = "Triton is installed, but doesn't include CPU backend"


class _DropTritonNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(TRITON_NOTICE)


_DROP_TRITON_NOTICE = _DropTritonNotice()


def silence_triton_notice() -> None:
    """Drop the notice, and nothing else, in this process (idempotent)."""
    logging.getLogger("vllm.triton_utils.importing").addFilter(_DROP_TRITON_NOTICE)


def import_first_in_spawned_processes() -> None:
    """Have every process this one spawns import this module before anything else.

    For `python -m oai_server`, whose main module (a package's `__main__`) spawn would not
    run; a console script (`oai-server`) is run by spawn as it is, and imports this module
    itself. Changes the main module's `__spec__`: call it only from the entry point.
    """
    main = sys.modules["__main__"]
    name = getattr(main.__spec__, "name", None)
    if name is not None and name.endswith(".__main__"):
        main.__spec__ = importlib.util.find_spec(__name__)


# What a spawned process runs when it imports this module as its main one.
silence_triton_notice()
