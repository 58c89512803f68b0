"""run.json: how a run was started, so that `asynceval run --resume DIR` needs nothing else.

Written before the first repetition (atomically: a temporary file renamed over it) and again at
the start of each resumed segment, it records the run's ids, its target, what decides what it
computes (`computes`: the target, the tasks' source with its content hash and column mapping,
the repeats (with --repeats auto, its --ci-width and --max-repeats: a resume continues the same
rule), the model and base URL) and what decides how it runs (`how`: limits, timeout, the
Dask backend, cache, journal, errors allowed, the pass-rate floor), the settings without secrets
and the versions. A resume takes every option from here; an option given again that decides
what the run computes must have the same value, one that decides how it runs may change (the
new segment records it).

The target's source files are recorded with their SHA-256 (`target.sha256`: the file of
`path/file.py`, the module's source file of `module:NAME`), and each segment records the hashes
it ran with: a resume after the code changed is refused unless `--allow-changed-target` (then
that segment's hashes are the new reference). A manifest without hashes (an older asynceval's)
is resumed without this check. The budget is not copied from here: it belongs to the run
directory (see `asynceval.engine.run_cost`).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import shlex
import socket
import sys
import tempfile
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._version import __version__
from ._errors import CLIError

NAME = "run.json"
FORMAT = 1

# --option -> its argparse dest, for what a run computes (given again: the same value only) ...
COMPUTES = {
    "--tasks": "tasks",
    "--query-field": "query_field",
    "--id-field": "id_field",
    "--field": "field",
    "--repeats": "repeats",
    "--ci-width": "ci_width",
    "--max-repeats": "max_repeats",
    "--model": "model",
    "--base-url": "base_url",
}
# ... and for how it runs (given again: the new value, for this segment).
HOW = {
    "--max-concurrent-llm-calls": "max_concurrent_llm_calls",
    "--max-concurrent-tasks": "max_concurrent_tasks",
    "--llm-call-timeout": "llm_call_timeout",
    "--dask": "dask",
    "--cache": "cache",
    "--no-cache": "no_cache",
    "--no-journal": "no_journal",
    "--allow-errors": "allow_errors",
    "--fail-under": "fail_under",
    "--max-cost": "max_cost",
    "--lane": "lane",
    "--keep-batches": "keep_batches",
    "--allow-changed-target": "allow_changed_target",
}
# ... of which these are never taken from the manifest: the budget is the run directory's (the
# engine carries it over), and accepting a changed target is this command line's choice alone.
NOT_CARRIED = frozenset({"max_cost", "allow_changed_target"})


def canonical_target(spec: str) -> str:
    """TARGET as a resume finds it from any folder: a file's absolute path (with its :NAME);
    `module:NAME` as given."""
    path, colon, name = spec.partition(":")
    if path.endswith(".py") or os.sep in path or (os.altsep and os.altsep in path):
        return os.path.abspath(path) + colon + name
    return spec


def read(out: Path) -> dict[str, Any] | None:
    """DIR/run.json, or None when there is none (a run of an older asynceval); a file that is
    not a manifest is one line."""
    path = out / NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"--resume {out}: cannot read {path} ({exc})") from None
    try:
        manifest = json.loads(text)
    except ValueError:
        manifest = None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CLIError(f"--resume {out}: {path} is not a run manifest of this asynceval")
    for key in ("target", "computes", "how", "segments"):
        if not isinstance(manifest.get(key), dict if key != "segments" else list):
            raise CLIError(f"--resume {out}: {path} has no {key!r}: not a whole run manifest")
    return manifest


def write(out: Path, manifest: Mapping[str, Any]) -> None:
    """Replace DIR/run.json with `manifest` in one rename (a reader sees the old or the new)."""
    descriptor, temporary = tempfile.mkstemp(prefix=".run-", suffix=".json", dir=out)
    try:
        os.fchmod(descriptor, 0o644)  # not mkstemp's 0600: a run directory others may read
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            json.dump(manifest, file, indent=2, ensure_ascii=False, default=str)
            file.write("\n")
        os.replace(temporary, out / NAME)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def given(args: argparse.Namespace, dest: str) -> bool:
    """Whether option `dest` was given on this command line (not left at its default)."""
    value = getattr(args, dest)
    return value not in (None, False, [])


def apply(args: argparse.Namespace, manifest: Mapping[str, Any], out: Path) -> None:
    """Fill `args` for a resume from `manifest`: the target and every option the run was
    started with. A computing option given again with another value is a CLIError (exit 2)
    naming the option and both values."""
    target = manifest["target"]
    recorded_target = target.get("canonical")
    if not isinstance(recorded_target, str):
        raise CLIError(f"--resume {out}: {out / NAME} names no target")
    if args.target is not None and canonical_target(args.target) != recorded_target:
        raise _differs(out, "TARGET", args.target, target.get("spec", recorded_target))
    args.target = recorded_target
    options = manifest["computes"].get("options", {})
    # The model and base URL the run had, wherever they came from (an option, .env, the
    # environment): what a model or base URL given again must equal.
    resolved = {
        "model": manifest["computes"].get("resolved", {}).get("model"),
        "base_url": manifest["computes"].get("resolved", {}).get("base_url"),
    }
    for option, dest in COMPUTES.items():
        recorded = resolved[dest] if dest in resolved else options.get(dest)
        if given(args, dest):
            mine = getattr(args, dest)
            mine_cmp = os.path.abspath(mine) if dest == "tasks" else mine
            if mine_cmp != recorded:
                raise _differs(out, option, mine, "none" if recorded is None else recorded)
        setattr(args, dest, recorded if recorded is not None else getattr(args, dest))
    for dest in HOW.values():
        if dest in NOT_CARRIED:
            continue
        if not given(args, dest) and dest in manifest["how"]:
            if dest in ("cache", "no_cache") and (given(args, "cache") or given(args, "no_cache")):
                continue
            setattr(args, dest, manifest["how"][dest])


def file_hashes(paths: Iterable[Path]) -> dict[str, str]:
    """{path: SHA-256 hex} of the files (read in blocks); "missing" for one that cannot be read."""
    found: dict[str, str] = {}
    for path in paths:
        digest = hashlib.sha256()
        try:
            with open(path, "rb") as file:
                for block in iter(lambda: file.read(1 << 16), b""):
                    digest.update(block)
        except OSError:
            found[str(path)] = "missing"
            continue
        found[str(path)] = digest.hexdigest()
    return found


def recorded_hashes(manifest: Mapping[str, Any]) -> dict[str, str] | None:
    """The target hashes the latest segment ran with (one that accepted a change recorded the
    new ones), else the run's; None for a manifest that kept none (an older asynceval's)."""
    for segment in reversed(manifest.get("segments") or []):
        if isinstance(segment, Mapping) and isinstance(segment.get("target_sha256"), dict):
            return dict(segment["target_sha256"])
    recorded = manifest.get("target", {}).get("sha256")
    return dict(recorded) if isinstance(recorded, dict) else None


def check_target(out: Path, manifest: Mapping[str, Any], *, allow: bool) -> None:
    """A resume of a target whose source changed since the run (or its last segment) started
    is a CLIError naming the file and both hashes, unless `allow` (--allow-changed-target)."""
    recorded = recorded_hashes(manifest)
    if not recorded or allow:
        return
    now = file_hashes(Path(path) for path in recorded)
    for path, before in recorded.items():
        if now[path] != before:
            after = now[path] if now[path] == "missing" else f"{now[path][:12]}..."
            raise CLIError(
                f"--resume {out}: the target {path} changed since the run started (sha256 "
                f"{before[:12]}... -> {after}); resume with --allow-changed-target to accept it"
            )


def recorded_budget(manifest: Mapping[str, Any]) -> float | None:
    """The run's total budget in USD as its latest segment recorded it (--max-cost, or
    MAX_COST_USD then), or None when it ran without one."""
    for segment in reversed(manifest.get("segments") or []):
        if isinstance(segment, Mapping) and isinstance(segment.get("how"), Mapping):
            value = segment["how"].get("max_cost")
            return float(value) if isinstance(value, int | float) else None
    value = manifest.get("how", {}).get("max_cost")
    return float(value) if isinstance(value, int | float) else None


def check_tasks(out: Path, recorded: Mapping[str, Any], now: Mapping[str, Any]) -> None:
    """The tasks a resume reads must be those the run was started with: the same content."""
    before, after = recorded.get("sha256"), now.get("sha256")
    if before is not None and before != after:
        where = recorded.get("path") or recorded.get("source") or "the tasks"
        raise CLIError(
            f"--resume {out}: {where} changed since the run started (sha256 {before[:12]}... "
            f"then, {str(after)[:12]}... now): resume only with the tasks it was run with"
        )
    if recorded.get("ids_sha256") is not None and recorded.get("ids_sha256") != now.get(
        "ids_sha256"
    ):
        raise CLIError(
            f"--resume {out}: the benchmark's own tasks changed since the run started "
            f"({recorded.get('count')} tasks then, {now.get('count')} now, other ids): resume "
            "only with the tasks it was run with"
        )


def new(
    *,
    run_id: str,
    args: argparse.Namespace,
    benchmark: str,
    tasks: Mapping[str, Any],
    repeats: int | str,
    settings: Mapping[str, Any],
    target_sha256: Mapping[str, str],
) -> dict[str, Any]:
    """The manifest of a new run (its first segment is added by `add_segment`);
    `target_sha256`: the target's source files and their hashes (`file_hashes`)."""
    options = {dest: getattr(args, dest) for dest in COMPUTES.values()}
    if options["tasks"] is not None:
        options["tasks"] = os.path.abspath(options["tasks"])
    options["repeats"] = repeats
    return {
        "format": FORMAT,
        "run_id": run_id,
        "created_at": _now(),
        "target": {
            "spec": args.target,
            "canonical": canonical_target(args.target),
            "benchmark": benchmark,
            "sha256": dict(target_sha256),
        },
        "computes": {
            "options": options,
            "tasks": dict(tasks),
            "resolved": {
                "model": settings.get("llm_model"),
                "base_url": settings.get("llm_base_url"),
            },
        },
        "how": how_of(args),
        "settings": dict(settings),
        "versions": {"asynceval": __version__, "python": platform.python_version()},
        "segments": [],
    }


def how_of(args: argparse.Namespace) -> dict[str, Any]:
    return {dest: getattr(args, dest) for dest in HOW.values()}


def add_segment(
    manifest: dict[str, Any],
    *,
    run_id: str,
    args: argparse.Namespace,
    resumed: bool,
    target_sha256: Mapping[str, str],
) -> None:
    """Record a segment (the first run, or a resume) starting now, with how it runs and the
    hashes of the target's source files it runs (`target_sha256`)."""
    manifest["segments"].append(
        {
            "run_id": run_id,
            "started_at": _now(),
            "resumed": resumed,
            "how": how_of(args),
            "target_sha256": dict(target_sha256),
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "argv": shlex.join(sys.argv[1:]),
        }
    )


def _differs(out: Path, option: str, mine: Any, theirs: Any) -> CLIError:
    return CLIError(
        f"--resume {out}: {option} {_show(mine)} differs from the run's {_show(theirs)}; it "
        "decides what the run computes: resume without it, or start a new run with --out"
    )


def _show(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(str(v) for v in value) or "none"
    return str(value)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
