"""The server's API keys, from flags, the environment and a keys file; matched in constant time."""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from oai_server.secret import ServerSecret

logger = logging.getLogger(__name__)

# The HMAC's use name: `key-` and the first 12 hex digits of HMAC-SHA256 under its key.
KEY_ID_USE = "api-key-id"


def key_id(key: str, secret: ServerSecret) -> str:
    """A short id for `key` that logs and metrics can show: keyed with the server's secret,
    so that neither the key nor a guess at it can be checked against the id without it."""
    return "key-" + secret.mac(KEY_ID_USE, key)[:12]


def legacy_key_id(key: str) -> str:
    """`key`'s id in releases before the server secret: `key-` and 12 hex digits of its
    plain SHA-256, which what it stored then is recorded under."""
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:12]


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

    def renames(self) -> dict[str, str]:
        """Each key's former id (`legacy_key_id`) and its id now."""
        return {legacy_key_id(key.decode()): ident for key, ident in self.keys}

    def current_ids(self, ids: Iterable[str], setting: str) -> frozenset[str]:
        """`ids` (a setting's, named `setting`), a key's former id read as its id now."""
        renames = self.renames()
        for ident in ids:
            if ident in renames:
                logger.warning(
                    "%s names %s, a key's id from before the server secret: read as %s, its id now",
                    setting,
                    ident,
                    renames[ident],
                )
        return frozenset(renames.get(ident, ident) for ident in ids)

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
