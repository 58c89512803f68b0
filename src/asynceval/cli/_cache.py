"""`asynceval cache stats [DIR]` and `asynceval cache prune [DIR] ...`: see and bound the
model-call cache.

DIR defaults to LLM_CACHE_DIR (the environment or `.env`). `stats` prints the entries, the bytes
of answers they hold, the bytes on disk (what LLM_CACHE_MAX_BYTES bounds), the oldest and newest
entry, the answers served from the entries still there, and any files of the one-file-per-entry
format before (not read; `prune --all` deletes them). `prune` deletes the entries last used more
than `--older-than DAYS` ago, then the least recently used beyond `--max-bytes N`, or everything
with `--all`, and gives the space back to the disk. A folder that is missing, not a folder, or
whose store cannot be read is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from ..config import Settings
from ..runtime import CallCache
from ._errors import CLIError


def add_parser(commands: Any) -> None:
    cache = commands.add_parser("cache", help="see and prune the model-call cache")
    sub = cache.add_subparsers(dest="cache_command", required=True, metavar="SUBCOMMAND")
    stats = sub.add_parser(
        "stats",
        help="entries, bytes, disk use, oldest and newest, hits",
        description="What the model-call cache in DIR holds.",
    )
    stats.add_argument("dir", nargs="?", help="the cache folder (default: LLM_CACHE_DIR)")
    stats.add_argument("--json", action="store_true", help="print the figures as JSON")
    stats.set_defaults(handler=cache_stats)
    prune = sub.add_parser(
        "prune",
        help="delete old or least recently used entries",
        description="Delete entries of the model-call cache in DIR: those last used more than "
        "--older-than DAYS ago, then the least recently used beyond --max-bytes N; --all "
        "deletes every entry (and the files of the format before).",
    )
    prune.add_argument("dir", nargs="?", help="the cache folder (default: LLM_CACHE_DIR)")
    prune.add_argument(
        "--max-bytes",
        type=_positive_int,
        metavar="N",
        help="keep the most recently used answers that fit in N bytes on disk (default: no bound)",
    )
    prune.add_argument(
        "--older-than",
        type=_positive_float,
        metavar="DAYS",
        help="delete entries last used more than DAYS days ago (default: none by age)",
    )
    prune.add_argument("--all", action="store_true", help="delete every entry")
    prune.set_defaults(handler=cache_prune)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _cache(args: argparse.Namespace) -> CallCache:
    """The cache of DIR or LLM_CACHE_DIR; CLIError (exit 2) when there is none to read."""
    folder: str | None = args.dir
    if folder is None:
        try:
            folder = Settings().llm_cache_dir
        except ValueError as exc:
            raise CLIError(str(exc)) from None
        if folder is None:
            raise CLIError("no cache folder: give DIR or set LLM_CACHE_DIR")
    path = Path(folder).expanduser()
    if not path.exists():
        raise CLIError(f"{folder}: no such folder")
    if not path.is_dir():
        raise CLIError(f"{folder}: not a folder")
    if not os.access(path, os.R_OK | os.X_OK):
        raise CLIError(f"{folder}: cannot be read (permission denied)")
    return CallCache(path)


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def _size(count: int) -> str:
    if count < 1000:
        return f"{count} bytes"
    value, unit = count / 1000, "KB"
    for larger in ("MB", "GB"):
        if value < 1000:
            break
        value, unit = value / 1000, larger
    return f"{value:.1f} {unit}"


def cache_stats(args: argparse.Namespace) -> int:
    cache = _cache(args)
    try:
        stats = cache.stats()
    except Exception as exc:  # sqlite3.Error: not a store
        raise CLIError(f"{cache.directory}: cannot be read as a cache ({exc})") from None
    old = cache.old_entries()
    if args.json:
        figures = {**stats._asdict(), "old_format_files": len(old), "dir": str(cache.directory)}
        print(json.dumps(figures, indent=2))
        return 0
    print(f"cache          {cache.directory}")
    print(f"entries        {stats.entries}")
    print(f"answers        {_size(stats.bytes)} ({stats.bytes} bytes)")
    ratio = f", {stats.disk_bytes / stats.bytes:.2f}x the answers" if stats.bytes else ""
    print(f"on disk        {_size(stats.disk_bytes)}{ratio}")
    print(f"oldest         {_when(stats.oldest)}")
    print(f"newest         {_when(stats.newest)}")
    print(f"last used      {_when(stats.last_used)}")
    print(f"hits           {stats.hits} (answers served from these entries)")
    if old:
        print(
            f"old format     {len(old)} files not read (asynceval cache prune --all deletes them)"
        )
    return 0


def cache_prune(args: argparse.Namespace) -> int:
    if not (args.all or args.max_bytes is not None or args.older_than is not None):
        raise CLIError("say what to prune: --max-bytes N, --older-than DAYS or --all")
    cache = _cache(args)
    older_than_s = None if args.older_than is None else args.older_than * 86_400
    try:
        removed, freed = cache.prune(
            max_bytes=args.max_bytes, older_than_s=older_than_s, everything=args.all
        )
        stats = cache.stats()
    except Exception as exc:  # sqlite3.Error, OSError
        raise CLIError(f"{cache.directory}: cannot be pruned ({exc})") from None
    print(
        f"deleted {removed} entries ({_size(freed)}); {stats.entries} left "
        f"({_size(stats.bytes)}, {_size(stats.disk_bytes)} on disk)"
    )
    return 0
