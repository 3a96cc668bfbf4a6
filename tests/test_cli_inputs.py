"""Bad input to every `bsjax` command: exit code 2, one `bsjax: error:` line on stderr, no
traceback, nothing written.

In-process (`bsjax.cli.main`), in a temporary working directory; every case fails in validation,
so no game is compiled and no model trained.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bsjax.battleship import cli_checks
from bsjax.battleship.harness.run_config import RunConfig
from bsjax.cli import main
from bsjax.core import checks
from bsjax.core.errors import UsageError

REPO = Path(__file__).resolve().parents[1]
HUGE = "99999999999999999999"
T = "{T}"  # the test's directory, filled in per case

PLAY = ["play", "--agent", "random", "--out", f"{T}/run"]
SWEEP = ["sweep", "--agent", "random", "--llm", "none", "--out", f"{T}/run"]
BENCH = ["bench", "--agent", "random", "--games", "1"]
GEN = ["gilp", "generate", "--bench", "taskgraph", "--splits", "test_ood", "--out", f"{T}/tasks"]
TRAIN = ["gilp", "train", "--bench", "taskgraph", "--profile", "smoke", "--work", f"{T}/w"]
RUN = ["gilp", "run", "--bench", "taskgraph", "--profile", "smoke", "--methods", "Agent-Replan",
       "--work", f"{T}/w", "--out", f"{T}/o"]
CALIBRATE = ["gilp", "calibrate", "--bench", "taskgraph", "--profile", "smoke", "--work", f"{T}/w"]
REAL = ["gilp", "real", "--bench", "taskgraph", "--llm", "none", "--methods", "Agent-Replan",
        "--tasks", "1", "--work", f"{T}/w", "--out", f"{T}/o"]
GPAPER = ["gilp", "paper", "--profile", "smoke", "--bench", "taskgraph", "--work", f"{T}/w",
          "--out", f"{T}/o"]

PAPER_ROW = "[[rows]]\nid = 'a'\nagent = 'random'\n"
SWEEP_HEAD = "[experiment]\nkind = 'sweep'\n[base]\nagent = 'random'\n[sweep]\n"
GAME_ROW = ('{"board": "B01", "seed": 0, "f1": 0.5, "won": false, "turns": 40, "shots": 40, '
            '"hits": 7, "questions": 0}\n')

RUN_JSON = '{"config": {"agent": "random"}, "games": 54}'
RESUME = PLAY + ["--resume"]
GRAND_BOARD = str(REPO / "bsjax" / "data" / "grand2025" / "board_B01.txt")

# id: (argv, files written into the test's directory first)
CASES = {
    # play --resume into a damaged run directory: refused naming the file, nothing rewritten
    "resume-run-json-config-list": (RESUME, {"run/run.json": '{"config": [1, 2]}',
                                             "run/games.jsonl": GAME_ROW}),
    "resume-run-json-games-text": (RESUME, {"run/run.json": '{"config": {}, "games": "x"}'}),
    "resume-run-json-binary": (RESUME, {"run/run.json": b"\xff\xfe{"}),
    "resume-games-number-line": (RESUME, {"run/run.json": RUN_JSON,
                                          "run/games.jsonl": "42\n" + GAME_ROW}),
    "resume-games-empty-object": (RESUME, {"run/run.json": RUN_JSON,
                                           "run/games.jsonl": "{}\n" + GAME_ROW}),
    "resume-games-binary": (RESUME, {"run/run.json": RUN_JSON,
                                     "run/games.jsonl": b"\xff\xfe\n" + GAME_ROW.encode()}),
    "resume-games-torn-middle": (RESUME, {"run/run.json": RUN_JSON,
                                          "run/games.jsonl": '{"board": "B0\n' + GAME_ROW}),
    "resume-games-twice": (RESUME, {"run/run.json": RUN_JSON,
                                    "run/games.jsonl": GAME_ROW + GAME_ROW}),
    "resume-games-more-than-the-run": (RESUME, {
        "run/run.json": '{"config": {"agent": "random"}, "games": 1}',
        "run/games.jsonl": GAME_ROW + GAME_ROW.replace('"seed": 0', '"seed": 1')}),
    "resume-events-torn-middle": (RESUME, {"run/run.json": RUN_JSON, "run/games.jsonl": GAME_ROW,
                                           "run/events.jsonl": '{"board"\n{"board": "B01", '
                                                               '"seed": 0}\n'}),
    "resume-with-another-batch-size": (RESUME + ["--batch-size", "7"],
                                       {"run/run.json": RUN_JSON, "run/games.jsonl": GAME_ROW}),
    "resume-parquet-part-damaged": (RESUME, {"run/run.json": RUN_JSON, "run/games.jsonl": GAME_ROW,
                                             "run/events/part-000000.parquet": b"not parquet"}),
    "report-parquet-part-damaged": (["report", f"{T}/s"], {
        "s/games.jsonl": GAME_ROW, "s/events/part-000000.parquet": b"PAR1 torn"}),
    "paper-resume-row-games-damaged": (["paper", "--llm", "none", "--resume", "--out",
                                        f"{T}/p"], {"p/runs/B1/games.jsonl": "42\n" + GAME_ROW}),
    "report-games-twice": (["report", f"{T}/s"], {"s/games.jsonl": GAME_ROW + GAME_ROW}),
    "lens-games-torn-middle": (["lens", f"{T}/s"], {"s/games.jsonl": '{"b\n' + GAME_ROW}),
    # typos in study files: never the built-in table, never a dropped table
    "toml-row-singular": ("[[row]]\nid = 'a'\nagent = 'random'\n", None),
    "toml-base-misspelt": ("[bsae]\nseeds = 1\n" + PAPER_ROW, None),
    "toml-unknown-table": ("[extra]\nx = 1\n" + PAPER_ROW, None),
    "toml-experiment-key-misspelt": ("[experiment]\nknd = 'paper'\n" + PAPER_ROW, None),
    "toml-sweep-key-misspelt": (SWEEP_HEAD + "param = 'tau'\nvalue = '0,1'\n", "sweep"),
    # contradictory flags: what the run would ignore is refused
    "play-board-file-and-boards": (PLAY + ["--protocol", "grand", "--board-file", GRAND_BOARD,
                                           "--boards", "B05"], {}),
    "play-tau-on-random": (PLAY + ["--tau", "0.5"], {}),
    "play-revision-on-greedy": (PLAY + ["--agent", "greedy", "--revision", "off"], {}),
    "play-cooldown-on-wma": (PLAY + ["--agent", "wma", "--cooldown", "1"], {}),
    "play-variant-on-greedy": (PLAY + ["--agent", "greedy", "--variant", "improved"], {}),
    "play-particles-on-random": (PLAY + ["--particles", "100"], {}),
    "play-sweeps-on-chain": (PLAY + ["--agent", "greedy", "--sampler", "chain", "--sweeps",
                                     "2"], {}),
    "play-mh-kernel-on-importance": (PLAY + ["--agent", "greedy", "--sampler", "importance",
                                             "--mh-kernel", "xla"], {}),
    "play-mh-kernel-on-exact": (PLAY + ["--agent", "greedy", "--sampler", "exact",
                                        "--mh-kernel", "xla"], {}),
    "play-prior-on-particles": (PLAY + ["--agent", "greedy", "--prior", "uniform"], {}),
    "play-prior-unknown": (PLAY + ["--agent", "greedy", "--sampler", "importance", "--prior",
                                   "flat"], {}),
    "play-exact-on-grand": (PLAY + ["--agent", "greedy", "--sampler", "exact", "--protocol",
                                    "grand"], {}),
    "play-mh-kernel-with-reference-streams": (PLAY + ["--agent", "greedy", "--sampler", "chain",
                                                      "--rng", "reference", "--mh-kernel",
                                                      "interpret"], {}),
    "play-mh-kernel-unknown": (PLAY + ["--agent", "greedy", "--mh-kernel", "triton"], {}),
    "play-mh-kernel-pallas-on-cpu": (PLAY + ["--agent", "greedy", "--mh-kernel", "pallas"], {}),
    "play-random-boards-on-synthetic": (PLAY + ["--random-boards", "5"], {}),
    "play-llm-on-greedy": (PLAY + ["--agent", "greedy", "--llm", "uniform"], {}),
    "play-answer-noise-on-random": (PLAY + ["--answer-noise", "0.2"], {}),
    "play-answer-noise-out-of-range": (PLAY + ["--agent", "greedy", "--answer-noise", "2"], {}),
    "play-connect-timeout-without-distributed": (PLAY + ["--connect-timeout", "5"], {}),
    # --set NAME=VALUE: an agent param by name
    "set-no-equals": (PLAY + ["--agent", "bayes", "--set", "gamma"], {}),
    "set-no-value": (PLAY + ["--agent", "bayes", "--set", "gamma="], {}),
    "set-no-name": (PLAY + ["--agent", "bayes", "--set", "=0.9"], {}),
    "set-twice": (PLAY + ["--agent", "bayes", "--set", "gamma=0.9", "--set", "gamma=0.8"], {}),
    "set-misspelt": (PLAY + ["--agent", "bayes", "--set", "gama=0.9"], {}),
    "set-on-an-agent-without-it": (PLAY + ["--set", "gamma=0.9"], {}),
    "set-a-word-for-a-number": (PLAY + ["--agent", "bayes", "--set", "gamma=abc"], {}),
    "set-nan": (PLAY + ["--agent", "bayes", "--set", "gamma=NaN"], {}),
    "set-infinity": (PLAY + ["--agent", "bayes", "--set", "gamma=Infinity"], {}),
    "set-a-list-for-a-number": (PLAY + ["--agent", "bayes", "--set", "gamma=[0.9, 0.8]"], {}),
    "set-a-field-with-its-own-flag": (PLAY + ["--agent", "mra", "--set", "tau=0.5"], {}),
    "set-evidence-scale-out-of-range": (PLAY + ["--agent", "bayes", "--set",
                                                "evidence_scale=2"], {}),
    "sweep-agent-param-the-agent-lacks": (SWEEP + ["--param", "gamma=0.9,0.95"], {}),
    "sweep-agent-param-not-numbers": (SWEEP + ["--agent", "bayes", "--param", "gamma=a,b"], {}),
    "sweep-params-itself": (SWEEP + ["--param", "params=1"], {}),
    "toml-params-not-a-table": ("[base]\nparams = 3\n" + PAPER_ROW, None),
    "toml-params-misspelt-in-a-row": ("[[rows]]\nid = 'a'\nagent = 'bayes'\n"
                                      "params = {gama = 0.9}\n", None),
    "toml-params-nan": ("[[rows]]\nid = 'a'\nagent = 'bayes'\nparams = {gamma = nan}\n",
                        None),
    "toml-sweep-agent-param-the-agent-lacks": (SWEEP_HEAD + "param = 'gamma'\n"
                                               "values = [0.9, 0.95]\n", "sweep"),
    "play-connect-timeout-zero": (PLAY + ["--distributed", "--connect-timeout", "0"], {}),
    "sweep-tau-on-greedy": (SWEEP + ["--agent", "greedy", "--param", "tau=0.5,0.7"], {}),
    "sweep-flag-on-a-row-it-skips": (SWEEP + ["--cooldown", "1", "--param", "seeds=1,2"], {}),
    "toml-row-tau-on-greedy": ("[[rows]]\nid = 'a'\nagent = 'greedy'\ntau = 0.5\n", None),
    "bench-tau-on-random": (BENCH + ["--tau", "0.5"], {}),
    # play: counts, empty values, repeated boards, unwritable --out, --distributed
    "play-seeds-0": (PLAY + ["--seeds", "0"], {}),
    "play-seeds-huge": (PLAY + ["--seeds", HUGE], {}),
    "play-particles-huge": (PLAY + ["--particles", HUGE], {}),
    "play-sweeps-0": (PLAY + ["--sweeps", "0"], {}),
    "play-first-seed-negative": (PLAY + ["--first-seed", "-1"], {}),
    "play-cooldown-negative": (PLAY + ["--cooldown", "-1"], {}),
    "play-min-delta-2": (PLAY + ["--min-delta", "2"], {}),
    "play-presets-unknown": (PLAY + ["--agent", "mra", "--presets", "coarse,closeout"], {}),
    "play-presets-empty": (PLAY + ["--agent", "mra", "--presets", ","], {}),
    "play-presets-repeated": (PLAY + ["--agent", "mra", "--presets",
                                      "cluster_closeout_bias,cluster_closeout_bias"], {}),
    "play-presets-for-the-llm": (PLAY + ["--agent", "mra-llm", "--llm", "uniform", "--presets",
                                         "cluster_closeout_bias"], {}),
    "play-sweeps-huge": (PLAY + ["--sweeps", HUGE], {}),
    "play-random-boards-0": (PLAY + ["--suite", "random", "--random-boards", "0"], {}),
    "play-random-boards-negative": (PLAY + ["--suite", "random", "--random-boards", "-1"], {}),
    "play-random-boards-huge": (PLAY + ["--suite", "random", "--random-boards", HUGE], {}),
    "play-batch-size-huge": (PLAY + ["--batch-size", HUGE], {}),
    "play-batch-size-word": (PLAY + ["--batch-size", "many"], {}),
    "play-boards-repeated": (PLAY + ["--boards", "B01,B01"], {}),
    "play-board-file-empty": (PLAY + ["--board-file", ""], {}),
    "play-board-file-directory": (PLAY + ["--board-file", f"{T}/adir"], {}),
    "play-board-file-binary": (PLAY + ["--board-file", f"{T}/bin.dat"], {}),
    "play-suite-empty": (PLAY + ["--suite", ""], {}),
    "play-out-empty": (["play", "--agent", "random", "--out", ""], {}),
    "play-out-file": (["play", "--agent", "random", "--out", f"{T}/file.txt"], {}),
    "play-out-under-file": (["play", "--agent", "random", "--out", f"{T}/file.txt/run"], {}),
    "play-process-id-negative": (PLAY + ["--distributed", "--process-id", "-1"], {}),
    "play-coordinator-malformed": (PLAY + ["--distributed", "--coordinator", "junk"], {}),
    "play-coordinator-port": (PLAY + ["--distributed", "--coordinator", "h:99999"], {}),
    # paper / sweep: experiment files and sweep specs
    "paper-config-empty": (["paper", "--config", "", "--out", f"{T}/run"], {}),
    "paper-config-directory": (["paper", "--config", f"{T}/adir", "--out", f"{T}/run"], {}),
    "paper-config-binary": (["paper", "--config", f"{T}/bin.dat", "--out", f"{T}/run"], {}),
    "paper-seeds-huge": (["paper", "--llm", "none", "--seeds", HUGE, "--out", f"{T}/run"], {}),
    "paper-out-under-file": (["paper", "--llm", "none", "--out", f"{T}/file.txt/run"], {}),
    "toml-base-not-table": ("base = 3\n", None),
    "toml-experiment-not-table": ("experiment = 'x'\n", None),
    "toml-rows-not-list": ("rows = 3\n", None),
    "toml-row-not-table": ("rows = [1]\n", None),
    "toml-row-id-int": ("[[rows]]\nid = 3\n", None),
    "toml-row-id-escapes": ("[[rows]]\nid = '../../evil'\nagent = 'random'\n", None),
    "toml-row-id-empty": ("[[rows]]\nid = ''\nagent = 'random'\n", None),
    "toml-row-label-int": ("[[rows]]\nid = 'a'\nlabel = 5\n", None),
    "toml-needs-llm-string": ("[[rows]]\nid = 'a'\nneeds_llm = 'no'\n", None),
    "toml-title-int": ("[experiment]\ntitle = 3\n" + PAPER_ROW, None),
    "toml-baseline-int": ("[experiment]\nbaseline = 3\n" + PAPER_ROW, None),
    "toml-baseline-unknown": ("[experiment]\nbaseline = 'B3'\n" + PAPER_ROW, None),
    "toml-boards-int": ("[base]\nboards = 5\n" + PAPER_ROW, None),
    "toml-seeds-float": ("[base]\nseeds = 2.5\n" + PAPER_ROW, None),
    "toml-seeds-bool": ("[base]\nseeds = true\n" + PAPER_ROW, None),
    "toml-particles-huge": ("[base]\nparticles = 9999999999999\n" + PAPER_ROW, None),
    "toml-row-seeds-zero": ("[[rows]]\nid = 'a'\nagent = 'random'\nseeds = 0\n", None),
    "toml-sweep-values-int": (SWEEP_HEAD + "param = 'tau'\nvalues = 3\n", "sweep"),
    "toml-sweep-values-table": (SWEEP_HEAD + "param = 'tau'\nvalues = {a = 1}\n", "sweep"),
    "toml-sweep-param-list": (SWEEP_HEAD + "param = ['tau']\nvalues = '0,1'\n", "sweep"),
    "toml-sweep-seeds-huge": (SWEEP_HEAD + "param = 'seeds'\nvalues = [1, 99999999999]\n", "sweep"),
    "sweep-seeds-zero": (SWEEP + ["--param", "seeds=0,1"], {}),
    "sweep-seeds-fraction": (SWEEP + ["--param", "seeds=1.5"], {}),
    "sweep-seeds-huge": (SWEEP + ["--param", f"seeds={HUGE}"], {}),
    "sweep-range-overflow": (SWEEP + ["--param", "tau=0:1e308:1e-308"], {}),
    "sweep-range-inf": (SWEEP + ["--param", "tau=0:inf:1"], {}),
    "sweep-range-nan": (SWEEP + ["--param", "tau=nan:1:0.1"], {}),
    "sweep-particles-overflow": (SWEEP + ["--param", "particles=1e400"], {}),
    "sweep-random-boards-zero": (SWEEP + ["--param", "random_boards=0,1"], {}),
    # bench
    "bench-games-huge": (["bench", "--agent", "random", "--games", HUGE], {}),
    "bench-games-repeated": (["bench", "--agent", "random", "--games", "1,1"], {}),
    "bench-repeats-0": (BENCH + ["--repeats", "0"], {}),
    "bench-repeats-negative": (BENCH + ["--repeats", "-1"], {}),
    "bench-repeats-huge": (BENCH + ["--repeats", HUGE], {}),
    "bench-random-boards-0": (BENCH + ["--suite", "random", "--random-boards", "0"], {}),
    # report / lens / h2h: damaged result files
    "report-study-json-list": (["report", f"{T}/s"], {"s/study.json": "[1, 2]"}),
    "report-study-json-no-rows": (["report", f"{T}/s"], {"s/study.json": '{"kind": "paper"}'}),
    "report-study-json-binary": (["report", f"{T}/s"], {"s/study.json": b"\xff\xfe\x00"}),
    "report-study-row-escapes": (["report", f"{T}/s"], {"s/study.json": (
        '{"kind": "paper", "base": {"protocol": "paper"}, '
        '"rows": [{"id": "../x", "overrides": {}}]}')}),
    "report-games-not-object": (["report", f"{T}/s"], {"s/games.jsonl": "[1]\n"}),
    "report-games-missing-keys": (["report", f"{T}/s"], {"s/games.jsonl": '{"a": 1}\n'}),
    "report-games-binary": (["report", f"{T}/s"], {"s/games.jsonl": b"\xff\xfe\n"}),
    "report-run-json-bad": (["report", f"{T}/s"], {"s/games.jsonl": GAME_ROW,
                                                    "s/run.json": "{bad"}),
    "report-study-baseline-int": (["report", f"{T}/s"], {"s/study.json": (
        '{"kind": "paper", "base": {"protocol": "paper"}, "baseline": 3, "rows": []}')}),
    "report-baseline-unknown": (["report", f"{T}/s", "--baseline", "B3"],
                                {"s/games.jsonl": GAME_ROW}),
    "report-baseline-empty": (["report", f"{T}/s", "--baseline", ""], {"s/games.jsonl": GAME_ROW}),
    "report-paired-unknown": (["report", f"{T}/s", "--paired", "sideways"],
                              {"s/games.jsonl": GAME_ROW}),
    "report-baseline-with-adjacent": (["report", f"{T}/s", "--paired", "adjacent", "--baseline",
                                       "s"], {"s/games.jsonl": GAME_ROW}),
    "lens-games-not-object": (["lens", f"{T}/s"], {"s/games.jsonl": "[1]\n"}),
    "lens-run-json-bad": (["lens", f"{T}/s"], {"s/games.jsonl": GAME_ROW, "s/run.json": "{bad"}),
    "lens-events-not-object": (["lens", f"{T}/s", "--view", "game"],
                               {"s/games.jsonl": GAME_ROW, "s/events.jsonl": "[1]\n"}),
    "lens-view-unknown": (["lens", f"{T}/s", "--view", "nope"], {"s/games.jsonl": GAME_ROW}),
    "lens-game-empty": (["lens", f"{T}/s", "--view", "game", "--game", ""],
                        {"s/games.jsonl": GAME_ROW}),
    "lens-game-malformed": (["lens", f"{T}/s", "--view", "game", "--game", "B01:x"],
                            {"s/games.jsonl": GAME_ROW}),
    "lens-game-without-game-view": (["lens", f"{T}/s", "--game", "B01:0"],
                                    {"s/games.jsonl": GAME_ROW}),
    "lens-against-without-compare": (["lens", f"{T}/s", "--against", f"{T}/s"],
                                     {"s/games.jsonl": GAME_ROW}),
    "lens-against-missing": (["lens", f"{T}/s", "--view", "compare"], {"s/games.jsonl": GAME_ROW}),
    "lens-against-empty": (["lens", f"{T}/s", "--view", "compare", "--against", ""],
                           {"s/games.jsonl": GAME_ROW}),
    "h2h-games-missing-keys": (["h2h", f"{T}/s", f"{T}/s"], {"s/games.jsonl": '{"a": 1}\n'}),
    "h2h-games-binary": (["h2h", f"{T}/s", f"{T}/s"], {"s/games.jsonl": b"\xff\n"}),
    # serve-ollama (checked before the model loads)
    "serve-port-huge": (["serve-ollama", "--port", "99999999"], {}),
    "serve-port-overflow": (["serve-ollama", "--port", HUGE], {}),
    "serve-port-negative": (["serve-ollama", "--port", "-1"], {}),
    "serve-port-zero": (["serve-ollama", "--port", "0"], {}),
    "serve-host-empty": (["serve-ollama", "--host", ""], {}),
    "serve-host-unknown": (["serve-ollama", "--host", "no-such-host.invalid"], {}),
    # gilp generate / train
    "gilp-generate-count-huge": (GEN + ["--count", HUGE], {}),
    "gilp-generate-bench-repeated": (GEN + ["--bench", "taskgraph,taskgraph"], {}),
    "gilp-generate-splits-repeated": (GEN + ["--splits", "train,train"], {}),
    "gilp-generate-out-file": (GEN + ["--out", f"{T}/file.txt"], {}),
    "gilp-generate-out-under-file": (GEN + ["--out", f"{T}/file.txt/tasks"], {}),
    "gilp-generate-out-empty": (GEN + ["--out", ""], {}),
    "gilp-train-seed-huge": (TRAIN + ["--seed", HUGE], {}),
    "gilp-train-seed-negative": (TRAIN + ["--seed", "-1"], {}),
    "gilp-train-jobs-0": (TRAIN + ["--jobs", "0"], {}),
    "gilp-train-jobs-huge": (TRAIN + ["--jobs", HUGE], {}),
    "gilp-train-backbone-empty": (TRAIN + ["--backbone", ""], {}),
    "gilp-train-backbone-comma": (TRAIN + ["--backbone", ","], {}),
    "gilp-train-backbone-repeated": (TRAIN + ["--backbone", "MLP,mlp"], {}),
    "gilp-train-work-file": (TRAIN + ["--work", f"{T}/file.txt"], {}),
    "gilp-train-work-empty": (TRAIN + ["--work", ""], {}),
    # gilp run
    "gilp-run-seeds-huge": (RUN + ["--seeds", HUGE], {}),
    "gilp-run-run-seed-negative": (RUN + ["--run-seed", "-1"], {}),
    "gilp-run-run-seed-huge": (RUN + ["--run-seed", HUGE], {}),
    "gilp-run-methods-empty": (RUN + ["--methods", ""], {}),
    "gilp-run-methods-comma": (RUN + ["--methods", ","], {}),
    "gilp-run-methods-unbalanced": (RUN + ["--methods", "Agent-Replan,GILP[tau_low=0.5"], {}),
    "gilp-run-methods-repeated": (RUN + ["--methods", "GILP,GILP"], {}),
    "gilp-run-params-empty": (RUN + ["--params", ""], {}),
    "gilp-run-out-empty": (RUN + ["--out", ""], {}),
    "gilp-run-out-file": (RUN + ["--out", f"{T}/file.txt"], {}),
    "gilp-run-out-under-file": (RUN + ["--out", f"{T}/file.txt/o"], {}),
    "gilp-run-work-file": (RUN + ["--work", f"{T}/file.txt"], {}),
    # gilp calibrate
    "gilp-calibrate-evals-huge": (CALIBRATE + ["--evals", HUGE], {}),
    "gilp-calibrate-out-file": (CALIBRATE + ["--out", f"{T}/file.txt"], {}),
    "gilp-calibrate-work-under-file": (CALIBRATE + ["--work", f"{T}/file.txt/w"], {}),
    "gilp-calibrate-from-real-empty": (CALIBRATE + ["--from-real", ""], {}),
    "gilp-calibrate-start-empty": (CALIBRATE + ["--start", ""], {}),
    "gilp-calibrate-budget-empty": (CALIBRATE + ["--budget", ""], {}),
    "gilp-calibrate-from-real-binary": (CALIBRATE + ["--from-real", f"{T}/r", "--out", f"{T}/c"],
                                        {"r/events.jsonl": b"\xff\xfe\n"}),
    # gilp real
    "gilp-real-tasks-0": (REAL + ["--tasks", "0"], {}),
    "gilp-real-tasks-huge": (REAL + ["--tasks", HUGE], {}),
    "gilp-real-timeout-nan": (REAL + ["--timeout", "nan"], {}),
    "gilp-real-timeout-inf": (REAL + ["--timeout", "inf"], {}),
    "gilp-real-timeout-huge": (REAL + ["--timeout", HUGE], {}),
    "gilp-real-wall-cap-nan": (REAL + ["--wall-cap", "nan"], {}),
    "gilp-real-threads-0": (REAL + ["--threads", "0"], {}),
    "gilp-real-threads-huge": (REAL + ["--threads", HUGE], {}),
    "gilp-real-methods-repeated": (REAL + ["--methods", "Agent-Replan,Agent-Replan"], {}),
    "gilp-real-host-without-ollama": (REAL + ["--llm-host", "http://127.0.0.1:1"], {}),
    "gilp-real-host-malformed": (REAL + ["--llm", "ollama", "--llm-host", "h:99999999"], {}),
    "gilp-real-host-empty": (REAL + ["--llm", "ollama", "--llm-host", ""], {}),
    "gilp-real-model-empty": (REAL + ["--llm", "ollama", "--model", ""], {}),
    "gilp-real-out-empty": (REAL + ["--out", ""], {}),
    "gilp-real-out-file": (REAL + ["--out", f"{T}/file.txt"], {}),
    "gilp-real-out-under-file": (REAL + ["--out", f"{T}/file.txt/o"], {}),
    # gilp paper / report
    "gilp-paper-config-not-table": (["gilp", "paper", "--config", f"{T}/c.toml"],
                                    {"c.toml": "paper = 3\n"}),
    "gilp-paper-config-run-seed-negative": (["gilp", "paper", "--config", f"{T}/c.toml"],
                                            {"c.toml": "[paper]\nrun_seed = -1\n"}),
    "gilp-paper-config-out-empty": (["gilp", "paper", "--config", f"{T}/c.toml"],
                                    {"c.toml": "[paper]\nout = ''\n"}),
    "gilp-paper-config-directory": (["gilp", "paper", "--config", f"{T}/adir"], {}),
    "gilp-paper-run-seed-negative": (GPAPER + ["--run-seed", "-1"], {}),
    "gilp-paper-run-seed-huge": (GPAPER + ["--run-seed", HUGE], {}),
    "gilp-paper-out-file": (GPAPER + ["--out", f"{T}/file.txt"], {}),
    "gilp-paper-out-empty": (GPAPER + ["--out", ""], {}),
    "gilp-paper-work-file": (GPAPER + ["--work", f"{T}/file.txt"], {}),
    "gilp-paper-work-empty": (GPAPER + ["--work", ""], {}),
    "gilp-report-empty": (["gilp", "report", ""], {}),
}


def _case(name: str, root: Path) -> list[str]:
    argv, files = CASES[name]
    if isinstance(argv, str):  # an experiment file's text and its command (None: paper)
        command = files or "paper"
        files = {"x.toml": argv}
        argv = [command, "--config", f"{T}/x.toml", "--llm", "none", "--out", f"{T}/run"]
    (root / "adir").mkdir()
    (root / "file.txt").write_text("not a directory\n")
    (root / "bin.dat").write_bytes(b"\xff\xfe\x00\x80" * 16)
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    return [a.replace(T, str(root)) for a in argv]


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
            for p in sorted(root.rglob("*"))}


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as stop:  # argparse's own errors
        return stop.code


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_exits_2_with_one_line_and_writes_nothing(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = _case(name, tmp_path)
    before = _tree(tmp_path)
    code = _exit_code(argv)
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert code == 2, (code, err[-2000:])
    assert len(lines) == 1 and lines[0].startswith("bsjax: error: "), err[-2000:]
    assert "Traceback" not in err
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("variable,value", [("BSJAX_LLM_THREADS", "0"),
                                            ("BSJAX_LLM_THREADS", "two"),
                                            ("BSJAX_GPU_AUTOTUNE_LEVEL", "fast"),
                                            ("BSJAX_GAMES_PER_STEP", "0"),
                                            ("BSJAX_GAMES_PER_STEP", "1e3")])
def test_a_bad_environment_variable_exits_2_and_writes_nothing(variable, value, tmp_path,
                                                                 monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(variable, value)
    code = _exit_code(["play", "--agent", "random", "--seeds", "1", "--out", "run"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"bsjax: error: {variable} must be"), err
    assert len(err.splitlines()) == 1 and list(tmp_path.iterdir()) == []


# ----- the checks themselves: valid input passes and the probe leaves nothing -----

def test_writable_dir_probe_leaves_nothing(tmp_path):
    target = tmp_path / "new" / "deep"
    assert checks.writable_dir(target, "--out") == target
    assert checks.writable_dir(tmp_path, "--out") == tmp_path
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_writable_dir_refuses_read_only(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(UsageError, match="cannot be written"):
            checks.writable_dir(locked / "run", "--out")
    finally:
        locked.chmod(0o700)


def test_input_dir_accepts_an_existing_directory(tmp_path):
    assert checks.input_dir(tmp_path, "--work") == tmp_path
    with pytest.raises(UsageError, match="is a file"):
        checks.input_dir(Path(__file__), "--work")


def test_default_run_config_passes():
    cli_checks.check_run_config(RunConfig())
    cli_checks.check_run_config(RunConfig(boards="B01,B02", seeds=30, particles=1000, tau=1))


@pytest.mark.parametrize("param,spec", [("tau", "0:1:0.05"), ("tau", "0, 0.5 ,1"),
                                        ("seeds", "1:5:2"), ("seeds", "1,2,30"),
                                        ("particles", [100, 1000]), ("agent", "greedy,wma"),
                                        ("tau", "a:b:c")])  # the last: parse_values says so
def test_valid_sweep_values_pass(param, spec):
    cli_checks.check_sweep_values(param, spec)


@pytest.mark.parametrize("path", sorted((REPO / "experiments").glob("*.toml")),
                         ids=lambda p: p.name)
def test_shipped_experiment_files_pass(path):
    cli_checks.check_experiment_file(path)


def test_study_row_ids_stay_inside_the_output_directory():
    for good in ("B1", "tau=0.05", "model=library/gemma3:4b"):
        checks.safe_dir_name(good, "a row id")
    for bad in ("", " ", ".", "..", "../x", "a/../b", "/abs", "a//b"):
        with pytest.raises(UsageError):
            checks.safe_dir_name(bad, "a row id")
