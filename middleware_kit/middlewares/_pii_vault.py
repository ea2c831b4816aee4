"""The key of ``PIIMiddleware(strategy="placeholder")``: placeholder names and the sealed (encrypted) values.

A placeholder is ``<EMAIL_3f9a1c2e>``: the type and 8 hex digits of an HMAC of the value under the deployment key,
so the same value gets the same placeholder wherever it enters (the input, the model's output, a tool result) with
no shared counter, and nobody without the key can tell which value it stands for. The real value is kept only
*sealed*: encrypted and authenticated with the key (see :class:`Keyring`), in the ``response_metadata["pii_vault"]``
of the message that carried it, so checkpoints, streams and results hold ciphertext and placeholders, never the
mapping in plain text.

The cipher is AES-256-GCM from the ``cryptography`` package (the ``pii`` extra; imported when a keyring is made, with
an error naming the extra when it is missing): a fresh 96-bit random nonce per seal, the key id as associated data.
Sub-keys are derived from the deployment key with HMAC-SHA256 (one key per purpose: encryption, placeholder names,
key id), so the secret you supply is never used directly.

Rotation: a :class:`Keyring` holds one or more keys; the FIRST seals and names placeholders, every key opens (a
sealed value names the key that sealed it). Put the new key first, keep the old ones until the threads that used
them are gone.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

try:
    from cryptography.exceptions import InvalidTag
except ImportError:  # pragma: no cover - _aead() says which extra to install

    class InvalidTag(Exception):  # type: ignore[no-redef]
        """Stand-in so this module imports without ``cryptography``."""

__all__ = ["KeySpec", "Keyring", "VaultError"]

KeySpec: TypeAlias = "str | bytes | Sequence[str | bytes] | Keyring"
"""A key (``str``/``bytes``, at least 32 bytes), a list of keys (the first is current; the others still open old
values), or a :class:`Keyring`."""

_PREFIX = "pii2."
_MIN_KEY_BYTES = 32


class VaultError(ValueError):
    """A sealed value could not be opened: not sealed by any key of the keyring, or altered."""


def _sub(key: bytes, purpose: bytes) -> bytes:
    return hmac.new(key, b"middleware_kit.pii/" + purpose, hashlib.sha256).digest()


@dataclass(frozen=True, slots=True)
class _Key:
    key_id: bytes  # 4 bytes, names the key in a sealed value (not secret)
    cipher: Any  # AES-256-GCM under a sub-key of the secret
    name: bytes

    @classmethod
    def derive(cls, secret: bytes) -> _Key:
        return cls(_sub(secret, b"id")[:4], _aead(_sub(secret, b"enc")), _sub(secret, b"name"))


def _aead(key: bytes) -> Any:
    """An AES-256-GCM cipher under ``key`` (``cryptography``, the ``pii`` extra)."""
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as exc:  # pragma: no cover - the test extra installs it
        raise ImportError(
            "PIIMiddleware(strategy='placeholder') encrypts the real values with AES-GCM from the 'cryptography' "
            "package. Install it: pip install 'middleware_kit[pii]'."
        ) from exc
    return AESGCM(key)


class Keyring:
    """The deployment's key(s) for placeholders: the first key seals and names; every key opens.

    Args:
        keys: One or more secrets (``str`` or ``bytes``, each at least 32 bytes; e.g. ``secrets.token_urlsafe(32)``
            kept in your secret manager). Raises ``ValueError`` when empty or too short.
    """

    __slots__ = ("_keys",)

    def __init__(self, keys: Sequence[str | bytes]) -> None:
        derived: list[_Key] = []
        for key in keys:
            raw = key.encode() if isinstance(key, str) else bytes(key)
            if len(raw) < _MIN_KEY_BYTES:
                raise ValueError(
                    f"a key must be at least {_MIN_KEY_BYTES} bytes (got {len(raw)}); make one with "
                    f"secrets.token_urlsafe(32)"
                )
            derived.append(_Key.derive(raw))
        if not derived:
            raise ValueError("the keyring needs at least one key")
        self._keys: tuple[_Key, ...] = tuple(derived)

    @classmethod
    def of(cls, spec: KeySpec) -> Keyring:
        """A keyring from a key, a list of keys or a keyring."""
        if isinstance(spec, Keyring):
            return spec
        if isinstance(spec, (str, bytes, bytearray)):
            return cls([bytes(spec) if not isinstance(spec, str) else spec])
        return cls(list(spec))

    def __repr__(self) -> str:  # never the keys
        return f"Keyring(<{len(self._keys)} key(s)>)"

    def subkeys(self, purpose: str) -> tuple[bytes, ...]:
        """One secret per key of the ring (the current one first), derived for another ``purpose`` (the approval
        digests of ``HumanInTheLoopMiddleware``): never a key itself, nor a secret the vault uses."""
        return tuple(_sub(key.name, purpose.encode()) for key in self._keys)

    def name(self, pii_type: str, value: str) -> str:
        """The placeholder of ``value``: ``<TYPE_8hex>``, the same for the same value under the current key."""
        digest = hmac.new(self._keys[0].name, f"{pii_type}\0{value}".encode(), hashlib.sha256).hexdigest()
        return f"<{pii_type.upper()}_{digest[:8]}>"

    def seal(self, value: str) -> str:
        """``value`` encrypted and authenticated with the current key: ``pii1.<base64url>``."""
        key = self._keys[0]
        nonce = secrets.token_bytes(12)
        body = key.cipher.encrypt(nonce, value.encode(), key.key_id)
        return _PREFIX + base64.urlsafe_b64encode(key.key_id + nonce + body).decode().rstrip("=")

    def open(self, sealed: str) -> str:
        """The value ``sealed`` holds; :class:`VaultError` when no key of the ring sealed it or it was altered."""
        if not isinstance(sealed, str) or not sealed.startswith(_PREFIX):
            raise VaultError("not a sealed value")
        text = sealed[len(_PREFIX) :]
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (ValueError, TypeError):
            raise VaultError("not a sealed value") from None
        if len(raw) < 4 + 12 + 16:
            raise VaultError("not a sealed value")
        key_id, nonce, body = raw[:4], raw[4:16], raw[16:]
        for key in self._keys:
            if key.key_id != key_id:
                continue
            try:
                return str(key.cipher.decrypt(nonce, body, key_id).decode())
            except InvalidTag:
                continue
        raise VaultError("sealed with a key that is not in the keyring, or altered")
