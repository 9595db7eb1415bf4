"""The suite on two cores at once: `make test` runs it with pytest-xdist (`-n 2 --dist loadgroup`).

Most of the suite's time is real servers starting and answering, one process at a time, so
one core idles while the other imports vLLM. Two workers each run whole groups of tests:

- a group is a test file (its module-scoped server is started once), or every file that
  uses one costly session fixture: the session's `server`, the test VLM's server, the
  local Ray;
- the session server's group runs on the first worker, which launched that server as the
  run began (`tests/conftest.py`); the other groups go to whichever worker is free next,
  those that start a real engine (the `integration` mark) first, so the last groups to
  run are short ones and both workers end together;
- each worker's engines compute on a core of their own (`VLLM_CPU_OMP_THREADS_BIND`, as the
  engine's default binds every core): two engines bound to the same cores wait on each
  other at every step.

Which fixtures a test uses is known where it is collected, in the workers, not in the
controller that schedules: each worker writes the groups of the files it collected to a
file of the run (`groups_file`), which the scheduler reads. (xdist's own `xdist_group`
mark reaches the scheduler through `item._nodeid`, which pytest 9.2 no longer reads.)

Run without `-n`, as when a developer runs one file, none of this applies.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import WorkerController

FIRST_WORKER = "gw0"
SESSION_GROUP = "session-server"
# Session fixtures too costly to start on both workers: the group of every file using them.
SHARED_FIXTURES = {
    "server": (SESSION_GROUP, "tests.integration.conftest"),
    "vlm_server": ("vision-server", "tests.vision.conftest"),
    "ray_serve": ("local-ray", "tests.ray.conftest"),
}
THREADS_BIND = "VLLM_CPU_OMP_THREADS_BIND"


def worker_id() -> str | None:
    """This process's xdist worker (`gw0`, `gw1`...), None when not run by xdist."""
    return os.environ.get("PYTEST_XDIST_WORKER")


def launches_session_server() -> bool:
    """Whether this process is the one that runs the session server's tests."""
    return worker_id() in (None, FIRST_WORKER)


def shared_group(item: pytest.Item) -> str | None:
    """The group of the costly session fixture `item` uses, if any."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for name, (group, module) in SHARED_FIXTURES.items():
        definitions = info.name2fixturedefs.get(name, ())
        if definitions and definitions[-1].func.__module__ == module:
            return group
    return None


def groups_file(run: str) -> Path:
    """Where this run's workers leave the groups of the files they collected."""
    return Path(tempfile.gettempdir()) / f"oai-test-groups-{run}.json"


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _grouped(items: list[pytest.Item]) -> dict[str, list[pytest.Item]]:
    """The items by group, the session's group first, then the groups that start a real
    engine, then the rest; each in collection order. A file stays whole (its tests may
    share module fixtures, or rely on their order): all of it goes to the group of a
    shared fixture any of its tests uses."""
    of_file: dict[str, str] = {}
    for item in items:
        group = shared_group(item)
        if group is not None:
            of_file.setdefault(file_of(item.nodeid), group)
    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        file = file_of(item.nodeid)
        groups.setdefault(of_file.get(file, file), []).append(item)

    def rank(group: str) -> int:
        if group == SESSION_GROUP:
            return 0
        real = any(item.get_closest_marker("integration") for item in groups[group])
        return 1 if real else 2

    return {group: groups[group] for group in sorted(groups, key=rank)}  # a stable sort


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if worker_id() is None or run is None:
        return
    groups = _grouped(items)
    items[:] = [item for members in groups.values() for item in members]
    of_file = {file_of(item.nodeid): group for group, members in groups.items() for item in members}
    # Every worker collects the same tests and writes the same file: each whole, by rename.
    target = groups_file(run)
    partial = target.with_name(f"{target.name}.{worker_id()}")
    partial.write_text(json.dumps(of_file))
    partial.replace(target)


def pytest_configure(config: pytest.Config) -> None:
    worker = worker_id()
    if worker is not None and THREADS_BIND not in os.environ:
        index = int(worker.removeprefix("gw"))
        os.environ[THREADS_BIND] = str(index % (os.cpu_count() or 1))


class GroupScheduling(LoadScopeScheduling):
    """xdist's `loadscope` over our groups, in the order the workers sorted them, with the
    session server's group kept for the first worker."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        self._of_file: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._of_file is None:
            # Read once every worker has collected (the scheduler splits only then).
            run = next(iter(self.nodes)).workerinput["testrunuid"]
            path = groups_file(run)
            # None written (collection failed): each file its own group.
            self._of_file = json.loads(path.read_text()) if path.exists() else {}
            path.unlink(missing_ok=True)
        file = file_of(nodeid)
        return self._of_file.get(file, file)

    def _assign_work_unit(self, node: WorkerController) -> None:
        if SESSION_GROUP in self.workqueue:
            other = next((scope for scope in self.workqueue if scope != SESSION_GROUP), None)
            if node.gateway.id == FIRST_WORKER:
                self.workqueue.move_to_end(SESSION_GROUP, last=False)
            elif other is not None:
                self.workqueue.move_to_end(other, last=False)
        super()._assign_work_unit(node)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> LoadScopeScheduling | None:
    if config.getvalue("dist") != "loadgroup":
        return None  # xdist's own scheduler
    config.option.loadscopereorder = False  # the workers' order, not xdist's by group size
    return GroupScheduling(config, log)
