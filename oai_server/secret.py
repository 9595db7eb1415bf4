"""The server's secret: one per deployment, given by `--secret-key` or kept in the data dir.

It keys what a client must neither forge nor reverse: the ids that name API keys in
logs, metrics and the Usage API (an HMAC of the key, so a `/metrics` scrape gives nothing
to test guessed keys against offline), and the encrypted reasoning a client that keeps no
state carries from one turn to the next (AES-GCM: this server reads it back, a client can
neither read nor alter it). Each use gets a key of its own, derived from the secret and the
use's name, so one use's output says nothing about another's.

Without `--secret-key`, the first start writes 32 random bytes to `<data dir>/secret`
(mode 0600) and later starts read them: ids and sealed reasoning survive a restart.
Replicas behind one gateway must share it (the same `--secret-key`), or each names keys
differently and none reads another's reasoning.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

FILE_NAME = "secret"
_NONCE_BYTES = 12
# As `--secret-key`'s own bound: a shorter one is too easy to guess to key anything.
MIN_LENGTH = 16


class SecretFileError(ValueError):
    """The data dir's secret file holds no usable secret (cut short by a crash, say)."""


class BrokenSealError(ValueError):
    """A sealed value that this server did not seal, or that was altered since."""


@dataclass(frozen=True)
class ServerSecret:
    value: bytes

    @classmethod
    def load(cls, given: str | None, data_dir: Path) -> ServerSecret:
        """`given` (`--secret-key`), else the data dir's, written there on the first start."""
        if given:
            return cls(given.encode())
        path = data_dir.expanduser() / FILE_NAME
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                # O_EXCL: of two servers starting on one data dir, one writes, both read it.
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                pass
            else:
                with os.fdopen(fd, "w") as out:
                    out.write(secrets.token_hex(32) + "\n")
        value = path.read_text().strip()
        if len(value) < MIN_LENGTH:
            # Not replaced silently: every key's id and all sealed reasoning would change.
            raise SecretFileError(
                f"{path} holds no secret of at least {MIN_LENGTH} characters: give "
                "--secret-key, or delete the file to have a new one generated (every "
                "API key's id then changes)."
            )
        return cls(value.encode())

    def _key(self, use: str) -> bytes:
        return hmac.new(self.value, use.encode(), hashlib.sha256).digest()

    def mac(self, use: str, data: str) -> str:
        """The HMAC-SHA256 of `data` under `use`'s key, hex."""
        return hmac.new(self._key(use), data.encode(), hashlib.sha256).hexdigest()

    def seal(self, use: str, plaintext: str) -> str:
        """`plaintext` encrypted and authenticated under `use`'s key, as URL-safe base64."""
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = AESGCM(self._key(use)).encrypt(nonce, plaintext.encode(), use.encode())
        return base64.urlsafe_b64encode(nonce + sealed).decode()

    def unseal(self, use: str, token: str) -> str:
        """What `seal(use, ...)` sealed into `token`; `BrokenSealError` for anything else."""
        try:
            raw = base64.urlsafe_b64decode(token.encode())
            nonce, sealed = raw[:_NONCE_BYTES], raw[_NONCE_BYTES:]
            return AESGCM(self._key(use)).decrypt(nonce, sealed, use.encode()).decode()
        except (binascii.Error, ValueError, InvalidTag) as exc:
            raise BrokenSealError(use) from exc
