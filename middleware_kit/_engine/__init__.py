"""The engine: how hooks become a LangGraph graph and how one call runs through them.

Nothing here is public API. The public modules (``middleware_kit.agent``, ``middleware``, ``types``, ``errors``,
``events``, ``plan``, ``tracing``...) sit on top and re-export what users need; ``docs/architecture.md`` maps the
modules of this package layer by layer. An import from ``middleware_kit._engine`` in user code may break in any
release.
"""
