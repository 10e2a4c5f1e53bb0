"""Persistence: ORM tables, engine, migrations and repositories."""
