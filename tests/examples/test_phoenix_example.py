"""examples/phoenix_traces.py as its docstring runs it (`python examples/phoenix_traces.py`),
against a Phoenix started by tests/otel/test_phoenix.py's harness: what it prints points at a
trace that Phoenix holds, the run's whole tree. Skipped without ASYNCEVAL_PHOENIX (.ci/run sets it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from ..otel.test_phoenix import PHOENIX, shared_phoenix

EXAMPLE = Path(__file__).parents[2] / "examples" / "phoenix_traces.py"

pytestmark = pytest.mark.skipif(
    not PHOENIX, reason="ASYNCEVAL_PHOENIX is unset: the path of a `phoenix` command"
)


def test_the_phoenix_example_sends_its_run_as_one_trace_and_says_where(
    tmp_path: Path, pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> None:
    phoenix = shared_phoenix(pytestconfig, tmp_path_factory)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PHOENIX_"))},
        "PHOENIX_COLLECTOR_ENDPOINT": phoenix.url,
    }
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "6 of 6 repetitions passed" in done.stdout
    assert f"Traces sent to Phoenix at {phoenix.url}, project 'asynceval'" in done.stdout
    found = re.search(rf"the run's trace: {phoenix.url}/redirects/traces/(\w{{32}})\n", done.stdout)
    assert found is not None, done.stdout

    spans = phoenix.wait_for_spans(1 + 6 + 12, project="asynceval", trace_id=found.group(1))
    ids = {span["context"]["span_id"]: span["name"] for span in spans}
    parents = Counter((span["name"], ids.get(span["parent_id"])) for span in spans)
    assert parents == {
        ("asynceval.run", None): 1,
        ("asynceval.repetition", "asynceval.run"): 6,
        ("chat asynceval-sim", "asynceval.repetition"): 12,
    }
    assert (tmp_path / "results" / "phoenix.jsonl").exists()
