"""`asynceval estimate`'s sample as the run's first segment, against the simulated provider over
loopback: `asynceval run --resume DIR` finishes the run and pays for none of the sample again;
what the sample cost is said; a sample the budget cuts short is still projected; the wall time
keeps the provider's announced rate budget; a sample whose repetitions all cost the same, or that
holds no task like some of the run's, gets an interval that says so."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from asynceval.cli import main
from asynceval.cli._estimate_stats import project
from asynceval.engine import read_records
from asynceval.sim import SimConfig, SimProvider

ROOT = Path(__file__).parents[2]
ARITHMETIC = str(ROOT / "examples" / "arithmetic.py")
SKEW = str(Path(__file__).parent / "skew_bench.py")
SIM = ("--model", "asynceval-sim")

Loopback = Callable[[SimConfig], tuple[str, SimProvider]]


def requests_seen(base_url: str) -> int:
    """How many requests the provider answered, by its own count."""
    return int(httpx.get(base_url.removesuffix("/v1") + "/stats").json()["requests"])


def events_of(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]


def billed(folder: Path) -> float:
    """What the provider billed, by the `cost_usd` of every `released` event in the folder."""
    return sum(e.get("cost_usd") or 0.0 for e in events_of(folder) if e["event"] == "released")


def pairs(folder: Path) -> Counter[tuple[str, int]]:
    records, _ = read_records(folder / "results.jsonl")
    return Counter((r["task_id"], r["repeat_idx"]) for r in records if r.get("type") != "header")


def estimate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    """`asynceval estimate ARGV --json` in this process: (status, its JSON or None, stderr)."""
    capsys.readouterr()
    status = main(["estimate", *argv, "--json"])
    out, err = capsys.readouterr()
    return status, (json.loads(out) if out.strip() else None), err


@pytest.mark.parametrize("option", ["--out", "--keep"])
def test_the_sample_is_the_run_s_first_segment_and_resume_pays_for_none_of_it_again(
    option: str, loopback: Loopback, capsys: pytest.CaptureFixture[str]
) -> None:
    """40 tasks x 2 repeats, 10 sampled: the provider answers 10 requests for the estimate and
    70 more for `run --resume DIR`, 80 in all, as many as the run has calls; every pair is in
    the results once. The estimate says what the sample cost, as the provider billed it."""
    base_url, _ = loopback(SimConfig(latency=0.01))
    where = ("--base-url", base_url, *SIM)
    status, found, said = estimate(
        capsys, ARITHMETIC, "--repeats", "2", "--sample", "10", "--seed", "1", *where, option, "d"
    )
    assert status == 0, said
    billed_before_resume = billed(Path("d"))
    assert requests_seen(base_url) == 10
    assert sum(pairs(Path("d")).values()) == 10
    assert main(["run", "--resume", "d", "--quiet"]) == 0
    assert requests_seen(base_url) == 80  # the run's 80 calls: the sample's 10 are not sent again
    done = pairs(Path("d"))
    assert len(done) == 80 and set(done.values()) == {1}
    assert {repeat for _, repeat in done} == {0, 1}
    assert "asynceval run --resume d" in said
    assert found["sample_cost_usd"] > 0 and found["run_directory"] == "d"
    assert found["sample_cost_usd"] == pytest.approx(billed_before_resume, rel=1e-12)


def test_the_text_output_says_what_the_sample_cost(
    loopback: Loopback, capsys: pytest.CaptureFixture[str]
) -> None:
    base_url, _ = loopback(SimConfig(latency=0.01))
    argv = [ARITHMETIC, "--sample", "4", "--seed", "2", "--base-url", base_url, *SIM]
    assert main(["estimate", *argv, "--keep", "d"]) == 0
    out = capsys.readouterr().out
    cost = f"${billed(Path('d')):.6f}"
    assert f"the sample cost {cost} (in d)" in out, out


def test_in_the_batch_lane_the_sample_cost_is_what_its_batches_were_billed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's lines hold no slot: what they cost is on `batch_completed`, not `released`."""
    monkeypatch.setenv("LLM_BATCH_LINGER", "0.1")
    monkeypatch.setenv("LLM_BATCH_POLL", "0.1")
    status, found, said = estimate(capsys, ARITHMETIC, "--sample", "6", "--lane", "batch")
    assert status == 0, said
    folder = Path(found["run_directory"])
    completed = [e for e in events_of(folder) if e["event"] == "batch_completed"]
    assert completed and found["sample_unpriced_calls"] == 0
    assert found["sample_cost_usd"] == pytest.approx(sum(e["cost_usd"] for e in completed))


def test_a_sample_the_budget_cuts_short_is_projected_from_what_finished(
    loopback: Loopback, capsys: pytest.CaptureFixture[str]
) -> None:
    """A budget that runs out during a sample of 20 (each call reserves its worst case): exit 3,
    with the estimate from the repetitions that finished (not "no estimate"); spent within the
    budget, by the provider's bill."""
    base_url, _ = loopback(SimConfig(latency=0.01))
    argv = (ARITHMETIC, "--sample", "20", "--seed", "1", "--base-url", base_url, *SIM)
    status, found, said = estimate(capsys, *argv, "--max-cost", "0.0009", "--keep", "d")
    assert status == 3, said
    assert found is not None and found["sample_drawn"] == 20
    assert 1 <= found["sample"] < 20
    assert f"the estimate is from the {found['sample']} of the 20" in said
    assert found["cost_usd"]["estimate"] > 0
    assert billed(Path("d")) <= 0.0009


def test_the_wall_time_keeps_the_provider_s_announced_rate_budget(
    loopback: Loopback, capsys: pytest.CaptureFixture[str]
) -> None:
    """The provider takes 10 requests per 1.5 s window and announces 400 a minute, with what is
    left and when it resets: the funnel sends 10, then waits for the reset. A real run of 40
    calls waits for 3 resets; the estimate, from a sample of 20 (which met one), projects it
    within its interval."""
    caps = SimConfig(latency=0.01, rpm=10, rate_window=1.5)
    sampled, _ = loopback(caps)
    status, found, said = estimate(
        capsys, ARITHMETIC, "--sample", "20", "--seed", "1", "--base-url", sampled, *SIM
    )
    assert status == 0, said
    real_url, _ = loopback(caps)
    argv = [ARITHMETIC, "--out", "real", "--quiet", "--base-url", real_url, *SIM]
    assert main(["run", *argv]) == 0
    (finished,) = [e for e in events_of(Path("real")) if e["event"] == "run_finished"]
    wall, real = found["wall_time_s"], finished["duration_s"]
    assert real > 4.5  # three resets: the announced budget paced it
    assert wall["low"] <= real <= wall["high"], (wall, real)
    assert found["limits"]["announced_requests"] == 10


def test_a_skewed_task_set_is_projected_within_the_interval_for_every_seed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """100 tasks, 5 of them with a query 150 times as long: a sample of 20 that misses them all
    (cost the same in each repetition) says so and reaches the estimate in proportion to query
    size; no lower bound is below what the sample itself cost; the real cost (the whole run,
    measured) is inside every seed's interval."""
    status, whole, said = estimate(capsys, SKEW, "--sample", "100", "--seed", "1")
    assert status == 0, said
    real = whole["cost_usd"]["estimate"]
    found = []
    for seed in range(1, 7):
        status, one, said = estimate(capsys, SKEW, "--seed", str(seed))
        assert status == 0, said
        found.append(one)
    for seed, one in enumerate(found, start=1):
        cost = one["cost_usd"]
        assert cost["low"] <= real <= cost["high"], (seed, cost, real)
    uniform = 0
    for seed, one in enumerate(found, start=1):
        cost = one["cost_usd"]
        assert cost["low"] >= one["sample_cost_usd"] - 1e-12, (seed, cost)
        if cost["uniform"]:
            uniform += 1
            assert cost["unlike"] and cost["high"] > cost["estimate"]
    assert uniform >= 1  # some seeds miss the long tasks (4 of these 6)


def test_a_sample_whose_repetitions_cost_the_same_says_its_interval_cannot_know(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["estimate", SKEW, "--seed", "2"]) == 0
    out = capsys.readouterr().out
    assert (
        "every sampled repetition cost the same: the interval does not cover tasks unlike the "
        "sample" in out
    )


def test_an_interval_is_never_below_what_the_sample_measured() -> None:
    """The sample is part of the run: its own total is a floor. Equal values are flagged; a
    run with far longer queries than any sampled widens the interval to the ratio estimate."""
    assert project([0.0, 0.0, 10.0], 100).low == 10.0
    same = project([2.0, 2.0, 2.0], 30)
    assert same.uniform and same.low == same.high == 60.0
    from asynceval.cli._estimate_stats import QuerySizes

    sizes = QuerySizes(sample=[10.0, 10.0, 10.0], total=10.0 * 27 + 1000.0 * 3, least=10, most=1000)
    widened = project([2.0, 2.0, 2.0], 30, sizes)
    assert widened.unlike and widened.estimate == 60.0
    assert widened.low == 60.0 and widened.high == pytest.approx(2.0 / 10.0 * 3270.0)


def test_the_help_has_one_percent_sign_and_no_resume_budget_afresh(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["estimate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "95% interval" in text and "%%" not in text
    assert "afresh" not in text
    assert "--out DIR, --keep DIR" in text and "asynceval run --resume DIR" in text
