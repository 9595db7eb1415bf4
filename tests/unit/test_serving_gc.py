"""A serving process's garbage collector: the start-up heap frozen, young generations
collected less often (in a process of its own: it would freeze this test session's heap)."""

from __future__ import annotations

import json
import subprocess
import sys

from oai_server.startup import GC_THRESHOLDS

PROBE = """
import gc, json
from oai_server.startup import prepare_gc_for_serving
before = gc.get_threshold()
prepare_gc_for_serving()
print(json.dumps([before, gc.get_threshold(), gc.get_freeze_count()]))
"""


def test_serving_freezes_the_start_up_heap_and_collects_young_objects_less_often() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    before, after, frozen = json.loads(out.stdout)
    assert tuple(after) == GC_THRESHOLDS
    assert after[0] > before[0]
    assert frozen > 10_000  # the imported modules' objects, at least
