"""Benchmarks of middleware_kit's per-invoke overhead.

Run ``python -m bench`` (``--quick`` for a smoke run); see bench/README.md."""
