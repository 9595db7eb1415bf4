"""The server's API keys, from flags, the environment and a keys file; matched in constant time."""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from oai_server.secret import ServerSecret

# The HMAC's use name: `key-` and the first 12 hex digits of HMAC-SHA256 under its key.
KEY_ID_USE = "api-key-id"


def key_id(key: str, secret: ServerSecret) -> str:
    """A short id for `key` that logs and metrics can show: keyed with the server's secret,
    so that neither the key nor a guess at it can be checked against the id without it."""
    return "key-" + secret.mac(KEY_ID_USE, key)[:12]


@dataclass(frozen=True)
class KeyRing:
    """The accepted keys, each with its id."""

    keys: tuple[tuple[bytes, str], ...]

    @classmethod
    def of(cls, keys: Iterable[str], secret: ServerSecret) -> KeyRing:
        unique = dict.fromkeys(k for k in keys if k)
        return cls(tuple((k.encode(), key_id(k, secret)) for k in unique))

    def __bool__(self) -> bool:
        return bool(self.keys)

    def match(self, given: bytes) -> str | None:
        """The id of the key equal to `given`, or None.

        Every key is compared, each in constant time, so the time taken says nothing
        about which key (or how much of one) matched.
        """
        found: str | None = None
        for key, ident in self.keys:
            if hmac.compare_digest(given, key):
                found = ident
        return found


def read_keys_file(path: Path) -> list[str]:
    """One key per line; blank lines and '#' comments are skipped."""
    keys = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            keys.append(line)
    return keys


def load_keys(api_keys: Iterable[str], keys_file: Path | None, secret: ServerSecret) -> KeyRing:
    """Every key given by flag or environment, plus those of `keys_file`."""
    keys = list(api_keys)
    if keys_file is not None:
        keys += read_keys_file(keys_file)
    return KeyRing.of(keys, secret)
