"""Training data, the work directory and the `bsjax gilp generate|train` commands."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from bsjax import cli
from bsjax.gilp import config, profiles
from bsjax.gilp.data import dataset, dataset_format, generate
from bsjax.gilp.envs import common, registry
from bsjax.gilp.training import workdir
from bsjax.gilp.types import graph_from_np

BENCH = registry.get("toolchain")


@pytest.fixture(scope="module")
def samples():
    tasks, _ = generate.generate_split("toolchain", "val", 4)
    return tasks, dataset.build(BENCH, tasks, seed=3)


def test_samples_have_the_dataset_layout_and_no_hidden_state(samples):
    _, data = samples
    n = dataset_format.validate(data)
    assert n % 4 == 0 and n > 0                       # the taken action + 3 counterfactuals
    assert data["taken"].sum() * 4 == n
    assert not data["hidden"].any()


def test_labels_equal_the_environment_labels(samples):
    _, data = samples
    for index in (0, 5, len(data["action"]) - 1):
        graph = graph_from_np({k: data[k][index] for k in
                               ("status", "ntype", "goal", "attr", "etype", "anc", "hidden",
                                "nmask", "t", "budget", "horizon")})
        expected = jax.device_get(common.labels(BENCH, graph, data["action"][index]))
        for name in dataset.LABEL_FIELDS:
            np.testing.assert_allclose(np.asarray(expected[name], np.float64),
                                       np.asarray(data[name][index], np.float64), atol=1e-6)


def test_trajectories_start_at_the_task_and_follow_the_taken_actions(samples):
    tasks, data = samples
    taken = np.flatnonzero(data["taken"] & (data["step"] == 0))
    assert len(taken) == 8                             # 4 tasks x 2 episodes
    for row, episode in zip(taken, data["episode"][taken]):
        np.testing.assert_array_equal(data["status"][row], tasks["status"][episode // 2])
    # ErrorAware's windows: runs of 3 executed transitions of one trajectory.
    windows = dataset.windows(data)
    assert dataset_format.validate_windows(windows) == len(windows["action"]) > 0


def test_rollouts_are_deterministic(samples):
    tasks, data = samples
    again = dataset.build(BENCH, tasks, seed=3)
    assert dataset_format.checksum(again) == dataset_format.checksum(data)
    other = dataset.build(BENCH, tasks, seed=4)
    assert dataset_format.checksum(other) != dataset_format.checksum(data)


def test_generate_command_writes_checksummed_splits_and_resumes(tmp_path, capsys):
    out = tmp_path / "tasks"
    argv = ["gilp", "generate", "--bench", "taskgraph", "--splits", "val,test_ood", "--count", "3",
            "--out", str(out), "--json"]
    assert cli.main(argv) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    arrays, manifest = generate.load_split(out / "taskgraph_val.npz")
    assert manifest["count"] == 3 and arrays["status"].shape == (3, config.N_MAX)
    assert [t["seed"] for t in manifest["tasks"]] == [config.task_seed("taskgraph", "val", i)
                                                      for i in range(3)]
    assert cli.main(argv) == 2                        # would overwrite without --resume
    assert cli.main([*argv, "--resume"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["splits"] == first["splits"]


def test_a_tampered_task_file_is_rejected(tmp_path):
    arrays, manifest = generate.generate_split("toolchain", "val", 2)
    path = generate.save_split(tmp_path, arrays, manifest)
    arrays["status"][0, 0] = (arrays["status"][0, 0] + 1) % 5
    np.savez_compressed(path, **arrays)
    with pytest.raises(generate.TaskFileError, match="checksum"):
        generate.load_split(path)


@pytest.mark.parametrize("argv, message", [
    (["generate", "--bench", "chess"], "unknown benchmark"),
    (["generate", "--splits", "dev"], "unknown split"),
    (["generate", "--count", "0"], "--count"),
    (["train", "--backbone", "Transformer"], "unknown backbone"),
    (["train", "--profile", "huge"], "unknown profile"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, argv, message):
    where = "--out" if argv[0] == "generate" else "--work"
    assert cli.main(["gilp", *argv, where, str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "w").exists()


def test_train_command_trains_saves_and_reuses_a_backbone(tmp_path, capsys):
    argv = ["gilp", "train", "--bench", "toolchain", "--backbone", "MLP", "--profile", "smoke",
            "--work", str(tmp_path), "--json"]
    assert cli.main(argv) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["backbones"]["toolchain/MLP"]
    assert 0.0 <= row["trans_acc"] <= 1.0 and row["params"] == 78_728
    profile = profiles.get_profile("smoke")
    model = workdir.load_backbone(tmp_path, "toolchain", "MLP", profile)
    assert model is not None
    summary = json.loads(workdir.checkpoint_path(tmp_path, "toolchain", "MLP", 0, profile)
                         .with_suffix(".metrics.json").read_text())
    assert summary["history"][-1]["train_loss"] < summary["history"][0]["train_loss"]
    assert set(summary["metrics"]) == {"id", "ood", "pooled"}
    assert cli.main(argv) == 0                        # loaded, not retrained
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["backbones"][
        "toolchain/MLP"] == row
    with pytest.raises(FileNotFoundError, match="bsjax gilp train"):
        workdir.load_backbone(tmp_path, "toolchain", "MPNN", profile)


def test_train_jobs_trains_backbones_in_child_processes(tmp_path, capsys):
    work = tmp_path / "w"
    argv = ["gilp", "train", "--bench", "toolchain", "--backbone", "MLP,GCN", "--profile",
            "smoke", "--work", str(work), "--jobs", "2", "--json"]
    assert cli.main(argv) == 0
    table = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["backbones"]
    assert set(table) == {"toolchain/MLP", "toolchain/GCN"}
    for name in ("MLP", "GCN"):
        assert "epoch 2/2" in (work / f"train_{name}_smoke.log").read_text()  # the child trained
    # The parent only read the children's summaries: a plain re-run finds the same numbers.
    assert cli.main(argv[:-3] + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["backbones"] == table


def test_train_rejects_zero_jobs_before_writing(tmp_path, capsys):
    work = tmp_path / "w"
    assert cli.main(["gilp", "train", "--bench", "toolchain", "--backbone", "MLP,GCN",
                     "--profile", "smoke", "--work", str(work), "--jobs", "0"]) == 2
    assert "--jobs must be at least 1" in capsys.readouterr().err
    assert not work.exists()
