"""Violations found, kept for the whole session."""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, field
from typing import Any, Final, NoReturn

from tests.conformance.schemas import ConformanceError, _nonconformance, _shorten

# --------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Violation:
    """One nonconforming response (or stream event)."""

    request: str  # e.g. "POST http://127.0.0.1:8000/v1/chat/completions"
    status: int
    schema: str | None
    message: str

    def __str__(self) -> str:
        against = f" [{self.schema}]" if self.schema else ""
        return f"{self.request} -> {self.status}{against}: {self.message}"


@dataclass
class ConformanceLog:
    """Every check made and every violation found, shared by transports.

    Thread-safe.  ``checked`` counts JSON documents validated (each SSE event
    counts once).
    """

    checked: int = 0
    violations: list[Violation] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record_check(self) -> None:
        """Count one validated document."""
        with self._lock:
            self.checked += 1

    def record_violation(self, violation: Violation) -> None:
        """Remember a violation."""
        with self._lock:
            self.violations.append(violation)

    def report(self) -> str:
        """A human-readable summary of all violations."""
        with self._lock:
            found = list(self.violations)
            checked = self.checked
        if not found:
            return f"{checked} documents checked against the OpenAI spec, all conform"
        body = "\n".join(f"{n}. {v}" for n, v in enumerate(found, 1))
        return f"{len(found)} OpenAI spec violation(s) in {checked} documents checked:\n{body}"

    def assert_clean(self) -> None:
        """Raise :class:`ConformanceError` if any violation was recorded."""
        if self.violations:
            raise ConformanceError(self.report())

    def export(self) -> dict[str, Any]:
        """What another process needs to `merge` this log into its own (plain data)."""
        with self._lock:
            return {"checked": self.checked, "violations": [asdict(v) for v in self.violations]}

    def merge(self, exported: dict[str, Any] | None) -> None:
        """Add what `export` gave in another process (an xdist worker's log)."""
        if exported is None:
            return
        with self._lock:
            self.checked += exported["checked"]
            self.violations += [Violation(**fields) for fields in exported["violations"]]

    def clear(self) -> None:
        """Forget everything recorded so far."""
        with self._lock:
            self.checked = 0
            self.violations.clear()


default_log: Final = ConformanceLog()
"""The log transports use when none is given."""


@dataclass(frozen=True)
class _Exchange:
    """Where a document came from, for messages."""

    log: ConformanceLog
    request: str
    status: int

    def fail(self, schema: str | None, message: str) -> NoReturn:
        violation = Violation(self.request, self.status, schema, message)
        self.log.record_violation(violation)
        raise ConformanceError(str(violation))

    def check_document(self, schema: str, document: object) -> None:
        self.log.record_check()
        problem = _nonconformance(schema, document)
        if problem is not None:
            self.fail(schema, problem)

    def check_json(self, schema: str, body: bytes) -> None:
        try:
            document = _loads(body)
        except ValueError as exc:
            self.log.record_check()
            self.fail(schema, f"body is not valid JSON ({exc}): {_shorten(repr(body))}")
        else:
            self.check_document(schema, document)


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def _loads(data: bytes | str) -> object:
    """Strict JSON: unlike :func:`json.loads`, rejects NaN and +/-Infinity."""
    return json.loads(data, parse_constant=_reject_constant)
