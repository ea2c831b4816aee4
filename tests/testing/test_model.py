"""``ScriptedChatModel``: its errors say which model of a multi-model test ran out."""

from __future__ import annotations

import pytest

from middleware_kit.testing import ScriptedChatModel, ScriptExhaustedError


def test_an_exhausted_script_names_the_model() -> None:
    planner = ScriptedChatModel(["plan"], name="planner")
    planner.invoke("x")
    with pytest.raises(ScriptExhaustedError) as info:
        planner.invoke("x")
    assert str(info.value) == (
        "ScriptedChatModel(name='planner') was called 2 time(s) but scripted with 1 response(s). Add responses, "
        "pass default=..., or cycle=True."
    )


def test_an_unnamed_exhausted_script_says_so() -> None:
    with pytest.raises(ScriptExhaustedError, match=r"^ScriptedChatModel \(unnamed\) was called 1 time\(s\) but "
                                                    r"scripted with 0 response\(s\)"):
        ScriptedChatModel([]).invoke("x")
