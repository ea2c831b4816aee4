"""LangChain 1.5.2's own agent and middleware unit tests, run unchanged on middleware_kit (see ``suite.py``)."""
