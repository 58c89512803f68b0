"""Finding the Benchmark a TARGET names: `path/file.py[:attr]` or `module:attr`.

In a file without `:attr`, asynceval takes the module attribute `benchmark` (an instance, a class
or a zero-argument factory), else the one Benchmark subclass the file defines. Whatever stops
that (no such file, a directory, an unreadable or non-Python file, an exception or `sys.exit` at
import, no such module or attribute, something that is not a Benchmark, a factory that raises)
is a CLIError naming the target and what is wrong, raised before anything is written.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

from ..engine import Benchmark
from ._errors import CLIError, describe

_FORMS = "give path/file.py, path/file.py:NAME or module:NAME"


def load_benchmark(target: str) -> Benchmark:
    """The Benchmark instance TARGET names, or a CLIError saying what is wrong."""
    path_part, _, attr = (
        target.partition(":") if not _is_windows_drive(target) else (target, "", "")
    )
    if path_part.endswith(".py") or Path(path_part).suffix == ".py":
        module = _import_file(Path(path_part))
    else:
        if not attr:
            raise CLIError(f"{target!r}: {_not_a_target(Path(path_part))}")
        module = _import_module(path_part)
    if attr:
        if not hasattr(module, attr):
            raise CLIError(f"{target!r}: {path_part} has no attribute {attr!r}")
        return _instantiate(getattr(module, attr), target)
    if hasattr(module, "benchmark"):
        return _instantiate(module.benchmark, target)
    subclasses = [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and issubclass(obj, Benchmark)
        and obj is not Benchmark
        and obj.__module__ == module.__name__
    ]
    defined = [obj for obj in subclasses if not inspect.isabstract(obj)]
    if not defined and subclasses:  # the person's Benchmark lacks a method it must define
        raise CLIError(f"{target!r}: " + "; ".join(_cannot_build(c) for c in subclasses))
    if len(defined) != 1:
        names = ", ".join(sorted(c.__name__ for c in defined)) or "none"
        raise CLIError(
            f"{target!r}: cannot tell which Benchmark to run (found: {names}); "
            "name one as FILE.py:NAME or define `benchmark = ...` in the file"
        )
    return _instantiate(defined[0], target)


def source_files(target: str) -> list[Path]:
    """The source files TARGET's code is read from, once `load_benchmark` imported it: the
    file of `path/file.py[:NAME]`; for `module:NAME`, the module's own source file (none for a
    module without one, such as a namespace package). A resume checks their hashes."""
    path_part, _, _ = target.partition(":") if not _is_windows_drive(target) else (target, "", "")
    if path_part.endswith(".py") or Path(path_part).suffix == ".py":
        return [Path(path_part).resolve()]
    module = sys.modules.get(path_part)
    found = getattr(module, "__file__", None)
    return [Path(found).resolve()] if isinstance(found, str) and Path(found).is_file() else []


def _is_windows_drive(target: str) -> bool:
    return len(target) > 2 and target[1] == ":" and target[2] in "\\/"


def _not_a_target(path: Path) -> str:
    """What is wrong with a TARGET without `:NAME` that does not end in .py."""
    if path.is_dir():
        return f"a directory, not a Python file; {_FORMS}"
    if path.exists():
        return f"not a Python file (no .py); {_FORMS}"
    return _FORMS


def _import_file(path: Path) -> Any:
    _check_readable(path)
    name = f"asynceval_target_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CLIError(f"{str(path)!r}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.resolve().parent))  # so the file can import its neighbours
    try:
        spec.loader.exec_module(module)
    except SystemExit as exc:  # a script's sys.exit() or argparse run at import time
        raise CLIError(_exited(str(path), exc)) from None
    except Exception as exc:
        raise CLIError(f"{str(path)!r} failed to import: {describe(exc)}") from None
    return module


def _check_readable(path: Path) -> None:
    """A CLIError unless `path` is a regular file whose first byte can be read: so a missing,
    unreadable or special file (a FIFO would block the import forever) gets its own message."""
    if path.is_dir():
        raise CLIError(f"{str(path)!r}: a directory, not a Python file")
    if not path.exists():
        raise CLIError(f"{str(path)!r}: no such file")
    if not path.is_file():
        raise CLIError(f"{str(path)!r}: not a regular file")
    try:
        with path.open("rb") as file:
            file.read(1)
    except OSError as exc:
        raise CLIError(f"{str(path)!r}: cannot read it: {exc.strerror or exc}") from None


def _import_module(name: str) -> Any:
    sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(f"{exc.name}.")):
            raise CLIError(f"{name!r}: no such module ({exc})") from None
        # The module is there, but something it imports is not.
        raise CLIError(f"{name!r} failed to import: {describe(exc)}") from None
    except SystemExit as exc:
        raise CLIError(_exited(name, exc)) from None
    except Exception as exc:
        raise CLIError(f"{name!r} failed to import: {describe(exc)}") from None


def _exited(name: str, exc: SystemExit) -> str:
    return (
        f"{name!r} exited while being imported (SystemExit: {exc.code!r}); "
        'put what the file does as a script under `if __name__ == "__main__":`'
    )


def _instantiate(obj: Any, target: str) -> Benchmark:
    if isinstance(obj, Benchmark):
        return obj
    if inspect.isclass(obj) and not issubclass(obj, Benchmark):
        raise CLIError(f"{target!r}: {obj.__name__} is not a Benchmark subclass")
    if not callable(obj):
        raise CLIError(f"{target!r}: {type(obj).__name__} is not a Benchmark")
    if inspect.isclass(obj) and inspect.isabstract(obj):
        raise CLIError(f"{target!r}: {_cannot_build(obj)}")
    try:
        made = obj()
    except TypeError as exc:
        raise CLIError(f"{target!r}: cannot build it without arguments ({exc})") from None
    except Exception as exc:
        raise CLIError(f"{target!r}: building it failed: {describe(exc)}") from None
    if not isinstance(made, Benchmark):
        raise CLIError(f"{target!r}: the factory returned {type(made).__name__}, not a Benchmark")
    return made


def _cannot_build(cls: type) -> str:
    """Why a Benchmark class with abstract methods cannot be built, naming the methods."""
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    hint = (
        " (async def setup_agents(self, agent_data, environment, task, user) returns the "
        "agents of a repetition)"
        if missing == ["setup_agents"]
        else ""
    )
    return (
        f"the Benchmark class {cls.__name__} cannot be built: it does not define "
        f"{', '.join(missing)}{hint}"
    )
