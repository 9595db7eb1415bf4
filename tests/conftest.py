"""Suite-wide: every response of an OpenAI route that a test reads is checked against
OpenAI's spec (`/health`, `/metrics` and the page's files have no schema there).

The HTTP clients the tests use (httpx, and through it the OpenAI SDK, LangChain and
LlamaIndex) go through `ValidatingTransport`, which records every nonconforming body.
A client library may swallow the error it raises, so the session also fails at the
end if the log holds any violation.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oai_server.engine.vllm import cpu
from tests.conformance import ConformanceLog, default_log

pytest_plugins = ("tests.store.fixtures", "tests.parallel")


def pytest_report_header() -> list[str]:
    """Which CPU the run is on, and what the real engine will run on it: vLLM's kernels
    differ per CPU (AMX or not), and so may the embedded model's answers."""
    flags = cpu.cpu_flags()
    plan = cpu.plan_kernels("auto", embedded=True, flags=flags)
    return [
        f"cpu: {cpu.cpu_summary(flags)}",
        f"embedded model engine: {plan.describe()} ({plan.reason})",
    ]


@pytest.fixture(scope="session", autouse=True)
def conformance() -> Iterator[ConformanceLog]:
    yield default_log
    default_log.assert_clean()


@pytest.fixture(scope="session", autouse=True)
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Servers the tests start keep their data (the default SQLite store) in a temporary
    directory, not in the user's own data directory."""
    path = tmp_path_factory.mktemp("data")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OAI_DATA_DIR", str(path))
        yield path


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say how many documents were checked against the spec, and how it went (under xdist,
    the workers' counts summed: each worker's own session fails on a violation it saw)."""
    terminalreporter.write_line(default_log.report().splitlines()[0])


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker hands its count to the controller, which sums them."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["conformance"] = default_log.export()


def pytest_testnodedown(node: Any, error: object) -> None:
    default_log.merge(getattr(node, "workeroutput", {}).get("conformance"))


@pytest.fixture(scope="session", autouse=True)
def _session_server_early(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[None]:
    """Launch the integration tests' session server at the start of the run, when any
    selected test uses it: its engine loads (a minute or two) while the tests before the
    first that needs it run, instead of after them. Under xdist, only on the worker that
    runs that server's tests (`tests/parallel.py`)."""
    from tests import parallel
    from tests.integration import conftest as integration

    if parallel.launches_session_server() and integration.needs_session_server(
        request.session.items
    ):
        factory: pytest.TempPathFactory = request.getfixturevalue("tmp_path_factory")
        integration.launch_session_server(factory.mktemp("server"))
    yield
    integration.stop_unclaimed_session_server()
