"""check_context: the run's context against the agent's context_schema (unit level; the agent-level tests are in
tests/integration/test_fail_fast.py)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from middleware_kit._engine.context import check_context, context_from_parent
from middleware_kit.errors import ContextError, MiddlewareError


@dataclass
class Ctx:
    user_id: str
    tier: str = "free"


@dataclass
class Defaults:
    tier: str = "free"
    tags: list[str] = field(default_factory=list)


class Model(BaseModel):
    user_id: str
    limit: int = 3


class Extra(BaseModel):
    model_config = ConfigDict(extra="allow")
    user_id: str


class Optional(TypedDict, total=False):
    a: int


class TD(TypedDict):
    user_id: str
    tier: NotRequired[str]


def test_an_instance_passes_unchanged() -> None:
    for schema, value in ((Ctx, Ctx("u")), (Model, Model(user_id="u")), (TD, {"user_id": "u"})):
        assert check_context(schema, value) is value
    assert check_context(None, "anything") == "anything"


def test_dicts_are_coerced_to_dataclass_and_pydantic_schemas() -> None:
    assert check_context(Ctx, {"user_id": "u"}) == Ctx("u")
    assert check_context(Model, {"user_id": "u", "limit": 5}) == Model(user_id="u", limit=5)
    assert check_context(Extra, {"user_id": "u", "more": 1}).model_extra == {"more": 1}


def test_no_context_gets_the_defaults_when_every_field_has_one() -> None:
    assert check_context(Defaults, None) == Defaults()
    assert check_context(Optional, None) == {}


@pytest.mark.parametrize("schema", [Ctx, Model, TD])
def test_missing_context_names_the_schema_and_the_field(schema: type[Any]) -> None:
    with pytest.raises(ContextError) as info:
        check_context(schema, None)
    err = info.value
    assert (err.schema, err.field) == (schema.__qualname__, "user_id")
    assert (err.middleware, err.hook) == ("create_agent", "context")
    assert str(err) == (
        f"The agent's context_schema is {schema.__qualname__}, which requires the field(s) ['user_id'], but the run "
        f"got no context. Pass it: agent.invoke(..., context={schema.__qualname__}(user_id=...)) (a dict of its "
        f"fields works too)."
    )


@pytest.mark.parametrize("schema", [Ctx, Model, TD])
def test_unknown_field_is_named_with_a_suggestion(schema: type[Any]) -> None:
    with pytest.raises(ContextError) as info:
        check_context(schema, {"userid": "u"})
    assert info.value.field == "userid"
    assert "Did you mean 'user_id'?" in str(info.value)
    assert str(info.value).startswith(f"context= has the field 'userid', which {schema.__qualname__} does not declare")


@pytest.mark.parametrize("schema", [Ctx, Model, TD])
def test_missing_field_is_named(schema: type[Any]) -> None:
    with pytest.raises(ContextError) as info:
        check_context(schema, {"tier": "pro"} if schema is not Model else {"limit": 1})
    assert info.value.field == "user_id"
    assert "lacks 'user_id', a required field of" in str(info.value)


@pytest.mark.parametrize("schema", [Ctx, Model, TD])
def test_wrong_type_is_refused(schema: type[Any]) -> None:
    with pytest.raises(ContextError) as info:
        check_context(schema, "acme")
    assert info.value.field is None
    assert str(info.value).startswith("context= is a str ('acme'), not a")


def test_pydantic_value_errors_name_the_field() -> None:
    with pytest.raises(ContextError) as info:
        check_context(Model, {"user_id": "u", "limit": "many"})
    assert info.value.field == "limit"
    assert "the field 'limit'" in str(info.value)


def test_dataclass_post_init_errors_become_context_errors() -> None:
    @dataclass
    class Checked:
        n: int

        def __post_init__(self) -> None:
            if self.n < 0:
                raise ValueError("n must be >= 0")

    with pytest.raises(ContextError, match="n must be >= 0"):
        check_context(Checked, {"n": -1})


def test_plain_class_schema_takes_instances_only() -> None:
    class Plain:
        pass

    value = Plain()
    assert check_context(Plain, value) is value
    with pytest.raises(ContextError):
        check_context(Plain, {"a": 1})
    with pytest.raises(ContextError):
        check_context(Plain, None)


# -- a subgraph run: the parent's context seen through the agent's schema ----------------------------------------------
@dataclass
class Parent:
    user_id: str
    tier: str = "pro"
    region: str = "eu"


def test_a_parent_context_of_the_schema_passes_as_it_is() -> None:
    assert context_from_parent(Ctx, Ctx("u")) is None  # None: LangGraph hands the parent's object down
    assert context_from_parent(TD, {"user_id": "u", "extra": 1}) is None


@pytest.mark.parametrize("parent", [Parent("u"), {"user_id": "u", "tier": "pro", "region": "eu"}])
def test_another_parent_context_fills_the_schema_by_field_name(parent: Any) -> None:
    assert context_from_parent(Ctx, parent) == Ctx("u", "pro")  # the parent's tier, not the default "free"
    assert context_from_parent(Model, parent) == Model(user_id="u")
    assert context_from_parent(Defaults, parent) == Defaults(tier="pro")
    assert context_from_parent(TD, Parent("u")) == {"user_id": "u", "tier": "pro"}


def test_a_parent_context_lacking_a_required_field_names_it() -> None:
    with pytest.raises(ContextError) as info:
        context_from_parent(Ctx, Defaults())
    assert (info.value.schema, info.value.field) == ("Ctx", "user_id")
    assert str(info.value).startswith(
        "This agent runs inside a parent graph whose context is a Defaults, and it gets that context (it was invoked "
        "without context=), but the context does not fit Ctx, the agent's context_schema: it lacks 'user_id'"
    )


def test_a_parent_value_the_schema_refuses_is_a_context_error() -> None:
    with pytest.raises(ContextError, match="does not fit Model") as info:
        context_from_parent(Model, {"user_id": "u", "limit": "many"})
    assert info.value.field == "limit"


_junk = st.recursive(
    st.none() | st.integers() | st.text(max_size=5) | st.booleans(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@given(_junk)
@pytest.mark.parametrize("schema", [Ctx, Model, TD, Defaults])
def test_any_value_fits_or_raises_a_context_error(schema: type[Any], value: Any) -> None:
    try:
        checked = check_context(schema, value)
    except ContextError as err:
        assert isinstance(err, MiddlewareError) and err.schema == schema.__qualname__
        return
    if schema is TD:
        assert isinstance(checked, dict) and "user_id" in checked
    else:
        assert isinstance(checked, schema)


_TYPED_SAMPLE = '''
from dataclasses import dataclass

from langchain_core.messages import HumanMessage

from middleware_kit import create_agent
from middleware_kit.testing import ScriptedChatModel


@dataclass
class Ctx:
    user_id: str


agent = create_agent(ScriptedChatModel(["ok"]), context_schema=Ctx)
agent.invoke({"messages": [HumanMessage("hi")]}, context=Ctx("u"))
agent.invoke({"messages": [HumanMessage("hi")]}, context="acme")  # line 17: the one error
plain = create_agent(ScriptedChatModel(["ok"]))
plain.invoke({"messages": [HumanMessage("hi")]}, context="anything")
reveal_type(agent)
'''


def test_create_agent_keeps_the_context_type_for_type_checkers(tmp_path: Path) -> None:
    sample = tmp_path / "typed_context.py"
    sample.write_text(_TYPED_SAMPLE, encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
         str(sample)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and "typed_context.py:17:" in errors[0], out.stdout
    assert 'Revealed type is "middleware_kit.compiled.CompiledAgent[typed_context.Ctx]"' in out.stdout
