"""``PIIMiddleware``: detect PII (emails, card numbers, IPs, MAC addresses, URLs, or your own) and redact, mask, hash,
block or replace it with placeholders, before anything holding it is committed, streamed or sent to the model.

Where each thing happens:

- ``guard_messages`` (the engine's message guard): every list of messages LangGraph is about to commit (the graph
  input, every node's ``messages`` write: the model's message, other middlewares' hook writes, the tool node's
  results) is rewritten first, so checkpoints, pending writes, every stream mode and the result hold the rewritten
  value. Covered: ``HumanMessage`` (``apply_to_input``), ``AIMessage`` text and tool-call arguments
  (``apply_to_output``), ``ToolMessage`` content and artifact (``apply_to_tool_results``).
- ``wrap_model_call`` (a flow hook): the messages of the request that are not the state's own (added by another
  middleware's ``modify_model_request``) are scanned; sealed values are stripped from the request (the model never
  sees even ciphertext); with ``apply_to_output`` the model's response is rewritten right there, before any
  ``after_model`` hook (human review) sees it.
- ``wrap_tool_call`` (a flow hook), ``strategy="placeholder"``: the placeholders in the tool-call arguments are
  replaced by the real values for the tool, and the real values the tool echoes back (result, artifact, exception)
  become placeholders again, whatever ``apply_to_tool_results`` says.
- ``before_agent``, ``strategy="hash"`` with ``salt=lambda runtime: ...`` only: the graph input is guarded before the
  run exists (no runtime, no tenant), its values sealed under a process-only key; the run's first step turns them
  into the tenant's hashes.
- ``guard_resume`` (the engine's resume guard, with ``apply_to_input``): a resume value (what a reviewer types into
  an edit or a rejection) is scanned before LangGraph stores it. Its placeholders carry their sealed value
  (``<EMAIL_3f9a1c2e|pii2....>``: ciphertext, never the value) until the message the value reaches is guarded, which
  moves the sealed value into that message's vault (and turns pending hashes into the tenant's hashes).

- ``transformers`` (with ``apply_to_output`` or ``apply_to_tool_results``, as in LangChain 1.5): a stream
  transformer (:mod:`._pii_stream`) rewrites what ``stream_events(version="v3")`` shows that no state write guards:
  tool events (the tool's input and output, its error text) and the token deltas of unguarded nested agents.
- ``before_model``/``after_model``: LangChain's hooks, for a direct call only (``mw.before_model(state, runtime)``
  returns LangChain's update). An agent does not run them (no node, no work per model call): the guard does it.

The placeholder mapping is never held in plain text: a placeholder is named by an HMAC of the value under the
deployment key, and the value is sealed (encrypted and authenticated with the key) in the ``response_metadata`` of
the message that carried it (:mod:`._pii_vault`). ``reveal(...)`` opens them for an authorised reviewer.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, TypeVar, cast

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.runtime import Runtime
from langgraph.types import Command

from middleware_kit.errors import MiddlewareConfigError, MiddlewareError
from middleware_kit.flow import ModelCallFlow, ModelCallFlowHooks, ToolCallFlow, ToolCallFlowHooks
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._config import INT_AT_LEAST_0, NON_EMPTY_NAME, Config, one_of
from middleware_kit.middlewares._direct import direct_call_only
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._pii_detectors import (
    BUILTIN_DETECTORS,
    Detector,
    PIIMatch,
    detect_credit_card,
    detect_email,
    detect_ip,
    detect_mac_address,
    detect_url,
    luhn_valid,
)
from middleware_kit.middlewares._pii_stream import DEFAULT_LOOKBACK, PIIStreamRedactor
from middleware_kit.middlewares._pii_vault import Keyring, KeySpec, VaultError
from middleware_kit.middlewares._stream import emit
from middleware_kit.types import AgentState, ExtendedModelResponse, ModelRequest, ModelResponse, ToolCallRequest

__all__ = [
    "VAULT_KEY",
    "KeySpec",
    "Keyring",
    "PIIDetectionError",
    "PIIMatch",
    "PIIMiddleware",
    "PIIState",
    "RedactedMatch",
    "Strategy",
    "VaultError",
    "detect_credit_card",
    "detect_email",
    "detect_ip",
    "detect_mac_address",
    "detect_url",
    "luhn_valid",
    "reveal",
]

Strategy: TypeAlias = Literal["redact", "mask", "hash", "block", "placeholder"]
"""What to do with detected PII (see :class:`PIIMiddleware`)."""
Salt: TypeAlias = "str | bytes | Callable[[Any], str | bytes | None] | None"
"""The key of the ``hash`` strategy: a string/bytes, or a function of the runtime (``lambda runtime: ...``)."""
DetectorSpec: TypeAlias = "str | re.Pattern[str] | Callable[[str], Sequence[Mapping[str, Any]]] | None"
"""``None`` (the built-in detector of the type), a regex (string or compiled) or ``(text) -> list[PIIMatch]``."""

VAULT_KEY = "pii_vault"
"""The ``response_metadata`` key of a message holding ``{placeholder: sealed value}`` for the values it carried."""
_STRATEGIES = ("redact", "mask", "hash", "block", "placeholder")
_PLACEHOLDER = re.compile(r"<[^<>\s]{1,64}_[0-9a-f]{8}>")
_CARRIED = re.compile(r"<([^<>\s|]{1,64}_[0-9a-f]{8})\|(pii\d\.[A-Za-z0-9_-]+)>")
"""A placeholder carrying its sealed value (made by ``guard_resume``; settled into a vault by ``guard_messages``)."""
_Where = Literal["input", "output", "tool_result", "request", "stream"]
_SKIP_KEYS = frozenset({"type", "id", "tool_call_id", "data", "base64", "mime_type", "source_type"})
"""Content-block keys whose values are never scanned (identifiers, inline binary data)."""
_T = TypeVar("_T")


class PIIState(AgentState[Any]):
    """The state of an agent with ``PIIMiddleware``: the agent's own. Kept for imports; the middleware adds no state
    key (the placeholder mapping is sealed in the messages, see :data:`VAULT_KEY`)."""


# -- the error ---------------------------------------------------------------------------------------------------
class RedactedMatch(dict[str, Any]):
    """What :class:`PIIDetectionError` keeps of a match: ``type``, ``start``, ``end``, ``length`` and a ``preview``
    such as ``"[REDACTED_EMAIL]"``. Never the value."""


class PIIDetectionError(MiddlewareError, ValueError):
    """Raised by ``strategy="block"``. Its message and attributes never contain the detected values.

    Attributes:
        pii_type: The type detected (``"email"``, ...).
        matches: One :class:`RedactedMatch` per detection (type, offsets, length, preview; no value).
        where: ``"input"``, ``"output"``, ``"tool_result"`` or ``"request"``.
    """

    def __init__(
        self,
        pii_type: str,
        matches: Sequence[Mapping[str, Any]],
        *,
        where: str = "input",
        middleware: str = "PIIMiddleware",
        hook: str = "guard_messages",
        message_index: int | None = None,
    ) -> None:
        self.pii_type = pii_type
        self.where = where
        # Not annotated: the class docstring documents it (an annotated instance attribute is documented a second
        # time by autodoc once the module's source has been analysed, e.g. for a class attribute of PIIMiddleware).
        self.matches = [
            RedactedMatch(
                type=m.get("type", pii_type),
                start=m.get("start"),
                end=m.get("end"),
                length=int(m.get("end", 0)) - int(m.get("start", 0)),
                preview=f"[REDACTED_{pii_type.upper()}]",
            )
            for m in matches
        ]
        located = f" (message {message_index})" if message_index is not None else ""
        super().__init__(
            f"Detected {len(self.matches)} instance(s) of {pii_type} in the {where.replace('_', ' ')}{located}; "
            f"{middleware} blocks it (strategy='block'): it was not stored. The values are withheld from this error. "
            f"To let the run continue without them, use strategy='redact', 'mask', 'hash' or 'placeholder'.",
            middleware=middleware,
            hook=hook,
        )


# -- the memo of clean texts ---------------------------------------------------------------------------------------
_MEMO_ENTRY_BYTES = 96
"""What one remembered text costs: a 16-byte digest object and its set slot (the text itself is not kept)."""


class _CleanMemo:
    """Digests of texts known to hold no PII, bounded in bytes: the texts are not referenced, only 16-byte digests,
    and the set starts over when ``max_bytes`` would be exceeded. A pure function's memo, shared by every run."""

    __slots__ = ("_limit", "_seen")

    def __init__(self, max_bytes: int) -> None:
        self._limit = max(0, max_bytes // _MEMO_ENTRY_BYTES)
        self._seen: set[bytes] = set()

    @staticmethod
    def digest(text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def __contains__(self, digest: bytes) -> bool:
        return digest in self._seen

    def add(self, digest: bytes) -> None:
        if not self._limit:
            return
        if len(self._seen) >= self._limit:
            self._seen.clear()
        self._seen.add(digest)

    @property
    def bytes_used(self) -> int:
        """An upper bound of the memory the memo holds (``memo_bytes`` bounds it)."""
        return len(self._seen) * _MEMO_ENTRY_BYTES


# -- replacing values ------------------------------------------------------------------------------------------
def _mask(pii_type: str, value: str) -> str:
    if pii_type == "email":
        at = value.rfind("@")
        sep = "@" if at >= 0 else "%40"
        local, domain = (value[:at], value[at + 1 :]) if at >= 0 else value.split("%40", 1)
        tld = domain.rsplit(".", 1)[-1]
        return f"{local}{sep}****.{tld}"
    if pii_type == "credit_card":
        total = sum(c.isdigit() for c in value)
        seen = 0
        out = []
        for c in value:
            if c.isdigit():
                seen += 1
                out.append(c if seen > total - 4 else "*")
            else:
                out.append(c)
        return "".join(out)
    if pii_type == "ip":
        address = value.split("%", 1)[0]
        if ":" in address:
            last = address.rsplit(":", 1)[-1]  # an embedded IPv4 (::ffff:1.2.3.4) keeps only its last octet
            return "*::" + ("*.*.*." + last.rsplit(".", 1)[-1] if "." in last else last)
        return "*.*.*." + value.rsplit(".", 1)[-1]
    if pii_type == "mac_address":
        return re.sub(r"[0-9A-Fa-f]", "*", value[:-2]) + value[-2:]
    if pii_type == "url":
        return "[MASKED_URL]"
    return "****"


@dataclass
class _Scrub:
    """One pass of one middleware over some messages: replaces values, counts them, seals placeholder values."""

    mw: PIIMiddleware
    runtime: Any
    hook: str
    count: int = 0
    sealed: dict[str, str] = field(default_factory=dict)
    """Placeholders made for the message being scrubbed, with their sealed values."""
    _salt: bytes | None = None
    carry: bool = False
    """Placeholders carry their sealed value in the text (a resume value: there is no message to hold a vault)."""

    # text ------------------------------------------------------------------------------------------------------
    def text(self, text: str, where: _Where, index: int | None) -> str:
        if not text:
            return text
        matches = self.mw.detect(text)
        if not matches:
            return text
        if self.mw.strategy == "block":
            raise PIIDetectionError(
                self.mw.pii_type, matches, where=where, middleware=self.mw.name, hook=self.hook, message_index=index
            )
        self.count += len(matches)
        parts: list[str] = []
        pos = 0
        for m in matches:
            parts.append(text[pos : m["start"]])
            parts.append(self.replacement(text[m["start"] : m["end"]]))
            pos = m["end"]
        parts.append(text[pos:])
        return "".join(parts)

    def replacement(self, value: str) -> str:
        strategy, pii_type = self.mw.strategy, self.mw.pii_type
        if strategy == "redact":
            return f"[REDACTED_{pii_type.upper()}]"
        if strategy == "mask":
            return _mask(pii_type, value)
        if strategy == "hash":
            if self._salt is None:
                salt = self.mw.salt_for(self.runtime)
                if salt is None:  # the graph input, before the run: no tenant yet (see PIIMiddleware.before_agent)
                    return f"<{pii_type}_hash:pending:{cast(Keyring, self.mw._pending).seal(value)}>"
                self._salt = salt
            digest = hmac.new(self._salt, value.encode(), hashlib.sha256).hexdigest()[:16]
            return f"<{pii_type}_hash:{digest}>"
        keyring = cast(Keyring, self.mw._keyring)
        name = keyring.name(pii_type, value)
        if name not in self.sealed:
            self.sealed[name] = keyring.seal(value)
        return f"{name[:-1]}|{self.sealed[name]}>" if self.carry else name

    # structures ------------------------------------------------------------------------------------------------
    def value(self, value: Any, where: _Where, index: int | None, *, blocks: bool = False) -> Any:
        """A JSON-like value: every string inside is scanned; the structure is kept (the same object when nothing
        changed). In content blocks (``blocks``) identifiers and inline binary data are not scanned."""
        if isinstance(value, str):
            if blocks and value.startswith("data:"):
                return value
            return self.text(value, where, index)
        if isinstance(value, dict):
            items = {
                k: v if blocks and k in _SKIP_KEYS else self.value(v, where, index, blocks=blocks)
                for k, v in value.items()
            }
            return items if any(items[k] is not value[k] for k in value) else value
        if isinstance(value, list | tuple):
            seq = [self.value(v, where, index, blocks=blocks) for v in value]
            if all(a is b for a, b in zip(seq, value, strict=True)):
                return value
            return seq if isinstance(value, list) else tuple(seq)
        return value

    def message(self, message: BaseMessage, index: int | None, where: _Where | None = None) -> BaseMessage:
        """The message with its PII replaced (the same object when nothing changed); id, name and kwargs kept."""
        kind = where or self.mw.where_of(message)
        if kind is None:
            return message
        self.sealed = {}
        update: dict[str, Any] = {}
        content = self.value(message.content, kind, index, blocks=True)
        if content is not message.content:
            update["content"] = content
        if isinstance(message, AIMessage):
            self._ai_fields(message, kind, index, update)
        if isinstance(message, ToolMessage) and message.artifact is not None:
            artifact = self.value(message.artifact, kind, index)
            if artifact is not message.artifact:
                update["artifact"] = artifact
        if not update:
            return message
        if self.sealed:
            meta = dict(message.response_metadata)
            meta[VAULT_KEY] = {**(meta.get(VAULT_KEY) or {}), **self.sealed}
            update["response_metadata"] = meta
        return message.model_copy(update=update)

    def _ai_fields(self, message: AIMessage, kind: _Where, index: int | None, update: dict[str, Any]) -> None:
        if message.tool_calls:
            calls = [{**c, "args": self.value(c["args"], kind, index)} for c in message.tool_calls]
            if any(new["args"] is not old["args"] for new, old in zip(calls, message.tool_calls, strict=True)):
                update["tool_calls"] = calls
        for name in ("invalid_tool_calls", "tool_call_chunks"):
            extra: Any = getattr(message, name, None)
            if extra:
                new_extra = self.value(list(extra), kind, index)
                if any(a is not b for a, b in zip(new_extra, extra, strict=True)):
                    update[name] = new_extra
        kwargs = message.additional_kwargs
        if kwargs.get("tool_calls") or kwargs.get("function_call"):  # the provider's raw form (JSON strings)
            new_kwargs = self.value(kwargs, kind, index)
            if new_kwargs is not kwargs:
                update["additional_kwargs"] = new_kwargs


class _WireScrub(_Scrub):
    """:class:`_Scrub` for the stream (no message, no run): a ``placeholder`` value shows as its placeholder (no
    sealed value: the stream holds no vault), a hash keyed per run as ``[REDACTED_<TYPE>]``."""

    def replacement(self, value: str) -> str:
        if self.mw.strategy == "placeholder":
            return cast(Keyring, self.mw._keyring).name(self.mw.pii_type, value)
        if self.mw.strategy == "hash" and callable(self.mw.salt):
            return f"[REDACTED_{self.mw.pii_type.upper()}]"
        return super().replacement(value)


def _last_index(messages: Sequence[Any], kind: type) -> list[int]:
    """``[i]`` of the last message of type ``kind`` (``[]`` when there is none)."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], kind):
            return [i]
    return []


def _searchable(message: BaseMessage) -> str:
    """The text a carried or pending value could hide in: content, tool-call arguments, a tool artifact."""
    content = message.content
    text = content if isinstance(content, str) else repr(content)
    if isinstance(message, AIMessage) and message.tool_calls:
        text += repr(message.tool_calls)
    if isinstance(message, ToolMessage) and message.artifact is not None:
        text += repr(message.artifact)
    return text


def _strip_vault(message: Any) -> Any:
    meta = getattr(message, "response_metadata", None)
    if not meta or VAULT_KEY not in meta:
        return message
    return message.model_copy(update={"response_metadata": {k: v for k, v in meta.items() if k != VAULT_KEY}})


def _vaults(messages: Sequence[Any]) -> dict[str, str]:
    """Every ``{placeholder: sealed}`` found in ``messages`` (newest last wins)."""
    found: dict[str, str] = {}
    for m in messages:
        meta = getattr(m, "response_metadata", None)
        vault = meta.get(VAULT_KEY) if isinstance(meta, Mapping) else None
        if isinstance(vault, Mapping):
            found.update({str(k): str(v) for k, v in vault.items()})
    return found


def _replace_strings(value: Any, replace: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return replace(value)
    if isinstance(value, dict):
        return {k: _replace_strings(v, replace) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_strings(v, replace) for v in value]
    if isinstance(value, tuple):
        return tuple(_replace_strings(v, replace) for v in value)
    return value


def _substitution(mapping: Mapping[str, str]) -> Callable[[str], str]:
    """``text -> text`` with every key of ``mapping`` replaced by its value (longest keys first, one pass)."""
    if not mapping:
        return lambda text: text
    pattern = re.compile("|".join(re.escape(k) for k in sorted(mapping, key=len, reverse=True)))
    return lambda text: pattern.sub(lambda m: mapping[m.group()], text) if text else text


# -- revealing placeholders (authorised reviewers) -------------------------------------------------------------
def reveal(value: _T, *, messages: Sequence[Any], key: KeySpec) -> _T:
    """``value`` (a string, or a JSON-like structure such as a review request's tool-call arguments) with every
    placeholder the ``messages`` hold a sealed value for replaced by the real value, opened with ``key``.

    For an authorised reviewer UI only, outside the agent: ``messages`` is the thread's state
    (``agent.get_state(config).values["messages"]``), ``key`` the deployment key (or keyring) the middleware was
    built with. Placeholders without a sealed value, or sealed under a key not in ``key``, are left as they are.
    """
    keyring = Keyring.of(key)
    sealed = _vaults(messages)
    opened: dict[str, str] = {}
    for name, token in sealed.items():
        try:
            opened[name] = keyring.open(token)
        except VaultError:
            continue
    return cast(_T, _replace_strings(value, _substitution(opened)))


# -- the middleware --------------------------------------------------------------------------------------------
def _unknown_type(pii_type: str, name: str) -> MiddlewareConfigError:
    return MiddlewareConfigError(
        f"Unknown PII type: {pii_type}. Must be one of {list(BUILTIN_DETECTORS)} or provide a custom detector. "
        f"Fix: PIIMiddleware({pii_type!r}, detector=...) with a regex or a function (text) -> list[PIIMatch].",
        middleware=name,
        hook="pii_type",
    )


def _as_detector(pii_type: str, detector: DetectorSpec, name: str) -> Detector:
    if detector is None:
        try:
            return BUILTIN_DETECTORS[pii_type]
        except KeyError:
            raise _unknown_type(pii_type, name) from None
    if isinstance(detector, str | re.Pattern):
        try:
            pattern = re.compile(detector) if isinstance(detector, str) else detector
        except re.error as exc:
            raise MiddlewareConfigError(
                f"{name}: detector is not a valid regular expression ({exc}). Fix the pattern or pass a function.",
                middleware=name,
                hook="detector",
            ) from None

        def detect_regex(text: str) -> list[PIIMatch]:
            return [
                PIIMatch(type=pii_type, value=m.group(), start=m.start(), end=m.end())
                for m in pattern.finditer(text)
                if m.end() > m.start()
            ]

        return detect_regex
    if callable(detector):
        custom = detector

        def detect_custom(text: str) -> list[PIIMatch]:
            found = []
            for m in custom(text):
                start, end = int(m["start"]), int(m["end"])
                found.append(PIIMatch(type=str(m.get("type", pii_type)), value=text[start:end], start=start, end=end))
            return found

        return detect_custom
    raise MiddlewareConfigError(
        f"{name}: detector must be None, a regex (str or compiled) or a callable (text) -> list[PIIMatch]; got "
        f"{type(detector).__name__}.",
        middleware=name,
        hook="detector",
    )


def _keyring(name: str, pii_type: str, strategy: Strategy, key: KeySpec | None) -> Keyring | None:
    """The keyring of ``strategy="placeholder"`` (which needs ``key``; no other strategy takes one)."""
    keyring: Keyring | None = None
    if strategy == "placeholder":
        if key is None:
            raise MiddlewareConfigError(
                f"{name}: strategy='placeholder' needs key=: the real values behind the placeholders are kept "
                f"only encrypted with a key your deployment supplies (never in plain text). Fix: "
                f"PIIMiddleware({pii_type!r}, strategy='placeholder', key=os.environ['PII_KEY']) with a secret of "
                f"at least 32 bytes (secrets.token_urlsafe(32)); a list of keys rotates (the first is current).",
                middleware=name,
                hook="key",
            )
        try:
            keyring = Keyring.of(key)
        except (ValueError, TypeError) as exc:
            raise MiddlewareConfigError(f"{name}: key is not usable: {exc}.", middleware=name, hook="key") from None
    elif key is not None:
        raise MiddlewareConfigError(
            f"{name}: key= is only used by strategy='placeholder' (got strategy={strategy!r}); for 'hash' pass "
            f"salt=.",
            middleware=name,
            hook="key",
        )
    return keyring


_OURS = "{owner}: {param} must be {expected}; got {value!r}."
_THEIRS = "PIIMiddleware {param} must be {expected}; got {value!r}."
"""LangChain's sentence (it names the class, not the instance)."""


class PIIMiddleware(ModelCallFlowHooks, ToolCallFlowHooks, FrozenConfig, AgentMiddleware[AgentState[Any], Any]):
    """Detect one type of PII and redact, mask, hash, block or replace it with placeholders, before it is committed.

    Args:
        pii_type: ``"email"``, ``"credit_card"``, ``"ip"``, ``"mac_address"``, ``"url"``, or your own name with a
            ``detector``.
        strategy: ``"redact"`` (``[REDACTED_EMAIL]``), ``"mask"`` (``user@****.com``, ``************1111``,
            ``*.*.*.100``), ``"hash"`` (``<email_hash:...>``, an HMAC-SHA256 keyed by ``salt``), ``"block"``
            (raise :class:`PIIDetectionError`; nothing holding the value is stored) or ``"placeholder"``
            (``<EMAIL_3f9a1c2e>``, the real value given back to tools; needs ``key``).
        detector: None for the built-in detector of ``pii_type``, a regex (string or compiled), or a function
            ``(text) -> list[PIIMatch]`` (``value`` may be omitted; it is taken from the offsets).
        apply_to_input: scan human messages (default True).
        apply_to_output: scan the model's messages: text and tool-call arguments (default False).
        apply_to_tool_results: scan tool results (default False).
        salt: the ``hash`` key: a string/bytes, or ``lambda runtime: ...`` (per tenant, from ``runtime.context``).
            Default: a random key made when the middleware is created (stable for this process only).
        key: ``strategy="placeholder"`` only, and required there: the deployment secret (``str``/``bytes`` of at
            least 32 bytes), a list of them (rotation: the first seals, all open) or a :class:`Keyring`. It names
            the placeholders and seals the real values; without it the mapping could only be stored in plain text,
            so the constructor refuses.
        memo_bytes: the memory the memo of texts known to be clean may use (digests only; default 4 MB; 0 disables).
        name: the middleware's name; default ``"PIIMiddleware[<pii_type>]"``.

    Constructor errors are :class:`MiddlewareConfigError` (a ``ValueError``) naming the parameter.
    """

    inherited = True  # applied by agents run inside this agent's runs too (AgentMiddleware.inherited)

    __config__ = Config(
        owner=lambda args: args["name"] or f"PIIMiddleware[{args['pii_type']}]",
        pii_type=NON_EMPTY_NAME.saying("a non-empty string", _THEIRS),
        strategy=one_of(*_STRATEGIES).saying(f"one of {', '.join(map(repr, _STRATEGIES))}", _THEIRS),
        memo_bytes=INT_AT_LEAST_0.saying("an int >= 0 (bytes; 0 disables the memo)", _OURS),
    )

    def __init__(
        self,
        pii_type: str,
        *,
        strategy: Strategy = "redact",
        detector: DetectorSpec = None,
        apply_to_input: bool = True,
        apply_to_output: bool = False,
        apply_to_tool_results: bool = False,
        salt: Salt = None,
        key: KeySpec | None = None,
        memo_bytes: int = 4_000_000,
        name: str | None = None,
    ) -> None:
        name = name or f"PIIMiddleware[{pii_type}]"
        self._keyring = _keyring(name, pii_type, strategy, key)
        self.pii_type = pii_type
        self.strategy: Strategy = strategy
        self.detector = _as_detector(pii_type, detector, name)
        self.apply_to_input = apply_to_input
        self.apply_to_output = apply_to_output
        self.apply_to_tool_results = apply_to_tool_results
        self.salt: Salt = salt if salt is not None else secrets.token_bytes(32)
        self.memo_bytes = memo_bytes
        self.name = name
        # hash with a per-run salt: the graph input is guarded before the run exists (no runtime, no tenant); its
        # values are sealed under a key that lives only in this process's memory and turned into the tenant's hash
        # by before_agent, the run's first step.
        per_run = strategy == "hash" and callable(salt)
        self._pending: Keyring | None = Keyring([secrets.token_bytes(32)]) if per_run else None
        # Texts known to hold no PII, so a text seen again (the same message guarded in its node and again by the
        # reducer, or by several instances) costs a digest, not a regex pass. Only for pure detectors: the built-in
        # ones and regexes; a custom function may depend on something that changes, so it is always called.
        pure = detector is None or isinstance(detector, str | re.Pattern)
        self._clean: _CleanMemo | None = _CleanMemo(memo_bytes) if pure and memo_bytes else None
        # The stream surfaces no state write guards (tool events, token deltas of unguarded nested agents): one
        # transformer per stream scope, as LangChain 1.5 installs when output or tool results are covered.
        if apply_to_output or apply_to_tool_results:
            self.transformers = (functools.partial(PIIStreamRedactor, redact=self._on_the_wire),)
        self.stream_holdback = DEFAULT_LOOKBACK if apply_to_output else None  # split values caught (streaming.md)

    # -- helpers, public for unit tests and custom layers -------------------------------------------------------
    def detect(self, text: str) -> list[PIIMatch]:
        """The matches of this middleware's detector in ``text``, sorted, overlaps removed (the first one wins)."""
        clean = self._clean
        digest = b""
        if clean is not None:
            digest = clean.digest(text)
            if digest in clean:
                return []
        found = self.detector(text)
        if not found:
            if clean is not None:
                clean.add(digest)
            return []
        matches = sorted(found, key=lambda m: (m["start"], -m["end"]))
        kept: list[PIIMatch] = []
        end = -1
        for m in matches:
            if m["start"] >= end:
                kept.append(m)
                end = m["end"]
        return kept

    def _on_the_wire(self, text: str) -> str:
        """``text`` as the stream may show it (the ``redact`` of :class:`PIIStreamRedactor`); ``block`` raises."""
        return _WireScrub(self, None, "transformers").text(text, "stream", None)

    def salt_for(self, runtime: Any) -> bytes | None:
        """The hash key for a run: ``salt``, or what ``salt(runtime)`` returns (None when the salt is a function and
        there is no runtime: the graph input is guarded before the run starts)."""
        if callable(self.salt):
            if runtime is None:
                return None
            salt = self.salt(runtime)
            if salt is None:
                raise MiddlewareConfigError(
                    f"{self.name}: salt(runtime) returned None; return a str or bytes (e.g. a per-tenant secret "
                    f"from runtime.context).",
                    middleware=self.name,
                    hook="salt",
                )
        else:
            salt = self.salt
        return salt.encode() if isinstance(salt, str) else bytes(cast(bytes, salt))

    def where_of(self, message: BaseMessage) -> _Where | None:
        """Which setting covers ``message`` (None: not scanned)."""
        if isinstance(message, HumanMessage):
            return "input" if self.apply_to_input else None
        if isinstance(message, ToolMessage):
            return "tool_result" if self.apply_to_tool_results else None
        if isinstance(message, AIMessage):
            return "output" if self.apply_to_output else None
        return None

    def _report(self, scrub: _Scrub, runtime: Any, where: str) -> None:
        if scrub.count:
            emit(
                runtime,
                {
                    "event": "pii",
                    "middleware": self.name,
                    "strategy": self.strategy,
                    "where": where,
                    "counts": {self.pii_type: scrub.count},
                },
            )

    # -- the guard: before LangGraph commits anything ---------------------------------------------------------
    def guard_messages(
        self, messages: Sequence[AnyMessage], runtime: Runtime[Any] | None
    ) -> Sequence[AnyMessage] | None:
        """Rewrite the covered messages of a write before it is committed (same ids, so replacements replace)."""
        scrub = _Scrub(self, runtime, "guard_messages")
        out: list[AnyMessage] | None = None
        for i, message in enumerate(messages):
            new = scrub.message(self._settled(message, runtime), i)
            if new is not message:
                if out is None:
                    out = list(messages)
                out[i] = cast(AnyMessage, new)
        self._report(scrub, runtime, "guard")
        return out

    # -- resume values: what a reviewer sends back ----------------------------------------------------------------
    def guard_resume(self, value: Any, runtime: Runtime[Any] | None) -> Any:
        """Scan a resume value (edited arguments, a rejection note) before LangGraph stores it, as the input is
        scanned (``apply_to_input``); ``placeholder`` values are carried sealed in their placeholder until the
        message they reach is guarded. ``block`` refuses the resume (nothing is stored)."""
        if not self.apply_to_input:
            return None
        scrub = _Scrub(self, runtime, "guard_resume", carry=True)
        guarded = scrub.value(value, "input", None)
        self._report(scrub, runtime, "resume")
        return None if guarded is value else guarded

    def _settled(self, message: BaseMessage, runtime: Runtime[Any] | None) -> BaseMessage:
        """``message`` with the carried placeholders of this type moved into its vault, and (with a runtime) pending
        hashes turned into the tenant's hashes. The same object when it carries none (a substring test)."""
        carried, pending = f"<{self.pii_type.upper()}_", f"<{self.pii_type}_hash:pending:"
        text = _searchable(message)
        has_carried = self.strategy == "placeholder" and "|pii" in text and carried in text
        has_pending = runtime is not None and self._pending is not None and pending in text
        if not (has_carried or has_pending):
            return message
        vault: dict[str, str] = {}

        def carry(m: re.Match[str]) -> str:
            if not m.group(1).startswith(carried[1:]):
                return m.group()
            vault[f"<{m.group(1)}>"] = m.group(2)
            return f"<{m.group(1)}>"

        settle = self._settle_pending(runtime) if has_pending else None

        def fix(value: Any) -> Any:
            def one(t: str) -> str:
                if has_carried and "|pii" in t:
                    t = _CARRIED.sub(carry, t)
                return settle(t) if settle is not None else t

            return _replace_strings(value, one)

        update: dict[str, Any] = {"content": fix(message.content)}
        if isinstance(message, AIMessage) and message.tool_calls:
            update["tool_calls"] = fix(message.tool_calls)
        if isinstance(message, ToolMessage) and message.artifact is not None:
            update["artifact"] = fix(message.artifact)
        if vault:
            meta = dict(message.response_metadata)
            meta[VAULT_KEY] = {**(meta.get(VAULT_KEY) or {}), **vault}
            update["response_metadata"] = meta
        return message.model_copy(update=update)

    def _settle_pending(self, runtime: Any) -> Callable[[str], str]:
        """``text -> text`` with this type's pending hashes replaced by the tenant's hashes; values sealed by another
        process (a restart in between) are redacted instead."""
        marker = f"<{self.pii_type}_hash:pending:"
        pattern = re.compile(re.escape(marker) + r"([A-Za-z0-9_.-]+)>")
        salt = self.salt_for(runtime)
        keyring = cast(Keyring, self._pending)

        def settle(m: re.Match[str]) -> str:
            try:
                value = keyring.open(m.group(1))
            except VaultError:
                return f"[REDACTED_{self.pii_type.upper()}]"
            digest = hmac.new(cast(bytes, salt), value.encode(), hashlib.sha256).hexdigest()[:16]
            return f"<{self.pii_type}_hash:{digest}>"

        return lambda text: pattern.sub(settle, text) if marker in text else text

    # -- the run's first step: tenant hashes for the input ----------------------------------------------------------
    def before_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """``hash`` with ``salt=lambda runtime: ...``: replace the input's pending hashes by the tenant's hashes (the
        input was guarded before the run existed). A substring test per message: no detector pass."""
        if self._pending is None:
            return None
        marker = f"<{self.pii_type}_hash:pending:"
        changed = []
        for message in state.get("messages") or ():
            if marker in _searchable(message):
                changed.append(self._settled(message, runtime))
        return {"messages": changed} if changed else None

    # -- LangChain's node hooks, for a direct call ------------------------------------------------------------------
    @direct_call_only
    def before_model(self, state: AgentState[Any], runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """LangChain's hook, called directly (``mw.before_model(state, runtime)``): the last human message
        (``apply_to_input``) and the tool results after the last AI message (``apply_to_tool_results``) rewritten,
        as ``{"messages": [...the whole list...]}``, or None when nothing changed. ``block`` raises.

        An agent does not run it (:class:`~._direct.direct_call_only`): :meth:`guard_messages` rewrites those
        messages before they are stored."""
        if not (self.apply_to_input or self.apply_to_tool_results):
            return None
        messages = list(state.get("messages") or ())
        targets: list[int] = []
        if self.apply_to_input:
            targets += _last_index(messages, HumanMessage)
        if self.apply_to_tool_results:
            last_ai = _last_index(messages, AIMessage)
            if last_ai:
                targets += [i for i in range(last_ai[0] + 1, len(messages)) if isinstance(messages[i], ToolMessage)]
        return self._rewritten(messages, targets, runtime, "before_model")

    @direct_call_only
    async def abefore_model(self, state: AgentState[Any], runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """:meth:`before_model` (CPU work only: no thread hop under ``ainvoke``)."""
        return self.before_model(state, runtime)

    @direct_call_only
    def after_model(self, state: AgentState[Any], runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """LangChain's hook, called directly: the last AI message (``apply_to_output``) rewritten, as
        ``{"messages": [...]}``, or None. An agent does not run it: the guard and :meth:`model_call_flow` rewrite
        the answer before any ``after_model`` hook sees it."""
        if not self.apply_to_output:
            return None
        messages = list(state.get("messages") or ())
        return self._rewritten(messages, _last_index(messages, AIMessage), runtime, "after_model")

    @direct_call_only
    async def aafter_model(self, state: AgentState[Any], runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """:meth:`after_model` (CPU work only: no thread hop under ``ainvoke``)."""
        return self.after_model(state, runtime)

    def _rewritten(
        self, messages: list[AnyMessage], targets: Sequence[int], runtime: Any, hook: str
    ) -> dict[str, Any] | None:
        scrub = _Scrub(self, runtime, hook)
        changed = False
        for i in targets:
            new = scrub.message(messages[i], i)
            if new is not messages[i]:
                messages[i], changed = cast(AnyMessage, new), True
        self._report(scrub, runtime, hook)
        return {"messages": messages} if changed else None

    # -- the model call --------------------------------------------------------------------------------------------
    def model_call_flow(self, request: ModelRequest[Any]) -> ModelCallFlow:
        """Scan the request's messages that are not the state's own, strip sealed values from the request, and (with
        ``apply_to_output``) rewrite the model's response before any ``after_model`` hook sees it."""
        state = request.state if isinstance(request.state, Mapping) else {}
        own = {id(m) for m in state.get("messages") or ()}
        scrub = _Scrub(self, request.runtime, "wrap_model_call")
        sealed: dict[str, str] = {}
        messages = list(request.messages)
        changed = False
        for i, message in enumerate(messages):
            new: Any = message
            if id(message) not in own:  # the state's messages were guarded when they were written
                new = scrub.message(message, i, "request" if self.where_of(message) else None)
                sealed.update(scrub.sealed if new is not message else {})
            new = _strip_vault(new)
            if new is not message:
                messages[i] = new
                changed = True
        self._report(scrub, request.runtime, "request")
        response = yield (request.override(messages=messages) if changed else request)
        return cast(
            "ModelResponse[Any] | ExtendedModelResponse[Any]", self._response(response, sealed, request.runtime)
        )

    def _response(self, response: Any, sealed: dict[str, str], runtime: Any) -> Any:
        extended = response if isinstance(response, ExtendedModelResponse) else None
        inner = extended.model_response if extended is not None else response
        if isinstance(inner, AIMessage):
            inner = ModelResponse(result=[inner])
        if not isinstance(inner, ModelResponse):
            return response
        result = list(inner.result)
        scrub = _Scrub(self, runtime, "wrap_model_call")
        changed = False
        sealed = dict(sealed)
        if self.apply_to_output:
            for i, message in enumerate(result):
                if isinstance(message, AIMessage):
                    new = scrub.message(message, None, "output")
                    if new is not message:
                        result[i], changed = new, True
        command = extended.command if extended is not None else None
        if self.apply_to_output and command is not None and isinstance(command.update, dict):
            # What inner wrappers send to state in the same step (e.g. a review's pending tool calls) is output too.
            scrub.sealed = {}
            update = {
                k: [scrub.message(m, None, "output") if isinstance(m, AIMessage) else m for m in v]
                if k == "messages" and isinstance(v, list)
                else scrub.value(v, "output", None)
                for k, v in command.update.items()
            }
            if any(update[k] is not command.update[k] for k in update):
                command = Command(graph=command.graph, update=update, resume=command.resume, goto=command.goto)
                sealed.update(scrub.sealed)
                changed = True
        if sealed:  # values not sealed in the answer itself: their sealed form goes to state with the answer
            for i in range(len(result) - 1, -1, -1):
                if isinstance(result[i], AIMessage):
                    meta = dict(result[i].response_metadata)
                    meta[VAULT_KEY] = {**sealed, **(meta.get(VAULT_KEY) or {})}
                    result[i] = result[i].model_copy(update={"response_metadata": meta})
                    changed = True
                    break
        self._report(scrub, runtime, "output")
        if not changed:
            return response
        new_inner = ModelResponse(result=result, structured_response=inner.structured_response)
        return ExtendedModelResponse(new_inner, command) if extended is not None else new_inner

    # -- tools ---------------------------------------------------------------------------------------------------
    def tool_call_flow(self, request: ToolCallRequest) -> ToolCallFlow:
        """``placeholder``: give the tool the real values, and turn the ones it echoes back into placeholders.
        ``hash`` with a salt function: a pending hash still in the arguments (a value a reviewer typed, guarded
        before the run continued) becomes the tenant's hash."""
        if self.strategy == "hash" and self._pending is not None:
            call = request.tool_call
            marker = f"<{self.pii_type}_hash:pending:"
            if marker in repr(call["args"]):
                args = _replace_strings(call["args"], self._settle_pending(request.runtime))
                request = request.override(tool_call={**call, "args": args})
            return (yield request)
        if self.strategy != "placeholder":
            return (yield request)
        call = request.tool_call
        prefix = f"<{self.pii_type.upper()}_"
        text = repr(call["args"])
        names = {m.group() for m in _PLACEHOLDER.finditer(text) if m.group().startswith(prefix)}
        # A value a reviewer typed that reached the call without passing a message guard (an edit applied from
        # private state) still carries its sealed value: open it in place.
        carried = {m.group(): m.group(2) for m in _CARRIED.finditer(text) if m.group().startswith(prefix)}
        if not names and not carried:
            return (yield request)
        state = request.state if isinstance(request.state, Mapping) else {}
        sealed = {**_vaults(state.get("messages") or ()), **carried}
        keyring = cast(Keyring, self._keyring)
        real: dict[str, str] = {}
        for name in names | carried.keys():
            token = sealed.get(name)
            if token is None:
                continue
            try:
                real[name] = keyring.open(token)
            except VaultError:
                continue
        if not real:
            return (yield request)
        args = _replace_strings(call["args"], _substitution(real))
        back = _substitution({v: k for k, v in real.items()})
        try:
            result = yield request.override(tool_call={**call, "args": args})
        except Exception as exc:
            _scrub_exception(exc, back)
            raise
        return cast("ToolMessage | Command[Any]", _placeholders_back(result, back))


def _placeholders_back(result: Any, back: Callable[[str], str]) -> Any:
    """The tool's result with the real values it echoes replaced by their placeholders."""
    if isinstance(result, ToolMessage):
        update: dict[str, Any] = {}
        content = _replace_strings(result.content, back)
        if content != result.content:
            update["content"] = content
        if result.artifact is not None:
            artifact = _replace_strings(result.artifact, back)
            if artifact != result.artifact:
                update["artifact"] = artifact
        return result.model_copy(update=update) if update else result
    if isinstance(result, Command) and isinstance(result.update, dict):
        update_dict = dict(result.update)
        messages = update_dict.get("messages")
        if isinstance(messages, list):
            update_dict["messages"] = [_placeholders_back(m, back) for m in messages]
        return Command(graph=result.graph, update=update_dict, resume=result.resume, goto=result.goto)
    return result


def _scrub_exception(exc: BaseException, back: Callable[[str], str]) -> None:
    """Replace the real values in an exception raised by the tool (args and notes, along its cause chain)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        with contextlib.suppress(AttributeError, TypeError):  # exotic exceptions with read-only args
            current.args = tuple(back(a) if isinstance(a, str) else a for a in current.args)
        notes = getattr(current, "__notes__", None)
        if isinstance(notes, list):
            notes[:] = [back(n) if isinstance(n, str) else n for n in notes]
        current = current.__cause__ or current.__context__
