"""Every command and code block in README.md and the docs pages runs as written, and the
reference pages hold everything the code defines.

A page's ```bash lines run in order in a scratch directory of the page's own, laid out like a
checkout (examples/ and a .venv/bin with python and asynceval), so a page can show several
commands on one run. ```python blocks run as scripts, each in a temporary directory. ```text
blocks are not run: they hold what cannot run as written (a command for several machines, a
signature). The set-up lines are checked, not repeated: the install is `.ci/run`'s own step, and
`.venv/bin/pytest` is this very suite. `sim serve`, which serves until stopped, is started, asked
for its stats and stopped.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import httpx
import pytest

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(?P<lang>[^\n`]*)\n(?P<body>.*?)^```$", re.M | re.S)
FENCE_LANGUAGES = {"bash", "python", "text"}

INSTALL = "python3 -m venv .venv && .venv/bin/pip install -e . && "
SET_UP = INSTALL + ".venv/bin/asynceval run examples/arithmetic.py"
TESTS = ".venv/bin/pip install -e '.[dev]' && .venv/bin/pytest"


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _blocks(page: Path) -> list[tuple[str, str]]:
    """(language, body) of each fenced block of `page`, in order."""
    return [(m["lang"].strip(), m["body"]) for m in FENCE.finditer(page.read_text())]


SHELL_LINES = [
    pytest.param(page, line.strip(), id=f"{_name(page)}:{line.strip()[:60]}")
    for page in PAGES
    for language, body in _blocks(page)
    if language == "bash"
    for line in body.splitlines()
    if line.strip() and not line.strip().startswith("#")
]
PYTHON_BLOCKS = [
    pytest.param(body, id=f"{_name(page)}:{index}")
    for page in PAGES
    for index, body in enumerate(body for language, body in _blocks(page) if language == "python")
]


def _reference() -> ModuleType:
    """The mkdocs hook that builds the reference pages (docs/hooks/reference.py)."""
    spec = importlib.util.spec_from_file_location("reference", ROOT / "docs/hooks/reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Path]:
    """Each page's scratch directory, made on first use: examples/ and .venv/bin/python and
    .venv/bin/asynceval, as in a checkout."""

    class Scratches(dict[Path, Path]):
        def __missing__(self, page: Path) -> Path:
            root = tmp_path_factory.mktemp(page.stem)
            (root / "examples").symlink_to(ROOT / "examples")
            bin_dir = root / ".venv" / "bin"
            bin_dir.mkdir(parents=True)
            for name, run in (("python", ""), ("asynceval", " -m asynceval")):
                script = bin_dir / name  # a script: a link would lose the venv's packages
                script.write_text(f'#!/bin/sh\nexec "{sys.executable}"{run} "$@"\n')
                script.chmod(0o755)
            self[page] = root
            return root

    return Scratches()


def test_every_code_block_is_bash_python_or_text() -> None:
    """A block in another language (or none) would be a snippet that no test runs."""
    for page in PAGES:
        for language, body in _blocks(page):
            assert language in FENCE_LANGUAGES, f"{_name(page)}: ```{language}\n{body}"


def test_the_readme_has_the_two_set_up_commands_and_ci_runs_the_second() -> None:
    readme = (ROOT / "README.md").read_text()
    set_up = re.search(r"## Set-up\n\n```bash\n(.*?)```", readme, re.S)
    assert set_up is not None
    assert set_up.group(1).strip().splitlines() == [SET_UP, TESTS]
    ci_lines = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if not line.lstrip().startswith("#")
    ]
    assert "python3 -m venv .venv" in ci_lines
    assert any(TESTS in line for line in ci_lines), "README's second command is not in .ci/run"


def test_the_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) < 150


@pytest.mark.parametrize(("page", "line"), SHELL_LINES)
def test_shell_line_runs_as_written(page: Path, line: str, scratch: dict[Path, Path]) -> None:
    cwd = scratch[page]
    if line == TESTS:
        return  # .ci/run's own step (checked above), and this very suite
    line = line.removeprefix(INSTALL)  # the install is .ci/run's first step
    if ".venv-phoenix/" in line or "localhost:6006" in line:
        return  # Phoenix's lines: tests/test_docs_observability.py runs them against a Phoenix
    if " sim serve " in f" {line} ":
        _serve_and_stop(line, cwd)
        return
    done = subprocess.run(
        line, shell=True, cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"


def _serve_and_stop(line: str, cwd: Path) -> None:
    port = "18765"
    server = subprocess.Popen(
        shlex.split(line.replace("--port 8000", f"--port {port}")), cwd=cwd, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                stats = httpx.get(f"http://127.0.0.1:{port}/stats", timeout=0.5).json()
                break
            except httpx.TransportError:
                time.sleep(0.05)
        else:
            pytest.fail("sim serve did not start")
        assert stats["requests"] == 0
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=10)


@pytest.mark.parametrize("code", PYTHON_BLOCKS)
def test_python_block_runs_as_written(code: str, tmp_path: Path) -> None:
    script = tmp_path / "snippet.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "Unclosed" not in done.stderr  # snippets close what they open


def test_the_settings_reference_has_every_setting() -> None:
    from asynceval import Settings

    table = _reference().settings_table()
    rows = {line.split("|")[1].strip() for line in table.splitlines()[2:]}
    assert rows == {name.upper() for name in Settings.model_fields}


def test_the_events_reference_has_every_event_name() -> None:
    from asynceval import events

    reference = _reference()
    table = reference.events_table()
    rows = {line.split("|")[1].strip() for line in table.splitlines()[2:]}
    names = {
        value
        for name, value in vars(events).items()
        if name.isupper() and isinstance(value, str) and value == name.lower()
    }
    assert names and rows == names
    assert set(reference.event_names().values()) == names


def test_the_cli_reference_has_every_command() -> None:
    text = _reference().cli_reference()
    for command in ("run", "report", "compare", "view", "logs check", "sim serve"):
        assert f"## asynceval {command}\n" in text
        assert f"usage: asynceval {command} " in text


def test_every_reference_marker_is_replaced() -> None:
    reference = _reference()
    for page in (ROOT / "docs").rglob("*.md"):
        rendered = reference.render(page.read_text())
        assert "<!-- reference:" not in rendered, _name(page)
