"""The persistent primitive cache: SQLite in WAL mode, one row per value signature.

Table `entries(sig BLOB PK, template, version, code_hash, deps JSON, proj BLOB, value BLOB msgpack, created)`; a value is a msgpack bin of float64.
A lookup is a hit only if the signature, the projection-table hash, the template
version and the code hash all match; anything else is ignored, never trusted.
Writes happen in one transaction per run, so a crashed run leaves nothing partial.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    sig BLOB PRIMARY KEY,
    template TEXT NOT NULL,
    version INTEGER NOT NULL,
    code_hash TEXT NOT NULL,
    deps TEXT NOT NULL,
    proj BLOB NOT NULL,
    value BLOB NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_template ON entries(template);
"""
DB_NAME = "concord.sqlite"


class Cache:
    """A cache directory holding `concord.sqlite`; `warnings` collects what the caller should print."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.path = self.folder / DB_NAME
        self.warnings: list[str] = []
        self.folder.mkdir(parents=True, exist_ok=True)
        self.db = self._open()

    def _open(self) -> sqlite3.Connection:
        db = None
        try:
            db = self._connect()
            row = db.execute("PRAGMA quick_check").fetchone()
            if row is None or row[0] != "ok":
                raise sqlite3.DatabaseError(f"quick_check: {row}")
            db.execute("SELECT sig, template, version, code_hash, deps, proj, value, created FROM entries LIMIT 1")
            return db
        except sqlite3.DatabaseError as exc:
            aside = self.path.with_name(f"{DB_NAME}.corrupt-{int(time.time())}")
            if db is not None:
                db.close()
            os.replace(self.path, aside)
            for suffix in ("-wal", "-shm"):
                extra = Path(str(self.path) + suffix)
                if extra.exists():
                    extra.unlink()
            self.warnings.append(f"cache {self.path} is corrupt ({exc}); moved it to {aside.name} and started afresh")
            return self._connect()

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(SCHEMA)
        return db

    def close(self) -> None:
        self.db.close()

    # ---- reads
    def lookup(self, template: str, sigs: list[bytes]) -> dict[bytes, tuple]:
        """sig -> (version, code_hash, proj, value bytes) for one template, in batched IN queries."""
        out: dict[bytes, tuple] = {}
        for start in range(0, len(sigs), 500):
            chunk = sigs[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.db.execute(
                f"SELECT sig, version, code_hash, proj, value FROM entries WHERE template = ? AND sig IN ({marks})",
                [template, *chunk],
            ).fetchall()
            for sig, version, code_hash, proj, value in rows:
                out[bytes(sig)] = (version, code_hash, bytes(proj), bytes(value))
        return out

    def lookup_all(self, sigs: list[bytes]) -> dict[bytes, tuple]:
        """sig -> (template, version, code_hash, proj, value bytes) for any templates, in batched IN queries.

        The signature is the primary key (and hashes the template id), so one query serves every
        template of a run; callers still check the template of each row."""
        out: dict[bytes, tuple] = {}
        for start in range(0, len(sigs), 500):
            chunk = sigs[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.db.execute(
                f"SELECT sig, template, version, code_hash, proj, value FROM entries WHERE sig IN ({marks})", chunk
            ).fetchall()
            for sig, template, version, code_hash, proj, value in rows:
                out[bytes(sig)] = (template, version, code_hash, bytes(proj), bytes(value))
        return out

    def deps_of(self, template: str, limit: int = 2000) -> list[dict]:
        rows = self.db.execute(
            "SELECT deps FROM entries WHERE template = ? ORDER BY created DESC LIMIT ?", (template, limit)
        ).fetchall()
        return [json.loads(r[0]) for r in rows]

    # ---- writes
    def store(self, rows: list[tuple]) -> None:
        """Insert (sig, template, version, code_hash, deps_json, proj, value) rows in one transaction."""
        if not rows:
            return
        now = time.time()
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.executemany(
                "INSERT OR REPLACE INTO entries (sig, template, version, code_hash, deps, proj, value, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(*r, now) for r in rows],
            )
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    # ---- maintenance
    def stats(self) -> dict:
        rows = self.db.execute(
            "SELECT template, COUNT(*), SUM(LENGTH(value)), MIN(created), MAX(created) FROM entries GROUP BY template"
        ).fetchall()
        per = {t: {"entries": c, "value_bytes": b} for t, c, b, _, _ in rows}
        size = sum(p.stat().st_size for p in self.folder.glob(DB_NAME + "*") if p.is_file())
        return {
            "path": str(self.path),
            "entries": sum(v["entries"] for v in per.values()),
            "bytes_on_disk": size,
            "templates": per,
        }

    def gc(self, current: dict[str, tuple[int, str]], older_than_s: float | None = None) -> int:
        """Delete entries whose version/code hash no longer match a current template (and old ones)."""
        removed = 0
        self.db.execute("BEGIN IMMEDIATE")
        try:
            for template, version, code_hash in self.db.execute(
                "SELECT DISTINCT template, version, code_hash FROM entries"
            ).fetchall():
                if (version, code_hash) not in current.get(template, set()):
                    cur = self.db.execute(
                        "DELETE FROM entries WHERE template = ? AND version = ? AND code_hash = ?",
                        (template, version, code_hash),
                    )
                    removed += cur.rowcount
            if older_than_s is not None:
                cur = self.db.execute("DELETE FROM entries WHERE created < ?", (time.time() - older_than_s,))
                removed += cur.rowcount
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("VACUUM")
        return removed

    def clear(self) -> int:
        cur = self.db.execute("DELETE FROM entries")
        self.db.execute("VACUUM")
        return cur.rowcount


def open_existing(folder: str | os.PathLike) -> Cache:
    """Open a cache that must already exist (maintenance verbs never create one)."""
    from methodkit.core.errors import DataError

    if not (Path(folder) / DB_NAME).is_file():
        raise DataError(f"{folder}: no concord cache here (expected {DB_NAME}); plans create one with --cache DIR")
    return Cache(folder)
