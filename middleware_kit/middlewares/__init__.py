"""Bundled middlewares, one module each (``middleware_kit.middlewares.<name>``)."""

__all__: list[str] = []
