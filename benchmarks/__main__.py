"""Entry point of `python -m benchmarks`.

The guard matters: vLLM's engine process is spawned and re-imports `__main__`.
"""

from __future__ import annotations

import sys

from benchmarks.cli import main

if __name__ == "__main__":
    sys.exit(main())
