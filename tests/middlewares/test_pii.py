"""PIIMiddleware and its detectors: detectors (positives, hard negatives), strategies, coverage points, placeholders
restored in tool arguments, value-free errors, content blocks, metadata, per-tenant salts and progress events."""

from __future__ import annotations

import asyncio
import pickle
import re
from dataclasses import dataclass
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from middleware_kit import MiddlewareError, create_agent, modify_model_request
from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.middlewares._pii_detectors import luhn_valid
from middleware_kit.middlewares.pii import (
    Keyring,
    PIIDetectionError,
    PIIMatch,
    PIIMiddleware,
    detect_credit_card,
    detect_email,
    detect_ip,
    detect_mac_address,
    detect_url,
    reveal,
)
from middleware_kit.testing import ScriptedChatModel, make_runtime, tool_call
from tests.conftest import Runner
from tests.middlewares.pii_corpus import corpus

EMAIL = "jane.doe@example.com"
CARD = "4111 1111 1111 1111"


def values(matches: list[PIIMatch]) -> list[str]:
    return [m["value"] for m in matches]


def stream_custom(agent: Any, inp: Any, mode: str, **kwargs: Any) -> list[Any]:
    if mode == "invoke":
        return list(agent.stream(inp, stream_mode="custom", **kwargs))

    async def collect() -> list[Any]:
        return [chunk async for chunk in agent.astream(inp, stream_mode="custom", **kwargs)]

    return asyncio.run(collect())


def sent_text(model: ScriptedChatModel) -> str:
    """Everything every model call received, as one string (content, blocks and tool-call arguments)."""
    parts: list[str] = []
    for call in model.calls:
        for m in call.messages:
            parts.append(repr(m.content))
            parts.append(repr(getattr(m, "tool_calls", "")))
    return "\n".join(parts)


# -- detectors -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"Write to {EMAIL}.", [EMAIL]),
        ("a+tag@mail.example.co.uk, USER@EXAMPLE.COM", ["a+tag@mail.example.co.uk", "USER@EXAMPLE.COM"]),
        ("mailto:bob@example.org", ["bob@example.org"]),
        ("ping @alice or user@localhost", []),
        ("https://mail.example.com/?to=jane@example.com and ftp://user@files.example.com/", ["jane@example.com"]),
        ("x..y@example.com .x@example.com x.@example.com", []),
    ],
)
def test_detect_email(text: str, expected: list[str]) -> None:
    assert values(detect_email(text)) == expected


@pytest.mark.parametrize(
    "card",
    [
        "4111 1111 1111 1111",  # Visa, spaces
        "4111-1111-1111-1111",  # Visa, dashes
        "4012888888881881",  # Visa
        "5555555555554444",  # Mastercard 5-series
        "2223003122003222",  # Mastercard 2-series
        "2720 9926 3826 3833",  # Mastercard 2-series, upper bound
        "378282246310005",  # Amex 15 digits
        "3782 822463 10005",  # Amex 4-6-5
        "6011111111111117",  # Discover
        "30569309025904",  # Diners 14 digits
        "3530111333300000",  # JCB
    ],
)
def test_detect_credit_card_positives(card: str) -> None:
    assert values(detect_credit_card(f"Card: {card}.")) == [card]


@pytest.mark.parametrize(
    "text",
    [
        "4111 1111 1111 1112",  # fails Luhn
        "1234567812345670",  # passes Luhn, no network
        "ISBN 978-3-16-148410-0",
        "call +1 415 555 0132",
        "order 99994111111111111111",  # runs into more digits
        "id 4111111111111111-1",
        "2721000000000004",  # beyond the Mastercard 2-series
        "timestamp 1705314645123",
    ],
)
def test_detect_credit_card_negatives(text: str) -> None:
    assert detect_credit_card(text) == []


def test_luhn() -> None:
    assert luhn_valid("79927398713") and not luhn_valid("79927398710")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("from 192.168.1.1, then 8.8.8.8.", ["192.168.1.1", "8.8.8.8"]),
        ("listen 127.0.0.1:8080", ["127.0.0.1"]),
        ("v6 2001:db8:85a3::8a2e:370:7334 and ::1", ["2001:db8:85a3::8a2e:370:7334", "::1"]),
        ("full 2001:0db8:85a3:0000:0000:8a2e:0370:7334", ["2001:0db8:85a3:0000:0000:8a2e:0370:7334"]),
        ("zone fe80::1%eth0.", ["fe80::1%eth0"]),
        ("mapped ::ffff:192.0.2.128", ["::ffff:192.0.2.128"]),
        ("bracketed [2001:db8::1]:443", ["2001:db8::1"]),
        ("net 10.0.0.0/8 and 2001:db8::/32", ["10.0.0.0", "2001:db8::"]),  # the address, not the prefix
        ("see http://192.168.0.10:3000/x", ["192.168.0.10"]),  # an IP and part of the URL
    ],
)
def test_detect_ip_positives(text: str, expected: list[str]) -> None:
    assert values(detect_ip(text)) == expected


@pytest.mark.parametrize(
    "text",
    [
        "version 1.2.3.4.5",
        "v1.2.3.4",
        "OID 1.3.6.1.4.1.311",
        "256.1.1.1 and 01.02.03.04",
        "at 10:30:45",
        "mac 00:1A:2B:3C:4D:5E",
        "C++ std::vector and a::b",
        "3.11.7",
    ],
)
def test_detect_ip_negatives(text: str) -> None:
    assert detect_ip(text) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nic 00:1A:2B:3C:4D:5E.", ["00:1A:2B:3C:4D:5E"]),
        ("nic AA-BB-CC-DD-EE-FF", ["AA-BB-CC-DD-EE-FF"]),
        ("cisco 0019.e8a4.5b2c", ["0019.e8a4.5b2c"]),
        ("ssh MD5:16:27:ac:a5:76:28:2d:36:63:1b:56:4d:eb:df:a6:48", []),
        ("fp 43:51:43:a1:b5:fc:8b:b7:0a:3a:a9:b1:0f:66:73:a8", []),
        ("mixed 00:1a-2b:3c:4d:5e", []),
        ("uuid 123e4567-e89b-12d3-a456-426614174000", []),
    ],
)
def test_detect_mac_address(text: str, expected: list[str]) -> None:
    assert values(detect_mac_address(text)) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("See https://example.com.", ["https://example.com"]),
        ("(https://x.com/a?b=1&c=2)", ["https://x.com/a?b=1&c=2"]),
        ("https://en.wikipedia.org/wiki/Foo_(bar)).", ["https://en.wikipedia.org/wiki/Foo_(bar)"]),
        ("www.example.org/path!", ["www.example.org/path"]),
        ("ftp://files.example.com:21/a.tar.gz, ok", ["ftp://files.example.com:21/a.tar.gz"]),
        ("http://localhost:8080/health?x=1#top", ["http://localhost:8080/health?x=1#top"]),
        ("bare example.com and readme.md are not URLs", []),
        ("http:// nothing", []),
    ],
)
def test_detect_url(text: str, expected: list[str]) -> None:
    assert values(detect_url(text)) == expected


def test_matches_have_offsets_into_the_text() -> None:
    text = f"a {EMAIL} b {CARD} c 10.1.2.3"
    for detect in (detect_email, detect_credit_card, detect_ip):
        for m in detect(text):
            assert text[m["start"] : m["end"]] == m["value"]


@pytest.mark.parametrize(
    "adversarial",
    ["1" * 100_000, "a@" * 50_000, "1." * 50_000, "-" * 100_000, "a@" + "a." * 49_999, "http://a" + ")" * 99_992],
    ids=["digits", "at", "dots", "dashes", "labels", "parens"],
)
def test_adversarial_inputs_complete(adversarial: str) -> None:
    """Correctness only: the timings are measured by bench/pii_speed.py, not asserted here."""
    for detect in (detect_email, detect_credit_card, detect_ip, detect_mac_address, detect_url):
        assert isinstance(detect(adversarial), list)


def test_corpus_meets_the_f1_targets() -> None:
    from bench.pii_eval import evaluate, macro_f1

    scores = evaluate(corpus())
    assert macro_f1(scores) >= 0.95
    assert all(s.f1 >= 0.90 for s in scores.values()), {t: round(s.f1, 3) for t, s in scores.items()}


# -- construction ----------------------------------------------------------------------------------------------
def test_unknown_type_without_detector_raises() -> None:
    expected = r"^Unknown PII type: ssn\. Must be one of \[.email., .credit_card., .ip., .mac_address., .url.\] or"
    with pytest.raises(ValueError, match=expected):
        PIIMiddleware("ssn")


def test_bad_strategy_raises() -> None:
    with pytest.raises(MiddlewareError, match="strategy must be one of"):
        PIIMiddleware("email", strategy="shred")  # type: ignore[arg-type]


def test_name_includes_the_type() -> None:
    assert PIIMiddleware("email").name == "PIIMiddleware[email]"
    assert PIIMiddleware("email", name="mine").name == "mine"


@pytest.mark.parametrize(
    "detector",
    [
        r"\bEMP-\d{6}\b",
        re.compile(r"\bEMP-\d{6}\b"),
        lambda text: [{"start": m.start(), "end": m.end()} for m in re.finditer(r"\bEMP-\d{6}\b", text)],
    ],
    ids=["regex", "compiled", "callable"],
)
def test_custom_detectors(detector: Any) -> None:
    mw = PIIMiddleware("employee_id", detector=detector)
    assert values(mw.detect("ids EMP-123456 and EMP-654321.")) == ["EMP-123456", "EMP-654321"]
    assert scrubbed(mw, "ids EMP-123456.") == "ids [REDACTED_EMPLOYEE_ID]."


# -- strategies (one model call through the request backstop) --------------------------------------------------
def scrubbed(mw: PIIMiddleware, text: str, runtime: Any = None) -> str:
    guarded = mw.guard_messages([HumanMessage(text)], runtime)
    return text if guarded is None else str(guarded[0].content)


@pytest.mark.parametrize(
    ("pii_type", "text", "redacted", "masked"),
    [
        ("email", f"to {EMAIL}!", "to [REDACTED_EMAIL]!", "to jane.doe@****.com!"),
        ("credit_card", f"card {CARD}.", "card [REDACTED_CREDIT_CARD].", "card **** **** **** 1111."),
        ("ip", "from 192.168.0.100.", "from [REDACTED_IP].", "from *.*.*.100."),
        ("ip", "from 2001:db8::7334.", "from [REDACTED_IP].", "from *::7334."),
        ("mac_address", "nic 00:1A:2B:3C:4D:5E", "nic [REDACTED_MAC_ADDRESS]", "nic **:**:**:**:**:5E"),
        ("url", "see https://example.com/x.", "see [REDACTED_URL].", "see [MASKED_URL]."),
    ],
)
def test_redact_and_mask(pii_type: str, text: str, redacted: str, masked: str) -> None:
    assert scrubbed(PIIMiddleware(pii_type), text) == redacted
    assert scrubbed(PIIMiddleware(pii_type, strategy="mask"), text) == masked


def test_hash_is_salted_and_stable() -> None:
    a1 = scrubbed(PIIMiddleware("email", strategy="hash", salt="tenant-a"), f"to {EMAIL}")
    a2 = scrubbed(PIIMiddleware("email", strategy="hash", salt="tenant-a"), f"from {EMAIL}")
    b = scrubbed(PIIMiddleware("email", strategy="hash", salt="tenant-b"), f"to {EMAIL}")
    assert re.fullmatch(r"to <email_hash:[0-9a-f]{16}>", a1)
    assert a1[3:] == a2[5:]  # same salt, same value: same hash
    assert a1 != b  # another salt: another hash
    assert EMAIL not in a1


def test_hash_salt_from_runtime_context() -> None:
    @dataclass
    class Tenant:
        tenant_salt: str

    mw = PIIMiddleware("email", strategy="hash", salt=lambda runtime: runtime.context.tenant_salt)
    one = scrubbed(mw, EMAIL, make_runtime(context=Tenant("s1")))
    two = scrubbed(mw, EMAIL, make_runtime(context=Tenant("s2")))
    assert one != two
    assert one == scrubbed(PIIMiddleware("email", strategy="hash", salt="s1"), EMAIL)


def test_block_error_never_contains_the_value() -> None:
    mw = PIIMiddleware("credit_card", strategy="block")
    with pytest.raises(PIIDetectionError) as info:
        scrubbed(mw, f"pay with {CARD} or 5555555555554444")
    err = info.value
    assert err.pii_type == "credit_card"
    assert err.middleware == "PIIMiddleware[credit_card]"
    assert len(err.matches) == 2 and err.matches[0]["start"] == 9
    assert err.matches[0]["preview"] == "[REDACTED_CREDIT_CARD]"
    everything = str(err) + repr(err) + repr(err.matches) + repr(vars(err)) + repr(pickle.loads(pickle.dumps(err)))
    for secret in (CARD, CARD.replace(" ", ""), "1111", "5555555555554444"):
        assert secret not in everything
    assert "strategy='redact'" in str(err)


# -- agents ----------------------------------------------------------------------------------------------------
def test_every_human_message_is_redacted_in_state_and_request(run: Runner) -> None:
    model = ScriptedChatModel(["ok"])
    agent = create_agent(model, middleware=[PIIMiddleware("email")])
    history = [
        HumanMessage(f"I am {EMAIL}", id="h1"),
        AIMessage("noted", id="a1"),
        HumanMessage("and my colleague is bob@example.org", id="h2"),
    ]
    result = run(agent, {"messages": history})
    assert EMAIL not in sent_text(model) and "bob@example.org" not in sent_text(model)
    assert [m.content for m in result["messages"][:3]] == [
        "I am [REDACTED_EMAIL]",
        "noted",
        "and my colleague is [REDACTED_EMAIL]",
    ]
    assert [m.id for m in result["messages"][:3]] == ["h1", "a1", "h2"]


def test_ids_names_and_kwargs_are_preserved(run: Runner) -> None:
    model = ScriptedChatModel(["ok"])
    agent = create_agent(model, middleware=[PIIMiddleware("email")])
    message = HumanMessage(
        f"mail {EMAIL}", id="h1", name="alice", additional_kwargs={"k": 1}, response_metadata={"m": 2}
    )
    out = run(agent, {"messages": [message]})["messages"][0]
    assert (out.id, out.name, out.additional_kwargs, out.response_metadata) == ("h1", "alice", {"k": 1}, {"m": 2})
    assert out.content == "mail [REDACTED_EMAIL]"


def test_list_of_blocks_content_keeps_its_structure(run: Runner) -> None:
    model = ScriptedChatModel(["ok"])
    agent = create_agent(model, middleware=[PIIMiddleware("email")])
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    content: list[Any] = [{"type": "text", "text": f"mail {EMAIL}", "extra": True}, image, f"plain {EMAIL}"]
    out = run(agent, {"messages": [HumanMessage(content, id="h1")]})["messages"][0]
    assert out.content == [
        {"type": "text", "text": "mail [REDACTED_EMAIL]", "extra": True},
        image,
        "plain [REDACTED_EMAIL]",
    ]


def test_output_text_and_tool_call_arguments(run: Runner) -> None:
    seen: dict[str, Any] = {}

    @tool
    def lookup(address: str) -> str:
        """Look an address up."""
        seen["address"] = address
        return "found"

    model = ScriptedChatModel(
        [AIMessage(f"checking {EMAIL}", tool_calls=[tool_call("lookup", {"address": EMAIL})]), f"done: {EMAIL}"]
    )
    agent = create_agent(
        model, [lookup], middleware=[PIIMiddleware("email", apply_to_input=False, apply_to_output=True)]
    )
    result = run(agent, {"messages": [HumanMessage("go")]})
    ai = result["messages"][1]
    assert ai.content == "checking [REDACTED_EMAIL]"
    assert ai.tool_calls[0]["args"] == {"address": "[REDACTED_EMAIL]"}
    assert seen["address"] == "[REDACTED_EMAIL]"  # redact means redacted everywhere, the tool included
    assert result["messages"][-1].content == "done: [REDACTED_EMAIL]"
    assert EMAIL not in sent_text(model)


def test_tool_results(run: Runner) -> None:
    @tool
    def whois(name: str) -> str:
        """Find a person's address."""
        return f"{name} can be reached at {EMAIL}"

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("whois", {"name": "Jane"})]), "ok"])
    agent = create_agent(model, [whois], middleware=[PIIMiddleware("email", apply_to_tool_results=True)])
    result = run(agent, {"messages": [HumanMessage("find jane")]})
    tool_message = result["messages"][2]
    assert isinstance(tool_message, ToolMessage)
    assert tool_message.content == "Jane can be reached at [REDACTED_EMAIL]"
    assert tool_message.name == "whois" and tool_message.tool_call_id
    assert EMAIL not in sent_text(model)


def test_tool_results_are_not_scanned_by_default(run: Runner) -> None:
    @tool
    def whois(name: str) -> str:
        """Find a person's address."""
        return EMAIL

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("whois", {"name": "Jane"})]), "ok"])
    agent = create_agent(model, [whois], middleware=[PIIMiddleware("email")])
    assert run(agent, {"messages": [HumanMessage("find jane")]})["messages"][2].content == EMAIL


def test_block_in_an_agent(run: Runner) -> None:
    model = ScriptedChatModel(["never"])
    agent = create_agent(model, middleware=[PIIMiddleware("credit_card", strategy="block")])
    with pytest.raises(PIIDetectionError) as info:
        run(agent, {"messages": [HumanMessage(f"card {CARD}")]})
    assert CARD not in str(info.value) and info.value.where == "input"
    assert model.call_count == 0


def test_block_tool_result(run: Runner) -> None:
    @tool
    def leak() -> str:
        """Leaks a card."""
        return f"card {CARD}"

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("leak", {})]), "never"])
    agent = create_agent(
        model, [leak], middleware=[PIIMiddleware("credit_card", strategy="block", apply_to_tool_results=True)]
    )
    with pytest.raises(PIIDetectionError) as info:
        run(agent, {"messages": [HumanMessage("go")]})
    assert info.value.where == "tool_result" and CARD not in str(info.value)
    assert model.call_count == 1


def test_messages_added_to_the_request_are_covered(run: Runner) -> None:
    @modify_model_request
    def inject(request: Any, state: Any) -> Any:
        return request.override(messages=[*request.messages, HumanMessage(f"context: {EMAIL}")])

    model = ScriptedChatModel(["ok"])
    agent = create_agent(model, middleware=[inject, PIIMiddleware("email")])
    run(agent, {"messages": [HumanMessage("hi")]})
    assert EMAIL not in sent_text(model)
    assert "context: [REDACTED_EMAIL]" in sent_text(model)


def test_several_instances_and_progress_counts(mode: str) -> None:
    """Progress events come from guards that run inside a node (here: the tool's result); the graph input is
    guarded by the messages reducer, outside any node, where no stream writer exists."""

    @tool
    def lookup() -> str:
        """Look it up."""
        return f"{EMAIL} and bob@example.org from 10.0.0.7, see https://example.com"

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("lookup", {})]), "ok"])
    agent = create_agent(
        model,
        [lookup],
        middleware=[
            PIIMiddleware("email", apply_to_tool_results=True),
            PIIMiddleware("ip", strategy="mask", apply_to_tool_results=True),
            PIIMiddleware("url", apply_to_tool_results=True),
        ],
    )
    events = [e for e in stream_custom(agent, {"messages": [HumanMessage("go")]}, mode) if e.get("event") == "pii"]
    counts = {e["middleware"]: e["counts"] for e in events}
    assert counts == {
        "PIIMiddleware[email]": {"email": 2},
        "PIIMiddleware[ip]": {"ip": 1},
        "PIIMiddleware[url]": {"url": 1},
    }
    assert all(EMAIL not in repr(e) and "10.0.0.7" not in repr(e) for e in events)
    assert (
        model.calls[1].messages[-1].content == "[REDACTED_EMAIL] and [REDACTED_EMAIL] from *.*.*.7, see [REDACTED_URL]"
    )


def test_per_tenant_salt_from_context(run: Runner) -> None:
    @dataclass
    class Tenant:
        tenant_salt: str

    model = ScriptedChatModel([f"write to {EMAIL}"], cycle=True)
    mw = PIIMiddleware("email", strategy="hash", salt=lambda runtime: runtime.context.tenant_salt, apply_to_output=True)
    agent = create_agent(model, middleware=[mw], context_schema=Tenant)

    def answer(tenant: str) -> str:
        result = run(agent, {"messages": [HumanMessage(f"I am {EMAIL}")]}, context=Tenant(tenant))
        return str(result["messages"][1].content)

    a, a2, b = answer("a"), answer("a"), answer("b")
    assert a == a2 != b
    assert a.startswith("write to <email_hash:")
    assert a == "write to " + scrubbed(PIIMiddleware("email", strategy="hash", salt="a"), EMAIL)
    # The graph input is guarded before the run exists (no runtime, no tenant): its values are sealed under a
    # process-only key, then hashed with the tenant's salt by before_agent, the run's first step.
    saver = InMemorySaver()
    agent = create_agent(model, middleware=[mw], context_schema=Tenant, checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    first = run(agent, {"messages": [HumanMessage(f"I am {EMAIL}")]}, config=config, context=Tenant("a"))
    assert first["messages"][0].content == "I am " + scrubbed(PIIMiddleware("email", strategy="hash", salt="a"), EMAIL)
    assert EMAIL.encode() not in repr([saver.storage, saver.writes, saver.blobs]).encode()
    assert EMAIL not in sent_text(model)


# -- placeholders ----------------------------------------------------------------------------------------------
KEY = "test-deployment-key-0123456789abcdef"


def ph(value: str, pii_type: str = "email") -> str:
    """The placeholder of ``value`` under the test key."""
    return Keyring.of(KEY).name(pii_type, value)


def email_agent(model: ScriptedChatModel, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
    sent: dict[str, Any] = {}

    @tool
    def send_email(to: str, cc: list[str], body: str) -> str:
        """Send an email."""
        sent.setdefault("calls", []).append({"to": to, "cc": cc, "body": body})
        return f"sent to {to}"

    agent = create_agent(
        model,
        [send_email],
        middleware=[PIIMiddleware("email", strategy="placeholder", key=KEY, **kwargs)],
        checkpointer=InMemorySaver(),
    )
    return agent, sent


def test_placeholders_restored_in_tool_arguments(run: Runner) -> None:
    bob = "bob@example.org"
    model = ScriptedChatModel(
        [
            AIMessage(
                "",
                tool_calls=[tool_call("send_email", {"to": ph(EMAIL), "cc": [ph(bob)], "body": f"Hi {ph(EMAIL)}!"})],
            ),
            f"Sent to {ph(EMAIL)}.",
        ]
    )
    agent, sent = email_agent(model, apply_to_tool_results=True)
    config = {"configurable": {"thread_id": "t1"}}
    result = run(agent, {"messages": [HumanMessage(f"email {EMAIL}, cc {bob}")]}, config=config)

    assert model.calls[0].messages[0].content == f"email {ph(EMAIL)}, cc {ph(bob)}"
    assert re.fullmatch(r"<EMAIL_[0-9a-f]{8}>", ph(EMAIL)) and ph(EMAIL) != ph(bob)
    assert sent["calls"] == [{"to": EMAIL, "cc": [bob], "body": f"Hi {EMAIL}!"}]
    assert EMAIL not in sent_text(model) and bob not in sent_text(model) and "pii2." not in sent_text(model)
    assert result["messages"][2].content == f"sent to {ph(EMAIL)}"  # the tool echoed it; a placeholder again
    assert EMAIL not in repr(result) and bob not in repr(result)
    state = agent.get_state(config).values
    assert "pii_placeholders" not in state
    assert reveal(result["messages"][2].content, messages=state["messages"], key=KEY) == f"sent to {EMAIL}"


def test_placeholders_are_stable_within_a_thread_and_scoped_to_it(run: Runner) -> None:
    carol = "carol@example.com"
    model = ScriptedChatModel(
        [
            "ok",
            AIMessage("", tool_calls=[tool_call("send_email", {"to": ph(EMAIL), "cc": [], "body": "x"})]),
            "done",
            AIMessage("", tool_calls=[tool_call("send_email", {"to": ph(EMAIL), "cc": [], "body": "x"})]),
            "done",
        ]
    )
    agent, sent = email_agent(model)
    t1 = {"configurable": {"thread_id": "t1"}}
    run(agent, {"messages": [HumanMessage(f"I am {EMAIL}")]}, config=t1)
    run(agent, {"messages": [HumanMessage(f"again {EMAIL}, and {carol}")]}, config=t1)
    assert model.calls[1].messages[-1].content == f"again {ph(EMAIL)}, and {ph(carol)}"
    assert sent["calls"][0]["to"] == EMAIL

    run(agent, {"messages": [HumanMessage("no address here")]}, config={"configurable": {"thread_id": "t2"}})
    assert sent["calls"][1]["to"] == ph(EMAIL)  # another thread holds no sealed value: nothing to restore


def test_placeholder_model_output_is_scrubbed_and_restored(run: Runner) -> None:
    model = ScriptedChatModel(
        [AIMessage("", tool_calls=[tool_call("send_email", {"to": EMAIL, "cc": [], "body": "x"})]), "done"]
    )
    agent, sent = email_agent(model, apply_to_output=True)
    result = run(agent, {"messages": [HumanMessage("go")]}, config={"configurable": {"thread_id": "t"}})
    assert result["messages"][1].tool_calls[0]["args"]["to"] == ph(EMAIL)
    assert sent["calls"][0]["to"] == EMAIL
    assert result["messages"][2].content == f"sent to {ph(EMAIL)}"  # echoed: back to its placeholder


def test_placeholder_needs_a_key() -> None:
    with pytest.raises(
        MiddlewareConfigError, match=r"PIIMiddleware\[email\]: strategy='placeholder' needs key="
    ) as info:
        PIIMiddleware("email", strategy="placeholder")
    assert info.value.hook == "key" and isinstance(info.value, ValueError)
    with pytest.raises(MiddlewareConfigError, match="at least 32 bytes") as short:
        PIIMiddleware("email", strategy="placeholder", key="short")
    assert short.value.hook == "key"
    with pytest.raises(MiddlewareConfigError, match="only used by strategy='placeholder'"):
        PIIMiddleware("email", key=KEY)


def test_system_message_is_not_touched(run: Runner) -> None:
    model = ScriptedChatModel(["ok"])
    agent = create_agent(model, system_prompt="admin@corp.com", middleware=[PIIMiddleware("email")])
    run(agent, {"messages": [HumanMessage(EMAIL)]})
    assert isinstance(model.calls[0].messages[0], SystemMessage)
    assert model.calls[0].messages[0].content == "admin@corp.com"
    assert model.calls[0].messages[1].content == "[REDACTED_EMAIL]"


def test_tool_result_returned_as_a_command(run: Runner) -> None:
    @tool
    def profile(tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
        """Load the profile."""
        return Command(update={"messages": [ToolMessage(f"email: {EMAIL}", tool_call_id=tool_call_id)]})

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("profile", {})]), "ok"])
    agent = create_agent(model, [profile], middleware=[PIIMiddleware("email", apply_to_tool_results=True)])
    result = run(agent, {"messages": [HumanMessage("load")]})
    assert result["messages"][2].content == "email: [REDACTED_EMAIL]"
    assert EMAIL not in sent_text(model)


def test_block_output(run: Runner) -> None:
    model = ScriptedChatModel([f"her address is {EMAIL}"])
    agent = create_agent(
        model, middleware=[PIIMiddleware("email", strategy="block", apply_to_input=False, apply_to_output=True)]
    )
    with pytest.raises(PIIDetectionError) as info:
        run(agent, {"messages": [HumanMessage("who?")]})
    # blocked by the engine's message guard as soon as the model returned, before any wrap layer saw the message
    assert info.value.where == "output" and info.value.hook == "guard_messages"
    assert EMAIL not in str(info.value)


def test_hooks_can_be_called_directly() -> None:
    mw = PIIMiddleware("email", strategy="placeholder", key=KEY)
    guarded = mw.guard_messages([HumanMessage(f"hi {EMAIL}", id="h1")], None)
    assert guarded is not None
    assert guarded[0].content == f"hi {ph(EMAIL)}" and guarded[0].id == "h1"
    sealed = guarded[0].response_metadata["pii_vault"]
    assert list(sealed) == [ph(EMAIL)] and EMAIL not in repr(sealed)
    assert Keyring.of(KEY).open(sealed[ph(EMAIL)]) == EMAIL
    assert mw.guard_messages(guarded, None) is None  # idempotent
    assert mw.guard_messages([HumanMessage("nothing")], None) is None


def test_clean_texts_are_memoized_only_for_pure_detectors() -> None:
    messages = [HumanMessage("nothing to see here"), HumanMessage("still nothing")]
    calls: list[str] = []

    def blocklist(text: str) -> list[dict[str, Any]]:  # impure on purpose: the blocklist may change
        calls.append(text)
        return []

    custom = PIIMiddleware("secret", detector=blocklist)
    custom.guard_messages(messages, None)
    custom.guard_messages(messages, None)
    assert len(calls) == 4  # a custom function is asked every time

    builtin = PIIMiddleware("email")
    assert builtin.guard_messages(messages, None) is None
    assert builtin.detect("mail me at a@b.co")[0]["value"] == "a@b.co"  # memo holds clean texts only
    assert builtin.guard_messages([HumanMessage("write to x@y.org")], None) is not None


def test_memo_is_bounded_in_bytes_and_holds_no_text() -> None:
    mw = PIIMiddleware("email", memo_bytes=100_000)
    memo = mw._clean
    assert memo is not None
    for i in range(20_000):
        mw.detect(f"clean text number {i} " + "x" * 1000)  # 20 MB of clean text seen
    assert memo.bytes_used <= 100_000
    assert all(isinstance(d, bytes) and len(d) == 16 for d in memo._seen)
    assert PIIMiddleware("email", memo_bytes=0)._clean is None
    with pytest.raises(MiddlewareConfigError, match="memo_bytes") as info:
        PIIMiddleware("email", memo_bytes=-1)
    assert info.value.hook == "memo_bytes"


def test_a_tool_exception_gets_placeholders_back(run: Runner) -> None:
    from middleware_kit.middlewares.tool_error import ToolErrorMiddleware

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        err = ValueError(f"mailbox {to} is full")
        err.add_note(f"while sending to {to}")
        raise err

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("send_email", {"to": ph(EMAIL)})]), "sorry"])
    saver = InMemorySaver()
    agent = create_agent(
        model,
        [send_email],
        middleware=[ToolErrorMiddleware(str), PIIMiddleware("email", strategy="placeholder", key=KEY)],
        checkpointer=saver,
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    result = run(agent, {"messages": [HumanMessage(f"mail {EMAIL}")]}, config=config)
    assert EMAIL not in repr(result) and EMAIL not in sent_text(model)
    assert ph(EMAIL) in str(result["messages"][2].content)


def test_provider_raw_tool_call_json_is_scrubbed(run: Runner) -> None:
    raw = {
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "x", "arguments": f'{{"to": "{EMAIL}"}}'}}]
    }
    model = ScriptedChatModel([AIMessage(f"to {EMAIL}", additional_kwargs=raw)], default="done")

    @tool
    def x(to: str) -> str:
        """X."""
        return "ok"

    agent = create_agent(model, [x], middleware=[PIIMiddleware("email", apply_to_output=True)])
    result = run(agent, {"messages": [HumanMessage("hi")]})
    assert EMAIL not in repr(result)
    message = result["messages"][1]
    assert "[REDACTED_EMAIL]" in message.additional_kwargs["tool_calls"][0]["function"]["arguments"]
    assert message.tool_calls[0]["args"] == {"to": "[REDACTED_EMAIL]"}


def test_update_state_goes_through_the_guard() -> None:
    saver = InMemorySaver()
    agent = create_agent(ScriptedChatModel(["ok"]), middleware=[PIIMiddleware("email")], checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("hi")]}, config)
    agent.update_state(config, {"messages": [HumanMessage(f"late {EMAIL}")]})
    assert EMAIL not in repr(agent.get_state(config).values)
    assert EMAIL.encode() not in repr([saver.storage, saver.writes, saver.blobs]).encode()


def test_placeholders_of_a_custom_type_with_any_name(run: Runner) -> None:
    got: list[str] = []

    @tool
    def open_ticket(employee: str) -> str:
        """Open a ticket."""
        got.append(employee)
        return f"ticket for {employee}"

    name = Keyring.of(KEY).name("employee-id", "EMP-123456")
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("open_ticket", {"employee": name})]), "ok"])
    mw = PIIMiddleware("employee-id", detector=r"\bEMP-\d{6}\b", strategy="placeholder", key=KEY)
    agent = create_agent(model, [open_ticket], middleware=[mw], checkpointer=InMemorySaver())
    result = run(agent, {"messages": [HumanMessage("for EMP-123456")]}, config={"configurable": {"thread_id": "t"}})
    assert got == ["EMP-123456"] and "EMP-123456" not in repr(result)
