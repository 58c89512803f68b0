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
from typing import Any

import pytest

from asynceval.analysis.view import write_view
from asynceval.cli import main
from asynceval.engine import read_records

from .test_view import RESUMED_LOG

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


def _report(task: str, status: str | None, marker: str, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "task_id": task,
        "repeat_idx": 0,
        "status": status,
        "termination_reason": "agent_stop",
        "eval": [{"passed": False, "note": f"EVAL-{marker}"}],
        "error": {"type": "AgentError", "message": f"ERR-{marker}"},
        "traces": {"messages": [{"role": "assistant", "content": f"TRACE-{marker}"}]},
        "usage": {"llm_calls": 1, "cache_hits": 1},
        "timing": {"duration_s": 0.5, "queued_s": 0.0, "finished_at": 2.0},
    }
    if status is None:
        del record["status"]
    return {**record, **extra}


def _write(directory: Path, lines: list[dict[str, Any]], name: str = "results.jsonl") -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text("".join(json.dumps(line) + "\n" for line in lines))


HEADER = {"type": "header", "benchmark": "B", "max_concurrent_llm_calls": 2, "started_at_unix": 1}


def detail_text(dom: str) -> str:
    return _detail(dom)[1]


def _detail(dom: str) -> tuple[str, str]:
    """(row, HTML) of the one open row's details."""
    found = re.findall(r'<tr class="detail" data-row="(\d+)">(.*?)</td></tr>', dom, re.S)
    assert len(found) == 1
    return found[0]


def test_an_opened_row_and_the_hash_filters_show_the_right_rows(tmp_path: Path) -> None:
    """#row=N opens row N's own details, all of them text; #sort, #q, #status and #reason give
    the rows they say, in order."""
    run = tmp_path / "run"
    evil = f"{EVIL} ERR-evil"
    _write(run, [
        HEADER,
        _report("alpha", "success", "alpha", timing={"duration_s": 0.3}),
        _report(EVIL, "agent_error", "evil", eval=[{"note": f"EVAL-evil {EVIL}"}],
                error={"type": "AgentError", "message": evil},
                traces={"messages": [{"role": "user", "content": f"TRACE-evil {EVIL}"}]},
                timing={"duration_s": 2.0}),
        _report("gamma", "success", "gamma", termination_reason="max_turns"),
        _report("delta", None, "delta", timing={}),
    ])  # fmt: skip
    page = tmp_path / "view.html"
    write_view([run], page)
    profile = tmp_path / "profile"

    opened = dump_dom(page, profile, "#row=1")
    assert '<b id="pwned">' not in opened and "<b " not in detail_text(opened)
    row, detail = _detail(opened)
    assert row == "1" and "answered from the cache" in opened
    for marker in ("ERR-evil", "EVAL-evil", "TRACE-evil", html.escape(EVIL, quote=False)):
        assert marker in detail, marker
    assert not any(other in detail for other in ("alpha", "gamma", "delta"))
    assert '<tr class="row oc-row-error open" data-row="1"' in opened

    by_duration = rows_of(dump_dom(page, profile, "#sort=-duration_s"))
    assert [task for task, _ in by_duration] == [EVIL, "gamma", "alpha", "delta"]  # none last
    assert rows_of(dump_dom(page, profile, "#q=gam")) == [("gamma", "failed")]
    assert rows_of(dump_dom(page, profile, "#status=None")) == [("delta", "error")]
    reason = dump_dom(page, profile, "#reason=max_turns")
    assert rows_of(reason) == [("gamma", "failed")]
    assert '<button class="chip active" data-value="max_turns"' in reason


def assert_labels_fit(svg: str) -> None:
    """No axis label (centred on its tick) runs past the chart's right edge: at 11 px, half a
    character is at most 3.5 units wide."""
    width = float(re.findall(r'viewBox="0 0 ([\d.]+) ', svg)[0])
    labels = re.findall(r'<text x="([\d.]+)" y="[\d.]+" text-anchor="middle">([^<]+)</text>', svg)
    assert labels and all(float(x) + 3.5 * len(text) <= width for x, text in labels), labels


def test_a_two_run_page_shows_the_comparison_and_each_run(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    passed = [{"passed": True}]
    _write(
        a,
        [
            HEADER,
            _report("t1", "success", "a1", eval=passed),
            _report("t2", "success", "a2"),
            _report("t3", "success", "a3", eval=passed),
        ],
    )
    _write(a, RESUMED_LOG, "events.jsonl")
    _write(b, [HEADER, *(_report(f"t{n}", "success", f"b{n}", eval=passed) for n in (1, 2, 3))])
    page = tmp_path / "both.html"
    write_view([a, b], page)
    profile = tmp_path / "profile"

    compared = dump_dom(page, profile)
    table = re.search(r'<table class="compare" id="compare-table">.*?</table>', compared, re.S)
    assert table is not None
    cells = re.findall(r'<td class="num in-flight">([^<]*)</td>', table.group(0))
    assert cells == ["5 / 2 EXCEEDED", "no events"]  # every run in a's log, not its last
    assert ">+33.3 pts<" in compared and "Improved: 1" in compared
    link = re.search(r'<a class="chip" href="([^"]+)">t2 #0</a>', compared)
    assert link is not None and html.unescape(link.group(1)) == "#run=1&task=t2&rep=0&row=1"

    first = dump_dom(page, profile, "#run=0")
    assert "asynceval logs check: VIOLATED: max in flight 5 (limit 2: EXCEEDED)" in first
    assert "ran no repetition (3 already done were skipped" in first
    charts = re.findall(r'<svg [^>]*class="chart ([\w-]+)".*?</svg>', first, re.S)
    assert "wait-histogram" in charts  # though the last run in the log made no call
    for chart in re.finditer(r'<svg [^>]*class="chart [\w-]+".*?</svg>', first, re.S):
        assert_labels_fit(chart.group(0))

    # A pair's link opens its row; without row= in the hash none is open (so it can close).
    linked = dump_dom(page, profile, "#run=1&task=t2&rep=0&row=1")
    assert _detail(linked)[0] == "1" and "ERR-b2" in detail_text(linked)
    closed = dump_dom(page, profile, "#run=1&task=t2&rep=0")
    assert rows_of(closed) == [("t2", "passed")] and 'class="detail"' not in closed


KEYS = """<script>
(function () {
  // What a keyboard user does: focus a row, Enter; focus a column header, Space; Enter again.
  function press(node, key) {
    node.dispatchEvent(new KeyboardEvent("keydown", { key: key, bubbles: true, cancelable: true }));
  }
  var marks = document.documentElement;
  function focused() {
    var node = document.activeElement;
    return node.getAttribute("data-row")
      || node.getAttribute("data-col") + " " + node.getAttribute("aria-sort");
  }
  var row = document.querySelector('tr.row[data-row="2"]');
  row.focus(); press(row, "x");
  row.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", ctrlKey: true, bubbles: true }));
  row.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", repeat: true, bubbles: true }));
  marks.setAttribute("data-after-x", String(document.querySelectorAll("tr.detail").length));
  press(row, "Enter");
  marks.setAttribute("data-after-enter", focused());
  var header = document.querySelector('th[data-col="duration_s"]');
  header.focus(); press(header, " ");
  marks.setAttribute("data-after-space", focused());
  marks.setAttribute("data-open", document.querySelector("tr.detail").getAttribute("data-row"));
  var again = document.querySelector('tr.row[data-row="2"]');
  again.focus(); press(again, "Enter");
  marks.setAttribute("data-after-second-enter", focused() + " " + again.isConnected + " "
    + document.querySelectorAll("tr.detail").length + " "
    + document.activeElement.getAttribute("aria-expanded"));
  var first = document.querySelector('tr.row[data-row="0"]');
  first.click();
  marks.setAttribute("data-after-click", focused());
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr.row"));
  var below = rows[rows.indexOf(document.activeElement) + 1];
  // Where the focus is, as a row index on the page, and whether the one tab stop went with it.
  function at() {
    var node = document.activeElement;
    return rows.indexOf(node) + (node.getAttribute("tabindex") === "0" ? "" : " not a tab stop")
      + (document.querySelectorAll('tr.row[tabindex="0"]').length === 1 ? "" : " several stops");
  }
  press(document.activeElement, "ArrowDown");
  marks.setAttribute("data-after-arrow", at() + (document.activeElement === below ? "" : " wrong"));
  press(document.activeElement, "Home");
  marks.setAttribute("data-after-home", at());
  press(document.activeElement, "End");
  marks.setAttribute("data-after-end", at());
  press(document.activeElement, "ArrowUp");
  marks.setAttribute("data-after-up", at());
})();
</script>
"""


def test_rows_and_column_headers_work_from_the_keyboard(tmp_path: Path) -> None:
    """Rows and headers take the focus (the rows one tab stop, moved with the arrow keys); Enter
    or Space opens a row or sorts by a column, as a click does, and the focus stays on that row
    or header in the table drawn anew; other keys do nothing."""
    run = tmp_path / "run"
    _write(run, [HEADER] + [_report(name, "success", name) for name in "abcdef"])
    page = tmp_path / "view.html"
    write_view([run], page)
    text = page.read_text(encoding="utf-8")
    assert text.count("</body>") == 1
    page.write_text(text.replace("</body>", KEYS + "</body>"), encoding="utf-8")
    dom = dump_dom(page, tmp_path / "profile")
    marks = dict(re.findall(r'data-after-([\w-]+)="([^"]*)"', dom))
    rows = re.findall(r'<tr class="row [^"]*" data-row="(\d+)"', dom)  # in page order
    assert sorted(rows) == ["0", "1", "2", "3", "4", "5"] and rows[-1] != "0"
    assert marks == {
        "x": "0",  # no row opened by another key, Ctrl+Enter or a held Enter
        "enter": "2",  # row 2 opened, and focused in the new table
        "space": "duration_s ascending",  # sorted, the header focused
        "second-enter": "2 false 0 false",  # closed again; the focus on the new row 2
        "click": "0",  # a click opens a row and leaves the focus on it too
        # The arrow keys move the focus and the rows' one tab stop with it, past the details.
        "arrow": str(rows.index("0") + 1),
        "home": "0",
        "end": "5",  # from the first row straight to the page's last
        "up": "4",
    }
    assert 'data-open="2"' in dom
    assert len(re.findall(r'<tr class="row [^>]*tabindex="0"', dom)) == 1  # one tab stop
    assert re.search(r'<th [^>]*tabindex="0" aria-sort="ascending" data-col="duration_s"', dom)
