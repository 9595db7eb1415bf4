"""Text a client chose, made safe to write into a log line.

A log line ends at a newline, and a terminal obeys escape sequences: a path, header or
model name that carries `\\n` (percent-decoded: `%0a`), `\\r`, U+2028 or `ESC[...` could
write a line of its own into the log, one that looks like the server's (a forged access
line, say), or rewrite what an operator's terminal shows. Every character that is not
printable is written as its Python escape (`\\n`, `\\x1b`, `\\u2028`), so one event is one
line and reads as what was sent.
"""

from __future__ import annotations

import logging


def printable(text: str) -> str:
    """`text` with each character that is not printable written as its escape."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


class PrintableFormatter(logging.Formatter):
    """A formatter whose messages are one line each, whatever their arguments held.

    The traceback that may follow a message is left as it is: its lines are Python's.
    A message's own trailing newlines (uvicorn's "Exception in ASGI application\\n") are
    dropped rather than escaped: they end the line anyway."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        record.message = printable(record.message.rstrip("\n"))
        return super().formatMessage(record)
