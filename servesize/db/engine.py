"""Transitional alias of :mod:`servesize.db.connection` for ``servesize/cli.py`` only.

Delete this module once the CLI imports ``create_db_engine`` from ``servesize.db.connection``.
"""

from servesize.db.connection import create_db_engine as make_engine
from servesize.db.connection import make_sessionmaker, transaction

__all__ = ["make_engine", "make_sessionmaker", "transaction"]
