"""Redaction blanks a secret only where it is one: the placeholder keys of local servers (`test`,
`none`, `ollama`) leave answers and field names whole in results.jsonl, while a real key echoed
back by a provider is still blanked, through `asynceval run` as a user runs it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from asynceval._redact import register_secret, scrub_line, scrub_value, secret_shaped
from asynceval.cli import main

RED = """
from asynceval import Benchmark, OpenAIChatModel, Task


class Red(Benchmark):
    def default_tasks(self):
        return [Task(query="Install ollama and test it", id="t0")]

    async def setup_agents(self, agent_data, environment, task, user):
        async def agent(query):
            if ASK:
                async with OpenAIChatModel(settings=self.settings) as model:
                    await model.generate(query)
            return f"You asked: {query}. Use the test suite; none of it; my password is hunter2."

        return [agent], {}

    async def setup_evaluators(self, environment, task, agents_by_name, user):
        def judge(task, answer, traces):
            return {"passed": True, "answer": answer, "secret_leaked": True,
                    "password_found": "hunter2", "n_tests": 3}

        return [judge]
"""


def _bench(tmp_path: Path, *, ask: bool) -> Path:
    path = tmp_path / "red.py"
    path.write_text(f"ASK = {ask}\n{RED}")
    return path


def _results(out: Path) -> list[dict[str, Any]]:
    lines = (out / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@pytest.mark.parametrize("key", ["test", "none", "ollama", "EMPTY", "lm-studio", "dummy"])
def test_a_placeholder_key_blanks_no_word_and_no_field_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    monkeypatch.setenv("LLM_API_KEY", key)
    out = tmp_path / "rd"
    assert main(["run", str(_bench(tmp_path, ask=False)), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    reports = [r for r in _results(out) if r.get("task_id") == "t0"]
    assert reports, _results(out)
    text = json.dumps(reports)
    assert "[redacted]" not in text
    assert '"n_tests": 3' in text
    assert "Use the test suite; none of it" in text
    assert "Install ollama and test it" in text


async def _echo_401(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A raw ASGI provider answering every request 401, quoting the Authorization it was sent."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    auth = dict(scope["headers"]).get(b"authorization", b"").decode()
    body = json.dumps({"error": {"message": f"Invalid credentials: {auth}"}}).encode()
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.mark.parametrize("key", ["sk-test-SECRET123456789", "gwkey-SECRETB-987654321zz"])
def test_a_real_key_echoed_in_a_401_body_is_blanked_in_results_and_events(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    asgi_server: Callable[[Any], int],
    key: str,
) -> None:
    port = asgi_server(_echo_401)
    monkeypatch.setenv("LLM_API_KEY", key)
    monkeypatch.setenv("LLM_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("LLM_MODEL", "m")
    out = tmp_path / "rd"
    argv = ["run", str(_bench(tmp_path, ask=True)), "--out", str(out), "--quiet"]
    assert main([*argv, "--allow-errors"]) == 0
    captured = capsys.readouterr()
    assert key not in captured.out + captured.err
    files = [out / "results.jsonl", *out.glob("*events*.jsonl")]
    assert len(files) >= 2, list(out.iterdir())
    for path in files:
        text = path.read_text()
        assert key not in text, path.name
        assert all(json.loads(line) for line in text.splitlines() if line.strip())
    (report,) = [r for r in _results(out) if r.get("task_id") == "t0"]
    assert report["status"] != "success"
    assert "Invalid credentials: Bearer [redacted]" in json.dumps(report)


def test_a_url_credential_is_blanked_and_its_other_parts_kept() -> None:
    text = "see https://bob:hunter2pass@host.test/v1?api-version=2024-02-01&key=AbC123xyz&n=3"
    assert scrub_line(text) == (
        "see https://[redacted]@host.test/v1?api-version=2024-02-01&key=[redacted]&n=3"
    )


def test_field_names_are_never_rewritten_even_when_they_hold_a_real_key() -> None:
    key = "gwkey-NAMES-5551234567zz"
    register_secret(key)
    scrubbed = scrub_value({f"n_{key}": f"said {key}", "n_tests": "the test suite"})
    assert scrubbed == {f"n_{key}": "said [redacted]", "n_tests": "the test suite"}


@pytest.mark.parametrize(
    ("value", "shaped"),
    [
        ("test", False),
        ("EMPTY", False),
        ("sk-no-key-required", False),
        ("testtesttesttest", False),
        ("2024-02-01", False),
        ("sk-test-SECRET123456789", True),
        ("gwkey-SECRETB-987654321zz", True),
    ],
)
def test_only_key_shaped_values_are_blanked_in_free_text(value: str, shaped: bool) -> None:
    assert secret_shaped(value) is shaped
