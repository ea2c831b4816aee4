"""``PIIMiddleware``: detect PII (emails, card numbers, IPs, MAC addresses, URLs, or your own) and redact, mask, hash,
block or replace it with placeholders, wherever it flows through the agent.

Where each thing happens (one rule for every strategy: **the PII is rewritten in state**, so it stays out of the model
and out of what is stored and returned):

- ``before_model``: every ``HumanMessage`` in state (``apply_to_input``; not only the newest), every ``ToolMessage``
  (``apply_to_tool_results``) and every ``AIMessage``, text and tool-call arguments (``apply_to_output``) are scanned;
  the changed ones are replaced in place (same ``id``: ``add_messages`` swaps them).
- ``wrap_model_call``: the same scan on the request itself, as a backstop for messages that are not in state (added
  by an outer middleware's ``modify_model_request``); only this call's request changes.
- ``after_model``: the new ``AIMessage`` (text and tool-call arguments), when ``apply_to_output``.
- ``after_tool``: the tool's result before it reaches state, when ``apply_to_tool_results`` (for ``placeholder`` this
  is done by the next ``before_model`` instead, which numbers placeholders in one place: parallel tool calls would
  race for the same numbers).
- ``before_tool``: with ``strategy="placeholder"``, ``<EMAIL_1>`` in tool-call arguments is replaced by the real
  value before the tool runs. The mapping lives in ``pii_placeholders``, a private state key: per thread
  (checkpointed with it), never in the agent's input or output, never sent to the model.

Beyond LangChain v1: IPv6/Amex/Cisco MACs and linear-time detectors (:mod:`._pii_detectors`), every message rather
than the newest, tool-call arguments, salted hashes (``salt=`` a string or ``lambda runtime: ...``), the
``placeholder`` strategy, a value-free :class:`PIIDetectionError`, and a ``{"event": "pii", ...}`` progress event
with counts per type (never values) on the custom stream.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NotRequired, TypeAlias, cast

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.runtime import Runtime
from langgraph.types import Command

from middleware_kit.errors import MiddlewareConfigError, MiddlewareError
from middleware_kit.hooks import AsyncModelHandler, ModelHandler, ToolResult
from middleware_kit.middleware import AgentMiddleware
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
from middleware_kit.middlewares._stream import emit
from middleware_kit.types import (
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
    ToolCallRequest,
)

__all__ = [
    "PIIDetectionError",
    "PIIMatch",
    "PIIMiddleware",
    "PIIState",
    "RedactedMatch",
    "Strategy",
    "detect_credit_card",
    "detect_email",
    "detect_ip",
    "detect_mac_address",
    "detect_url",
    "luhn_valid",
]

Strategy: TypeAlias = Literal["redact", "mask", "hash", "block", "placeholder"]
"""What to do with detected PII (see :class:`PIIMiddleware`)."""
Salt: TypeAlias = "str | bytes | Callable[[Any], str | bytes | None] | None"
"""The key of the ``hash`` strategy: a string/bytes, or a function of the runtime (``lambda runtime: ...``)."""
DetectorSpec: TypeAlias = "str | re.Pattern[str] | Callable[[str], Sequence[Mapping[str, Any]]] | None"
"""``None`` (the built-in detector of the type), a regex (string or compiled) or ``(text) -> list[PIIMatch]``."""

PLACEHOLDERS_KEY = "pii_placeholders"
_STRATEGIES = ("redact", "mask", "hash", "block", "placeholder")
_Where = Literal["input", "output", "tool_result", "request"]


def _merge_placeholders(left: dict[str, str] | None, right: dict[str, str] | None) -> dict[str, str]:
    """Reducer of ``pii_placeholders``: placeholders are only ever added."""
    if not right:
        return dict(left or {})
    return {**(left or {}), **right}


class PIIState(AgentState[Any]):
    """The state ``PIIMiddleware`` adds: the placeholder mapping of the thread (``strategy="placeholder"``)."""

    pii_placeholders: NotRequired[Annotated[dict[str, str], PrivateStateAttr, _merge_placeholders]]
    """``{"<EMAIL_1>": "real@example.com", ...}``. Private: hidden from input, output and tools' state. (The reducer
    comes last in ``Annotated``: LangGraph takes the last metadata item as the reducer.)"""


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
        hook: str = "before_model",
        message_index: int | None = None,
    ) -> None:
        self.pii_type = pii_type
        self.where = where
        self.matches: list[RedactedMatch] = [
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
            f"{middleware} blocks it (strategy='block'). The values are withheld from this error. To let the run "
            f"continue without them, use strategy='redact', 'mask', 'hash' or 'placeholder'.",
            middleware=middleware,
            hook=hook,
        )


# -- replacing values ------------------------------------------------------------------------------------------
_CLEAN_MEMO_SIZE = 100_000
"""Texts remembered as clean per middleware before the memo starts over."""


def _mask(pii_type: str, value: str) -> str:
    if pii_type == "email":
        local, _, domain = value.rpartition("@")
        tld = domain.rsplit(".", 1)[-1]
        return f"{local}@****.{tld}"
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
        if ":" in value:
            return "*::" + value.split("%", 1)[0].rsplit(":", 1)[-1]
        return "*.*.*." + value.rsplit(".", 1)[-1]
    if pii_type == "mac_address":
        return re.sub(r"[0-9A-Fa-f]", "*", value[:-2]) + value[-2:]
    if pii_type == "url":
        return "[MASKED_URL]"
    return "****"


@dataclass
class _Scrub:
    """One pass of one middleware over some messages: replaces values, counts them, collects new placeholders."""

    mw: PIIMiddleware
    runtime: Any
    placeholders: Mapping[str, str]
    hook: str
    new_placeholders: dict[str, str] = field(default_factory=dict)
    count: int = 0
    _key: bytes | None = None
    _reverse: dict[str, str] | None = None

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
            parts.append(self.replacement(m["value"]))
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
            if self._key is None:
                self._key = self.mw.salt_for(self.runtime)
            digest = hmac.new(self._key, value.encode(), hashlib.sha256).hexdigest()[:16]
            return f"<{pii_type}_hash:{digest}>"
        return self.placeholder(value)

    def placeholder(self, value: str) -> str:
        prefix = f"<{self.mw.pii_type.upper()}_"
        if self._reverse is None:
            self._reverse = {v: k for k, v in self.placeholders.items() if k.startswith(prefix)}
        found = self._reverse.get(value)
        if found is None:
            found = f"{prefix}{len(self._reverse) + 1}>"
            self._reverse[value] = found
            self.new_placeholders[found] = value
        return found

    # structures ------------------------------------------------------------------------------------------------
    def content(self, content: Any, where: _Where, index: int | None) -> Any:
        """``str`` or a list of blocks: only text is rewritten; the list's shape and other blocks are kept."""
        if isinstance(content, str):
            return self.text(content, where, index)
        if not isinstance(content, list):
            return content
        changed = False
        out: list[Any] = []
        for block in content:
            new = block
            if isinstance(block, str):
                new = self.text(block, where, index)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                text = self.text(block["text"], where, index)
                if text is not block["text"]:
                    new = {**block, "text": text}
            changed = changed or new is not block
            out.append(new)
        return out if changed else content

    def value(self, value: Any, where: _Where, index: int | None) -> Any:
        """A JSON-like value (tool-call arguments): every string inside is scanned; the structure is kept."""
        if isinstance(value, str):
            return self.text(value, where, index)
        if isinstance(value, dict):
            items = {k: self.value(v, where, index) for k, v in value.items()}
            return items if any(items[k] is not value[k] for k in value) else value
        if isinstance(value, list):
            seq = [self.value(v, where, index) for v in value]
            return seq if any(a is not b for a, b in zip(seq, value, strict=True)) else value
        return value

    def message(self, message: BaseMessage, index: int | None, where: _Where | None = None) -> BaseMessage:
        """The message with its PII replaced (the same object when nothing changed); id, name and kwargs kept."""
        kind = where or self.mw.where_of(message)
        if kind is None:
            return message
        update: dict[str, Any] = {}
        content = self.content(message.content, kind, index)
        if content is not message.content:
            update["content"] = content
        if isinstance(message, AIMessage) and message.tool_calls:
            calls = [{**c, "args": self.value(c["args"], kind, index)} for c in message.tool_calls]
            if any(new["args"] is not old["args"] for new, old in zip(calls, message.tool_calls, strict=True)):
                update["tool_calls"] = calls
        return message.model_copy(update=update) if update else message

    def messages(self, messages: Sequence[AnyMessage], where: _Where | None = None) -> list[tuple[int, BaseMessage]]:
        changed: list[tuple[int, BaseMessage]] = []
        for i, message in enumerate(messages):
            new = self.message(message, i, where)
            if new is not message:
                changed.append((i, new))
        return changed


# -- the middleware --------------------------------------------------------------------------------------------
def _as_detector(pii_type: str, detector: DetectorSpec) -> Detector:
    if detector is None:
        try:
            return BUILTIN_DETECTORS[pii_type]
        except KeyError:
            raise ValueError(
                f"Unknown PII type {pii_type!r}: the built-in types are {', '.join(BUILTIN_DETECTORS)}. "
                f"For another type pass detector= (a regex or a function (text) -> list[PIIMatch])."
            ) from None
    if isinstance(detector, str | re.Pattern):
        pattern = re.compile(detector) if isinstance(detector, str) else detector

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
    raise TypeError(f"PIIMiddleware detector must be None, a regex or a callable; got {type(detector).__name__}")


class PIIMiddleware(AgentMiddleware[PIIState, Any]):
    """Detect one type of PII and redact, mask, hash, block or replace it with placeholders.

    Args:
        pii_type: ``"email"``, ``"credit_card"``, ``"ip"``, ``"mac_address"``, ``"url"``, or your own name with a
            ``detector``.
        strategy: ``"redact"`` (``[REDACTED_EMAIL]``), ``"mask"`` (``user@****.com``, ``************1111``,
            ``*.*.*.100``), ``"hash"`` (``<email_hash:...>``, an HMAC-SHA256 keyed by ``salt``), ``"block"``
            (raise :class:`PIIDetectionError`) or ``"placeholder"`` (``<EMAIL_1>``, restored in tool-call arguments).
        detector: None for the built-in detector of ``pii_type``, a regex (string or compiled), or a function
            ``(text) -> list[PIIMatch]`` (``value`` may be omitted; it is taken from the offsets).
        apply_to_input: scan every human message (default True).
        apply_to_output: scan the model's messages: text and tool-call arguments (default False).
        apply_to_tool_results: scan tool results (default False).
        salt: the ``hash`` key: a string/bytes, or ``lambda runtime: ...`` (per tenant, from ``runtime.context``).
            Default: a random key made when the middleware is created (stable for this process only).
        name: the middleware's name; default ``"PIIMiddleware[<pii_type>]"``.
    """

    state_schema = PIIState

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
        name: str | None = None,
    ) -> None:
        if strategy not in _STRATEGIES:
            raise MiddlewareConfigError(
                f"PIIMiddleware strategy must be one of {', '.join(map(repr, _STRATEGIES))}; got {strategy!r}.",
                middleware=name or f"PIIMiddleware[{pii_type}]",
                hook="strategy",
            )
        self.pii_type = pii_type
        self.strategy: Strategy = strategy
        self.detector = _as_detector(pii_type, detector)
        # A memo of texts known to hold no PII, so the history already scrubbed is not re-scanned on every model
        # call (a hash look-up instead of a regex pass). Only for pure detectors: the built-in ones and regexes; a
        # custom function may depend on something that changes, so it is always called. Bounded; shared by every
        # run, which is safe because it memoizes a pure function of the text (no per-run data).
        self._clean: set[str] | None = set() if detector is None or not callable(detector) or isinstance(
            detector, re.Pattern
        ) else None
        self.apply_to_input = apply_to_input
        self.apply_to_output = apply_to_output
        self.apply_to_tool_results = apply_to_tool_results
        self.salt: Salt = salt if salt is not None else secrets.token_bytes(32)
        self.name = name or f"PIIMiddleware[{pii_type}]"

    # -- helpers, public for unit tests and custom layers -------------------------------------------------------
    def detect(self, text: str) -> list[PIIMatch]:
        """The matches of this middleware's detector in ``text``, sorted, overlaps removed (the first one wins)."""
        clean = self._clean
        if clean is not None and text in clean:
            return []
        found = self.detector(text)
        if not found:
            if clean is not None:
                if len(clean) >= _CLEAN_MEMO_SIZE:
                    clean.clear()
                clean.add(text)
            return []
        matches = sorted(found, key=lambda m: (m["start"], -m["end"]))
        kept: list[PIIMatch] = []
        end = -1
        for m in matches:
            if m["start"] >= end:
                kept.append(m)
                end = m["end"]
        return kept

    def salt_for(self, runtime: Any) -> bytes:
        """The hash key for a run: ``salt``, or what ``salt(runtime)`` returns."""
        salt = self.salt(runtime) if callable(self.salt) else self.salt
        if salt is None:
            raise MiddlewareConfigError(
                f"{self.name}: salt(runtime) returned None; return a str or bytes (e.g. a per-tenant secret "
                f"from runtime.context).",
                middleware=self.name,
                hook="salt",
            )
        return salt.encode() if isinstance(salt, str) else bytes(salt)

    def where_of(self, message: BaseMessage) -> _Where | None:
        """Which setting covers ``message`` (None: not scanned)."""
        if isinstance(message, HumanMessage):
            return "input" if self.apply_to_input else None
        if isinstance(message, ToolMessage):
            return "tool_result" if self.apply_to_tool_results else None
        if isinstance(message, AIMessage):
            return "output" if self.apply_to_output else None
        return None

    def _scrub(self, runtime: Any, state: Any, hook: str) -> _Scrub:
        placeholders = (state or {}).get(PLACEHOLDERS_KEY) or {} if isinstance(state, Mapping) else {}
        return _Scrub(self, runtime, placeholders, hook)

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

    def _state_update(self, scrub: _Scrub, messages: list[BaseMessage]) -> dict[str, Any] | None:
        update: dict[str, Any] = {}
        if messages:
            update["messages"] = messages
        if scrub.new_placeholders:
            update[PLACEHOLDERS_KEY] = scrub.new_placeholders
        return update or None

    # -- node hooks ----------------------------------------------------------------------------------------------
    def before_model(self, state: PIIState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Rewrite every covered message in state (same ids, so ``add_messages`` replaces them)."""
        scrub = self._scrub(runtime, state, "before_model")
        changed = [m for _, m in scrub.messages(state["messages"])]
        self._report(scrub, runtime, "state")
        return self._state_update(scrub, changed)

    async def abefore_model(self, state: PIIState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_model(state, runtime)

    def after_model(self, state: PIIState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Rewrite the model's new message (text and tool-call arguments) when ``apply_to_output``."""
        if not self.apply_to_output:
            return None
        messages = state["messages"]
        i = len(messages) - 1
        if i < 0 or not isinstance(messages[i], AIMessage):
            return None
        scrub = self._scrub(runtime, state, "after_model")
        new = scrub.message(messages[i], i, "output")
        self._report(scrub, runtime, "output")
        return self._state_update(scrub, [new] if new is not messages[i] else [])

    async def aafter_model(self, state: PIIState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.after_model(state, runtime)

    # -- the model call: a backstop for messages that are not in state -------------------------------------------
    def _request(self, request: ModelRequest[Any]) -> tuple[ModelRequest[Any], _Scrub]:
        scrub = self._scrub(request.runtime, request.state, "wrap_model_call")
        changed = scrub.messages(request.messages)
        if not changed:
            return request, scrub
        messages = list(request.messages)
        for i, new in changed:
            messages[i] = cast(AnyMessage, new)
        self._report(scrub, request.runtime, "request")
        return request.override(messages=messages), scrub

    @staticmethod
    def _respond(response: Any, scrub: _Scrub) -> Any:
        if not scrub.new_placeholders:
            return response
        if isinstance(response, AIMessage):
            response = ModelResponse(result=[response])
        # The chain hands outer layers a plain ModelResponse (inner commands are applied separately), so the new
        # placeholders reach state with the model's message, in the same step.
        return ExtendedModelResponse(response, Command(update={PLACEHOLDERS_KEY: scrub.new_placeholders}))

    def wrap_model_call(self, request: ModelRequest[Any], handler: ModelHandler) -> Any:
        """Scrub this call's messages (a no-op when ``before_model`` already rewrote state)."""
        request, scrub = self._request(request)
        return self._respond(handler(request), scrub)

    async def awrap_model_call(self, request: ModelRequest[Any], handler: AsyncModelHandler) -> Any:
        request, scrub = self._request(request)
        return self._respond(await handler(request), scrub)

    # -- tools ---------------------------------------------------------------------------------------------------
    def before_tool(self, request: ToolCallRequest) -> ToolCallRequest | None:
        """``placeholder``: put the real values back into the tool-call arguments before the tool runs."""
        if self.strategy != "placeholder":
            return None
        state = request.state if isinstance(request.state, Mapping) else {}
        mapping: Mapping[str, str] = state.get(PLACEHOLDERS_KEY) or {}
        prefix = f"<{self.pii_type.upper()}_"
        mapping = {k: v for k, v in mapping.items() if k.startswith(prefix)}
        if not mapping:
            return None
        pattern = re.compile("|".join(re.escape(k) for k in sorted(mapping, key=len, reverse=True)))

        def restore(value: Any) -> Any:
            if isinstance(value, str):
                return pattern.sub(lambda m: mapping[m.group()], value) if prefix in value else value
            if isinstance(value, dict):
                return {k: restore(v) for k, v in value.items()}
            if isinstance(value, list):
                return [restore(v) for v in value]
            return value

        call = request.tool_call
        args = restore(call["args"])
        if args == call["args"]:
            return None
        return request.override(tool_call={**call, "args": args})

    async def abefore_tool(self, request: ToolCallRequest) -> ToolCallRequest | None:
        return self.before_tool(request)

    def after_tool(self, request: ToolCallRequest, result: ToolResult) -> ToolResult | None:
        """Scrub the tool's result before it reaches state (``apply_to_tool_results``; not for ``placeholder``)."""
        if not self.apply_to_tool_results or self.strategy == "placeholder":
            return None
        scrub = self._scrub(request.runtime, request.state, "after_tool")
        if isinstance(result, ToolMessage):
            new = scrub.message(result, None, "tool_result")
            self._report(scrub, request.runtime, "tool_result")
            return new if new is not result else None  # type: ignore[return-value]
        update = result.update
        if isinstance(update, dict) and isinstance(update.get("messages"), list):
            messages = [
                scrub.message(m, None, "tool_result") if isinstance(m, ToolMessage) else m for m in update["messages"]
            ]
            if scrub.count:
                self._report(scrub, request.runtime, "tool_result")
                return Command(
                    graph=result.graph, update={**update, "messages": messages}, resume=result.resume, goto=result.goto
                )
        return None

    async def aafter_tool(self, request: ToolCallRequest, result: ToolResult) -> ToolResult | None:
        return self.after_tool(request, result)
