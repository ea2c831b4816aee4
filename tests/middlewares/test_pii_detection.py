# ruff: noqa: RUF001  (fullwidth characters are the point of these tests)
"""PII detection on real-world text (both labeled corpora), spans mapped back through normalisation, properties that
must hold for any text (hypothesis), the frozen configuration, and the per-model-call cost on a long thread."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from middleware_kit import create_agent
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares._pii_detectors import BUILTIN_DETECTORS
from middleware_kit.middlewares.pii import PIIMiddleware, detect_credit_card, detect_email, detect_ip, detect_url
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner
from tests.middlewares.pii_corpus import corpus
from tests.middlewares.pii_realworld_corpus import realworld_corpus

ZW = "\u200b"


@pytest.mark.parametrize("name", ["generated", "realworld"])
def test_corpora_meet_the_f1_targets(name: str) -> None:
    from bench.pii_eval import evaluate, macro_f1

    scores = evaluate(corpus() if name == "generated" else realworld_corpus())
    assert macro_f1(scores) >= 0.95
    assert all(s.f1 >= 0.90 for s in scores.values()), {t: round(s.f1, 3) for t, s in scores.items()}


@pytest.mark.parametrize(
    ("detect", "text", "expected"),
    [
        (detect_email, "Escríbeme a josé.garcía@correo.es.", ["josé.garcía@correo.es"]),
        (detect_email, "Bitte an müller@example.de", ["müller@example.de"]),
        (detect_email, "He wrote 'ada@example.com' and \"bob@example.org\".", ["ada@example.com", "bob@example.org"]),
        (detect_email, "https://x.example/?to=ada@example.com&a=1", ["ada@example.com"]),
        (detect_email, "https://x.example/?email=ada%40example.com", ["ada%40example.com"]),
        (detect_email, "请联系ada@example.com谢谢", ["ada@example.com"]),
        (detect_email, "ｔａｒｏ＠ｅｘａｍｐｌｅ．ｃｏｍ", ["ｔａｒｏ＠ｅｘａｍｐｌｅ．ｃｏｍ"]),
        (detect_email, f"ada{ZW}@example.com", [f"ada{ZW}@example.com"]),
        (detect_email, "logo@2x.png, https://user@host.example.com/x", []),
        (detect_credit_card, "1,Ada,4111111111111111,12/27", ["4111111111111111"]),
        (detect_credit_card, "카드번호4111111111111111로", ["4111111111111111"]),
        (detect_credit_card, "４１１１ １１１１ １１１１ １１１１", ["４１１１ １１１１ １１１１ １１１１"]),
        (detect_credit_card, f"4111{ZW}1111{ZW}1111{ZW}1111", [f"4111{ZW}1111{ZW}1111{ZW}1111"]),
        (detect_ip, "http://10.1.2.3:8080/x and 192.168.1.17/24", ["10.1.2.3", "192.168.1.17"]),
        (detect_ip, "サーバー192.168.10.5に", ["192.168.10.5"]),
        (detect_url, "詳細はhttps://example.jp/faqをご覧ください。", ["https://example.jp/faq"]),
    ],
)
def test_real_world_formats(detect: Any, text: str, expected: list[str]) -> None:
    found = detect(text)
    assert [m["value"] for m in found] == expected
    assert all(text[m["start"] : m["end"]] == m["value"] for m in found)


# -- properties ------------------------------------------------------------------------------------------------
_ALPHABET = st.sampled_from([*"ab1@.:-/ %4０１＠．\u200b\u00ad谢é,;'\"<>()[]", "\n", "\t"])
_TEXTS = st.text(_ALPHABET, max_size=80) | st.text(max_size=60)


@settings(max_examples=150, deadline=None)
@given(_TEXTS)
def test_spans_always_point_into_the_original_text(text: str) -> None:
    for detect in BUILTIN_DETECTORS.values():
        found = detect(text)
        for m in found:
            assert 0 <= m["start"] < m["end"] <= len(text)
            assert text[m["start"] : m["end"]] == m["value"]
        assert [m["start"] for m in found] == sorted(m["start"] for m in found)


_VALUES = {
    "email": "jane.doe@example.com",
    "credit_card": "4111 1111 1111 1111",
    "ip": "203.0.113.7",
    "mac_address": "00:1A:2B:3C:4D:5E",
    "url": "https://example.com/a",
}


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(sorted(_VALUES)),
    st.sampled_from(["", " ", "\n", "(", "「", "谢", "。"]),
    st.sampled_from(["", " ", ".", ")", "」", "谢", "。", ","]),
    st.integers(min_value=1, max_value=18),
    st.sampled_from(["\u200b", "\u200d", "\u2060", "\u00ad", "\ufeff"]),
)
def test_an_invisible_character_inside_a_value_never_hides_it(
    pii_type: str, before: str, after: str, cut: int, invisible: str
) -> None:
    value = _VALUES[pii_type]
    cut = min(cut, len(value) - 1)
    split = value[:cut] + invisible + value[cut:]
    text = f"{before}{split}{after}"
    found = BUILTIN_DETECTORS[pii_type](text)
    assert [m["value"] for m in found] == [split], text
    redacted = PIIMiddleware(pii_type).guard_messages([HumanMessage(text)], None)
    assert redacted is not None and value not in str(redacted[0].content) and split not in str(redacted[0].content)


def test_adversarial_inputs_stay_correct_for_all_five() -> None:
    """Correctness only (timings are bench/pii_speed.py's): 100k characters of shapes that make naive patterns
    backtrack, through all five detectors, fullwidth and zero-width variants included."""
    shapes = ["１" * 100_000, "a＠" * 50_000, ("1" + ZW) * 50_000, "谢a@" * 33_000, "http://a" + "谢" * 99_992]
    for shape in shapes:
        for detect in BUILTIN_DETECTORS.values():
            assert isinstance(detect(shape), list)


# -- configuration ---------------------------------------------------------------------------------------------
def test_configuration_is_frozen_and_replace_works(run: Runner) -> None:
    keys = ["k" * 40]
    mw = PIIMiddleware("email", strategy="placeholder", key=keys)
    keys.append("x")  # the caller's list: copied at construction
    create_agent(ScriptedChatModel(["ok"]), middleware=[mw])  # adopted: read-only from now on
    with pytest.raises(FrozenMiddlewareError) as info:
        mw.strategy = "redact"
    assert info.value.hook == "strategy" and isinstance(info.value, AttributeError)
    masked = mw.replace(strategy="mask", key=None)
    assert masked.strategy == "mask" and mw.strategy == "placeholder"
    model = ScriptedChatModel(["ok"])
    run(create_agent(model, middleware=[masked]), {"messages": [HumanMessage("I am jane@example.com")]})
    assert model.calls[0].messages[0].content == "I am jane@****.com"


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"pii_type": "ssn"}, "pii_type"),
        ({"pii_type": "email", "strategy": "shred"}, "strategy"),
        ({"pii_type": "email", "detector": 42}, "detector"),
        ({"pii_type": "x", "detector": "(unclosed"}, "detector"),
        ({"pii_type": "email", "memo_bytes": -5}, "memo_bytes"),
        ({"pii_type": "email", "strategy": "placeholder"}, "key"),
        ({"pii_type": "email", "strategy": "placeholder", "key": "too short"}, "key"),
    ],
)
def test_constructor_errors_name_the_parameter(kwargs: dict[str, Any], param: str) -> None:
    from middleware_kit.errors import MiddlewareConfigError

    with pytest.raises(MiddlewareConfigError) as info:
        PIIMiddleware(**kwargs)
    assert info.value.hook == param and isinstance(info.value, ValueError)
    assert info.value.middleware.startswith("PIIMiddleware[")


# -- cost on a long thread -------------------------------------------------------------------------------------
def test_each_model_call_scans_only_new_messages(run: Runner) -> None:
    """A long thread: the texts the detector reads per turn do not grow with the history (guarded when written,
    never rescanned). A custom function detector is used because it is never memoized: every call is counted."""
    seen: list[str] = []

    def detector(text: str) -> list[dict[str, Any]]:
        seen.append(text)
        return [{"start": m.start(), "end": m.end()} for m in re.finditer(r"\bEMP-\d{6}\b", text)]

    @tool
    def lookup(q: str) -> str:
        """Look up."""
        return f"result for {q}"

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("lookup", {"q": "x"})]), "answer"], cycle=True)
    mw = PIIMiddleware("employee_id", detector=detector, apply_to_output=True, apply_to_tool_results=True)
    agent = create_agent(model, [lookup], middleware=[mw], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "long"}}
    per_turn: list[int] = []
    for turn in range(12):
        before = len(seen)
        run(agent, {"messages": [HumanMessage(f"question {turn} about EMP-{turn:06d}")]}, config=config)
        per_turn.append(len(seen) - before)
    assert len(set(per_turn[1:])) == 1, per_turn  # constant per turn: O(new messages), not O(history)
    history = agent.get_state(config).values["messages"]
    assert len(history) == 48 and "EMP-" not in repr(history)


_SECRETS = {
    "email": "zoe.secret@example.org",
    "credit_card": "5105 1051 0510 5100",
    "ip": "203.0.113.77",
    "mac_address": "3c:22:fb:12:9a:01",
    "url": "https://private.example.net/u/zoe",
}
_AROUND = st.text(st.sampled_from([*" \n\t,;:()[]{}<>\"'「」。，、谢ครับ으로\u200b\u00a0", "\u3000"]), max_size=6)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(sorted(_SECRETS)),
    st.sampled_from(["redact", "mask", "hash", "placeholder"]),
    _AROUND,
    _AROUND,
    st.integers(min_value=1, max_value=3),
)
def test_the_guard_never_lets_a_value_through_whatever_surrounds_it(
    pii_type: str, strategy: Any, before: str, after: str, copies: int
) -> None:
    secret = _SECRETS[pii_type]
    text = " ".join([before + secret + after] * copies)
    key = "k" * 40 if strategy == "placeholder" else None
    mw = PIIMiddleware(pii_type, strategy=strategy, key=key, apply_to_output=True)
    guarded = mw.guard_messages([HumanMessage(text), AIMessage(text, tool_calls=[tool_call("t", {"q": text})])], None)
    assert guarded is not None
    assert secret not in repr([m.content for m in guarded]) + repr(guarded[1].tool_calls)  # type: ignore[union-attr]
    assert mw.guard_messages(guarded, None) is None  # idempotent
