"""Approvals bound to their exact call, and who made each decision.

**The binding.** An approval (or an edit) records a digest of the call the reviewer approved: its tool name, its
arguments and its tool call id, as canonical JSON, under HMAC-SHA256 with the deployment secret. Right before the
tool runs, the call about to run is digested again; if the digests differ (the checkpoint was changed between the
approval and the execution: tampered, or migrated with different arguments), the tool does not run and
:class:`ApprovalMismatchError` says why.

Where the secret comes from: ``HumanInTheLoopMiddleware(key=...)`` (a ``str``/``bytes`` of at least 32 bytes, a list
of them (the first signs, every one verifies: rotation), or PIIMiddleware's ``Keyring``), else the environment
variable :data:`ENV_KEY` when the middleware is built. Without either, the digest is an unkeyed SHA-256: it still
catches a checkpoint changed by accident (a migration, a bad ``update_state``), not a tamperer who can write the
checkpoint and recompute the digest. With a key configured, an unkeyed digest is refused (it could be forged).

**The reviewer.** Each decision records who made it: the authenticated user LangGraph Server puts in
``runtime.server_info.user`` (its ``identity``), read defensively (older LangGraph has no ``server_info``), and/or the
``reviewer`` id the resume value carries. The authenticated identity wins; a different claimed id is kept beside it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from middleware_kit.errors import MiddlewareConfigError, MiddlewareError

__all__ = ["ENV_KEY", "ApprovalMismatchError", "ApprovalSeal", "reviewer_record"]

ENV_KEY = "MIDDLEWARE_KIT_APPROVAL_KEY"
"""The environment variable holding the approval key when ``key=`` is not given (read when the middleware is built)."""
_PURPOSE = b"middleware_kit.hitl/approval"
_MIN_KEY_BYTES = 32
_KEYED, _PLAIN = "hmac-sha256", "sha256"


class ApprovalMismatchError(MiddlewareError):
    """The call about to run is not the call a reviewer approved: the checkpoint changed between the approval and
    the execution. The tool did not run.

    Attributes:
        tool_call_id: The call's id.
        tool_name: The tool about to run.
    """

    def __init__(self, message: str, *, middleware: str, tool_call_id: str, tool_name: str) -> None:
        super().__init__(message, middleware=middleware, hook="before_tool")
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name


def _canonical(name: str, args: Mapping[str, Any], call_id: str) -> bytes:
    body = {"name": name, "args": dict(args), "id": call_id}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr).encode()


def _secrets(owner: str, key: object) -> tuple[bytes, ...]:
    """The secrets ``key`` stands for (each turned into this purpose's sub-key)."""
    from middleware_kit.middlewares._pii_vault import Keyring

    if isinstance(key, Keyring):  # PIIMiddleware's keyring: its per-key name secrets, derived once more here
        raw = list(key.subkeys("approvals"))
    elif isinstance(key, (str, bytes, bytearray)):
        raw = [key.encode() if isinstance(key, str) else bytes(key)]
    elif isinstance(key, Sequence) and key:
        raw = [k.encode() if isinstance(k, str) else bytes(k) for k in key]
    else:
        raise MiddlewareConfigError(
            f"{owner}: key must be a str or bytes secret (at least {_MIN_KEY_BYTES} bytes), a list of them, or a "
            f"Keyring; got a {type(key).__name__}.", middleware=owner, hook="key",
        )
    if any(len(r) < _MIN_KEY_BYTES for r in raw):
        raise MiddlewareConfigError(
            f"{owner}: an approval key must be at least {_MIN_KEY_BYTES} bytes; make one with "
            f"secrets.token_urlsafe(32) and keep it in your secret manager (or in ${ENV_KEY}).",
            middleware=owner, hook="key",
        )
    return tuple(hmac.new(r, _PURPOSE, hashlib.sha256).digest() for r in raw)


class ApprovalSeal:
    """How one middleware binds approvals to their call (immutable)."""

    __slots__ = ("_keys",)

    def __init__(self, keys: tuple[bytes, ...]) -> None:
        self._keys = keys

    @classmethod
    def of(cls, owner: str, key: object) -> ApprovalSeal:
        """From the ``key=`` option; None: the environment variable :data:`ENV_KEY`, else no key (unkeyed)."""
        if key is None:
            key = os.environ.get(ENV_KEY) or None
        return cls(() if key is None else _secrets(owner, key))

    @property
    def keyed(self) -> bool:
        return bool(self._keys)

    def __repr__(self) -> str:  # never the keys
        return f"ApprovalSeal(<{len(self._keys)} key(s)>)" if self._keys else "ApprovalSeal(unkeyed)"

    def digest(self, name: str, args: Mapping[str, Any], call_id: str) -> str:
        """The digest recorded with an approval of this call."""
        body = _canonical(name, args, call_id)
        if not self._keys:
            return f"{_PLAIN}:{hashlib.sha256(body).hexdigest()}"
        return f"{_KEYED}:{hmac.new(self._keys[0], body, hashlib.sha256).hexdigest()}"

    def problem(self, digest: object, name: str, args: Mapping[str, Any], call_id: str) -> str | None:
        """None when ``digest`` is this call's; else what is wrong, for the error."""
        kind, _, value = str(digest).partition(":")
        body = _canonical(name, args, call_id)
        if kind == _PLAIN and not self._keys:
            return None if hmac.compare_digest(value, hashlib.sha256(body).hexdigest()) else "changed"
        if kind == _PLAIN:
            return "unkeyed"
        if kind == _KEYED and not self._keys:
            return "no key"
        if kind == _KEYED:
            for key in self._keys:
                if hmac.compare_digest(value, hmac.new(key, body, hashlib.sha256).hexdigest()):
                    return None
        return "changed"


def authenticated_user(runtime: Any) -> str | None:
    """The identity of the user LangGraph Server authenticated for this run (``runtime.server_info.user``), if any."""
    user = getattr(getattr(runtime, "server_info", None), "user", None)
    if user is None:
        return None
    identity = getattr(user, "identity", None)
    if identity is None and isinstance(user, Mapping):
        identity = user.get("identity")
    return str(identity) if identity else None


def reviewer_record(runtime: Any, claimed: str | None) -> dict[str, Any] | None:
    """Who made a decision: ``{"id", "source"}`` (``"langgraph_server"``: the authenticated user; ``"resume"``: the id
    the resume value carried), plus ``"claimed"`` when the resume value named someone else; None when unknown."""
    user = authenticated_user(runtime)
    if user is not None:
        record: dict[str, Any] = {"id": user, "source": "langgraph_server"}
        if claimed is not None and claimed != user:
            record["claimed"] = claimed
        return record
    return {"id": claimed, "source": "resume"} if claimed is not None else None
