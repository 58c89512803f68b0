"""What a run directory's manifest (`run.json`) says, for `asynceval report` and `view`: how
the run was started, as a few labelled lines. Reading is lenient (a missing or unreadable
manifest is simply not shown): the results file is the record; the manifest explains it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MANIFEST = "run.json"


def read_manifest(results: Path) -> dict[str, Any] | None:
    """The manifest beside the results file at `results` (DIR/run.json beside
    DIR/results.jsonl), or None when there is none or it cannot be read as one."""
    if results.name != "results.jsonl":
        return None
    try:
        manifest = json.loads((results.parent / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and "computes" in manifest else None


def describe(manifest: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, text) lines of what a manifest says: the target (with its source file's
    SHA-256 when recorded), the tasks, the repeats, the model, and the run's segments."""
    target = _mapping(manifest.get("target"))
    computes = _mapping(manifest.get("computes"))
    options = _mapping(computes.get("options"))
    tasks = _mapping(computes.get("tasks"))
    resolved = _mapping(computes.get("resolved"))
    found = manifest.get("segments")
    segments: list[Any] = found if isinstance(found, list) else []
    text = f"{target.get('spec', '?')} ({target.get('benchmark', '?')})"
    hashes = _mapping(target.get("sha256"))
    if len(hashes) == 1:  # the file's SHA-256, which a resume checks
        text += f", sha256 {str(next(iter(hashes.values())))[:12]}..."
    lines = [("target", text)]
    if tasks.get("kind") == "default":
        lines.append(("tasks", f"the benchmark's own: {tasks.get('count', '?')}"))
    else:
        digest = tasks.get("sha256")
        where = tasks.get("path") or tasks.get("source") or "?"
        rows = tasks.get("rows")
        text = f"{where} ({tasks.get('kind', '?')}"
        text += f", {rows} rows" if rows is not None else ""
        text += f", sha256 {digest[:12]}...)" if isinstance(digest, str) else ")"
        lines.append(("tasks", text))
    lines.append(("repeats", str(options.get("repeats", "?"))))
    model = resolved.get("model") or "the provider's default"
    base = resolved.get("base_url") or "the embedded simulated provider"
    lines.append(("model", f"{model} at {base}"))
    resumed = len([s for s in segments if isinstance(s, Mapping) and s.get("resumed")])
    text = f"{manifest.get('run_id', '?')}, started {manifest.get('created_at', '?')}"
    if resumed:
        text += f", resumed {resumed} time{'s' if resumed != 1 else ''}"
    lines.append(("run", text))
    return lines


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
