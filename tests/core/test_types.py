"""``middleware_kit.types``: each request type's fields are stated once (the dataclass annotations); the constructor
takes every field, ``override`` takes exactly its ``*Overrides`` TypedDict, and both normalise values the same way."""

from __future__ import annotations

import dataclasses
import inspect
from types import MappingProxyType
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from middleware_kit import ModelRequest, ToolCallRequest
from middleware_kit.testing import ScriptedChatModel
from middleware_kit.types import _ModelRequestOverrides, _ToolCallRequestOverrides


@tool
def echo(text: str) -> str:
    """Echo."""
    return text


def _request(**extra: Any) -> ModelRequest[Any]:
    return ModelRequest(model=ScriptedChatModel(responses=[]), messages=(HumanMessage("hi"),), **extra)


@pytest.mark.parametrize(
    ("cls", "overrides", "not_overridable"),
    [
        (ModelRequest, _ModelRequestOverrides, {"system_prompt"}),
        (ToolCallRequest, _ToolCallRequestOverrides, set()),
    ],
)
def test_constructor_and_override_agree_with_the_fields(cls: type, overrides: type, not_overridable: set[str]) -> None:
    fields = {f.name for f in dataclasses.fields(cls)}
    params = set(inspect.signature(cls.__init__).parameters) - {"self"}
    assert fields <= params
    assert set(overrides.__annotations__) - not_overridable <= fields


def test_constructor_and_override_normalise_the_same_way() -> None:
    built = _request(tools=(echo,), model_settings={"temperature": 0})
    assert type(built.messages) is list and type(built.tools) is list
    assert isinstance(built.model_settings, MappingProxyType)
    changed = built.override(messages=(HumanMessage("again"),), tools=(), model_settings={"top_p": 1})
    assert type(changed.messages) is list and changed.tools == []
    assert isinstance(changed.model_settings, MappingProxyType) and dict(changed.model_settings) == {"top_p": 1}
    assert built.override(tool_choice="any").messages is built.messages  # unchanged fields keep their identity
    assert built.override().runtime is built.runtime


def test_override_names_the_fields_it_takes() -> None:
    unknown = r"ModelRequest.override\(\) got unknown field\(s\) \['modle'\]; the fields are: .*system_prompt"
    with pytest.raises(TypeError, match=unknown):
        _request().override(modle=None)  # type: ignore[call-arg]
    call = ToolCallRequest({"name": "echo", "args": {}, "id": "1", "type": "tool_call"}, echo, {})
    with pytest.raises(TypeError, match=r"ToolCallRequest.override\(\) got unknown field\(s\) \['runtime'\]"):
        call.override(runtime=None)  # type: ignore[call-arg]
    assert call.override(state={"x": 1}).tool_call is call.tool_call
