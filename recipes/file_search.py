"""Let the agent search a code base, and nothing else on the machine.

What it shows
    ``FilesystemFileSearchMiddleware(root_path=...)`` over a small repository that also contains a symlink to a
    directory outside it (as checkouts and build trees often do). The scripted model globs for Python files, greps
    for ``TODO`` with line numbers, then tries to read outside the root three ways (``..``, an absolute host path and
    the symlink). The recipe checks the findings and that every escape was refused (the model reads an empty
    result, the application gets the reason in the tool's event), and prints the tools' events.

When to use it
    Code-review, support and documentation agents that must find things in one tree without shell access.

Run it: ``python recipes/file_search.py``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage

from middleware_kit import create_agent
from middleware_kit.middlewares.file_search import FilesystemFileSearchMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="recipe_search_"))
    (base / "private").mkdir()
    (base / "private" / "credentials.txt").write_text("TODO rotate: password=hunter2\n")
    repo = base / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "api.py").write_text("def handler():\n    # TODO validate input\n    return 200\n")
    (repo / "src" / "db.py").write_text("def connect():\n    return None\n")
    (repo / "README.md").write_text("# Repo\n\nTODO write docs\n")
    os.symlink(base / "private", repo / "shared")

    calls = [
        tool_call("glob_search", {"pattern": "**/*.py"}, id="glob"),
        tool_call("grep_search", {"pattern": "TODO", "output_mode": "content"}, id="todo"),
        tool_call("grep_search", {"pattern": "password", "path": "../private"}, id="dotdot"),
        tool_call("grep_search", {"pattern": "password", "path": str(base / "private")}, id="absolute"),
        tool_call("glob_search", {"pattern": "*", "path": "/shared"}, id="symlink"),
    ]
    model = ScriptedChatModel([AIMessage("", tool_calls=calls), "Two TODOs: api.py and README.md."])
    agent = create_agent(model, middleware=[FilesystemFileSearchMiddleware(root_path=str(repo))])
    events = []
    final = None
    for mode, chunk in agent.stream({"messages": [HumanMessage("What is left to do?")]},
                                    stream_mode=["custom", "values"]):
        if mode == "custom":
            events.append(chunk)
            print("event:", chunk)
        else:
            final = chunk
    assert final is not None
    answers = {m.tool_call_id: m.content for m in final["messages"] if m.type == "tool"}
    assert sorted(answers["glob"].splitlines()) == ["/src/api.py", "/src/db.py"]
    assert sorted(answers["todo"].splitlines()) == [
        "/README.md:3:TODO write docs",
        "/src/api.py:2:    # TODO validate input",
    ]
    # As in LangChain, the model reads an empty result for a path it may not search; the reason goes to the
    # application, in the tool's event.
    assert (answers["dotdot"], answers["absolute"], answers["symlink"]) == (
        "No matches found", "No matches found", "No files found")
    refused = " | ".join(sorted(e["refused"] for e in events if "refused" in e))  # parallel calls: any order
    assert "outside the search root" in refused and "does not exist" in refused
    assert "directory symlink" in refused
    assert "hunter2" not in str(final) and len(events) == 5
    print("OK: found 2 files and 2 TODOs; 3 escape attempts refused")


if __name__ == "__main__":
    main()
