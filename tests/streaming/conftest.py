"""A chat model that streams token by token (pieces of a few characters, tool-call arguments in deltas), and every
stream surface of an agent collected as text, so a test can say: no chunk or event carries the secret, and the
text that was streamed is the text the final state holds."""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field, PrivateAttr

from tests.providers.conftest import _server, provider  # noqa: F401 (the provider double's fixtures, reused)

INPUT = {"messages": [HumanMessage("tell me")]}


class TokenModel(BaseChatModel):
    """Answers from a script; streams each answer in pieces of ``size`` characters (a value is split across tokens),
    then its tool calls as argument deltas of ``size`` characters. ``finished`` counts the completed answers."""

    answers: list[AIMessage] = Field(repr=False)
    size: int = 3
    _next: int = PrivateAttr(default=0)
    finished: int = 0

    @property
    def _llm_type(self) -> str:
        return "token-model"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _answer(self) -> AIMessage:
        answer = self.answers[self._next % len(self.answers)]
        self._next += 1
        return answer

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        answer = self._answer()
        self.finished += 1
        return ChatResult(generations=[ChatGeneration(message=answer)])

    def _pieces(self, answer: AIMessage) -> Iterator[AIMessageChunk]:
        text = answer.text
        for i in range(0, len(text), self.size):
            yield AIMessageChunk(content=text[i:i + self.size])
        for index, call in enumerate(answer.tool_calls):
            args = json.dumps(call["args"])
            yield AIMessageChunk(content="", tool_call_chunks=[
                {"name": call["name"], "args": "", "id": call["id"], "index": index, "type": "tool_call_chunk"}])
            for i in range(0, len(args), self.size):
                yield AIMessageChunk(content="", tool_call_chunks=[
                    {"name": None, "args": args[i:i + self.size], "id": None, "index": index,
                     "type": "tool_call_chunk"}])

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        for piece in self._pieces(self._answer()):
            yield ChatGenerationChunk(message=piece)
        self.finished += 1

    async def _astream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                       run_manager: AsyncCallbackManagerForLLMRun | None = None,
                       **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        for piece in self._pieces(self._answer()):
            yield ChatGenerationChunk(message=piece)
            await asyncio.sleep(0)
        self.finished += 1


# -- the stream surfaces -------------------------------------------------------------------------------------------
MODES: list[Any] = ["messages", "updates", "values", "custom", "debug",
                    ["messages", "updates", "values", "custom", "debug"]]
SURFACES = [
    *(f"stream:{m if isinstance(m, str) else 'all'}" for m in MODES),
    "stream:messages+subgraphs",
    "astream:messages", "astream:all", "astream:messages+subgraphs",
    "astream_events:v2",
    "stream_events:v3", "astream_events:v3",
]


def _mode(name: str) -> tuple[Any, bool]:
    mode = name.split(":")[1]
    subgraphs = mode.endswith("+subgraphs")
    mode = mode.removesuffix("+subgraphs")
    return (MODES[-1] if mode == "all" else mode), subgraphs


def collect(agent: Any, surface: str, inp: Any = None) -> list[Any]:
    """Every item ``surface`` yields for one run of ``agent``."""
    inp = INPUT if inp is None else inp
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the v3 protocol is beta
        if surface.startswith("stream:"):
            mode, subgraphs = _mode(surface)
            return list(agent.stream(inp, stream_mode=mode, subgraphs=subgraphs))
        if surface == "stream_events:v3":
            return list(agent.stream_events(inp, version="v3"))
        return asyncio.run(_acollect(agent, surface, inp))


async def _acollect(agent: Any, surface: str, inp: Any) -> list[Any]:
    if surface.startswith("astream:"):
        mode, subgraphs = _mode(surface)
        return [item async for item in agent.astream(inp, stream_mode=mode, subgraphs=subgraphs)]
    if surface == "astream_events:v2":
        return [event async for event in agent.astream_events(inp, version="v2")]
    run = await agent.astream_events(inp, version="v3")
    return [event async for event in run]


def streamed_text(surface: str, items: list[Any]) -> str | None:
    """The answer's text as the token surface of ``surface`` shows it (None: a surface without tokens)."""
    if surface.startswith(("stream:messages", "astream:messages")):
        chunks = [item[-1][0] if surface.endswith("subgraphs") else item[0] for item in items]
        return "".join(c.text for c in chunks if isinstance(c, AIMessageChunk))
    if surface == "astream_events:v2":
        return "".join(e["data"]["chunk"].text for e in items if e["event"] == "on_chat_model_stream")
    if surface.endswith(":v3"):
        finished = [e["params"]["data"][0] for e in items if e.get("method") == "messages"
                    and isinstance(e["params"]["data"][0], dict)
                    and e["params"]["data"][0].get("event") == "content-block-finish"
                    and e["params"]["data"][0]["content"].get("type") == "text"]
        return "".join(f["content"]["text"] for f in finished)
    return None


def model_end_text(items: list[Any]) -> list[str]:
    """``astream_events`` v2: the text of every ``on_chat_model_end`` output."""
    return [e["data"]["output"].text for e in items if e["event"] == "on_chat_model_end"]
