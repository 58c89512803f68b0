"""`asynceval run --tasks SOURCE` with a CSV and a column mapping, and its mistakes."""

from __future__ import annotations

from pathlib import Path

from asynceval.engine import read_records

from .test_cli import asynceval

BENCH = """
from asynceval import Benchmark, OpenAIChatModel


class Quiz(Benchmark):
    async def setup_agents(self, agent_data, environment, task, user):
        model = OpenAIChatModel()

        async def solver(query):
            return (await model.generate(query)).text

        return [solver], {}

    def setup_evaluators(self, environment, task, agents, user):
        def exact(task, answer, traces):
            return {"passed": str(answer).strip() == task.evaluation_data["answer"]}

        return [exact]
"""


def test_a_csv_with_a_mapping_runs_and_keeps_every_column(tmp_path: Path) -> None:
    (tmp_path / "quiz.py").write_text(BENCH)
    (tmp_path / "quiz.csv").write_text(
        "\ufeffqid,question,answer,source\nq1,What is 2 + 2?,4,book\nq2,What is 3 * 3?,10,web\n"
    )
    done = asynceval(
        "run", "quiz.py", "--tasks", "quiz.csv", "--query-field", "question",
        "--id-field", "qid", "--field", "evaluation_data=answer", "--out", "out", "--quiet",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    reports = {r["task_id"]: r for r in read_records(tmp_path / "out" / "results.jsonl")[0][1:]}
    assert {tid: r["eval"] for tid, r in reports.items()} == {
        "q1": [{"passed": True}],
        "q2": [{"passed": False}],
    }


def test_a_bad_row_or_mapping_is_one_line_naming_file_row_and_field(tmp_path: Path) -> None:
    (tmp_path / "quiz.py").write_text(BENCH)
    (tmp_path / "quiz.csv").write_text("qid,question\nq1,What?\nq2,\n")
    done = asynceval(
        "run", "quiz.py", "--tasks", "quiz.csv", "--query-field", "question", cwd=tmp_path
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "asynceval run: quiz.csv:3: query: missing (column 'question' is empty)"
    )
    done = asynceval("run", "quiz.py", "--tasks", "quiz.csv", "--query-field", "q", cwd=tmp_path)
    assert done.returncode == 2 and "no column 'q' (columns: qid, question)" in done.stderr
    done = asynceval("run", "quiz.py", "--query-field", "question", cwd=tmp_path)
    assert done.returncode == 2 and "map the columns of --tasks SOURCE" in done.stderr
