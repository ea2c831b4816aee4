"""Cost of run control per invoke in CPU instructions, counted by valgrind's callgrind (repeatable where wall-clock
time on a shared or virtual machine is not).

    .venv/bin/python -m bench.run_control_instructions [--invokes N]

The agents are those of :mod:`bench.run_control` on an ``InMemorySaver``: ``on`` (the default) and ``off``
(``run_control=False``). Each is run in its own process under callgrind twice, with 10 and with ``10 + N`` invokes
after the same warm-up; the difference divided by ``N`` is the instructions per invoke, free of start-up and build.
Prints both and ``on/off`` (the issue's target: at most 1.03). Needs ``valgrind`` (Debian's package); the four runs
take a few minutes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BASE = 10


def _child(variant: str, count: int) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from bench.run_control import agents, one_invoke

    run = one_invoke(agents(InMemorySaver())[variant])
    for _ in range(10 + count):  # 10 warm-up invokes, then ``count``
        run()


def _instructions(variant: str, count: int, out: Path) -> int:
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-m",
               "bench.run_control_instructions", "--child", variant, str(count)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"callgrind printed no instruction count:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--invokes", type=int, default=100)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], int(args.child[1]))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=2) as pool:
        jobs = {(v, n): pool.submit(_instructions, v, n, Path(tmp) / f"{v}.{n}.out")
                for v in ("on", "off") for n in (BASE, BASE + args.invokes)}
        counts = {key: job.result() for key, job in jobs.items()}
    per = {v: (counts[(v, BASE + args.invokes)] - counts[(v, BASE)]) / args.invokes for v in ("on", "off")}
    print(f"instructions per invoke: off {per['off'] / 1e6:.2f} M  on {per['on'] / 1e6:.2f} M  |  "
          f"on/off {per['on'] / per['off']:.3f}")


if __name__ == "__main__":
    main()
