"""``servesize serve``, ``db`` and ``keys``: the server and its database (imported lazily, so
the planning commands run without the server's dependencies)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from servesize.cli.app import app, console, db_app, keys_app, refuse
from servesize.security import Scope

if TYPE_CHECKING:
    from servesize.db.repository import ApiKeyRepository


@app.command()
def serve(
    host: Annotated[str, typer.Option(envvar="HOST", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(envvar="PORT", help="Port to listen on.")] = 8000,
    no_migrate: Annotated[
        bool, typer.Option("--no-migrate", help="Do not apply pending migrations first.")
    ] = False,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            max=64,
            help="API processes on the one socket (default: WORKERS, else 1); above 1 they "
            "share rate limits, cached answers and jobs through the database or Redis.",
        ),
    ] = None,
) -> None:
    """Apply pending migrations, then serve the API."""
    import logging.config
    import os

    import uvicorn

    from servesize.api.app import create_app, server_options
    from servesize.api.logs import logging_config
    from servesize.db import migrate
    from servesize.settings import get_settings

    if workers is not None:
        os.environ["WORKERS"] = str(workers)  # read by every worker's settings
        get_settings.cache_clear()
    settings = get_settings()
    logging.config.dictConfig(logging_config(settings.log_level))  # Alembic's lines too
    if settings.workers > 1:
        _check_shareable(settings.database_url, settings.shared_store())
    if not no_migrate:
        migrate.upgrade(settings.database_url)
    if settings.workers == 1:
        uvicorn.run(create_app(settings), host=host, port=port, **server_options(settings))
        return
    with _multiprocess_metrics():
        uvicorn.run(
            "servesize.api.app:create_app",
            factory=True,
            workers=settings.workers,
            host=host,
            port=port,
            **server_options(settings),
        )


def _check_shareable(database_url: str, store: str) -> None:
    if ":memory:" in database_url:
        refuse("--workers needs a database the processes share, not SQLite :memory:", code=2)
    if store == "memory":
        refuse("--workers needs STATE_STORE database or redis, not memory", code=2)


@contextmanager
def _multiprocess_metrics() -> Iterator[None]:
    """``PROMETHEUS_MULTIPROC_DIR`` for the workers (set before they import
    prometheus_client): the given directory, else a temporary one removed at exit; emptied of
    an earlier run's files first."""
    import os
    import shutil
    import tempfile
    from pathlib import Path

    from servesize.api.metrics import MULTIPROC_ENV

    given = os.environ.get(MULTIPROC_ENV)
    path = Path(given) if given else Path(tempfile.mkdtemp(prefix="servesize-metrics-"))
    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob("*.db"):
        stale.unlink()
    os.environ[MULTIPROC_ENV] = str(path)
    try:
        yield
    finally:
        if not given:
            shutil.rmtree(path, ignore_errors=True)
            os.environ.pop(MULTIPROC_ENV, None)


@db_app.command("upgrade")
def db_upgrade(revision: Annotated[str, typer.Argument()] = "head") -> None:
    """Upgrade the database to a revision (default: the newest)."""
    from servesize.db import migrate
    from servesize.settings import get_settings

    migrate.upgrade(get_settings().database_url, revision)
    db_current()


@db_app.command("downgrade")
def db_downgrade(
    revision: Annotated[str, typer.Argument(help="Target, e.g. base or -1.")],
    yes_destroy_data: Annotated[
        bool,
        typer.Option(
            "--yes-destroy-data",
            help="Drop the tables and columns listed, with their rows (they cannot be restored "
            "but from a backup).",
        ),
    ] = False,
) -> None:
    """Downgrade the database to a revision. Refuses (exit 1, nothing changed) when that drops
    stored data, listing what it would drop, unless --yes-destroy-data is given. The instance
    secret is kept, so API keys restored later still verify."""
    from servesize.db import migrate
    from servesize.settings import get_settings

    try:
        dropped = migrate.downgrade(
            get_settings().database_url, revision, destroy_data=yes_destroy_data
        )
    except migrate.DataLossRefusedError as exc:
        lines = "\n".join(f"  {loss.describe()}" for loss in exc.losses)
        refuse(
            f"refusing to downgrade to {revision}: it would drop\n{lines}\n"
            "back the database up, then rerun with --yes-destroy-data",
            code=1,
        )
    for loss in dropped:
        if loss.rows:
            print(f"dropped {loss.describe()}")
    db_current()


@db_app.command("current")
def db_current() -> None:
    """Print the database's revision and the newest one."""
    from servesize.db import migrate
    from servesize.db.connection import create_db_engine
    from servesize.settings import get_settings

    settings = get_settings()
    db_engine = create_db_engine(settings.database_url)
    try:
        current = sorted(migrate.current_revisions(db_engine)) or ["base"]
    finally:
        db_engine.dispose()
    heads = sorted(migrate.head_revisions(settings.database_url))
    state = "at head" if current == heads else "behind head"
    print(f"current: {', '.join(current)}  head: {', '.join(heads)}  ({state})")


@contextmanager
def _key_repository() -> Iterator[ApiKeyRepository]:
    """An API-key repository inside one committed transaction."""
    from servesize.db.connection import create_db_engine, make_sessionmaker, transaction
    from servesize.db.repository import ApiKeyRepository
    from servesize.settings import get_settings

    settings = get_settings()
    secret = settings.secret_key.get_secret_value().encode() if settings.secret_key else None
    db_engine = create_db_engine(settings.database_url)
    try:
        with transaction(make_sessionmaker(db_engine)) as session:
            yield ApiKeyRepository(session, secret_key=secret)
    finally:
        db_engine.dispose()


@keys_app.command("create")
def keys_create(
    scope: Annotated[
        list[Scope], typer.Option("--scope", help="Repeat for several scopes.", show_choices=True)
    ],
    name: Annotated[str | None, typer.Option(help="Unique name; default: key-<id>.")] = None,
) -> None:
    """Create an API key and print it once (it cannot be shown again)."""
    with _key_repository() as keys:
        row, new = keys.create(name=name or f"key-{secrets.token_hex(4)}", scopes=scope)
        console.print(f"created key [bold]{row.name}[/] ({row.key_id}) scopes {row.scopes}")
        console.print("store it now; it is not shown again:")
        print(new.token)


@keys_app.command("list")
def keys_list() -> None:
    """List keys (never their secrets)."""
    table = Table("key_id", "name", "scopes", "created_at", "revoked_at")
    with _key_repository() as keys:
        for row in keys.list():
            table.add_row(
                row.key_id,
                row.name,
                ",".join(row.scopes),
                row.created_at.isoformat(),
                row.revoked_at.isoformat() if row.revoked_at else "",
            )
    console.print(table)


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="The key's public id.")]) -> None:
    """Revoke a key; it stops working at once."""
    with _key_repository() as keys:
        row = keys.revoke(key_id)
        if row is None:
            console.print(f"[red]no API key with id {key_id!r}[/]")
            raise typer.Exit(code=1)
        console.print(f"revoked {row.name} ({row.key_id})")
