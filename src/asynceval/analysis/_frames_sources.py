"""What the frames read from a run directory: its files, and its manifest's segments.

A run directory (DESIGN section 14) holds `run.json` (the manifest: the run's id, its target,
what it computes, one entry per segment), `results.jsonl` (a header line per segment, then one
report per repetition), `events.jsonl` (every event, each carrying its segment's run_id) and
its call journal. A directory given to the frames must hold at least a results or an events
file: `run.json` alone is a run that never started a repetition, anything else is not a run
(`FramesError`). A library run (`bench.run(results_path=DIR/results.jsonl)`) has no manifest:
its segments are found in its headers and its `run_started` events instead.

The manifest is read leniently, as `asynceval report` reads it (`run_info.read_manifest`): one
that cannot be read is no manifest; the results file is the record.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

from ..errors import AsyncEvalError

MANIFEST = "run.json"
RESULTS = "results.jsonl"
EVENTS = "events.jsonl"


class FramesError(AsyncEvalError, ValueError):
    """A path given to the frames that is not a run directory (missing, a file, or a folder
    holding neither results.jsonl nor events.jsonl); the message names it."""


@dataclass(frozen=True)
class RunDir:
    """One run directory: where its files are (None: absent) and its manifest (None: none)."""

    path: Path
    results: Path | None
    events: Path | None
    manifest: Mapping[str, Any] | None

    @property
    def run_dir_id(self) -> str | None:
        """The run's own id: the manifest's `run_id`, which is its first segment's (None
        without a manifest: then the first segment found in its files stands for it)."""
        value = self.manifest.get("run_id") if self.manifest else None
        return value if isinstance(value, str) else None


def run_dirs(paths: Sequence[str | PathLike[str]]) -> list[RunDir]:
    """The run directories at `paths`, in order, each once (the same directory given twice is
    read once); FramesError for none given or for a path that is not a run directory."""
    if not paths:
        raise FramesError("no run directory given")
    found: dict[Path, RunDir] = {}
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise FramesError(f"{os.fspath(given)}: no such directory")
        if not path.is_dir():
            raise FramesError(f"{os.fspath(given)}: not a directory (give a run directory)")
        results, events = path / RESULTS, path / EVENTS
        run = RunDir(
            path=path,
            results=results if results.is_file() else None,
            events=events if events.is_file() else None,
            manifest=read_manifest(path / MANIFEST),
        )
        if run.results is None and run.events is None and run.manifest is None:
            raise FramesError(
                f"{os.fspath(given)}: not a run directory (no {MANIFEST}, {RESULTS} or {EVENTS})"
            )
        found.setdefault(path.resolve(), run)
    return list(found.values())


def read_manifest(path: Path) -> Mapping[str, Any] | None:
    """The manifest at `path`, or None when there is none or it is not a manifest."""
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("segments"), list):
        return None
    return manifest


def segment_rows(run: RunDir) -> list[dict[str, Any]]:
    """One row per segment its manifest records, in order: what only the manifest knows of
    a segment (how it was started: target, options, pid, host, command line)."""
    manifest = run.manifest or {}
    target = _mapping(manifest.get("target"))
    computes = _mapping(manifest.get("computes"))
    options, resolved = _mapping(computes.get("options")), _mapping(computes.get("resolved"))
    versions = _mapping(manifest.get("versions"))
    rows = []
    for index, segment in enumerate(manifest.get("segments") or []):
        if not isinstance(segment, Mapping) or not isinstance(segment.get("run_id"), str):
            continue
        how = _mapping(segment.get("how"))
        repeats = options.get("repeats")
        rows.append(
            {
                "run_id": segment["run_id"],
                "segment": index,
                "manifest_started_at": _text(segment.get("started_at")),
                "resumed": segment.get("resumed") is True,
                "target": _text(target.get("spec")),
                "benchmark": _text(target.get("benchmark")),
                "repeats": None if repeats is None else str(repeats),
                "model": _text(resolved.get("model")),
                "base_url": _text(resolved.get("base_url")),
                "lane": _text(how.get("lane")),
                "host": _text(segment.get("host")),
                "pid": segment.get("pid") if type(segment.get("pid")) is int else None,
                "argv": _text(segment.get("argv")),
                "asynceval_version": _text(versions.get("asynceval")),
            }
        )
    return rows


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
