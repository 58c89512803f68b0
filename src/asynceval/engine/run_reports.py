"""RunReports: what `Benchmark.run` returns, the run's reports read back from its results file.

Keeping every report of a long run in memory costs about 3 KB each (300 MB at 100,000). The run
writes each report to its results file anyway, so the return value keeps only where each of its
lines begins (8 bytes a report) and reads a report when it is asked for. A run without
`results_path` writes to a temporary file that this object owns (deleted when it is garbage
collected, or at exit; a killed process leaves it in the temporary directory).
"""

from __future__ import annotations

import contextlib
import json
import os
import weakref
from array import array
from collections.abc import Iterator, Sequence
from typing import Any, overload


class RunReports(Sequence[dict[str, Any]]):
    """The reports of one run, in the order they finished: a read-only sequence of dicts.

    `len()`, indexing, slices (a list), iteration, `+` (a list) and `==` with a list work as for
    the list of reports `run()` used to return; `list(reports)` makes one. Each report is read from the
    results file (`path`) when asked for, so its values are what the file holds: JSON types
    (a tuple comes back as a list, an object JSON cannot hold as its repr). Keep the results
    file while you use the reports; a run's own temporary file (`temporary`) lives as long as
    this object.
    """

    def __init__(
        self, path: str | None, offsets: array[int] | None = None, *, temporary: bool = False
    ) -> None:
        self.path = path
        """The results file the reports are read from (None: the run kept none)."""
        self.temporary = temporary
        # Where each report line begins, recorded as the run wrote it (another run appending to
        # the same file never mixes in).
        self._offsets = offsets if offsets is not None else array("q")
        if temporary and path is not None:
            weakref.finalize(self, remove_file, path)

    @classmethod
    def empty(cls) -> RunReports:
        """No reports (a run with `collect=False`)."""
        return cls(None)

    def __reduce__(self) -> tuple[Any, ...]:
        # A copy or a pickle (sent to another process) is a plain list: a temporary file lives
        # only as long as this object, and another machine has no such file.
        return (list, (list(self),))

    def __len__(self) -> int:
        return len(self._offsets)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        offsets = self._offsets
        if isinstance(index, slice):
            return [self._read(offsets[i]) for i in range(*index.indices(len(offsets)))]
        return self._read(offsets[index])  # IndexError as a list's

    def __iter__(self) -> Iterator[dict[str, Any]]:
        offsets = self._offsets
        if not offsets or self.path is None:
            return
        with open(self.path, "rb") as file:
            for offset in offsets:
                file.seek(offset)
                yield _parse(file.readline())

    def _read(self, offset: int) -> dict[str, Any]:
        assert self.path is not None
        with open(self.path, "rb") as file:
            file.seek(offset)
            return _parse(file.readline())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RunReports | list | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __add__(self, other: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """`reports + more` is a list, as with the lists `run()` used to return."""
        if not isinstance(other, RunReports | list | tuple):
            return NotImplemented
        return [*self, *other]

    def __radd__(self, other: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        if not isinstance(other, list | tuple):
            return NotImplemented
        return [*other, *self]

    __hash__ = None  # type: ignore[assignment]  # mutable-looking, like the list it stands for

    def __repr__(self) -> str:
        return f"<RunReports: {len(self)} reports in {self.path}>"


def _parse(line: bytes) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(line)
    return record


def remove_file(path: str) -> None:
    """Delete `path` if it is there."""
    with contextlib.suppress(OSError):
        os.unlink(path)
