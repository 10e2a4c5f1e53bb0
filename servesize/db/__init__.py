"""Persistence: ORM tables, connection pool, migrations and repositories."""
