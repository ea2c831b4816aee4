"""FilesystemFileSearchMiddleware: glob and grep confined to a root; every test here tries to get out of it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from middleware_kit import create_agent
from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares.file_search import FilesystemFileSearchMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner

SECRET = "TOPSECRET-outside-the-root"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """``root/`` with code, a big file, a binary file and hostile symlinks; ``outside/`` holds the secret."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET}\nasync def stolen(): pass\n")
    root = tmp_path / "root"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "a.py").write_text("import os\n\nasync def fetch():\n    return 1\n")
    (root / "src" / "pkg" / "b.py").write_text("def sync():\n    pass\nasync def other():\n    pass\n")
    (root / "notes.md").write_text("async def in markdown\n")
    (root / "big.log").write_bytes(b"async def hidden_in_big_file\n" + b"x" * (2 * 1024 * 1024))
    (root / "blob.bin").write_bytes(b"\x00\x01async def in binary\n")
    (root / "link_out_file.py").symlink_to(outside / "secret.txt")
    (root / "link_out_dir").symlink_to(outside, target_is_directory=True)
    (root / "loop").symlink_to(root / "loop")
    (root / "src" / "up").symlink_to(root, target_is_directory=True)  # a directory loop
    (root / "inside_link.py").symlink_to(root / "src" / "a.py")
    return root


def search(root: Path, **kwargs: object) -> FilesystemFileSearchMiddleware:
    options: dict[str, object] = {"max_file_size_mb": 1, **kwargs}
    return FilesystemFileSearchMiddleware(root_path=str(root), **options)  # type: ignore[arg-type]


def test_glob_and_grep_through_an_agent(tree: Path, run: Runner) -> None:
    model = ScriptedChatModel([
        AIMessage("", tool_calls=[
            tool_call("glob_search", {"pattern": "**/*.py"}, id="g"),
            tool_call("grep_search", {"pattern": r"async def \w+", "include": "*.py", "output_mode": "content"},
                      id="r"),
        ]),
        "found them",
    ])
    result = run(create_agent(model, middleware=[search(tree)]), {"messages": [HumanMessage("find async code")]})
    answers = {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}
    assert sorted(answers["g"].content.splitlines()) == ["/inside_link.py", "/src/a.py", "/src/pkg/b.py"]
    assert sorted(answers["r"].content.splitlines()) == [
        "/inside_link.py:3:async def fetch():",
        "/src/a.py:3:async def fetch():",
        "/src/pkg/b.py:3:async def other():",
    ]
    assert SECRET not in str(result) and "stolen" not in str(result)


def test_glob_orders_newest_first_and_supports_braces(tree: Path) -> None:
    mw = search(tree)
    old = time.time() - 1000
    os.utime(tree / "src" / "a.py", (old, old))
    assert mw.glob("src/**/*.{py,md}").splitlines() == ["/src/pkg/b.py", "/src/a.py"]
    assert mw.glob("*.md", path="/") == "/notes.md"
    assert mw.glob("*.py", path="/src/pkg") == "/src/pkg/b.py"
    assert mw.glob("*.rs") == "No files found"


@pytest.mark.parametrize(
    "path",
    ["..", "../outside", "/../outside", "src/../../outside", "src/../..", "./../outside/secret.txt", "..\\outside"],
)
def test_dot_dot_is_refused(tree: Path, path: str) -> None:
    mw = search(tree)
    assert mw.glob("*", path=path) == "No files found"
    assert mw.grep("TOPSECRET", path=path) == "No matches found"


def test_absolute_paths_are_inside_the_root(tree: Path) -> None:
    mw = search(tree)
    outside = str(tree.parent / "outside")
    assert mw.grep("TOPSECRET", path=outside) == "No matches found"  # read as <root>/<that path>: not there
    assert mw.glob("*", path="/etc") == "No files found"
    assert mw.glob("/src/*.py") == "/src/a.py"  # a leading slash in a pattern means the root


def test_symlinks_out_of_the_root_are_never_followed(tree: Path) -> None:
    mw = search(tree)
    for mode in ("files_with_matches", "content", "count"):
        assert mw.grep("TOPSECRET|stolen", output_mode=mode) == "No matches found"  # type: ignore[arg-type]
    assert "link_out" not in mw.glob("**/*")
    assert mw.grep("x", path="/link_out_dir") == "No matches found"
    assert mw.grep("x", path="/link_out_file.py") == "No matches found"
    assert mw.glob("*", path="/src/up") == "No files found"


def test_symlink_loops_terminate(tree: Path) -> None:
    mw = search(tree)
    listing = mw.glob("**/*").splitlines()  # returns at all (pytest-timeout guards a loop)
    assert "/loop" not in listing and not any(p.startswith("/src/up/") for p in listing)
    assert mw.grep("anything") == "No matches found"


def test_big_and_binary_files_are_skipped(tree: Path) -> None:
    mw = search(tree)
    assert mw.grep("hidden_in_big_file") == "No matches found"
    assert mw.grep("in binary") == "No matches found"
    bigger = search(tree, max_file_size_mb=5)
    assert bigger.grep("hidden_in_big_file") == "/big.log"


def test_catastrophic_regex_is_stopped_by_the_time_budget(tree: Path) -> None:
    (tree / "evil.txt").write_text("a" * 40 + "!\n")
    mw = search(tree, search_timeout=0.5)
    answer = mw.grep(r"(a|aa)+$", path="/evil.txt")  # unbudgeted, this match takes minutes
    assert answer.startswith("Error: the search took longer than 0.5s")


def test_invalid_patterns_and_modes_are_messages_not_crashes(tree: Path) -> None:
    mw = search(tree)
    assert mw.grep("(unclosed").startswith("Invalid regex pattern: ")
    assert mw.grep("x", output_mode="lines").startswith("Error: output_mode")  # type: ignore[arg-type]
    assert mw.grep("async", path="/missing") == "No matches found"
    for include in ("*.{py", "*.py}", "*.{}", "", "*.py\n", "a\x00"):
        assert mw.grep("async", include=include) == "Invalid include pattern", include


def test_the_tools_are_attributes_as_in_langchain(tree: Path) -> None:
    mw = search(tree)
    assert [t.name for t in mw.tools] == ["glob_search", "grep_search"]
    assert mw.tools == (mw.glob_search, mw.grep_search)
    assert mw.glob_search.func is not None and mw.grep_search.func is not None
    assert mw.glob_search.func(pattern="*.md") == "/notes.md"
    assert mw.grep_search.func(pattern="fetch", include="*.{py,md}", output_mode="count") == (
        "/inside_link.py:1\n/src/a.py:1"
    )


def test_count_mode_and_result_cap(tree: Path) -> None:
    mw = search(tree, max_results=1)
    assert mw.grep("def", output_mode="count", path="/src/pkg") == "/src/pkg/b.py:2"
    capped = mw.grep("def").splitlines()
    assert len(capped) == 2 and capped[1].startswith("... ") and "more result(s)" in capped[1]


def test_missing_root_is_reported(tmp_path: Path) -> None:
    mw = search(tmp_path / "nope")
    assert "is not an existing directory" in mw.glob("*")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=st.lists(st.sampled_from(["..", ".", "src", "link_out_dir", "up", "loop", "/", "outside", "~", "%2e%2e"]),
                  max_size=5).map("/".join),
    pattern=st.sampled_from(["*", "**/*", "../*", "/**/*", "**/../**/*", "{..,.}/*"]),
)
def test_no_path_or_pattern_reaches_outside(tree: Path, path: str, pattern: str) -> None:
    mw = search(tree)
    for answer in (mw.glob(pattern, path=path), mw.grep(".", path=path), mw.grep("TOPSECRET", path=path)):
        assert SECRET not in answer and "stolen" not in answer
        for line in answer.splitlines():
            if line.startswith("/"):
                listed = tree / line.split(":", 1)[0].lstrip("/")
                assert os.path.commonpath([tree, os.path.realpath(listed)]) == str(tree)


def test_frozen_configuration(tree: Path) -> None:
    mw = search(tree)
    mw.max_results = 1000  # before an agent adopts it, settable as in LangChain
    create_agent(ScriptedChatModel(["ok"]), middleware=[mw])
    with pytest.raises(FrozenMiddlewareError):
        mw.max_results = 5  # type: ignore[misc]
    changed = mw.replace(max_results=1)
    assert changed.max_results == 1 and mw.max_results == 1000
    assert changed.grep("def", path="/src").count("\n") == 1


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"root_path": ""}, "root_path"),
        ({"root_path": "/x", "max_file_size_mb": 0}, "max_file_size_mb"),
        ({"root_path": "/x", "max_results": 0}, "max_results"),
        ({"root_path": "/x", "search_timeout": -1}, "search_timeout"),
    ],
)
def test_constructor_errors_name_class_and_parameter(kwargs: dict[str, object], param: str) -> None:
    with pytest.raises(MiddlewareConfigError) as caught:
        FilesystemFileSearchMiddleware(**kwargs)  # type: ignore[arg-type]
    assert caught.value.middleware == "FilesystemFileSearchMiddleware" and caught.value.hook == param
    assert str(caught.value).startswith("FilesystemFileSearchMiddleware:") and param in str(caught.value)


def test_search_events_on_the_custom_stream(tree: Path) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("grep_search", {"pattern": "x", "path": ".."})]),
                               "ok"])
    agent = create_agent(model, middleware=[search(tree)])
    events = list(agent.stream({"messages": [HumanMessage("q")]}, stream_mode="custom"))
    assert events == [{"event": "file_search", "middleware": "FilesystemFileSearchMiddleware", "tool": "grep_search",
                       "refused": "Error: path '..' is outside the search root ('..' is not allowed)."}]


def test_sibling_prefixes_and_trailing_slashes(tree: Path) -> None:
    (tree / "src2").mkdir()
    (tree / "src2" / "c.py").write_text("async def sibling():\n    pass\n")
    mw = search(tree)
    assert "/src2/c.py" not in mw.grep("async def", path="/src")
    assert mw.grep("async def", path="/src/") == mw.grep("async def", path="src")
    assert mw.glob("*.py", path="/src2/") == "/src2/c.py"


# -- hostile review (H10): races, special files, odd names -----------------------------------------------------
def test_symlinks_swapped_in_during_searches_never_leak(tree: Path) -> None:
    """TOCTOU: a file and a directory flip between real and symlink-to-outside while searches run. Before the
    descriptor-based walk, a directory checked as real and entered as a symlink leaked the outside secret."""
    import threading

    outside = tree.parent / "outside"
    (tree / "flip.txt").write_text("benign\n")
    (tree / "flip_link").symlink_to(outside / "secret.txt")
    (tree / "flipdir").mkdir()
    (tree / "flipdir" / "secret.txt").write_text("benign\n")
    (tree / "flipdir_link").symlink_to(outside, target_is_directory=True)
    stop = threading.Event()

    def swap(a: Path, b: Path) -> None:
        saved = a.with_name(a.name + "_saved")
        os.rename(a, saved)
        os.rename(b, a)
        os.rename(a, b)
        os.rename(saved, a)

    def flipper() -> None:
        while not stop.is_set():
            swap(tree / "flip.txt", tree / "flip_link")
            swap(tree / "flipdir", tree / "flipdir_link")

    worker = threading.Thread(target=flipper)
    worker.start()
    mw = search(tree)
    answers: list[str] = []
    try:
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            answers.append(mw.grep("TOPSECRET", output_mode="content"))
            answers.append(mw.grep("TOPSECRET", path="/flipdir", output_mode="content"))
            answers.append(mw.grep("TOPSECRET", path="/flip.txt", output_mode="content"))
    finally:
        stop.set()
        worker.join()
    assert len(answers) > 30
    assert not [a for a in answers if SECRET in a]


def test_a_path_through_a_directory_symlink_is_refused_even_inside_the_root(tree: Path) -> None:
    mw = search(tree)
    assert mw.grep("async", path="/src/up/src/a.py") == "No matches found"
    assert mw.glob("*", path="/link_out_dir/") == "No files found"
    assert mw.grep("TOPSECRET", path="/link_out_dir/secret.txt") == "No matches found"


@pytest.mark.parametrize("path", ["a\x00b", "/src/a.py\x00", "\x00"])
def test_nul_in_a_path_is_a_message_not_a_crash(tree: Path, path: str) -> None:
    mw = search(tree)
    assert mw.grep("x", path=path) == "No matches found"
    assert mw.glob("*", path=path) == "No files found"


def test_fifos_and_devices_never_block_or_get_read(tree: Path) -> None:
    import threading

    os.mkfifo(tree / "pipe.txt")  # opening it for reading would block until a writer comes: forever
    (tree / "zero").symlink_to("/dev/zero")  # an endless file outside the root
    results: list[str] = []
    mw = search(tree)
    worker = threading.Thread(
        target=lambda: results.extend([mw.grep("x"), mw.grep("x", path="/pipe.txt"), mw.glob("*")]), daemon=True
    )
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "a search blocked on a FIFO"
    assert results[1] == "No matches found" and "/pipe.txt" not in results[2]
    assert mw.grep("x", path="/zero") == "No matches found"


def test_names_that_are_not_utf8_give_encodable_results(tree: Path, run: Runner) -> None:
    os.close(os.open(bytes(tree) + b"/caf\xe9.txt", os.O_CREAT | os.O_WRONLY))
    with open(bytes(tree) + b"/caf\xe9.txt", "wb") as handle:
        handle.write(b"needle\n")
    mw = search(tree)
    assert mw.glob("caf*") == "/caf\\xe9.txt"
    assert mw.grep("needle").encode("utf-8") == b"/caf\\xe9.txt"
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("glob_search", {"pattern": "caf*"})]), "ok"])
    from langgraph.checkpoint.memory import InMemorySaver

    agent = create_agent(model, middleware=[mw], checkpointer=InMemorySaver())
    result = run(agent, {"messages": [HumanMessage("q")]}, config={"configurable": {"thread_id": "names"}})
    assert [m.content for m in result["messages"] if isinstance(m, ToolMessage)] == ["/caf\\xe9.txt"]


def test_nul_bytes_past_the_binary_sniff_never_reach_the_result(tree: Path) -> None:
    (tree / "late_nul.txt").write_bytes(b"x\n" * 5000 + b"needle\x00here\n")
    answer = search(tree).grep("needle", output_mode="content")
    assert answer == "/late_nul.txt:5001:needle\ufffdhere" and "\x00" not in answer


def test_a_hard_link_is_the_file_itself(tree: Path) -> None:
    """Documented limit: a hard link inside the root IS a file inside the root (no path leads outside); the
    operating system decides who may create one (fs.protected_hardlinks). Searches see its content."""
    os.link(tree.parent / "outside" / "secret.txt", tree / "hard.txt")
    assert search(tree).grep("TOPSECRET") == "/hard.txt"


def test_walking_a_huge_tree_is_bounded_by_the_time_budget_too(tree: Path) -> None:
    """Before, only regex matching of file contents had a budget: a glob (or a grep whose `include` matched nothing)
    over a huge tree walked all of it, however long that took."""
    for i in range(50):
        (tree / "src" / f"m{i}.txt").write_text("x\n")
    mw = search(tree, search_timeout=1e-6)
    assert mw.glob("**/*.nomatch").startswith("Error: the search took longer than")
    assert mw.grep("x", include="*.nomatch").startswith("Error: the search took longer than")
    assert search(tree).glob("**/*.nomatch") == "No files found"


def test_a_tree_thousands_of_levels_deep_neither_crashes_nor_hangs() -> None:
    """os.walk/os.fwalk recurse: 1500 nested directories (anyone who can write into the root, e.g. the shell tool,
    can make them) raised RecursionError out of both tools. The walk is iterative now; below 256 levels nothing is
    searched (documented). Built outside pytest's tmp_path: its cleanup (shutil.rmtree) recurses too."""
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="mk_deep_"))
    try:
        fd = os.open(root, os.O_RDONLY)
        for level in range(1500):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = child
            if level == 9:
                with open(os.open("shallow.txt", os.O_CREAT | os.O_WRONLY, dir_fd=fd), "w") as handle:
                    handle.write("needle\n")
        os.close(os.open("deep.txt", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
        os.close(fd)
        mw = search(root)
        started = time.monotonic()
        assert mw.glob("**/*.txt") == "/" + "d/" * 10 + "shallow.txt"
        assert mw.grep("needle") == "/" + "d/" * 10 + "shallow.txt"
        assert time.monotonic() - started < 5
    finally:
        remove_chain(root, "d")
        shutil.rmtree(root, ignore_errors=True)


def remove_chain(top: Path, name: str) -> None:
    """Remove a chain of nested ``name`` directories (and the files in them) without recursion."""
    fds = [os.open(top, os.O_RDONLY)]
    try:
        while name in os.listdir(fds[-1]):
            fds.append(os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fds[-1]))
        for parent, child in zip(reversed(fds[:-1]), reversed(fds[1:]), strict=True):
            for entry in os.listdir(child):
                os.unlink(entry, dir_fd=child)
            os.rmdir(name, dir_fd=parent)
    finally:
        for fd in fds:
            os.close(fd)
