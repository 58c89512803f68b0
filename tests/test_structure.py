"""The code's shape, checked: layering inside engine/, events written only in events.py, every
exception in one tree, functions of a readable length."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import json
import pkgutil
import subprocess
import sys
import warnings
from pathlib import Path

import asynceval
from asynceval.errors import AsyncEvalError

SRC = Path(asynceval.__file__).parent


def _imports(path: Path) -> set[str]:
    """Sibling modules `path` imports at run time (inside functions too; not under
    `if TYPE_CHECKING:`), by relative or absolute name."""
    found: set[str] = set()

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if "TYPE_CHECKING" in ast.unparse(node.test):
                for child in node.orelse:
                    self.visit(child)
                return
            self.generic_visit(node)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.level == 1:
                if node.module:
                    found.add(node.module.split(".")[0])
                else:
                    found.update(alias.name for alias in node.names)
            elif node.level == 0 and node.module and node.module.startswith("asynceval.engine."):
                found.add(node.module.split(".")[2])

        def visit_Import(self, node: ast.Import) -> None:
            for alias in node.names:
                if alias.name.startswith("asynceval.engine."):
                    found.add(alias.name.split(".")[2])

    Visitor().visit(ast.parse(path.read_text()))
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph as a path (first node repeated at the end), or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_the_engine_package_has_no_import_cycle() -> None:
    modules = {p.stem: p for p in (SRC / "engine").glob("*.py") if p.stem != "__init__"}
    graph = {name: _imports(path) & set(modules) for name, path in modules.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_event_names_are_written_only_in_events_py() -> None:
    """Outside events.py nothing calls `emit` (or a logger) with an event name of its own."""
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.name == "events.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute | ast.Name)
                and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
                == "emit"
            ):
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not offenders


def test_every_public_exception_is_in_the_asyncevalerror_tree() -> None:
    internal = {"asynceval.sim._dialect.BadRequest"}  # becomes an HTTP 400, never raised to users
    outside = []
    for info in pkgutil.walk_packages(asynceval.__path__, "asynceval."):
        if info.name.endswith("__main__") or info.name.startswith("asynceval.agents.smolagents"):
            continue  # runs the CLI when imported; needs the optional smolagents extra
        with warnings.catch_warnings():  # the one-release shims of moved modules warn
            warnings.simplefilter("ignore", DeprecationWarning)
            module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, Exception)
                and not issubclass(obj, Warning)  # categories for warnings.warn, not raised
                and obj.__module__.startswith("asynceval")
                and not name.startswith("_")
                and not issubclass(obj, AsyncEvalError)
                and f"{obj.__module__}.{obj.__qualname__}" not in internal
            ):
                outside.append(f"{obj.__module__}.{obj.__qualname__}")
    assert not outside


def test_functions_stay_under_sixty_lines() -> None:
    long = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > 60:
                    long.append(f"{path.relative_to(SRC)}:{node.name} ({length} lines)")
    assert not long


def test_a_run_without_a_backend_never_imports_distributed() -> None:
    """Dask is an extra: the package, a whole run and the CLI's `run` without --dask leave
    `distributed` (and dask) unimported."""
    script = (
        "import sys\n"
        "from asynceval import Benchmark, Task\n"
        "class B(Benchmark):\n"
        "    async def setup_agents(self, agent_data, environment, task, user):\n"
        "        return [lambda query: 'ok'], {}\n"
        "B().run_sync([Task(query='q', id='a')])\n"
        "import asynceval.cli._run\n"
    )
    assert loaded_by(script, ("distributed", "dask")) == []


def test_the_bare_import_leaves_heavy_optional_modules_out() -> None:
    """`import asynceval` imports what a run needs when it needs it: not httpx or aiohttp (a pool
    imports them on first use; httpx's own import brings rich, click and pygments for its command
    line), not structlog (the console format's renderer), not Dask, not any framework."""
    heavy = ("aiohttp", "httpx", "httpx_aiohttp", "structlog", "rich", "click", "pygments")
    heavy += ("distributed", "dask", "openai", "smolagents", "pydantic_ai", "langchain_openai")
    heavy += ("datasets", "pyarrow", "pandas")
    assert loaded_by("import asynceval\n", heavy) == []


def loaded_by(script: str, packages: tuple[str, ...]) -> list[str]:
    """Which of `packages` a fresh interpreter has imported once `script` has run."""
    roots = "{m.split('.')[0] for m in sys.modules}"
    probe = f"import json, sys\nprint(json.dumps(sorted({roots} & {set(packages)!r})))"
    done = subprocess.run(
        [sys.executable, "-c", script + probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded: list[str] = json.loads(done.stdout)
    return loaded


def _package_of(path: Path) -> list[str]:
    """The dotted package a source file sits in, as a list (asynceval/llm/model.py: asynceval, llm)."""
    return ["asynceval", *path.relative_to(SRC).parent.parts]


def test_no_module_imports_from_the_package_root() -> None:
    """The root re-exports from every layer, so importing a name from it (`from .. import
    __version__`) reaches above any module's own layer. Submodules (`from .. import events`)
    are imported by their own name and are fine."""
    offenders = []
    for path in SRC.rglob("*.py"):
        if path == SRC / "__init__.py":
            continue
        package = _package_of(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target != "asynceval":
                continue
            for alias in node.names:
                if importlib.util.find_spec(f"asynceval.{alias.name}") is None:
                    offenders.append(f"{path.relative_to(SRC)}:{node.lineno} {alias.name}")
    assert not offenders


_SENDS = {"handle_async_request", "handle_request"}
_CLIENT_CALLS = {"send", "post", "get", "put", "patch", "delete", "request", "stream"}


def test_only_the_funnel_sends_http() -> None:
    """Outside `asynceval.funnel`, no code hands a request to a transport or calls an HTTP
    client's request methods: every provider request takes the funnel's one send path. (The
    simulated provider is a server, and stands apart; a transport that hands its request to a
    `FunnelTransport`, held as `funnel`, is taking that path: interop's httpx2 transports.)"""
    offenders = []
    for path in SRC.rglob("*.py"):
        relative = path.relative_to(SRC)
        if relative.parts[0] in ("funnel", "sim"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            receiver = ast.unparse(node.func.value).lower()
            if node.func.attr in _SENDS and receiver.endswith(".funnel"):
                continue  # into the funnel's own transport
            if node.func.attr in _SENDS or (
                node.func.attr in _CLIENT_CALLS and ("client" in receiver or "httpx" in receiver)
            ):
                offenders.append(f"{relative}:{node.lineno} {ast.unparse(node.func)}")
    assert not offenders


def test_the_send_checker_finds_a_send() -> None:
    """The check above is not vacuous: the funnel's own send path is what it would flag."""
    sends = [
        node
        for path in (SRC / "funnel").glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _SENDS
    ]
    assert sends


def test_the_layer_contracts_hold() -> None:
    """The walls of DESIGN section 1 (pyproject's import-linter contracts: layers, private
    modules, the simulator standing apart), checked by the suite as well as by CI."""
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--no-cache"],
        cwd=SRC.parents[1],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 3 kept, 0 broken." in done.stdout
