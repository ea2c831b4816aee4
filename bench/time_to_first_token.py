"""Stream hold-back: time to first token with each vetting middleware, against no guard, in the same run.

``.venv/bin/python -m bench.time_to_first_token [--quick] [--rounds R] [--token-ms T] [--tokens N]``

One agent turn = one model call that streams an answer of ``N`` tokens (default 40, 4 characters each), one token
every ``T`` ms (default 5; ``time.sleep`` under ``stream``, ``asyncio.sleep`` under ``astream``), read with
``stream_mode="messages"``. Subjects, taking turns within each round (machine noise hits all of them):

- **none**: no middleware (the baseline: the first token arrives after about one token's time);
- **pii**: ``PIIMiddleware("email", apply_to_output=True)``: a window of 128 characters (the first text arrives
  once 128 characters more have been streamed, i.e. after about 32 tokens here);
- **guardrails**: ``GuardrailsMiddleware(output_guards=[...])``: the whole message waits for the guard;
- **moderation**: ``ModerationMiddleware`` checking output: the whole message;
- **refusal**: ``ModelRefusalMiddleware``: the whole message.

Before timing, each subject's streamed text is checked against its final state. Printed per mode: the median time
to the first text chunk (TTFT) and to the end of the turn, in ms, and TTFT / TTFT(none) and TTFT / turn. A
``"message"`` hold-back makes TTFT about the whole turn; a window makes it about ``window / chars per token``
tokens. Nothing here is asserted by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

from middleware_kit import create_agent
from middleware_kit.middlewares.guardrails import GuardrailsMiddleware
from middleware_kit.middlewares.model_refusal import ModelRefusalMiddleware
from middleware_kit.middlewares.moderation import KeywordModerationChecker, ModerationMiddleware
from middleware_kit.middlewares.pii import PIIMiddleware

__all__ = ["SUBJECTS", "format_ttft", "run_ttft"]

SUBJECTS = ("none", "pii", "guardrails", "moderation", "refusal")
INPUT = {"messages": [HumanMessage("tell me a story")]}


class PacedModel(BaseChatModel):
    """Streams ``tokens`` tokens of four characters, one every ``delay`` seconds, like a provider."""

    tokens: int = 40
    delay: float = 0.005

    @property
    def _llm_type(self) -> str:
        return "paced"

    def _text(self) -> list[str]:
        return [f"w{i:02d} " for i in range(self.tokens)]

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage("".join(self._text())))])

    def _stream(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        for piece in self._text():
            time.sleep(self.delay)
            yield ChatGenerationChunk(message=AIMessageChunk(content=piece))

    async def _astream(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                       **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        for piece in self._text():
            await asyncio.sleep(self.delay)
            yield ChatGenerationChunk(message=AIMessageChunk(content=piece))


def _passes(request: Any, answer: AIMessage) -> None:
    return None


def build(subject: str, tokens: int, delay: float) -> Any:
    middleware: dict[str, Any] = {
        "none": [],
        "pii": [PIIMiddleware("email", apply_to_output=True)],
        "guardrails": [GuardrailsMiddleware(output_guards=[_passes])],
        "moderation": [ModerationMiddleware(KeywordModerationChecker(["forbidden-word"]), check_input=False)],
        "refusal": [ModelRefusalMiddleware()],
    }
    return create_agent(PacedModel(tokens=tokens, delay=delay), middleware=middleware[subject])


def _sync_turn(agent: Any) -> tuple[float, float, str]:
    started = time.perf_counter()
    first = 0.0
    text = ""
    for chunk, _ in agent.stream(INPUT, stream_mode="messages"):
        if isinstance(chunk, AIMessageChunk) and chunk.text:
            first = first or time.perf_counter() - started
            text += chunk.text
    return first * 1000, (time.perf_counter() - started) * 1000, text


async def _async_turn(agent: Any) -> tuple[float, float, str]:
    started = time.perf_counter()
    first = 0.0
    text = ""
    async for chunk, _ in agent.astream(INPUT, stream_mode="messages"):
        if isinstance(chunk, AIMessageChunk) and chunk.text:
            first = first or time.perf_counter() - started
            text += chunk.text
    return first * 1000, (time.perf_counter() - started) * 1000, text


def turn(agent: Any, mode: str) -> tuple[float, float, str]:
    return _sync_turn(agent) if mode == "stream" else asyncio.run(_async_turn(agent))


def run_ttft(rounds: int = 9, tokens: int = 40, token_ms: float = 5.0) -> dict[str, dict[str, tuple[float, float]]]:
    """``{mode: {subject: (median TTFT ms, median turn ms)}}``; raises SystemExit when a subject streams a text
    other than its final answer."""
    results: dict[str, dict[str, tuple[float, float]]] = {}
    for mode in ("stream", "astream"):
        agents = {name: build(name, tokens, token_ms / 1000) for name in SUBJECTS}
        expected = "".join(f"w{i:02d} " for i in range(tokens))
        for name, agent in agents.items():  # warm-up, and the check that each subject streams the answer
            _, _, text = turn(agent, mode)
            if text != expected:
                raise SystemExit(f"{name} ({mode}): streamed {text[:60]!r}..., expected the model's answer")
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in agents}
        for _ in range(rounds):
            for name, agent in agents.items():
                first, total, _ = turn(agent, mode)
                times[name].append((first, total))
        results[mode] = {name: (statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts))
                         for name, ts in times.items()}
    return results


def format_ttft(results: dict[str, dict[str, tuple[float, float]]]) -> str:
    header = f"{'mode':<8}{'subject':<12}{'TTFT ms':>9}{'turn ms':>9}{'TTFT/none':>11}{'TTFT/turn':>11}"
    lines = ["time to first token (stream_mode='messages'), medians", header, "-" * len(header)]
    for mode, subjects in results.items():
        base = subjects["none"][0]
        for name, (first, total) in subjects.items():
            lines.append(f"{mode:<8}{name:<12}{first:>9.1f}{total:>9.1f}{first / base:>11.1f}{first / total:>11.2f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--token-ms", type=float, default=5.0)
    args = parser.parse_args()
    print(f"{args.tokens} tokens of 4 characters, one every {args.token_ms:g} ms")
    print(format_ttft(run_ttft(3 if args.quick else args.rounds, args.tokens, args.token_ms)))


if __name__ == "__main__":
    main()
