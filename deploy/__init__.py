"""Deployment entry points (LangGraph Server: see ``langgraph.json`` and ``docs/deploy.md``)."""
