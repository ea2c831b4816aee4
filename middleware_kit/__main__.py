"""``python -m middleware_kit``: print the plan of any agent, or run the demo.

    python -m middleware_kit plan package.module:agent   # the middleware plan and the Mermaid graph
    python -m middleware_kit plan package.module:make_agent   # a callable taking no arguments works too
    python -m middleware_kit plan package.module:agent --html plan.html   # also the plan as an offline HTML page
    python -m middleware_kit demo
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any


def _load(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise SystemExit(f"plan: expected MODULE:ATTR (e.g. myapp.agents:support_agent), got {target!r}")
    sys.path.insert(0, "")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SystemExit(f"plan: cannot import {module_name!r}: {exc}") from exc
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise SystemExit(f"plan: module {module_name!r} has no attribute {attr!r}") from None
    if callable(obj) and not hasattr(obj, "middleware_plan"):
        obj = obj()
    if not hasattr(obj, "middleware_plan"):
        raise SystemExit(f"plan: {target} is not an agent built by middleware_kit.create_agent (no middleware_plan)")
    return obj


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m middleware_kit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    plan = commands.add_parser("plan", help="print the middleware plan and the Mermaid graph of an agent")
    plan.add_argument("target", help="MODULE:ATTR naming an agent, or a function returning one")
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
