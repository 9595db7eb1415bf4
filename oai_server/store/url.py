"""Database URLs: the user's `sqlite://` / `postgresql://`, as SQLAlchemy's async drivers."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import URL, make_url

_ASYNC_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
}


def async_url(store_url: str | None, data_dir: Path) -> URL:
    """The URL to connect with: by default a SQLite file in `data_dir`."""
    if store_url is None:
        return make_url(f"sqlite+aiosqlite:///{data_dir.expanduser() / 'store.db'}")
    url = make_url(store_url)
    driver = _ASYNC_DRIVERS.get(url.drivername)
    return url if driver is None else url.set(drivername=driver)


def ensure_directory(url: URL) -> None:
    """Create a SQLite file's directory (the data directory) on first use."""
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        Path(url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def describe(url: URL) -> str:
    """The URL for a log line: password hidden."""
    return url.render_as_string(hide_password=True)
