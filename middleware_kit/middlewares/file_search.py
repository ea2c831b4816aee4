"""``FilesystemFileSearchMiddleware``: ``glob_search`` and ``grep_search`` tools confined to one directory.

The model sees a virtual filesystem whose ``/`` is ``root_path``. Confinement is the point, so every path is checked
where it is used, not only where it is typed:

- a ``path`` argument containing ``..``, going through a directory symlink, or resolving outside the root is refused;
- every directory and file is opened from the root's descriptor one component at a time with ``O_NOFOLLOW``, so a
  symlink swapped in between a check and a read (a race to escape) is never followed;
- absolute paths are read as relative to the root (``/src`` is ``<root>/src``), never as host paths;
- directory symlinks are never followed (which also makes symlink loops harmless); a file symlink is read only when
  its target resolves inside the root;
- only regular files are opened (never FIFOs, sockets or devices: a FIFO would block a read forever); files
  larger than ``max_file_size_mb`` are skipped and at most that many bytes are ever read; binary files (a NUL
  byte in the first 8 KiB) are skipped;
- a regular expression runs with a time budget (``search_timeout``): a catastrophic-backtracking pattern ends the
  search with an error message instead of hanging the agent;
- results are capped (``max_results``) and long lines are cut.

LangChain's ``use_ripgrep`` is accepted for compatibility; searches always use the bounded Python engine (see the
docs page for why).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import regex  # type: ignore[import-untyped]  # shipped with tiktoken (a dependency)
from langchain_core.tools import BaseTool, StructuredTool

from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._config import INT_AT_LEAST_1, POSITIVE_NUMBER, Config, rule
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._stream import emit

__all__ = ["FilesystemFileSearchMiddleware", "FileSearchError"]

_BINARY_SNIFF = 8192
_MAX_LINE_CHARS = 500
OutputMode = Literal["files_with_matches", "content", "count"]

GLOB_DESCRIPTION = (
    "Find files by name with a glob pattern such as '**/*.py' or 'src/**/*.{ts,tsx}'. Paths are relative to the "
    "search root, written with a leading '/'. Returns matching file paths, most recently modified first."
)
GREP_DESCRIPTION = (
    "Search file contents with a regular expression. 'include' filters file names with a glob (e.g. '*.py'). "
    "output_mode: 'files_with_matches' (default; paths), 'content' (path:line:text) or 'count' (path:count)."
)


class FileSearchError(Exception):
    """A search argument was refused, or the root is unusable.

    Never raised to the caller of the agent: ``glob``/``grep`` (and so the tools) catch it and return its message as
    the tool result, which the model reads and can act on (another path, a simpler pattern). It is therefore not a
    :class:`~middleware_kit.errors.MiddlewareError`; configuration mistakes the user makes are raised from the
    constructor as :class:`~middleware_kit.errors.MiddlewareConfigError`.
    """


class _PathRefused(FileSearchError):
    """A ``path`` argument names nothing searchable inside the root (outside it, through a directory symlink, or
    missing). The tools answer as LangChain does, with an empty result (``No files found`` / ``No matches found``),
    so nothing about the host is confirmed; the reason goes to the ``file_search`` event (``refused``)."""


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | _CLOEXEC
"""Open one directory component: never through a symlink (a symlink swapped in after a check fails here)."""
_FILE_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | _CLOEXEC
)
"""Open one file: never through a symlink, and never block (a FIFO swapped in opens at once and is then skipped)."""


def _show(parts: tuple[str, ...]) -> str:
    """The virtual path of root-relative ``parts``; bytes that are not UTF-8 (file names are bytes on POSIX) are
    shown as ``\\xNN`` so that the tool result is always encodable (checkpointers serialize it)."""
    text = "/" + "/".join(parts)
    return os.fsencode(text).decode("utf-8", errors="backslashreplace")


@dataclass(frozen=True, slots=True)
class _Start:
    """Where a search starts: root-relative path components, and whether they name a directory."""

    parts: tuple[str, ...]
    is_dir: bool


class _Root:
    """The confinement root, opened once per call (it may be created after the middleware).

    Every file and directory is reached from the root's file descriptor one component at a time, with ``O_NOFOLLOW``
    (``openat``), and directories are walked the same way, iteratively (a tree thousands of levels deep cannot
    exhaust the stack; below :data:`_MAX_DEPTH` levels nothing is searched). A check and the use it guards can
    therefore not be separated by a symlink swapped in meanwhile: a path that was a real directory or file when
    listed and became a symlink (to anywhere) when opened is skipped.
    """

    def __init__(self, root_path: Path) -> None:
        self.real = Path(os.path.realpath(root_path))
        try:
            self.fd = os.open(self.real, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
        except (OSError, ValueError):
            raise FileSearchError(f"Error: the search root {str(root_path)!r} is not an existing directory.") from None

    def __enter__(self) -> _Root:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)

    def contains(self, candidate: str | Path) -> bool:
        try:
            return os.path.commonpath([self.real, candidate]) == str(self.real)
        except ValueError:
            return False

    def start(self, path: str) -> _Start:
        """What a ``path`` argument names, or :class:`FileSearchError`."""
        text = (path or "/").replace("\\", "/")
        if "\x00" in text:
            raise _PathRefused(f"Error: path {path!r} contains a NUL character; pass a plain path.")
        parts = tuple(p for p in text.split("/") if p not in ("", "."))
        if ".." in parts:
            raise _PathRefused(f"Error: path {path!r} is outside the search root ('..' is not allowed).")
        if not parts:
            return _Start((), True)
        try:
            parent = self._open_dirs(parts[:-1])
        except FileNotFoundError:
            raise _PathRefused(f"Error: path {path!r} does not exist.") from None
        except OSError:  # ELOOP / ENOTDIR: a component is a symlink (or a file)
            raise _PathRefused(
                f"Error: path {path!r} goes through a directory symlink or a file; symlinks are not followed."
            ) from None
        try:
            mode = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False).st_mode
        except OSError:
            raise _PathRefused(f"Error: path {path!r} does not exist.") from None
        finally:
            os.close(parent)
        if stat.S_ISDIR(mode):
            return _Start(parts, True)
        if stat.S_ISLNK(mode):
            try:
                real = os.path.realpath(self.real.joinpath(*parts))
            except OSError:  # the link changed or vanished while it was being resolved (a concurrent rename)
                raise _PathRefused(f"Error: path {path!r} changed during the search; try again.") from None
            if os.path.isdir(real):
                raise _PathRefused(f"Error: path {path!r} is a directory symlink; symlinks are not followed.")
            if not self.contains(real):
                raise _PathRefused(f"Error: path {path!r} resolves outside the search root.")
            if not os.path.exists(real):
                raise _PathRefused(f"Error: path {path!r} does not exist.")
        return _Start(parts, False)

    def _open_dirs(self, parts: tuple[str, ...]) -> int:
        """A new descriptor of the directory ``parts`` below the root, reached without following any symlink."""
        fd = os.dup(self.fd)
        for part in parts:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            finally:
                os.close(fd)
            fd = child
        return fd

    def entries(self, start: _Start) -> Iterator[tuple[tuple[str, ...], int, str]]:
        """``(root-relative parts, directory fd, name)`` of every non-directory entry under ``start``, in a stable
        order. Directory symlinks are never entered (so symlink loops end); the fd is valid until the next item."""
        if not start.is_dir:
            parent = self._open_dirs(start.parts[:-1])
            try:
                yield start.parts, parent, start.parts[-1]
            finally:
                os.close(parent)
            return
        try:
            top = self._open_dirs(start.parts)
        except OSError:  # replaced by a symlink since start() looked
            return
        # Depth-first with an explicit stack of (directory fd, parts, subdirectories left): one fd per level.
        stack: list[tuple[int, tuple[str, ...], Iterator[str]]] = []
        try:
            try:
                files, dirs = _listing(top)
            except OSError:
                os.close(top)
                return
            stack.append((top, start.parts, iter(dirs)))
            for name in files:
                yield (*start.parts, name), top, name
            while stack:
                fd, parts, pending = stack[-1]
                child_name = next(pending, None)
                if child_name is None:
                    stack.pop()
                    os.close(fd)
                    continue
                if len(stack) > _MAX_DEPTH:
                    continue
                try:
                    child = os.open(child_name, _DIR_FLAGS, dir_fd=fd)  # a symlink swapped in since: refused here
                except OSError:
                    continue
                try:
                    files, dirs = _listing(child)
                except OSError:
                    os.close(child)
                    continue
                child_parts = (*parts, child_name)
                stack.append((child, child_parts, iter(dirs)))
                for name in files:
                    yield (*child_parts, name), child, name
        finally:
            for fd, _, _ in stack:
                os.close(fd)

    def open_file(self, parts: tuple[str, ...], dirfd: int, name: str) -> int | None:
        """A read-only descriptor of the regular file listed as ``parts`` (a file symlink only when its target is
        inside the root), or None. Opened with ``O_NOFOLLOW`` and checked with ``fstat`` after opening."""
        try:
            mode = os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                real = os.path.realpath(self.real.joinpath(*parts))
                if not self.contains(real) or real == str(self.real):
                    return None
                target = Path(real).relative_to(self.real).parts
                parent = self._open_dirs(target[:-1])
                try:
                    return _open_regular(target[-1], parent)
                finally:
                    os.close(parent)
            if not stat.S_ISREG(mode):
                return None  # FIFOs, sockets and devices are never opened
            return _open_regular(name, dirfd)
        except OSError:
            return None


_MAX_DEPTH = 256
"""Directory levels below the search start that are walked (deeper ones are not searched)."""


def _listing(fd: int) -> tuple[list[str], list[str]]:
    """``(non-directories, real subdirectories)`` of the open directory ``fd``, sorted; symlinks count as files."""
    files: list[str] = []
    dirs: list[str] = []
    with os.scandir(fd) as scan:
        for entry in scan:
            (dirs if entry.is_dir(follow_symlinks=False) else files).append(entry.name)
    return sorted(files), sorted(dirs)


def _open_regular(name: str, dirfd: int) -> int | None:
    fd = os.open(name, _FILE_FLAGS, dir_fd=dirfd)
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


# -- glob patterns -----------------------------------------------------------------------------------------------
def _expand_braces(pattern: str, limit: int = 64) -> list[str]:
    start = pattern.find("{")
    if start < 0:
        return [pattern]
    depth = 0
    for i in range(start, len(pattern)):
        if pattern[i] == "{":
            depth += 1
        elif pattern[i] == "}":
            depth -= 1
            if depth == 0:
                inner = pattern[start + 1 : i]
                options = _split_top_level(inner)
                if len(options) < 2:
                    return [pattern]
                out: list[str] = []
                for option in options:
                    for rest in _expand_braces(pattern[:start] + option + pattern[i + 1 :], limit):
                        out.append(rest)
                        if len(out) >= limit:
                            return out
                return out
    return [pattern]


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        current += ch
    parts.append(current)
    return parts


def _glob_regex(pattern: str) -> str:
    """A regex matching relative POSIX paths for one brace-free glob: ``**/`` spans directories, ``*`` and ``?``
    stay within one path segment."""
    out, i = "", 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**/", i):
            out += "(?:[^/]*/)*"
            i += 3
            continue
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
            continue
        if ch == "*":
            out += "[^/]*"
        elif ch == "?":
            out += "[^/]"
        elif ch == "[":
            end = pattern.find("]", i + 2)
            if end < 0:
                out += regex.escape(ch)
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out += "[" + body.replace("\\", "\\\\") + "]"
                i = end
        else:
            out += regex.escape(ch)
        i += 1
    return out


def _include_is_valid(include: str) -> bool:
    """LangChain's rules for ``include``: not empty, one line, no NUL, braces balanced and never empty (``{}``)."""
    if not include or any(ch in include for ch in "\x00\n\r") or "{}" in include:
        return False
    depth = 0
    for ch in include:
        depth += ch == "{"
        depth -= ch == "}"
        if depth < 0:
            return False
    return depth == 0


def _compile_glob(pattern: str) -> regex.Pattern[str]:
    text = pattern.strip().replace("\\", "/").lstrip("/")
    alternatives = [_glob_regex(p) for p in _expand_braces(text)]
    return regex.compile("^(?:" + "|".join(alternatives) + ")$")


# -- the middleware ----------------------------------------------------------------------------------------------
class FilesystemFileSearchMiddleware(FrozenConfig, AgentMiddleware):
    """Give the agent ``glob_search`` and ``grep_search`` over the files under ``root_path``, and nothing outside it.

    Args:
        root_path: The directory the tools search; the model sees it as ``/``.
        use_ripgrep: Accepted for LangChain compatibility; the bounded Python engine is always used.
        max_file_size_mb: Files larger than this are skipped (and never more than this is read). Default 10.
        max_results: At most this many result lines per call (a note says when more were found). Default 1000.
        search_timeout: Seconds one ``grep_search`` may spend matching before it stops with an error. Default 10.
    """

    __config__ = Config(
        root_path=rule(lambda v: isinstance(v, (str, os.PathLike)) and bool(str(v)), "a directory path (str or Path)"),
        max_file_size_mb=POSITIVE_NUMBER,
        search_timeout=POSITIVE_NUMBER,
        max_results=INT_AT_LEAST_1.saying("a positive int"),
    )

    def __init__(
        self,
        *,
        root_path: str | os.PathLike[str],
        use_ripgrep: bool = True,
        max_file_size_mb: float = 10,
        max_results: int = 1000,
        search_timeout: float = 10.0,
    ) -> None:
        self.root_path = Path(root_path).expanduser().absolute()
        self.use_ripgrep = use_ripgrep
        self.max_file_size_mb = max_file_size_mb
        self.max_file_size_bytes = int(max_file_size_mb * 1024 * 1024)
        self.max_results = max_results
        self.search_timeout = float(search_timeout)
        self.glob_search: StructuredTool = StructuredTool.from_function(
            func=self._glob_tool(), name="glob_search", description=GLOB_DESCRIPTION
        )
        """The ``glob_search`` tool (LangChain's attribute; ``glob_search.func(pattern=...)`` calls it directly)."""
        self.grep_search: StructuredTool = StructuredTool.from_function(
            func=self._grep_tool(), name="grep_search", description=GREP_DESCRIPTION
        )
        """The ``grep_search`` tool (LangChain's attribute)."""
        self.tools: tuple[BaseTool, ...] = (self.glob_search, self.grep_search)

    # -- the tools (closures over this frozen configuration; no per-run data) ---------------------------------
    def _glob_tool(self) -> Any:
        def glob_search(pattern: str, path: str = "/") -> str:
            """Find files matching a glob pattern."""
            return self.glob(pattern, path)

        return glob_search

    def _grep_tool(self) -> Any:
        def grep_search(
            pattern: str, path: str = "/", include: str | None = None, output_mode: OutputMode = "files_with_matches"
        ) -> str:
            """Search file contents with a regular expression."""
            return self.grep(pattern, path, include=include, output_mode=output_mode)

        return grep_search

    def glob(self, pattern: str, path: str = "/") -> str:
        """What ``glob_search`` returns (callable directly, e.g. in tests)."""
        try:
            with _Root(self.root_path) as root:
                start = root.start(path)
                try:
                    matcher = _compile_glob(pattern)
                except regex.error as exc:
                    raise FileSearchError(f"Error: invalid glob pattern {pattern!r}: {exc}.") from None
                found: list[tuple[float, str]] = []
                base = len(start.parts) if start.is_dir else len(start.parts) - 1
                deadline = time.monotonic() + self.search_timeout
                for parts, dirfd, name in root.entries(start):
                    if not self._matches(matcher, "/".join(parts[base:]), deadline, anchored=True):
                        continue
                    fd = root.open_file(parts, dirfd, name)
                    if fd is None:
                        continue
                    try:
                        found.append((os.fstat(fd).st_mtime, _show(parts)))
                    finally:
                        os.close(fd)
        except _PathRefused as exc:
            self._emit("glob_search", refused=str(exc))
            return "No files found"
        except FileSearchError as exc:
            self._emit("glob_search", refused=str(exc))
            return str(exc)
        found.sort(key=lambda item: (-item[0], item[1]))
        self._emit("glob_search", results=len(found))
        if not found:
            return "No files found"
        lines = [p for _, p in found[: self.max_results]]
        return "\n".join(lines) + self._more(len(found))

    def grep(
        self,
        pattern: str,
        path: str = "/",
        *,
        include: str | None = None,
        output_mode: OutputMode = "files_with_matches",
    ) -> str:
        """What ``grep_search`` returns (callable directly, e.g. in tests)."""
        if output_mode not in ("files_with_matches", "content", "count"):
            return f"Error: output_mode must be 'files_with_matches', 'content' or 'count', got {output_mode!r}."
        try:
            compiled = regex.compile(pattern)
        except regex.error as exc:
            return f"Invalid regex pattern: {exc}"
        try:
            if include is not None and not _include_is_valid(include):
                raise regex.error("unbalanced braces")
            name_filter = _compile_glob(include) if include else None
        except regex.error:
            return "Invalid include pattern"
        try:
            with _Root(self.root_path) as root:
                results, total = self._search(root, root.start(path), compiled, name_filter, output_mode)
        except _PathRefused as exc:
            self._emit("grep_search", refused=str(exc))
            return "No matches found"
        except FileSearchError as exc:
            self._emit("grep_search", refused=str(exc))
            return str(exc)
        self._emit("grep_search", results=total)
        if not results:
            return "No matches found"
        return "\n".join(results) + self._more(total)

    def _search(
        self,
        root: _Root,
        start: _Start,
        compiled: regex.Pattern[str],
        name_filter: regex.Pattern[str] | None,
        mode: OutputMode,
    ) -> tuple[list[str], int]:
        deadline = time.monotonic() + self.search_timeout
        results: list[str] = []
        total = 0
        prefilter = None
        if not any(anchor in compiled.pattern for anchor in ("\\A", "\\Z", "\\z", "\\G")):
            # Per-line semantics are kept: MULTILINE makes ^ and $ match at line ends; a whole-file hit is then
            # confirmed line by line, so a match spanning lines (e.g. through \s) only costs the confirmation.
            prefilter = regex.compile(compiled.pattern, compiled.flags | regex.MULTILINE)
        for parts, dirfd, name in root.entries(start):
            if name_filter is not None and not self._matches(name_filter, name, deadline, anchored=True):
                continue
            fd = root.open_file(parts, dirfd, name)
            if fd is None:
                continue
            try:
                text = self._read_text(fd)
            finally:
                os.close(fd)
            if text is None:
                continue
            if prefilter is not None and not self._matches(prefilter, text, deadline):
                continue  # one search of the whole file rules most files out (no per-line loop)
            count = 0
            for number, line in enumerate(text.splitlines(), 1):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise FileSearchError(self._timeout_message())
                try:
                    hit = compiled.search(line, timeout=remaining)
                except TimeoutError:
                    raise FileSearchError(self._timeout_message()) from None
                if hit is None:
                    continue
                count += 1
                if mode == "files_with_matches":
                    break
                if mode == "content":
                    total += 1
                    if len(results) < self.max_results:
                        shown = line if len(line) <= _MAX_LINE_CHARS else line[:_MAX_LINE_CHARS] + "..."
                        shown = shown.replace("\x00", "\ufffd")  # NUL breaks JSON/PostgreSQL checkpoints
                        results.append(f"{_show(parts)}:{number}:{shown}")
            if count and mode != "content":
                total += 1
                if len(results) < self.max_results:
                    results.append(
                        _show(parts) if mode == "files_with_matches" else f"{_show(parts)}:{count}"
                    )
        return results, total

    def _matches(self, pattern: Any, text: str, deadline: float, *, anchored: bool = False) -> bool:
        """One match within the search's time budget (also spent by walking a huge tree: checked per file)."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise FileSearchError(self._timeout_message())
        try:
            found = (pattern.match if anchored else pattern.search)(text, timeout=remaining)
            return found is not None
        except TimeoutError:
            raise FileSearchError(self._timeout_message()) from None

    def _read_text(self, fd: int) -> str | None:
        """The open file's text, or None when it is too large, binary or unreadable. Reads at most the size limit
        (also when the file grows while it is read)."""
        limit = self.max_file_size_bytes
        try:
            if os.fstat(fd).st_size > limit:
                return None
            chunks: list[bytes] = []
            size = 0
            while size <= limit:
                chunk = os.read(fd, min(1 << 20, limit + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        except OSError:
            return None
        data = b"".join(chunks)
        if len(data) > limit or b"\x00" in data[:_BINARY_SNIFF]:
            return None
        return data.decode("utf-8", errors="replace")

    def _timeout_message(self) -> str:
        return (
            f"Error: the search took longer than {self.search_timeout:g}s and was stopped. Simplify the pattern "
            f"(avoid nested quantifiers such as '(a+)+') or narrow 'path'/'include'."
        )

    def _more(self, total: int) -> str:
        if total <= self.max_results:
            return ""
        return f"\n... {total - self.max_results} more result(s) not shown; narrow the search."

    def _emit(self, tool: str, **fields: Any) -> None:
        emit(None, {"event": "file_search", "middleware": self.name, "tool": tool, **fields})
