"""A throwaway PostgreSQL server from Debian's binaries, for the store's tests and benchmarks.

PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user
(`runuser`), in a data directory that user owns; otherwise as the current user.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

import asyncpg


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"PostgreSQL's '{name}' is not installed (Debian package 'postgresql')")
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """`start()`, `stop()` and `start()` again on the same data and port; `close()` at the end."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="oai-store-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.as_root = os.geteuid() == 0
        self.running = False
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(
            [_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"],
            check=True,
        )

    def _command(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *argv] if self.as_root else argv

    def _run(self, argv: list[str], *, check: bool) -> None:
        subprocess.run(self._command(argv), check=check, capture_output=True)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url_of(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        options = f"-p {self.port} -h 127.0.0.1 -k {self.root} -c fsync=off -c max_connections=200"
        argv = [_bin("pg_ctl"), "start", "-w", "-D", str(self.data), "-o", options]
        self._run([*argv, "-l", str(self.root / "postgres.log")], check=True)
        self.running = True

    def stop(self) -> None:
        """A fast shutdown: open connections are cut, as when a database server goes away."""
        if self.running:
            self._run(
                [_bin("pg_ctl"), "stop", "-w", "-m", "fast", "-D", str(self.data)], check=True
            )
            self.running = False

    def _processes(self) -> list[int]:
        """The postmaster and its children (backends, checkpointer, ...): their process ids."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        children = subprocess.run(
            ["pgrep", "-P", str(postmaster)], capture_output=True, text=True, check=False
        ).stdout.split()
        return [postmaster, *map(int, children)]

    def freeze(self) -> None:
        """Stop every process of the server without closing a socket: a database that hangs
        (a partition, a full disk, a long lock) rather than one that refuses."""
        for pid in self._processes():
            os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        for pid in self._processes():
            os.kill(pid, signal.SIGCONT)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    async def create_database(self, name: str) -> str:
        """A fresh database; its URL."""
        conn = await asyncpg.connect(self.url)
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
        return self.url_of(name)
