"""Memory and CPU time of a server and all its descendants, read from Linux's /proc.

A vLLM server is several processes (the API server, the engine core it spawns, helpers), so a
figure for "the server" sums over the process tree rooted at the process the harness started.

- RSS (resident set size) is what `top` shows; summed over processes it counts pages they share
  (the libraries both load, torch above all) once per process, so it overstates.
- PSS (proportional set size) splits each shared page between its sharers: the sum over a tree
  is the memory it really holds. It comes from `smaps_rollup`, which costs the kernel a walk of
  the page tables, still well under a millisecond for a few processes.
- CPU time is the time the threads alive when read have spent on a CPU (user + system), from
  `schedstat` in nanoseconds (`stat` counts 10 ms ticks).

Every function takes the /proc root as an argument, so the parsing is tested on a fake tree.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

PROC = Path("/proc")
KIB_PER_MIB = 1024


@dataclass(frozen=True)
class StatFields:
    """The fields of /proc/<pid>/stat used here; times in clock ticks."""

    ppid: int
    utime: int
    stime: int


def parse_stat(text: str) -> StatFields:
    """Parse /proc/<pid>/stat; the command name (field 2) may hold spaces and parentheses."""
    rest = text[text.rindex(")") + 2 :].split()
    # rest[0] is field 3 (state): field n is rest[n - 3].
    return StatFields(ppid=int(rest[1]), utime=int(rest[11]), stime=int(rest[12]))


def parse_kib(text: str, key: str) -> int:
    """The KiB of a `Key:   123 kB` line of /proc/<pid>/status or smaps_rollup (0 if none)."""
    prefix = key + ":"
    for line in text.splitlines():
        if line.startswith(prefix):
            return int(line[len(prefix) :].split()[0])
    return 0


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None  # the process exited, or is not ours to read


def _pids(proc: Path) -> Iterator[int]:
    for entry in proc.iterdir():
        if entry.name.isdigit():
            yield int(entry.name)


def process_tree(root: int, proc: Path = PROC) -> list[int]:
    """`root` and its live descendants (empty if `root` is gone)."""
    children: dict[int, list[int]] = {}
    for pid in _pids(proc):
        text = _read(proc / str(pid) / "stat")
        if text is not None:
            children.setdefault(parse_stat(text).ppid, []).append(pid)
    if _read(proc / str(root) / "stat") is None:
        return []
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


@dataclass(frozen=True)
class Memory:
    """Resident memory of a process tree, in MiB."""

    rss_mib: float
    pss_mib: float

    def max(self, other: Memory) -> Memory:
        return Memory(max(self.rss_mib, other.rss_mib), max(self.pss_mib, other.pss_mib))


def tree_memory(root: int, proc: Path = PROC) -> Memory:
    """RSS and PSS of `root` and its descendants, summed."""
    rss = pss = 0
    for pid in process_tree(root, proc):
        status = _read(proc / str(pid) / "status")
        rss += parse_kib(status, "VmRSS") if status else 0
        rollup = _read(proc / str(pid) / "smaps_rollup")
        pss += parse_kib(rollup, "Pss") if rollup else 0
    return Memory(rss / KIB_PER_MIB, pss / KIB_PER_MIB)


def task_cpu_seconds(pid: int, proc: Path = PROC, ticks_per_second: int | None = None) -> float:
    """CPU seconds used so far by the live threads of process `pid` (0 if it is gone).

    The first field of /proc/<pid>/task/<tid>/schedstat is a thread's time on a CPU in
    nanoseconds; `utime` + `stime` of stat count whole clock ticks (10 ms), too coarse for
    a web server's fraction of a second. The ticks serve where schedstat is missing.
    """
    total_ns, found = 0, False
    tasks = proc / str(pid) / "task"
    try:
        tids = [entry.name for entry in tasks.iterdir() if entry.name.isdigit()]
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        tids = []
    for tid in tids:
        text = _read(tasks / tid / "schedstat")
        if text:
            total_ns += int(text.split()[0])
            found = True
    if found:
        return total_ns / 1e9
    stat = _read(proc / str(pid) / "stat")
    if stat is None:
        return 0.0
    fields = parse_stat(stat)
    return (fields.utime + fields.stime) / (ticks_per_second or os.sysconf("SC_CLK_TCK"))


def tree_cpu_seconds(root: int, proc: Path = PROC, ticks_per_second: int | None = None) -> float:
    """User + system CPU seconds used so far by `root` and its live descendants.

    Threads and processes that ended between two readings drop out of the difference: read it
    around work done by long-lived ones (a server's event loop, an engine's workers).
    """
    return sum(task_cpu_seconds(pid, proc, ticks_per_second) for pid in process_tree(root, proc))


class MemorySampler:
    """Samples a process tree's memory every `interval` seconds in a thread; keeps the peak.

    `with MemorySampler(pid) as sampler: ...` then `sampler.peak`.
    """

    def __init__(self, root: int, interval: float = 0.5, proc: Path = PROC) -> None:
        self.root, self.interval, self.proc = root, interval, proc
        self.peak = Memory(0.0, 0.0)
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="memory-sampler", daemon=True)

    def _sample(self) -> None:
        self.peak = self.peak.max(tree_memory(self.root, self.proc))
        self.samples += 1

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> MemorySampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
