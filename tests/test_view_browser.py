"""The view's page in a real headless browser (Debian's chromium): a real run's page shows every
repetition as a row and the chart of calls in flight against the limit; a URL hash filters the
rows; text from the run that looks like markup stays text; without events.jsonl the page says
there is no chart."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from asynceval.analysis.view import write_view
from asynceval.cli import main
from asynceval.engine import read_records

ROOT = Path(__file__).parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
EVIL = '</script><b id="pwned">x</b><!--<script>'

# About 2 s (one small run, three page loads): not marked slow.
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium or chromium-browser on PATH")


def dump_dom(page: Path, profile: Path, fragment: str = "") -> str:
    """The page's DOM once its script has run, as chromium serializes it."""
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={profile}",  # not the user's profile; tests may run in parallel
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri() + fragment,
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "data-rendered-ms=" in done.stdout, "the page's script did not finish"
    return done.stdout


def rows_of(dom: str) -> list[tuple[str, str]]:
    """(task id, outcome) of each table row the page rendered."""
    found = re.findall(r'<tr class="row [^"]*" data-row="\d+" data-task="([^"]*)" '
                       r'data-outcome="(\w+)"', dom)  # fmt: skip
    return [(html.unescape(task), outcome) for task, outcome in found]


def test_a_real_runs_page_shows_its_rows_and_chart_and_filters_by_hash(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert (
        main(["run", str(ROOT / "examples" / "arithmetic.py"), "--out", str(out), "--quiet"]) == 0
    )
    records = [r for r in read_records(out / "results.jsonl")[0] if r.get("type") != "header"]
    evil = {**records[0], "task_id": EVIL, "status": "agent_error", "eval": None}
    evil["error"] = {"type": "AgentError", "message": EVIL}
    with open(out / "results.jsonl", "a") as file:
        file.write(json.dumps(evil) + "\n")
    page = out / "view.html"
    write_view([out], page)

    dom = dump_dom(page, tmp_path / "profile")
    rows = rows_of(dom)
    assert sorted(task for task, _ in rows) == sorted([r["task_id"] for r in records] + [EVIL])
    assert '<b id="pwned">' not in dom and '&lt;b id="pwned"&gt;' in dom  # text, not markup
    chart = re.search(r'<svg [^>]*class="chart inflight-chart".*?</svg>', dom, re.S)
    assert chart is not None
    path = re.search(r'<path class="inflight-max" d="(M[^"]+)"', chart.group(0))
    assert path is not None and path.group(1).count("H") > 10  # a step line through buckets
    assert re.search(r'<line class="limit-line" [^>]*y1="[\d.]+"', chart.group(0))
    assert ">limit 5<" in chart.group(0)
    assert 'id="pass-rate"' in dom and "95% CI" in dom

    failed = [r for r in records if r["eval"] and not r["eval"][0]["passed"]]
    assert failed  # the arithmetic example has questions its solver rounds wrongly
    filtered = dump_dom(page, tmp_path / "profile", "#outcome=failed")
    assert sorted(rows_of(filtered)) == sorted((r["task_id"], "failed") for r in failed)
    assert f"of {len(failed)} (filtered from {len(records) + 1})" in filtered

    (out / "events.jsonl").unlink()  # the rows still show; the chart's place says why it is not
    write_view([out], page)
    bare = dump_dom(page, tmp_path / "profile")
    assert len(rows_of(bare)) == len(records) + 1 and 'id="no-events"' in bare
    assert 'class="chart inflight-chart"' not in bare
