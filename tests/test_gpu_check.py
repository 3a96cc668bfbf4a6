"""`benchmarks/gpu_check.py --timeout-s`: a point compiled in a child process, and stopped."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu_check.py"


def _rows(*flags: str) -> list[dict]:
    done = subprocess.run([sys.executable, str(SCRIPT), "--agents", "random", "--games", "1",
                           "--out", "-", *flags], capture_output=True, text=True, timeout=300)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_a_child_process_reports_what_the_same_point_reports_in_process():
    # With the compiler plugin a report, without it the same error row: either way the child's
    # answer comes back through the queue unchanged.
    here, child = _rows(), _rows("--timeout-s", "240")
    strip = ("compile_seconds", "date")
    assert len(here) == len(child) == 1
    assert ({k: v for k, v in child[0].items() if k not in strip}
            == {k: v for k, v in here[0].items() if k not in strip})


def test_a_point_past_its_time_is_stopped_and_written_as_an_error_row():
    # Half a second does not even import JAX in the child.
    (row,) = _rows("--timeout-s", "0.5")
    assert row["error"] == "compile not finished after 0.5 s (stopped)"
    assert row["agent"] == "random" and row["games"] == 1


def test_a_timeout_must_be_positive():
    done = subprocess.run([sys.executable, str(SCRIPT), "--timeout-s", "0", "--out", "-"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--timeout-s must be positive" in done.stderr


def test_each_target_writes_its_own_file_by_default(tmp_path):
    # The script's default files pointed into tmp_path; one point for the TPU target (a report
    # with libtpu, an error row without it) must land in the TPU's file only.
    done = subprocess.run([sys.executable, "-c", f"""
import importlib.util, pathlib, sys
sys.path.insert(0, {str(SCRIPT.parent)!r})
spec = importlib.util.spec_from_file_location("gpu_check", {str(SCRIPT)!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module.OUT = {{t: pathlib.Path({str(tmp_path)!r}) / (t + ".jsonl") for t in module.OUT}}
module.main(["--target", "tpu-v5e-2x2", "--agents", "random", "--games", "1"])
"""], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tpu-v5e-2x2.jsonl"]
    (row,) = [json.loads(line) for line in (tmp_path / "tpu-v5e-2x2.jsonl").read_text().splitlines()]
    assert row["target"] == "tpu-v5e-2x2" and row["agent"] == "random"
