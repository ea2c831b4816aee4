"""Shared fixtures: every agent-level test runs under both ``invoke`` and ``ainvoke``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.tools import tool


@pytest.fixture(params=["invoke", "ainvoke"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


Runner = Callable[..., Any]


@pytest.fixture
def run(mode: str) -> Runner:
    """``run(agent, input, **kwargs)`` calls ``agent.invoke`` or ``agent.ainvoke`` (in a fresh event loop)."""

    def call(agent: Any, inp: Any, **kwargs: Any) -> Any:
        if mode == "invoke":
            return agent.invoke(inp, **kwargs)
        return asyncio.run(agent.ainvoke(inp, **kwargs))

    return call


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@pytest.fixture
def tools() -> list[Any]:
    return [add, echo]
