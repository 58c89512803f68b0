"""docs/guides/observability.md's Phoenix block, run as written against a real Phoenix.

tests/test_docs.py runs every other line of the page; it leaves these to this file, since they
need Phoenix: the install line is `.ci/run`'s own step (checked here, not repeated: 850 MB),
`phoenix serve &` is stood for by tests/otel/test_phoenix.py's harness (the same command, on free
ports), and the lines after it run in a scratch checkout with Phoenix's address in place of
http://localhost:6006. Then Phoenix holds what they sent: the example's run in project
`asynceval`, the CLI's in project `arithmetic`, each a whole trace.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from .otel.test_phoenix import PHOENIX, Phoenix, shared_phoenix

ROOT = Path(__file__).parents[1]
PAGE = ROOT / "docs" / "guides" / "observability.md"
BLOCK = re.compile(r"^```bash\n(?P<body>.*?)^```$", re.M | re.S)
ADDRESS = "http://localhost:6006"
INSTALL = "python3 -m venv .venv-phoenix && .venv-phoenix/bin/pip install arize-phoenix"
SERVE = ".venv-phoenix/bin/phoenix serve &"


def phoenix_lines() -> list[str]:
    """The lines of the page's bash block that starts Phoenix."""
    (body,) = [m["body"] for m in BLOCK.finditer(PAGE.read_text()) if SERVE in m["body"]]
    return [line.strip() for line in body.splitlines() if line.strip()]


def test_the_guides_phoenix_install_is_the_one_ci_runs() -> None:
    lines = phoenix_lines()
    assert lines[:2] == [INSTALL, SERVE]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m venv .venv-phoenix" in ci
    assert re.search(r"\.venv-phoenix/bin/pip install .*'arize-phoenix==[\d.]+'", ci)
    assert 'ASYNCEVAL_PHOENIX="$PWD/.venv-phoenix/bin/phoenix"' in ci


def _checkout(root: Path) -> Path:
    """A scratch directory laid out as a checkout: examples/ and a .venv/bin with python and
    asynceval (as tests/test_docs.py's scratch directories are)."""
    root.mkdir()
    (root / "examples").symlink_to(ROOT / "examples")
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, run in (("python", ""), ("asynceval", " -m asynceval")):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}"{run} "$@"\n')
        script.chmod(0o755)
    return root


def _tree(
    phoenix: Phoenix, project: str, count: int, trace_id: str | None = None
) -> Counter[tuple[str, str | None]]:
    """(span name, its parent's name) counted over `project`'s spans (of one trace, if given),
    which must be of one trace."""
    spans = phoenix.wait_for_spans(count, project=project, trace_id=trace_id)
    assert len({span["context"]["trace_id"] for span in spans}) == 1, project
    names = {span["context"]["span_id"]: span["name"] for span in spans}
    return Counter((span["name"], names.get(span["parent_id"])) for span in spans)


@pytest.mark.skipif(not PHOENIX, reason="ASYNCEVAL_PHOENIX is unset (.ci/run sets it)")
def test_the_guides_phoenix_lines_send_their_runs_to_phoenix(
    tmp_path: Path, pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> None:
    phoenix = shared_phoenix(pytestconfig, tmp_path_factory)
    cwd = _checkout(tmp_path / "checkout")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PHOENIX_"))}
    printed = ""
    for line in phoenix_lines()[2:]:
        done = subprocess.run(
            line.replace(ADDRESS, phoenix.url),
            shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
        assert "Failed to export" not in done.stderr, done.stderr  # (metrics: 405 at Phoenix)
        printed += done.stdout

    found = re.search(rf"{phoenix.url}/redirects/traces/(\w{{32}})\n", printed)
    assert found is not None, printed
    assert _tree(phoenix, "asynceval", 1 + 6 + 12, trace_id=found.group(1)) == {
        ("asynceval.run", None): 1,
        ("asynceval.repetition", "asynceval.run"): 6,
        ("chat asynceval-sim", "asynceval.repetition"): 12,
    }
    # examples/arithmetic.py: 40 tasks, one call each, the run's spans from the environment
    assert _tree(phoenix, "arithmetic", 1 + 40 + 40) == {
        ("asynceval.run", None): 1,
        ("asynceval.repetition", "asynceval.run"): 40,
        ("chat asynceval-sim", "asynceval.repetition"): 40,
    }
