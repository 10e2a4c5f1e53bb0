"""Pydantic wire contracts shared by the API and the agent."""
