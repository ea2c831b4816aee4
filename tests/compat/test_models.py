"""Model strings (``middleware_kit.models.resolve_model``): resolved through a provider package found on a real
import path. The provider packages here are fakes written to a temporary directory put on ``sys.path``; nothing is
mocked in middleware_kit."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage

from middleware_kit import MiddlewareConfigError, create_agent
from middleware_kit.middlewares.fallback import ModelFallbackMiddleware
from middleware_kit.middlewares.summarization import SummarizationMiddleware, is_summary
from middleware_kit.models import PROVIDERS, infer_provider, parse_model_string, resolve_model
from middleware_kit.testing import ScriptedChatModel
from tests.conftest import Runner

FAKE_MISTRAL = '''
from middleware_kit.testing import ScriptedChatModel

constructed = []


class ChatMistralAI(ScriptedChatModel):
    """Stands in for langchain_mistralai.ChatMistralAI."""

    model: str = "unset"
    temperature: float | None = None

    def __init__(self, **kwargs):
        constructed.append(dict(kwargs))
        super().__init__(["summary from mistral", "answer from mistral"], cycle=True, **kwargs)
'''


def install_fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, source: str) -> None:
    """A real package ``module`` on ``sys.path`` (removed again after the test)."""
    package = tmp_path / module
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.delitem(sys.modules, module, raising=False)


@pytest.fixture
def mistral(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    install_fake(tmp_path, monkeypatch, "langchain_mistralai", FAKE_MISTRAL)
    yield
    sys.modules.pop("langchain_mistralai", None)


@pytest.mark.usefixtures("mistral")
@pytest.mark.parametrize(
    ("spec", "kwargs", "model"),
    [
        ("mistralai:mistral-large-latest", {}, "mistral-large-latest"),
        ("mistral-large-latest", {}, "mistral-large-latest"),  # provider inferred from the prefix
        ("MistralAI:codestral", {"temperature": 0.2}, "codestral"),  # provider names are case-insensitive
        ("my-finetune", {"model_provider": "mistralai"}, "my-finetune"),
    ],
)
def test_a_model_string_resolves_through_its_provider_package(spec: str, kwargs: dict[str, Any], model: str) -> None:
    assert "langchain_mistralai" not in sys.modules  # imported only when a string names it
    chat = resolve_model(spec, **kwargs)
    fake = sys.modules["langchain_mistralai"]
    assert type(chat).__name__ == "ChatMistralAI" and isinstance(chat, fake.ChatMistralAI)
    assert chat.model == model
    expected = {"model": model, **{k: v for k, v in kwargs.items() if k != "model_provider"}}
    assert fake.constructed == [expected]


def test_an_instance_is_returned_as_it_is() -> None:
    model = ScriptedChatModel([])
    assert resolve_model(model) is model
    with pytest.raises(MiddlewareConfigError, match="keyword arguments"):
        resolve_model(model, temperature=0)


@pytest.mark.parametrize(
    ("spec", "package"),
    [
        ("groq:llama-3.1-8b-instant", "langchain-groq"),
        ("fireworks:accounts/fireworks/models/llama", "langchain-fireworks"),
        ("command-r", "langchain-cohere"),  # provider inferred from the prefix
        ("grok-4", "langchain-xai"),
        ("google_genai:gemini-2.5-flash", "langchain-google-genai"),
        ("ollama:llama3:8b", "langchain-ollama"),  # only the first ':' separates the provider
        ("bedrock:anthropic.claude-3-haiku", "langchain-aws"),
    ],
)
def test_a_missing_provider_package_is_named(spec: str, package: str) -> None:
    module = package.replace("-", "_")
    with pytest.raises(MiddlewareConfigError) as err:
        resolve_model(spec)
    assert str(err.value).startswith(f"Unable to import {module}. Please install with `pip install -U {package}`")
    assert (err.value.middleware, err.value.hook) == ("resolve_model", "model")
    assert isinstance(err.value, ValueError)


def test_an_unknown_provider_or_name_says_what_to_write() -> None:
    with pytest.raises(MiddlewareConfigError) as err:
        resolve_model("my-own-model")
    assert str(err.value).startswith(
        "Unable to infer model provider for model='my-own-model'. Please specify 'model_provider' directly."
    )
    assert "'openai:my-own-model'" in str(err.value)
    with pytest.raises(MiddlewareConfigError, match=r"^Unsupported model_provider='acme'"):
        resolve_model("x", model_provider="acme")
    with pytest.raises(MiddlewareConfigError, match="model name is empty"):
        resolve_model("openai:")
    with pytest.raises(MiddlewareConfigError, match="needs a model string"):
        resolve_model(42)  # type: ignore[arg-type]


def test_a_package_without_the_chat_model_class_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake(tmp_path, monkeypatch, "langchain_groq", "ChatGroq = object\n")
    try:
        with pytest.raises(MiddlewareConfigError, match=r"langchain_groq.ChatGroq is not a chat model class"):
            resolve_model("groq:llama-3.1-8b-instant")
    finally:
        sys.modules.pop("langchain_groq", None)


@pytest.mark.parametrize(
    ("name", "provider"),
    [
        ("gpt-4o", "openai"), ("o3-mini", "openai"), ("chatgpt-4o-latest", "openai"), ("claude-3-5-haiku", "anthropic"),
        ("gemini-2.5-pro", "google_vertexai"), ("command-r", "cohere"), ("mistral-small", "mistralai"),
        ("deepseek-chat", "deepseek"), ("grok-4", "xai"), ("amazon.nova-pro-v1:0", "bedrock"), ("llama3", None),
    ],
)
def test_prefix_inference_like_langchain(name: str, provider: str | None) -> None:
    assert infer_provider(name) == provider


def test_parse_and_provider_table() -> None:
    assert parse_model_string("openai:gpt-4o") == ("openai", "gpt-4o")
    assert parse_model_string("azure-openai:my-deployment") == ("azure_openai", "my-deployment")
    assert parse_model_string("gpt-4o", "groq") == ("groq", "gpt-4o")
    assert PROVIDERS["bedrock"].model_argument == "model_id" and PROVIDERS["google_genai"].package == (
        "langchain-google-genai")
    with pytest.raises(TypeError):
        PROVIDERS["acme"] = PROVIDERS["openai"]  # type: ignore[index]


@pytest.mark.usefixtures("mistral")
def test_summarization_and_fallback_take_model_strings(run: Runner) -> None:
    mw = SummarizationMiddleware("mistralai:mistral-small", trigger=("messages", 3), keep=("messages", 1))
    assert type(mw.model).__name__ == "ChatMistralAI"
    history = [HumanMessage("q0"), AIMessage("a0"), HumanMessage("q1")]
    result = run(create_agent(ScriptedChatModel(["final"]), middleware=[mw]), {"messages": history})
    assert is_summary(result["messages"][0]) and result["messages"][0].content.endswith("summary from mistral")

    fallback = ModelFallbackMiddleware("mistralai:mistral-large-latest")
    agent = create_agent(ScriptedChatModel([ConnectionError("down")]), middleware=[fallback])
    assert run(agent, {"messages": [HumanMessage("hi")]})["messages"][-1].content == "summary from mistral"


@settings(max_examples=300, deadline=None)
@given(spec=st.text(max_size=40), provider=st.one_of(st.none(), st.text(max_size=12)))
def test_any_model_string_resolves_or_raises_a_config_error(spec: str, provider: str | None) -> None:
    """Without the provider package, every string ends in a MiddlewareConfigError (never another error)."""
    kwargs = {} if provider is None else {"model_provider": provider}
    try:
        name, _ = parse_model_string(spec, provider)
    except MiddlewareConfigError:
        name = None
    # A provider package installed on this machine would build a real model: those strings are out of scope here.
    assume(name is None or importlib.util.find_spec(PROVIDERS[name].module.split(".")[0]) is None)
    with pytest.raises(MiddlewareConfigError) as err:
        resolve_model(spec, **kwargs)
    assert isinstance(err.value, ValueError) and err.value.middleware == "resolve_model"
