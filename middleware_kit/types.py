"""The values that flow through the onion: state schemas, model requests and responses, tool-call requests.

Requests are frozen, keyword-only, slotted values: ``override(**changes)`` returns a changed copy and assigning an
attribute raises, so nothing a hook does to a request can leak into graph state. Their sequences are tuples and
their settings read-only mappings for the same reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Generic, Literal, NotRequired, Required, TypeAlias, cast

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage, ToolCall
from langchain_core.tools import BaseTool
from langgraph.channels.ephemeral_value import EphemeralValue
from langgraph.graph.message import add_messages
from langgraph.prebuilt.tool_node import ToolRuntime
from langgraph.runtime import Runtime
from langgraph.types import Command
from langgraph.typing import ContextT
from typing_extensions import TypedDict, TypeVar, Unpack

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = [
    "AgentState",
    "ContextT",
    "ExtendedModelResponse",
    "InputAgentState",
    "JumpTo",
    "ModelCallResult",
    "ModelRequest",
    "ModelResponse",
    "OmitFromInput",
    "OmitFromOutput",
    "OmitFromSchema",
    "OutputAgentState",
    "PrivateStateAttr",
    "ResponseT",
    "Runtime",
    "ToolCallRequest",
]

JumpTo: TypeAlias = Literal["model", "tools", "end"]
"""Where a node hook may send the run next: the model (the top of the loop), the tools, or the end."""

ResponseT = TypeVar("ResponseT", default=Any)
"""The type of the structured response of an agent (``AgentState[ResponseT]``)."""


@dataclass(frozen=True)
class OmitFromSchema:
    """Marker for ``Annotated`` state fields that stay out of the agent's input and/or output schema."""

    input: bool = True
    output: bool = True


OmitFromInput = OmitFromSchema(input=True, output=False)
"""``Annotated[T, OmitFromInput]``: the key is ignored when given as input."""
OmitFromOutput = OmitFromSchema(input=False, output=True)
"""``Annotated[T, OmitFromOutput]``: the key stays out of the result of ``invoke``."""
PrivateStateAttr = OmitFromSchema(input=True, output=True)
"""``Annotated[T, PrivateStateAttr]``: the key lives only inside the graph (hidden from input, output and tools)."""


class AgentState(TypedDict, Generic[ResponseT]):
    """The state every agent has. Middlewares extend it with their own ``state_schema`` (a TypedDict subclass)."""

    messages: Required[Annotated[list[AnyMessage], add_messages]]
    """The conversation, merged with LangGraph's ``add_messages`` reducer."""
    jump_to: NotRequired[Annotated[JumpTo | None, EphemeralValue, PrivateStateAttr]]
    """Returned by a node hook (declared with ``can_jump_to``) to route the run; never seen in state or results."""
    structured_response: NotRequired[Annotated[ResponseT, OmitFromInput]]
    """The parsed structured output, when the agent has a ``response_format`` or a middleware supplies one."""


class InputAgentState(TypedDict):
    """The input of an agent: ``{"messages": [...]}`` plus any input keys of the merged schemas."""

    messages: Required[Annotated[list[AnyMessage | dict[str, Any]], add_messages]]


class OutputAgentState(TypedDict, Generic[ResponseT]):
    """The result of an agent: the public state keys."""

    messages: Required[Annotated[list[AnyMessage], add_messages]]
    structured_response: NotRequired[ResponseT]


class _Frozen:
    """Assignment raises with a pointer to ``override()`` (dataclass's own frozen message names no fix)."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise dataclasses.FrozenInstanceError(
            f"{type(self).__name__} is frozen: cannot assign {name!r}. "
            f"Use request.override({name}=...) to get a changed copy."
        )

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"{type(self).__name__} is frozen: cannot delete {name!r}.")

    _coerce: ClassVar[Mapping[str, Callable[[Any], Any]]] = {}
    """How a field's given value is normalised when set (``messages`` copied into a list, settings frozen...)."""

    def _set_fields(self, given: Mapping[str, Any]) -> None:
        """Set every dataclass field from ``given`` (the constructor's ``locals()``): the field list is the class's
        annotations, stated once."""
        setattr_ = object.__setattr__
        cls = type(self)
        for name, coerce in _FIELD_PLANS.get(cls) or _field_plan(cls):  # a request per model and tool call
            value = given[name]
            setattr_(self, name, value if coerce is None else coerce(value))

    def _replaced(self, changes: Mapping[str, Any], overridable: frozenset[str]) -> Any:
        """A copy with ``changes`` applied (unchanged fields keep their identity), refusing a name not in
        ``overridable`` (the class's ``*Overrides`` TypedDict, the one statement of what ``override`` takes)."""
        unknown = changes.keys() - overridable
        if unknown:
            raise TypeError(
                f"{type(self).__name__}.override() got unknown field(s) {sorted(unknown)}; "
                f"the fields are: {', '.join(sorted(overridable))}."
            )
        new = object.__new__(type(self))
        for name in _field_names(type(self)):
            if name in changes:
                coerce = self._coerce.get(name)
                value = changes[name] if coerce is None else coerce(changes[name])
            else:
                value = getattr(self, name)
            object.__setattr__(new, name, value)
        return new


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_FIELD_PLANS: dict[type, tuple[tuple[str, Callable[[Any], Any] | None], ...]] = {}


def _field_plan(cls: type[_Frozen]) -> tuple[tuple[str, Callable[[Any], Any] | None], ...]:
    """Each field of ``cls`` with its ``_coerce`` (None: kept as given), read once per class: a request is built
    for every model and tool call."""
    plan = _FIELD_PLANS.get(cls)
    if plan is None:
        plan = _FIELD_PLANS[cls] = tuple((name, cls._coerce.get(name)) for name in _field_names(cls))
    return plan


def _field_names(cls: type) -> tuple[str, ...]:
    """The dataclass fields of ``cls``, in order (read once per class)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


class _ModelRequestOverrides(TypedDict, total=False):
    model: BaseChatModel
    messages: Sequence[AnyMessage]
    system_message: SystemMessage | None
    system_prompt: str | None
    tools: Sequence[BaseTool | dict[str, Any]]
    tool_choice: Any
    response_format: Any
    model_settings: Mapping[str, Any]
    state: Any
    runtime: Runtime[Any] | None


_EMPTY_SETTINGS: Mapping[str, Any] = MappingProxyType({})
_MODEL_REQUEST_OVERRIDES = frozenset(_ModelRequestOverrides.__annotations__)


def _as_list(items: Sequence[Any] | None) -> list[Any]:
    """A list given is kept as it is (its identity too, as LangChain's ``override`` does); anything else is copied
    into a new list."""
    if type(items) is list:
        return items
    return [] if items is None else list(items)


def _freeze_settings(settings: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if not settings:
        return _EMPTY_SETTINGS
    if type(settings) is MappingProxyType:
        return settings
    return MappingProxyType(dict(settings))


@dataclass(init=False, eq=True, repr=True, slots=True)
class ModelRequest(_Frozen, Generic[ContextT]):
    """One model call, as the wrappers see it. Frozen (assigning a field raises): change it with :meth:`override`.

    ``system_prompt="..."`` (constructor or ``override``) is sugar for ``system_message=SystemMessage("...")``;
    giving both raises ``ValueError``.
    """

    model: BaseChatModel
    """The chat model to call (a middleware may swap it, e.g. for a fallback)."""
    messages: list[AnyMessage]
    """The conversation sent to the model, without the system message. A list, as in LangChain: inside an agent each
    model call gets its own copy of the state's messages, so editing it in place (a retrying wrapper appending a
    correction) changes this call only, never the thread's state; return a state update to change state."""
    system_message: SystemMessage | None
    """Sent first, before ``messages``; never stored in state."""
    tools: list[BaseTool | dict[str, Any]]
    """The tools offered to the model: the agent's tools plus every middleware's ``tools``. A list of this call's
    own (as ``messages``)."""
    tool_choice: Any
    """Passed to ``bind_tools(tool_choice=...)`` when set."""
    response_format: Any
    """The agent's structured-output format, if any."""
    model_settings: Mapping[str, Any]
    """Extra keyword arguments bound on the model for this call (read-only)."""
    state: Any
    """The agent state when the call was prepared (read-only view; return state updates from node hooks)."""
    runtime: Runtime[ContextT]
    """LangGraph's runtime of the run: ``runtime.context``, ``runtime.store``, ``runtime.stream_writer``.
    Always set inside an agent (None only on a request built by hand without one)."""

    _coerce = MappingProxyType({"messages": _as_list, "tools": _as_list, "model_settings": _freeze_settings})

    def __init__(
        self,
        *,
        model: BaseChatModel,
        messages: Sequence[AnyMessage],
        system_message: SystemMessage | None = None,
        system_prompt: str | None = None,
        tool_choice: Any = None,
        tools: Sequence[BaseTool | dict[str, Any]] | None = None,
        response_format: Any = None,
        state: Any = None,
        runtime: Runtime[ContextT] | None = None,
        model_settings: Mapping[str, Any] | None = None,
    ) -> None:
        if system_prompt is not None:
            if system_message is not None:
                raise ValueError("Cannot specify both system_prompt and system_message")
            system_message = SystemMessage(content=system_prompt)
        self._set_fields(locals())

    @property
    def system_prompt(self) -> str | None:
        """The text of ``system_message`` (``None`` without one)."""
        if self.system_message is None:
            return None
        return self.system_message.text

    def override(self, **changes: Unpack[_ModelRequestOverrides]) -> ModelRequest[ContextT]:
        """Return a copy with ``changes`` applied; unchanged fields keep their identity. The original is untouched."""
        values: dict[str, Any] = dict(changes)
        if "system_prompt" in values:
            if values.get("system_message") is not None:
                raise ValueError("Cannot specify both system_prompt and system_message")
            prompt = values.pop("system_prompt")
            values["system_message"] = None if prompt is None else SystemMessage(content=prompt)
        return cast("ModelRequest[ContextT]", self._replaced(values, _MODEL_REQUEST_OVERRIDES))


@dataclass(frozen=True)
class ModelResponse(Generic[ResponseT]):
    """What a model call produced: the messages to add to state, and the structured response if any."""

    result: list[BaseMessage]
    """Usually one ``AIMessage``; a wrapper may add messages (they are added to state in order)."""
    structured_response: ResponseT | None = None
    """Lands in ``state["structured_response"]`` when not None."""


@dataclass(frozen=True)
class ExtendedModelResponse(Generic[ResponseT]):
    """A response plus a ``Command(update=...)`` applied in the same step as the model's messages.

    Updates apply after the model's messages, inner wrappers' commands before outer ones. ``goto``, ``resume`` and
    ``graph`` are not supported there (``NotImplementedError``): route with a node hook's ``jump_to``.
    """

    model_response: ModelResponse[ResponseT]
    command: Command[Any] | None = None


ModelCallResult: TypeAlias = "ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]"
"""What a ``wrap_model_call`` may return."""


class _ToolCallRequestOverrides(TypedDict, total=False):
    tool_call: ToolCall
    tool: BaseTool | None
    state: Any


_TOOL_CALL_REQUEST_OVERRIDES = frozenset(_ToolCallRequestOverrides.__annotations__)


@dataclass(init=True, slots=True)
class ToolCallRequest(_Frozen):
    """One tool call, as ``before_tool``, ``wrap_tool_call`` and ``after_tool`` see it. Frozen: use :meth:`override`."""

    tool_call: ToolCall
    """The call from the model: ``{"name", "args", "id", "type"}``."""
    tool: BaseTool | None
    """The tool that will run, or None for a name the agent does not know (a wrapper may supply one)."""
    state: Any
    """The agent state when the tools step started."""
    runtime: ToolRuntime[Any, Any] | None
    """LangGraph's ``ToolRuntime`` (``context``, ``store``, ``stream_writer``, ``tool_call_id``, ``config``)."""

    def __init__(
        self,
        tool_call: ToolCall,
        tool: BaseTool | None,
        state: Any,
        runtime: ToolRuntime[Any, Any] | None = None,
    ) -> None:
        self._set_fields(locals())

    def override(self, **changes: Unpack[_ToolCallRequestOverrides]) -> ToolCallRequest:
        """Return a copy with ``changes`` applied. The original is untouched."""
        return cast(ToolCallRequest, self._replaced(changes, _TOOL_CALL_REQUEST_OVERRIDES))
