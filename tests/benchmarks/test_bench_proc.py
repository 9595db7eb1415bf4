"""Memory and CPU time of a process tree, read from a fake /proc and from the real one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.proc_stats import (
    MemorySampler,
    parse_stat,
    process_tree,
    tree_cpu_seconds,
    tree_memory,
)


def _stat(pid: int, ppid: int, utime: int = 0, stime: int = 0, comm: str = "python") -> str:
    # Fields 3-15: state ppid pgrp session tty tpgid flags, 4 fault counts, utime stime
    return f"{pid} ({comm}) S {ppid} 1 1 0 -1 0 0 0 0 0 {utime} {stime} 0 0 20 0 1 0\n"


def _process(
    proc: Path, pid: int, ppid: int, *, rss_kib: int, pss_kib: int, ticks: int = 0
) -> Path:
    root = proc / str(pid)
    root.mkdir(parents=True)
    (root / "stat").write_text(_stat(pid, ppid, utime=ticks, comm="vllm (engine) core"))
    (root / "status").write_text(f"Name:\tx\nVmPeak:\t 999999 kB\nVmRSS:\t {rss_kib} kB\n")
    (root / "smaps_rollup").write_text(f"Rss:  {rss_kib} kB\nPss:  {pss_kib} kB\n")
    return root


@pytest.fixture
def fake_proc(tmp_path: Path) -> Path:
    """A server (10) with an engine core (11, itself with a helper 12), and a stranger (20)."""
    _process(tmp_path, 10, 1, rss_kib=2048, pss_kib=1024, ticks=100)
    _process(tmp_path, 11, 10, rss_kib=4096, pss_kib=3072, ticks=250)
    _process(tmp_path, 12, 11, rss_kib=1024, pss_kib=512, ticks=50)
    _process(tmp_path, 20, 1, rss_kib=99999, pss_kib=99999, ticks=999)
    (tmp_path / "self").mkdir()  # not a pid
    return tmp_path


def test_parse_stat_with_spaces_and_parentheses_in_the_name() -> None:
    fields = parse_stat(_stat(42, 7, utime=12, stime=3, comm="a) b (c"))
    assert (fields.ppid, fields.utime, fields.stime) == (7, 12, 3)


def test_tree_sums_descendants_only(fake_proc: Path) -> None:
    assert sorted(process_tree(10, fake_proc)) == [10, 11, 12]
    assert process_tree(12, fake_proc) == [12]
    assert process_tree(99, fake_proc) == []
    memory = tree_memory(10, fake_proc)
    assert memory.rss_mib == pytest.approx(7.0)
    assert memory.pss_mib == pytest.approx(4.5)


def test_cpu_time_from_ticks_or_schedstat(fake_proc: Path) -> None:
    assert tree_cpu_seconds(10, fake_proc, ticks_per_second=100) == pytest.approx(4.0)
    # With schedstat (nanoseconds on a CPU, per thread), it wins over the ticks.
    for tid, ns in ((11, 1_500_000_000), (13, 250_000_000)):
        task = fake_proc / "11" / "task" / str(tid)
        task.mkdir(parents=True)
        task.joinpath("schedstat").write_text(f"{ns} 0 1\n")
    assert tree_cpu_seconds(10, fake_proc, ticks_per_second=100) == pytest.approx(3.25)


def test_sampler_keeps_the_peak(fake_proc: Path) -> None:
    with MemorySampler(10, interval=0.01, proc=fake_proc) as sampler:
        (fake_proc / "12" / "status").write_text("VmRSS:\t 9216 kB\n")
        # Two samples after the write, however long a loaded machine makes them take.
        taken = sampler.samples
        _until(lambda: sampler.samples >= taken + 2, "two more samples")
        (fake_proc / "12" / "status").write_text("VmRSS:\t 0 kB\n")
    assert sampler.peak.rss_mib == pytest.approx(15.0)
    assert sampler.samples >= 3


def test_real_process_tree_memory_and_cpu() -> None:
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.2: pass\n"
    child = subprocess.Popen([sys.executable, "-c", busy + "time.sleep(30)"])
    try:
        # The child's 0.2 s of CPU, whenever a loaded machine lets it run them.
        _until(lambda: tree_cpu_seconds(child.pid) >= 0.15, "the child's CPU time")
        assert child.pid in process_tree(os.getpid())
        assert tree_memory(child.pid).rss_mib > 1
    finally:
        child.kill()
        child.wait()


def _until(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        time.sleep(0.01)
