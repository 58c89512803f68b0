"""Finding the Benchmark a TARGET names: `path/file.py[:attr]` or `module:attr`.

In a file without `:attr`, asynceval takes the module attribute `benchmark` (an instance, a class
or a zero-argument factory), else the one Benchmark subclass the file defines.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

from ..engine import Benchmark
from ._errors import CLIError


def load_benchmark(target: str) -> Benchmark:
    """The Benchmark instance TARGET names, or a CLIError saying what is wrong."""
    path_part, _, attr = (
        target.partition(":") if not _is_windows_drive(target) else (target, "", "")
    )
    if path_part.endswith(".py") or Path(path_part).suffix == ".py":
        module = _import_file(Path(path_part))
    else:
        if not attr:
            raise CLIError(f"{target!r}: give a file (path/file.py) or module:attr")
        module = _import_module(path_part)
    if attr:
        if not hasattr(module, attr):
            raise CLIError(f"{target!r}: {module.__name__} has no attribute {attr!r}")
        return _instantiate(getattr(module, attr), target)
    if hasattr(module, "benchmark"):
        return _instantiate(module.benchmark, target)
    defined = [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and issubclass(obj, Benchmark)
        and obj is not Benchmark
        and obj.__module__ == module.__name__
        and not inspect.isabstract(obj)
    ]
    if len(defined) != 1:
        names = ", ".join(sorted(c.__name__ for c in defined)) or "none"
        raise CLIError(
            f"{target!r}: cannot tell which Benchmark to run (found: {names}); "
            "name one as FILE.py:NAME or define `benchmark = ...` in the file"
        )
    return _instantiate(defined[0], target)


def _is_windows_drive(target: str) -> bool:
    return len(target) > 2 and target[1] == ":" and target[2] in "\\/"


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise CLIError(f"{str(path)!r}: no such file")
    name = f"asynceval_target_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CLIError(f"{str(path)!r}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.resolve().parent))  # so the file can import its neighbours
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise CLIError(f"{str(path)!r} failed to import: {type(exc).__name__}: {exc}") from exc
    return module


def _import_module(name: str) -> Any:
    sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise CLIError(f"{name!r}: no such module ({exc})") from exc
    except Exception as exc:
        raise CLIError(f"{name!r} failed to import: {type(exc).__name__}: {exc}") from exc


def _instantiate(obj: Any, target: str) -> Benchmark:
    if isinstance(obj, Benchmark):
        return obj
    if inspect.isclass(obj) and not issubclass(obj, Benchmark):
        raise CLIError(f"{target!r}: {obj.__name__} is not a Benchmark subclass")
    if not callable(obj):
        raise CLIError(f"{target!r}: {type(obj).__name__} is not a Benchmark")
    try:
        made = obj()
    except TypeError as exc:
        raise CLIError(f"{target!r}: cannot build it without arguments ({exc})") from exc
    if not isinstance(made, Benchmark):
        raise CLIError(f"{target!r}: the factory returned {type(made).__name__}, not a Benchmark")
    return made
