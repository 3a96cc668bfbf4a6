"""Run directories that never lie: one writer at a time, a full disk survived, bounded waits.

(Damaged files, typos in study files and contradictory flags are bad-input cases of
`tests/test_cli_inputs.py`: exit 2, one line, nothing written.)
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bsjax.battleship.harness import experiment, rundir
from bsjax.battleship.harness.run_config import RunConfig
from bsjax.core.errors import UsageError
from bsjax.core.files import LOCK_NAME, writer_lock
from bsjax.core.llm.backends import OllamaBackend
from bsjax.core.llm.server import OllamaAPIServer
from bsjax.core.llm.structured import Call, LLMClient, reply_cap

SMALL = RunConfig(agent="random", boards="B01,B02,B03", seeds=2, batch_size=2)
SCHEMA = {"type": "object", "properties": {"kind": {"enum": ["shoot", "ask"]}},
          "required": ["kind"]}


def _rows(path: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k != "wall_seconds"}
            for line in path.read_text().splitlines()]


def _holder(directory: Path):
    """Another process holding `directory`'s writer lock until killed."""
    code = ("import sys, time\nfrom bsjax.core.files import writer_lock\n"
            f"with writer_lock({str(directory)!r}, 'bsjax play'):\n"
            "    print('held', flush=True)\n    time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_writer_is_refused_and_a_dead_writers_lock_is_taken_over(tmp_path):
    out = tmp_path / "run"
    holder = _holder(out)
    try:
        with pytest.raises(UsageError, match=rf"{out} is being written by process "
                                             rf"{holder.pid} \(bsjax play\)"):
            experiment.run(SMALL, out, resume=True)
        assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]   # nothing else written
    finally:
        holder.send_signal(signal.SIGKILL)  # as a crash would: the OS releases the lock
        holder.wait()
    summary = experiment.run(SMALL, out, resume=True)
    assert summary["games"] == 6 and len(rundir.read_games(out / "games.jsonl", 6)) == 6


def test_the_lock_is_reentrant_within_a_process(tmp_path):
    with writer_lock(tmp_path, "outer"), writer_lock(tmp_path, "inner"):
        pass
    assert "outer" in (tmp_path / LOCK_NAME).read_text()


def test_a_full_disk_ends_the_run_with_one_line_and_the_run_resumes(tmp_path, monkeypatch):
    """The disk fills up halfway through the second batch's events: the run ends with one
    line naming what was kept, and a resume plays exactly the games an uninterrupted run does."""
    real, calls = rundir.append_jsonl, []

    def full_disk(path, rows):
        calls.append(path.name)
        if len(calls) == 3:   # batch 2's events: half of them written, then ENOSPC
            text = "".join(json.dumps(r) + "\n" for r in rows)
            with path.open("a") as fh:
                fh.write(text[: len(text) // 2])
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, rows)

    monkeypatch.setattr(rundir, "append_jsonl", full_disk)
    with pytest.raises(UsageError, match=r"cannot write .*events\.jsonl: No space left on "
                                         r"device; the games written before it are kept "
                                         r"\(at least 2 of 6\)"):
        experiment.run(SMALL, tmp_path / "run")
    assert calls == ["events.jsonl", "games.jsonl", "events.jsonl"]
    assert len(_rows(tmp_path / "run" / "games.jsonl")) == 2
    monkeypatch.undo()

    experiment.run(SMALL, tmp_path / "run", resume=True)
    experiment.run(SMALL, tmp_path / "whole")
    for name in ("games.jsonl", "events.jsonl"):
        assert _rows(tmp_path / "run" / name) == _rows(tmp_path / "whole" / name), name


def test_a_study_directory_has_one_writer_too(tmp_path):
    from bsjax.battleship.harness import study as study_lib
    study = study_lib.sweep_study(SMALL, "seeds", "1,2")
    holder = _holder(tmp_path / "sweep")
    try:
        with pytest.raises(UsageError, match="is being written by process"):
            study_lib.run(study, tmp_path / "sweep")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()


# ----- bounded waits and sizes -----


def test_a_distributed_run_whose_peers_never_come_ends_with_one_line(tmp_path):
    argv = [sys.executable, "-m", "bsjax.cli", "play", "--agent", "random", "--boards", "B01",
            "--seeds", "1", "--distributed", "--coordinator", "127.0.0.1:1",
            "--num-processes", "2", "--process-id", "1", "--connect-timeout", "2",
            "--out", str(tmp_path / "run")]
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert lines == [lines[-1]] and "did not connect within 2 s" in lines[-1]
    assert time.perf_counter() - start < 60 and not (tmp_path / "run").exists()


def test_an_oversized_reply_is_an_oversized_fault_and_is_not_cached(tmp_path):
    from bsjax.core.llm.call_cache import CallCache
    huge = json.dumps({"kind": "shoot", "why": "x" * 5_000_000})
    with OllamaAPIServer(lambda system, user: huge) as server:
        client = LLMClient(OllamaBackend(host=server.url, timeout=30, retries=0),
                           CallCache(tmp_path / "calls.jsonl"))
        answer = client.ask(Call("s", "u", SCHEMA))
    assert not answer.ok and answer.fault == "oversized"
    assert f"over the cap of {reply_cap(SCHEMA)}" in answer.error
    cache = tmp_path / "calls.jsonl"
    assert reply_cap(SCHEMA) < 2_000 and (not cache.exists() or not cache.read_text().strip())


def test_a_timeout_is_counted_as_a_timeout():
    with OllamaAPIServer(lambda system, user: time.sleep(3) or "{}") as server:
        answer = LLMClient(OllamaBackend(host=server.url, timeout=0.5, retries=0)).ask(
            Call("s", "u", SCHEMA))
    assert not answer.ok and answer.fault == "timeout"


def test_a_revision_fault_is_recorded_by_its_kind():
    from bsjax.battleship.harness.llm_host import RevisionHost
    from bsjax.core.llm.structured import Answer
    for fault in ("timeout", "oversized", "transport"):
        _, event = RevisionHost.resolve(3, Answer(None, fault=fault, error="x"),
                                        {"turnNumber": 7}, {})
        assert not event.ok and event.reason == fault


def test_gilp_generate_resume_refuses_another_count(tmp_path, capsys):
    from bsjax.cli import main
    argv = ["gilp", "generate", "--bench", "taskgraph", "--splits", "test_ood", "--out",
            str(tmp_path / "tasks")]
    assert main(argv + ["--count", "2"]) == 0
    before = (tmp_path / "tasks" / "taskgraph_test_ood.npz").read_bytes()
    capsys.readouterr()
    assert main(argv + ["--count", "3", "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds 2 tasks, not the 3 asked for" in err[0]
    assert (tmp_path / "tasks" / "taskgraph_test_ood.npz").read_bytes() == before
    assert main(argv + ["--count", "2", "--resume"]) == 0
