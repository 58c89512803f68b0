"""The budget and price settings as a person gives them: a bad --max-cost, MAX_COST_USD or
LLM_PRICES_FILE is one line and exit status 2, before anything runs; a budget spent at once
says so in its one line; a resume keeps the run's budget unless given a new one."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from asynceval import Runtime, Settings
from asynceval.cli import main
from asynceval.errors import ConfigError
from asynceval.limits import CostBudget

from ._support import Calls, events_file, named, tasks

ARITHMETIC = str(Path(__file__).parents[2] / "examples" / "arithmetic.py")


def run_once(tmp_path: Path, *args: str) -> list[str]:
    return ["run", ARITHMETIC, "--out", str(tmp_path / "out"), "--quiet", *args]


@pytest.mark.parametrize("value", ["0", "-1", "nan", "abc", "inf", "1e-400", ""])
def test_a_bad_max_cost_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    assert main(run_once(tmp_path, f"--max-cost={value}")) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert (
        line == f"asynceval run: --max-cost must be an amount in USD > 0, got {value or repr('')}"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["0", "-1", "nan", "abc", "inf", "-inf"])
def test_a_bad_max_cost_usd_is_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    value: str,
) -> None:
    monkeypatch.setenv("MAX_COST_USD", value)
    assert main(run_once(tmp_path)) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("asynceval run: MAX_COST_USD ") and value.lstrip("-") in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", [0, -1.0, math.nan, math.inf, "abc"])
async def test_a_bad_budget_through_the_api_is_a_config_error(value: float | str) -> None:
    with pytest.raises(ConfigError, match="budget"):
        await Calls().run(tasks(1), max_cost_usd=value)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="budget"):
        CostBudget(value)


BAD_PRICE_FILES = {
    "not-json.json": ("{not json", "not JSON"),
    "not-yaml.yaml": ("m: [\n", "not YAML"),
    "a-list.json": ("[1, 2]", "maps model names to prices"),
    "not-a-number.json": ('{"m": {"input_mtok": "x", "output_mtok": 1}}', "input_mtok"),
    "negative.yaml": ("m:\n  input_mtok: -1\n  output_mtok: 1\n", "must be >= 0"),
    "missing-output.json": ('{"m": {"input_mtok": 1}}', "output_mtok is missing"),
    "unknown-key.json": ('{"m": {"input_mtok": 1, "output_mtok": 1, "foo": 2}}', "'foo'"),
}


@pytest.mark.parametrize("name", sorted(BAD_PRICE_FILES))
def test_a_bad_price_file_is_a_config_error_naming_what_is_wrong(tmp_path: Path, name: str) -> None:
    """Through the API: the runtime reads LLM_PRICES_FILE at once, and refuses a bad one."""
    text, says = BAD_PRICE_FILES[name]
    (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError, match=says) as raised:
        Runtime(Settings(llm_prices_file=str(tmp_path / name)))
    assert str(raised.value).startswith(str(tmp_path / name))  # which file says it


@pytest.mark.parametrize("name", ["not-json.json", "negative.yaml", "missing"])
def test_a_bad_price_file_is_one_line_on_the_command_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    if name in BAD_PRICE_FILES:
        (tmp_path / name).write_text(BAD_PRICE_FILES[name][0])
    monkeypatch.setenv("LLM_PRICES_FILE", str(tmp_path / name))
    status = main(run_once(tmp_path))
    (line,) = capsys.readouterr().err.splitlines()
    assert status == 2 and line.startswith("asynceval run: ") and name in line
    assert not (tmp_path / "out").exists()


def test_a_budget_spent_at_once_stops_the_run_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A budget below one call's worst case: nothing is spent, every task is left to run."""
    out = tmp_path / "out"
    assert main(run_once(tmp_path, "--max-cost", "1e-9")) == 3
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "asynceval: budget exhausted: spent $0 of $1e-09; 40 repetitions left to run; "
        f"finish with: asynceval run --resume {out} --max-cost USD"
    )
    (finished,) = named(events_file(out / "events.jsonl"), "run_finished")
    assert finished["budget_spent_usd"] == 0 and finished["cost_usd"] is None
    assert set(finished["counts"]) == {"budget_exhausted"}


def test_a_resume_keeps_the_runs_budget_unless_given_a_new_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the simulator's model (a call's worst case about $0.0007, what it costs about
    $0.000013): $0.0008 runs some of the 40 repetitions each time, $5 the rest."""
    out = tmp_path / "out"
    assert main(run_once(tmp_path, "--max-cost", "0.0008")) == 3
    assert main(["run", "--resume", str(out)]) == 3  # the run's budget, spent: nothing runs
    assert main(["run", "--resume", str(out), "--max-cost", "5"]) == 0  # the run's new total
    capsys.readouterr()
    finished = named(events_file(out / "events.jsonl"), "run_finished")
    assert [f["budget_usd"] for f in finished] == [0.0008, 0.0008, 5]
    assert [f["budget_exhausted"] for f in finished] == [True, True, False]
    first, again, last = finished
    assert 0 < first["budget_spent_usd"] <= 0.0008
    assert again["budget_spent_usd"] == first["budget_spent_usd"] and not again["counts"]
    assert first["budget_spent_usd"] < last["budget_spent_usd"] <= 5  # every segment's
    assert first["counts"].get("success", 0) > 0 and last["counts"].get("success", 0) > 0
