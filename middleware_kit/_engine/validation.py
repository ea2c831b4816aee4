"""Hook return values validated to the element, before anything of them reaches state.

The engine checks the container a hook returns (a dict, a ``ModelResponse``, a ``ToolMessage``...); these functions
check what is inside: every message of a ``messages`` update, ``ModelResponse.result``, an
``ExtendedModelResponse``'s command, the messages of a rewritten ``ModelRequest``, a ``Command``'s update and the id a
``ToolMessage`` answers. A bad element raises :class:`~middleware_kit.errors.HookValueError` naming the
middleware and the hook; the node fails before it writes, so the thread keeps its last good checkpoint.

They sit on the per-call path, so the common case costs a ``type()`` comparison per element: a list of message
objects passes without a call into langchain-core.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage, convert_to_messages
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command, Overwrite

from middleware_kit.errors import HookValueError, MiddlewareError
from middleware_kit.types import ExtendedModelResponse, ModelRequest, ModelResponse, ToolCallRequest

__all__ = [
    "check_model_request",
    "check_model_response",
    "check_state_update",
    "check_tool_result",
    "note_hook_failure",
    "note_tool_failure",
]


def check_state_update(update: Mapping[str, Any], owner: str, hook: str) -> None:
    """Every message of ``update["messages"]`` (as ``add_messages`` reads it) is a message or converts to one."""
    if "messages" in update:
        _check_messages(update["messages"], owner, hook, "{'messages': ...}")


def _check_messages(value: Any, owner: str, hook: str, where: str) -> None:
    if type(value) is Overwrite:
        value = value.value
    if type(value) is list:
        for index, item in enumerate(value):
            if not isinstance(item, BaseMessage):
                _check_message_like(item, owner, hook, f"{where}[{index}]")
        return
    if isinstance(value, BaseMessage):
        return
    if isinstance(value, (tuple, str, dict)):
        _check_message_like(value, owner, hook, where)
        return
    raise HookValueError.not_a_message(owner, hook, where, value)


def _check_message_like(item: Any, owner: str, hook: str, where: str) -> None:
    """A ('role', 'content') tuple, a str (a human message) or a message dict, as ``add_messages`` converts them."""
    if not isinstance(item, (tuple, str, dict)):
        raise HookValueError.not_a_message(owner, hook, where, item)
    try:
        convert_to_messages([item])
    except Exception:  # langchain-core raises ValueError, NotImplementedError or KeyError depending on the shape
        raise HookValueError.not_a_message(owner, hook, where, item) from None


def check_model_response(value: Any, owner: str, hook: str = "wrap_model_call") -> None:
    """A ``ModelResponse`` (also inside an ``ExtendedModelResponse``) holds a list of messages; a command is a
    ``Command`` with a valid update."""
    if type(value) is ModelResponse:
        result = value.result
        if type(result) is list and all(isinstance(m, BaseMessage) for m in result):
            return
        _check_result(result, owner, hook)
        return
    if isinstance(value, ExtendedModelResponse):
        command = value.command
        if command is not None:
            if not isinstance(command, Command):
                raise HookValueError.not_a_command(owner, hook, command)
            check_command(command, owner, hook)
        check_model_response(value.model_response, owner, hook)
        return
    if isinstance(value, ModelResponse):
        _check_result(value.result, owner, hook)


def _check_result(result: Any, owner: str, hook: str) -> None:
    if not isinstance(result, list):
        raise HookValueError.result_not_a_list(owner, hook, result)
    for index, item in enumerate(result):
        if not isinstance(item, BaseMessage):
            raise HookValueError.not_a_message(owner, hook, f"ModelResponse.result[{index}]", item)


def check_command(command: Command[Any], owner: str, hook: str) -> None:
    """``Command.update`` is None, a dict or a list of (key, value) pairs; its messages are messages."""
    update = command.update
    if update is None:
        return
    if isinstance(update, dict):
        if not all(isinstance(k, str) for k in update):
            raise HookValueError.bad_update(owner, hook, update)
        check_state_update(update, owner, hook)
        return
    if isinstance(update, (list, tuple)) and all(
        isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str) for pair in update
    ):
        for key, value in update:
            if key == "messages":
                _check_messages(value, owner, hook, "Command.update['messages']")
        return
    raise HookValueError.bad_update(owner, hook, update)


def check_model_request(changed: ModelRequest[Any], before: ModelRequest[Any], owner: str, hook: str) -> None:
    """A rewritten request's messages are messages (only checked when the hook replaced the list)."""
    messages = changed.messages
    if messages is before.messages:
        return
    if not isinstance(messages, (list, tuple)):
        raise HookValueError.not_a_message(owner, hook, "request.messages", messages)
    for index, item in enumerate(messages):
        if not isinstance(item, BaseMessage):
            raise HookValueError.not_a_message(owner, hook, f"request.messages[{index}]", item)


def check_tool_result(value: Any, request: ToolCallRequest, owner: str, hook: str) -> None:
    """A ``ToolMessage`` answers ``request``'s call (same id); a ``Command``'s update is valid."""
    if type(value) is ToolMessage or isinstance(value, ToolMessage):
        expected = request.tool_call.get("id")
        if expected is not None and value.tool_call_id != expected:
            raise HookValueError.foreign_tool_message(
                owner, hook, value.tool_call_id, expected, str(request.tool_call.get("name"))
            )
    elif isinstance(value, Command):
        check_command(value, owner, hook)



_HOOK_NOTE = "Raised in the middleware hook {owner}.{hook}."
_HOOK_NOTE_START = _HOOK_NOTE.split("{", 1)[0]


def note_hook_failure(exc: BaseException, owner: str, hook: str) -> None:
    """Add one note naming the middleware and the hook to an exception raised in a user's hook (its type and its
    chain unchanged, so ``pytest.raises(ValueError)`` and ``except`` clauses keep working). The engine calls it where
    the hook itself raised, never for what passed through a wrap hook from its handler (the model, the tool, an
    inner hook). Not for middleware_kit's own errors (they name their culprit), LangGraph's control flow (interrupts)
    nor an exception already noted (raised in the hook of an agent nested in this hook: the innermost is named)."""
    if isinstance(exc, (GraphBubbleUp, MiddlewareError)) or not isinstance(exc, Exception):
        return
    if any(isinstance(n, str) and n.startswith(_HOOK_NOTE_START) for n in getattr(exc, "__notes__", ())):
        return
    exc.add_note(_HOOK_NOTE.format(owner=owner, hook=hook))


_TOOL_NOTE = (
    "While running the tool {name!r} (tool call id {id!r}). To answer the model with the error instead, add "
    "ToolErrorMiddleware(on_error) to middleware=[...]; to retry the call, ToolRetryMiddleware(...)."
)


def note_tool_failure(exc: BaseException, tool_call: Mapping[str, Any]) -> None:
    """Add a note naming the tool and the call to an exception a tool raised (its type unchanged), pointing at
    ``ToolErrorMiddleware``/``ToolRetryMiddleware``. Not for middleware_kit's own errors (they name their culprit)
    nor LangGraph's control flow (interrupts)."""
    if isinstance(exc, (GraphBubbleUp, MiddlewareError)) or not isinstance(exc, Exception):
        return
    note = _TOOL_NOTE.format(name=tool_call.get("name"), id=tool_call.get("id"))
    if note not in getattr(exc, "__notes__", ()):
        exc.add_note(note)
