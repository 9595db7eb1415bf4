"""The engine's processes end with the server, however the server ends.

vLLM's engine core and its workers are processes of their own: a server stopped by
`kill -9` or the OOM killer never stops them, and they run on, orphaned, holding the
model's memory (6.6 GB after a killed test drill, for 50 minutes, until killed by hand).
vLLM 0.32 gives the core no way to notice its parent's death (its workers watch the core
through a pipe, not the server), and a parent-death signal set in the child
(`PR_SET_PDEATHSIG`) fires when the *thread* that started it ends, not the process,
and needs code run in a spawned child.

So each engine has a watchdog: a small process of its own (this file, run by path with
`python -I`: no package import, 14 MiB resident) that holds the read end of a pipe from the
server. While the engine starts it adopts each new process below the server; once the
engine is up, the server names the engine's processes exactly. When the pipe closes (the
server is gone, whatever killed it, or its engine stopped) or the server's process is
no longer there, it sends SIGTERM to whatever it adopted that still runs (the core shuts
its workers down), waits `GRACE_S`, and kills what is left.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
from collections.abc import Collection, Iterable, Sequence
from typing import Any

import psutil

# How often a starting engine's new processes are looked for, and the server's life.
POLL_S = 0.5
# How long the engine's processes have to end on SIGTERM before they are killed.
GRACE_S = 5.0


class Watchdog:
    """The server's side: the pipe's write end, open for the life of the engine."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process

    @classmethod
    def start(cls, known: Collection[int]) -> Watchdog:
        """A watchdog for the engine about to start; `known`: this process's children
        already running (not the engine's: another engine's, say)."""
        command = [sys.executable, "-I", __file__, str(os.getpid()), *map(str, known)]
        # Its own session: Ctrl-C in a terminal reaches the server, not the watchdog.
        process = subprocess.Popen(command, stdin=subprocess.PIPE, start_new_session=True)
        return cls(process)

    @property
    def pid(self) -> int:
        return self._process.pid

    def adopt(self, processes: Sequence[Any]) -> None:
        """Name the engine's processes (psutil's), now that it has started."""
        assert self._process.stdin is not None
        self._process.stdin.write(" ".join(str(p.pid) for p in processes).encode() + b"\n")
        self._process.stdin.flush()

    def close(self) -> None:
        """End the watch, the engine being stopped: it ends whatever is left of it."""
        assert self._process.stdin is not None
        with contextlib.suppress(OSError):
            self._process.stdin.close()
        self._process.wait(timeout=GRACE_S + 5)


def watch(server_pid: int, known: set[int]) -> None:
    """Adopt the server's new processes until it names them, then end them when it goes."""
    server = _processes([server_pid]).get(server_pid)  # None: gone before we looked
    stdin = sys.stdin.fileno()
    adopted: dict[int, psutil.Process] = {}
    named = False
    pending = b""
    while True:
        alive = server is not None and server.is_running()
        # A server that is gone may still have left its last words in the pipe.
        readable, _, _ = select.select([stdin], [], [], POLL_S if alive else 0)
        if readable:
            chunk = os.read(stdin, 4096)
            if not chunk:
                break
            pending += chunk
            while b"\n" in pending:
                line, _, pending = pending.partition(b"\n")
                adopted = _processes(int(pid) for pid in line.split())
                named = True
            continue
        if not alive:
            break
        if not named and server is not None:
            with contextlib.suppress(psutil.Error):
                for child in server.children(recursive=True):
                    if child.pid not in known and child.pid != os.getpid():
                        adopted.setdefault(child.pid, child)
    _end([p for p in adopted.values() if _ours(p)])


def _processes(pids: Iterable[int]) -> dict[int, psutil.Process]:
    found = {}
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            found[pid] = psutil.Process(pid)
    return found


def _ours(process: psutil.Process) -> bool:
    """Still running, and not multiprocessing's resource tracker (it cleans up shared
    memory when its users are gone, and ends by itself)."""
    try:
        return process.is_running() and "resource_tracker" not in " ".join(process.cmdline())
    except psutil.Error:
        return False


def _end(processes: list[psutil.Process]) -> None:
    if not processes:
        return
    pids = ", ".join(str(p.pid) for p in processes)
    print(f"oai-server watchdog: the engine outlived its server; ending {pids}", file=sys.stderr)
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _, alive = psutil.wait_procs(processes, timeout=GRACE_S)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()


if __name__ == "__main__":
    watch(int(sys.argv[1]), {int(pid) for pid in sys.argv[2:]})
