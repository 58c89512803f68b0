"""run.json records the SHA-256 of the target's source file (a file target's, a `module:NAME`
target's module file), and a resume after it changed exits 2 naming the file, unless
`--allow-changed-target`, which the segment's header records; a manifest without hashes (an
older asynceval's) resumes without the check."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from asynceval.cli import main

BENCH = """
from asynceval import Benchmark, Task


class Edited(Benchmark):
    def default_tasks(self):
        return [Task(query=f"q{i}", id=f"t{i}") for i in range(4)]

    async def setup_agents(self, agent_data, environment, task, user):
        async def solver(query):
            return query

        return [solver], {}

    async def evaluate(self, evaluators, agents, final_answer, traces):
        return [{"passed": PASSED}]


benchmark = Edited()
"""


def write_bench(path: Path, passed: bool) -> str:
    path.write_text(BENCH.replace("PASSED", str(passed)))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def results(out: Path) -> list[dict[str, object]]:
    lines = (out / "results.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r.get("type") != "header"]


def drop_two_reports(out: Path) -> None:
    """Leave two repetitions to run again, as an interrupted run would."""
    lines = (out / "results.jsonl").read_text().splitlines(keepends=True)
    (out / "results.jsonl").write_text("".join(lines[:-2]))


def test_a_resume_after_the_target_changed_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "edited.py"
    before = write_bench(target, passed=True)
    out = tmp_path / "out"
    assert main(["run", str(target), "--out", str(out), "--quiet"]) == 0
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["target"]["sha256"] == {str(target.resolve()): before}
    drop_two_reports(out)
    after = write_bench(target, passed=False)
    capsys.readouterr()

    assert main(["run", "--resume", str(out), "--quiet"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"asynceval run: --resume {out}: the target {target.resolve()} changed since the run "
        f"started (sha256 {before[:12]}... -> {after[:12]}...); resume with "
        "--allow-changed-target to accept it"
    )
    assert len(results(out)) == 2  # nothing ran
    assert len(json.loads((out / "run.json").read_text())["segments"]) == 1

    assert main(["run", "--resume", str(out), "--quiet", "--allow-changed-target"]) == 0
    assert [r["eval"][0]["passed"] for r in results(out)] == [True, True, False, False]  # type: ignore[index]
    segment = json.loads((out / "run.json").read_text())["segments"][-1]
    assert segment["how"]["allow_changed_target"] is True
    assert segment["target_sha256"] == {str(target.resolve()): after}
    # The accepted version is the reference from then on.
    drop_two_reports(out)
    assert main(["run", "--resume", str(out), "--quiet"]) == 0


def test_a_module_target_s_source_file_is_hashed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    module = tmp_path / "edited_module_h4.py"
    before = write_bench(module, passed=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "edited_module_h4", raising=False)
    out = tmp_path / "out"
    assert main(["run", "edited_module_h4:benchmark", "--out", str(out), "--quiet"]) == 0
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["target"]["sha256"] == {str(module.resolve()): before}
    drop_two_reports(out)
    write_bench(module, passed=False)
    capsys.readouterr()
    assert main(["run", "--resume", str(out), "--quiet"]) == 2
    assert f"the target {module.resolve()} changed" in capsys.readouterr().err
    sys.modules.pop("edited_module_h4", None)


def test_a_manifest_without_hashes_resumes_without_the_check(tmp_path: Path) -> None:
    target = tmp_path / "edited.py"
    write_bench(target, passed=True)
    out = tmp_path / "out"
    assert main(["run", str(target), "--out", str(out), "--quiet"]) == 0
    manifest = json.loads((out / "run.json").read_text())
    del manifest["target"]["sha256"]
    for segment in manifest["segments"]:
        del segment["target_sha256"]
    (out / "run.json").write_text(json.dumps(manifest))
    drop_two_reports(out)
    write_bench(target, passed=False)
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
