"""ModelRefusalMiddleware: a provider's explicit refusal raises ModelRefusalError instead of ending the run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.exceptions import ModelRefusalError
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel

from middleware_kit import MiddlewareConfigError, create_agent
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares.fallback import ModelFallbackMiddleware
from middleware_kit.middlewares.model_refusal import ModelRefusalMiddleware, find_refusal
from middleware_kit.middlewares.retry import ModelRetryMiddleware
from middleware_kit.testing import ScriptedChatModel
from tests.conftest import Runner

Q = {"messages": [HumanMessage("Write the exploit.")]}

STANDARD = AIMessage(content=[{"type": "refusal", "refusal": "I can't help with that."}])
ANTHROPIC = AIMessage(content="", response_metadata={"stop_reason": "refusal", "model_provider": "anthropic"})
OPENAI = AIMessage(
    content=[{"type": "text", "text": ""}],
    additional_kwargs={"refusal": "I'm sorry, I can't assist with that request."},
    response_metadata={"model_provider": "openai"},
)
CATEGORIZED = AIMessage(content=[{"type": "refusal", "refusal": "No.", "extras": {"category": "cyber"}}])


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (STANDARD, "Model refused to produce the requested output: I can't help with that."),
        (ANTHROPIC, "Model refused to produce the requested output"),
        (OPENAI, "Model refused to produce the requested output: I'm sorry, I can't assist with that request."),
        (CATEGORIZED, "Model refused to produce the requested output (category='cyber'): No."),
    ],
    ids=["standard block", "anthropic stop_reason", "openai refusal field", "with category"],
)
def test_a_refusal_raises_model_refusal_error(run: Runner, reply: AIMessage, message: str) -> None:
    agent = create_agent(ScriptedChatModel([reply]), middleware=[ModelRefusalMiddleware()])
    with pytest.raises(ModelRefusalError) as err:
        run(agent, Q)
    assert str(err.value) == message
    assert isinstance(err.value.raw_message, AIMessage) and err.value.raw_message.content == reply.content
    assert err.value.is_retryable is False


@pytest.mark.parametrize(
    "reply",
    ["I can't help with that.", AIMessage(content=[{"type": "text", "text": "Sure, here you go."}])],
    ids=["refusal in prose", "text blocks"],
)
def test_answers_are_never_refusals_even_when_they_decline_in_prose(run: Runner, reply: Any) -> None:
    result = run(create_agent(ScriptedChatModel([reply]), middleware=[ModelRefusalMiddleware()]), Q)
    assert isinstance(result["messages"][-1], AIMessage)
    assert find_refusal(result["messages"][-1]) is None


def test_without_the_middleware_a_refusal_is_a_final_answer(run: Runner) -> None:
    result = run(create_agent(ScriptedChatModel([STANDARD])), Q)
    assert find_refusal(result["messages"][-1]) == {"type": "refusal", "refusal": "I can't help with that."}


def test_an_outer_fallback_catches_the_refusal_and_the_event_comes_first(mode: str) -> None:
    backup = ScriptedChatModel(["A safer answer."])
    agent = create_agent(
        ScriptedChatModel([CATEGORIZED]), middleware=[ModelFallbackMiddleware(backup), ModelRefusalMiddleware()]
    )
    if mode == "invoke":
        chunks: list[Any] = list(agent.stream(Q, stream_mode=["custom", "values"]))
    else:

        async def go() -> list[Any]:
            return [c async for c in agent.astream(Q, stream_mode=["custom", "values"])]

        chunks = asyncio.run(go())
    events = [data for kind, data in chunks if kind == "custom"]
    assert [e["event"] for e in events] == ["model_refused", "fallback"]
    assert events[0] == {
        "event": "model_refused",
        "middleware": "ModelRefusalMiddleware",
        "refusal": "No.",
        "category": "cyber",
    }
    final = [data for kind, data in chunks if kind == "values"][-1]
    assert final["messages"][-1].content == "A safer answer." and backup.call_count == 1


def test_a_retry_outside_does_not_retry_a_refusal(run: Runner) -> None:
    model = ScriptedChatModel([STANDARD, "would be the retry"])
    agent = create_agent(
        model,
        middleware=[
            ModelRetryMiddleware(max_retries=3, on_failure="error", jitter=False, initial_delay=0),
            ModelRefusalMiddleware(),
        ],
    )
    with pytest.raises(ModelRefusalError):
        run(agent, Q)
    assert model.call_count == 1


def test_a_refusal_leaves_the_thread_usable_and_is_not_committed(run: Runner) -> None:
    model = ScriptedChatModel([STANDARD, "Happy to help with something else."])
    agent = create_agent(model, middleware=[ModelRefusalMiddleware()], checkpointer=InMemorySaver())
    cfg: RunnableConfig = {"configurable": {"thread_id": "t"}}
    with pytest.raises(ModelRefusalError):
        run(agent, Q, config=cfg)
    messages = agent.get_state(cfg).values["messages"]
    assert [type(m).__name__ for m in messages] == ["HumanMessage"]  # the refusing message never reached state
    result = run(agent, {"messages": [HumanMessage("Something else then.")]}, config=cfg)
    assert result["messages"][-1].content == "Happy to help with something else."


def test_configuration_is_frozen_and_replace_works(run: Runner) -> None:
    mw = ModelRefusalMiddleware()
    create_agent(ScriptedChatModel(["ok"]), middleware=[mw])  # adopted: read-only from now on
    with pytest.raises(FrozenMiddlewareError, match="cannot set 'strict'"):
        mw.strict = True
    copy = mw.replace()
    assert copy is not mw and isinstance(copy, ModelRefusalMiddleware)
    with pytest.raises(ModelRefusalError):
        run(create_agent(ScriptedChatModel([STANDARD]), middleware=[copy]), Q)
    with pytest.raises(MiddlewareConfigError, match=r"replace\(\) got unknown argument\(s\) \['strict'\]"):
        mw.replace(strict=True)


def test_one_instance_serves_concurrent_runs_in_isolation() -> None:
    from concurrent.futures import ThreadPoolExecutor

    def reply(messages: list[Any]) -> AIMessage | str:
        text = str(messages[-1].content)
        return STANDARD if text.startswith("refuse") else f"ok {text}"

    agent = create_agent(ScriptedChatModel([reply], cycle=True), middleware=[ModelRefusalMiddleware()])

    def ask(i: int) -> dict[str, Any]:
        return {"messages": [HumanMessage(f"refuse {i}" if i % 3 == 0 else f"fine {i}")]}

    async def one(i: int) -> Any:
        try:
            return await agent.ainvoke(ask(i))
        except ModelRefusalError as exc:
            return exc

    def sync_one(i: int) -> Any:
        try:
            return agent.invoke(ask(i))
        except ModelRefusalError as exc:
            return exc

    async def many(ids: list[int]) -> list[Any]:
        return list(await asyncio.gather(*(one(i) for i in ids)))

    with ThreadPoolExecutor(4) as pool:
        threaded = {i: pool.submit(sync_one, i) for i in range(0, 24, 2)}
        gathered = dict(zip(range(1, 24, 2), asyncio.run(many(list(range(1, 24, 2)))), strict=True))
        results = {i: f.result() for i, f in threaded.items()} | gathered
    for i, result in results.items():
        if i % 3 == 0:
            assert isinstance(result, ModelRefusalError), i
        else:
            assert result["messages"][-1].content == f"ok fine {i}", i


def test_a_refusal_that_fails_native_structured_output_is_a_refusal(run: Runner) -> None:
    from middleware_kit.structured_output import ProviderStrategy, StructuredOutputValidationError

    class Answer(BaseModel):
        text: str

    refusal = AIMessage(content=[], response_metadata={"model_provider": "anthropic", "stop_reason": "refusal"})
    plain = create_agent(ScriptedChatModel([refusal]), response_format=ProviderStrategy(Answer))
    with pytest.raises(StructuredOutputValidationError):
        run(plain, Q)
    guarded = create_agent(ScriptedChatModel([refusal]), response_format=ProviderStrategy(Answer),
                           middleware=[ModelRefusalMiddleware()])
    with pytest.raises(ModelRefusalError):
        run(guarded, Q)
