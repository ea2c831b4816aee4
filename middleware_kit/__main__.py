"""``python -m middleware_kit``: print the plan of any agent, or run the demo.

    python -m middleware_kit plan package.module:agent   # the middleware plan and the Mermaid graph
    python -m middleware_kit plan package.module:make_agent   # a callable taking no arguments works too
    python -m middleware_kit plan package.module:agent --html plan.html   # also the plan as an offline HTML page
    python -m middleware_kit plan ./app.py:agent   # a file path works too (loaded as a module)
    python -m middleware_kit demo
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any, Final, NoReturn

_EXPECTED: Final = (
    "expected module.path:attribute or path/to/file.py:attribute (e.g. myapp.agents:support_agent or ./app.py:agent)"
)


def _fail(target: str, why: str) -> NoReturn:
    """One line on stderr naming what was given, what went wrong and what is expected; exit code 2 (a usage error)."""
    print(f"python -m middleware_kit plan: cannot load {target!r}: {why}; {_EXPECTED}", file=sys.stderr)
    raise SystemExit(2)


def _raised(exc: BaseException) -> str:
    """``NameError: ... (file:line)`` on one line: the innermost frame of the traceback, so the line still points at
    the code."""
    frames = traceback.extract_tb(exc.__traceback__)
    if isinstance(exc, SyntaxError) and exc.filename:
        where = f" ({exc.filename}:{exc.lineno})"
    else:
        where = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}{where}"


def _import_file(target: str, location: str) -> ModuleType:
    path = Path(location).expanduser().resolve()
    if not path.is_file():
        _fail(target, f"there is no file {location!r}")
    name = path.stem if path.stem.isidentifier() and path.stem not in sys.modules else "__middleware_kit_target__"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        _fail(target, f"{location!r} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before running it: dataclasses and pickling look their module up there
    sys.path.insert(0, str(path.parent))  # so the file imports its neighbours as when it is run as a script
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        _fail(target, f"running {location!r} raised {_raised(exc)}")
    return module


def _import_module(target: str, module_name: str) -> ModuleType:
    sys.path.insert(0, "")
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        _fail(target, f"cannot import {module_name!r}: {' '.join(str(exc).split())}")
    except Exception as exc:
        _fail(target, f"importing {module_name!r} raised {_raised(exc)}")


def _load(target: str) -> Any:
    """The agent ``target`` names: ``module.path:attribute`` or ``path/to/file.py:attribute`` (an agent, or a
    callable taking no arguments that returns one). Anything else: one line on stderr and exit code 2."""
    location, _, attr = target.rpartition(":")  # rpartition: a Windows path (C:\app.py:agent) has a colon too
    if not location or not attr.isidentifier():
        _fail(target, "it does not name an attribute after a colon")
    is_file = location.endswith(".py") or "/" in location or "\\" in location
    module = _import_file(target, location) if is_file else _import_module(target, location)
    if not hasattr(module, attr):
        _fail(target, f"{location!r} has no attribute {attr!r}")
    obj = getattr(module, attr)
    if callable(obj) and not hasattr(obj, "middleware_plan"):
        try:
            obj = obj()
        except Exception as exc:
            _fail(target, f"calling {attr}() raised {_raised(exc)}")
    if not hasattr(obj, "middleware_plan"):
        _fail(target, f"{attr} is of type {type(obj).__name__}, not an agent built by middleware_kit.create_agent "
                      "(no middleware_plan) nor a function returning one")
    return obj


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m middleware_kit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    plan = commands.add_parser("plan", help="print the middleware plan and the Mermaid graph of an agent")
    plan.add_argument("target", help="module.path:attribute or path/to/file.py:attribute naming an agent, or a "
                                     "function returning one")
    plan.add_argument("--no-mermaid", action="store_true", help="print only the plan table")
    plan.add_argument("--html", metavar="PATH",
                      help="also write the plan as a self-contained HTML page (onion, graph, table; opens offline)")
    commands.add_parser("demo", help="run the offline demo")
    args, rest = parser.parse_known_args(argv)
    if args.command == "demo":
        from middleware_kit.demo import main as demo

        return demo(rest)
    agent = _load(args.target)
    print(agent.middleware_plan)
    if not args.no_mermaid:
        print()
        print(agent.middleware_plan.mermaid())
    if args.html:
        from middleware_kit.viz import write_plan_html

        try:
            written = write_plan_html(agent, args.html)
        except OSError as exc:
            raise SystemExit(f"plan: cannot write {args.html!r}: {exc}") from exc
        print(f"wrote {written}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
