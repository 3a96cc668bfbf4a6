"""The Battleship commands of `bsjax`: play, paper, sweep, report, boards, bench, h2h, lens.

Each `cmd_*` validates every flag before it writes anything (`bsjax.battleship.cli_checks`,
`bsjax.core.checks`) and raises `UsageError` for bad input; `bsjax.cli.main` turns that into one
line on stderr and exit code 2.
"""

from __future__ import annotations

import json
from pathlib import Path

from bsjax.battleship import cli_checks, cli_flags
from bsjax.core import checks
from bsjax.core.errors import UsageError


def cmd_play(args) -> int:
    from bsjax.battleship.harness import experiment, run_config
    from bsjax.core.progress import GameProgress
    cfg = cli_checks.check_run_config(cli_flags.config_from_flags(args))
    run_config.validate(cfg)
    run_config.check_applies(cfg, list(cli_flags.overrides(args)))
    cli_flags.init_distributed(args)
    out = cli_flags.out_dir(args, "play")
    experiment.prepare_out_dir(out, cfg, args.resume)
    summary = experiment.run(cfg, out, resume=args.resume, progress=GameProgress())
    lo, hi = summary["win_rate_ci"]
    print(f"{summary['agent']} ({summary['sampler'] or 'no belief'}, {summary['protocol']}): "
          f"{summary['games']} games  F1 {summary['avg_f1']:.4f}  wins {summary['wins']}/"
          f"{summary['games']} ({100 * summary['win_rate']:.1f}%, CI [{100 * lo:.1f}, "
          f"{100 * hi:.1f}])  shots {summary['avg_shots']:.1f}  questions "
          f"{summary['avg_questions']:.1f}  {summary['games_per_second']:.2f} games/s  -> {out}")
    if args.json:
        print(json.dumps(summary))
    return 0


def _run_study(args, study, prefix: str) -> int:
    import jax

    from bsjax.battleship.harness import study as study_lib
    from bsjax.battleship.report import tables
    from bsjax.core.progress import GameProgress
    cli_checks.check_study(study)
    study_lib.validate(study)
    cli_flags.init_distributed(args)
    out = cli_flags.out_dir(args, prefix)
    study_lib.prepare(study, out, args.resume)
    summaries = study_lib.run(study, out, resume=args.resume,
                              progress_factory=lambda row_id: GameProgress(label=row_id))
    if jax.process_index() != 0:  # process 0 writes the report
        print(f"process {jax.process_index()}: done; `bsjax report {out}` once all have finished")
        return 0
    report = tables.write(out)
    print(report["markdown"], end="")
    print(f"-> {out}  ({', '.join(Path(f).name for f in report['files'].values())})")
    if args.json:
        print(json.dumps({"out": str(out), "rows": report["table"], "files": report["files"],
                          "seconds": sum(s["seconds"] for s in summaries.values())}))
    return 0


def cmd_paper(args) -> int:
    """The paper's unified table (all four layers and the baselines) with its figures."""
    from bsjax.battleship.harness import study as study_lib
    overrides = cli_flags.overrides(args)
    if args.config is not None:
        cli_checks.check_experiment_file(args.config)
        study = study_lib.load_toml(args.config, overrides)
    else:
        study = study_lib.paper_study(study_lib.paper_base(**overrides))
    if study.kind != "paper":
        raise UsageError(f"{args.config} defines a {study.kind}: run it with bsjax {study.kind}")
    return _run_study(args, study, "paper")


def cmd_sweep(args) -> int:
    """One row per value of a RunConfig field, with CIs, a CSV and a plot."""
    from bsjax.battleship.harness import study as study_lib
    overrides = cli_flags.overrides(args)
    if args.config is not None:
        cli_checks.check_experiment_file(args.config)
        study = study_lib.load_toml(args.config, overrides)
        if study.kind != "sweep":
            raise UsageError(f"{args.config} defines a {study.kind}, not a sweep")
        if args.param:
            raise UsageError("give the swept parameter in the experiment file or with --param, "
                             "not both")
    else:
        if not args.param or "=" not in args.param:
            raise UsageError("--param NAME=VALUES is required, e.g. --param tau=0:1:0.05")
        name, values = args.param.split("=", 1)
        name = name.strip().replace("-", "_")
        cli_checks.check_sweep_values(name, values)
        study = study_lib.sweep_study(cli_flags.config_from_flags(args), name, values)
    _check_flags_apply(args, study)
    return _run_study(args, study, "sweep")


def _check_flags_apply(args, study) -> None:
    """The flags given to a sweep apply to every row's run (`run_config.check_applies`)."""
    from bsjax.battleship.harness import run_config
    given = [f for f in cli_flags.overrides(args) if f != study.param]
    for row in study.active_rows():
        try:
            cfg = row.config(study.base)
            run_config.validate(cfg)
        except (UsageError, TypeError):
            continue  # `study.validate` reports it, naming the row
        run_config.check_applies(cfg, given)


def cmd_report(args) -> int:
    from bsjax.battleship.report import tables
    checks.nonempty(args.baseline, "--baseline")
    cli_checks.check_run_files(args.run_dir)
    try:
        report = tables.write(args.run_dir, args.baseline, args.paired)
    except tables.ReportError as err:
        raise UsageError(str(err)) from None
    except OSError as err:  # nothing written: the first file could not be
        raise UsageError(f"cannot write the report into {args.run_dir} "
                         f"({err.strerror or err})") from None
    print(report["markdown"], end="")
    print(f"-> {', '.join(report['files'].values())}")
    if args.json:
        print(json.dumps({"rows": report["table"], "files": report["files"]}))
    return 0


def cmd_boards(args) -> int:
    from bsjax.battleship.config import protocol
    from bsjax.battleship.game import suites
    config = protocol("paper" if args.suite == "synthetic" else "grand")
    if args.suite not in ("synthetic", "grand"):
        raise UsageError(f"unknown suite {args.suite!r} (choose from synthetic, grand)")
    boards = suites.suite(args.suite, config)
    table = {b.board_id: b.rows_text() for b in boards}
    if args.json:
        print(json.dumps(table))
    else:
        for board_id, rows in table.items():
            print(board_id)
            print("\n".join("  " + r for r in rows))
    return 0


def cmd_bench(args) -> int:
    from bsjax.battleship.harness import bench, run_config
    cfg = cli_checks.check_run_config(cli_flags.config_from_flags(args))
    run_config.validate(cfg)
    run_config.check_applies(cfg, list(cli_flags.overrides(args)))
    try:
        sizes = [int(x) for x in str(args.games).split(",")]
    except ValueError:
        raise UsageError(f"--games takes positive integers such as 1,8,54 (got {args.games})") from None
    if any(g < 1 for g in sizes):
        raise UsageError(f"--games must be positive (got {args.games})")
    for games in checks.unique(sizes, "--games"):
        checks.int_in(games, "--games", 1, cli_checks.MAX_BENCH_GAMES)
    checks.int_in(args.repeats, "--repeats", 1, cli_checks.MAX_REPEATS)
    for games in sizes:
        row = bench.bench(cfg, games, repeats=args.repeats)
        print(json.dumps(row) if args.json else
              f"{row['agent']}/{row['sampler']} G={games} P={row['particles']}: "
              f"{row['games_per_second']:.2f} games/s (compile {row['compile_seconds']:.1f} s, "
              f"{row['device']})")
    return 0


def cmd_h2h(args) -> int:
    """Pooled head-to-head F1 win rate of run A over run B (docs/battleship/grand-protocol.md §3.1)."""
    from bsjax.battleship.harness import summaries
    from bsjax.core import stats
    rows = []
    for run_dir in (args.run_a, args.run_b):
        cli_checks.check_run_files(run_dir)
        path = Path(run_dir) / "games.jsonl"
        if not path.is_file():
            raise UsageError(f"{run_dir} is not a run directory (no games.jsonl)")
        try:
            rows.append([json.loads(line) for line in path.read_text().splitlines() if line])
        except json.JSONDecodeError:
            raise UsageError(f"{path} is not valid JSON lines") from None
    f1_a, f1_b = summaries.f1_by_board(rows[0]), summaries.f1_by_board(rows[1])
    shared = sorted(set(f1_a) & set(f1_b))
    if not shared:
        raise UsageError("the two runs share no board")
    rate = stats.head_to_head_win_rate(f1_a, f1_b)
    result = {"a": args.run_a, "b": args.run_b, "boards": len(shared), "win_rate": rate}
    print(json.dumps(result) if args.json else
          f"A beats B on F1 with pooled head-to-head rate {rate:.4f} over {len(shared)} boards")
    return 0


def cmd_lens(args) -> int:
    from bsjax.battleship.report import lens as lens_lib
    if args.format not in ("text", "json"):
        raise UsageError(f"--format must be text or json (got {args.format!r})")
    checks.nonempty(args.game, "--game")
    checks.nonempty(args.against, "--against")
    if args.game is not None and args.view not in ("game", "confidence"):
        raise UsageError(f"--game is for --view game or confidence (not {args.view})")
    if args.against is not None and args.view != "compare":
        raise UsageError(f"--against is for --view compare (not {args.view})")
    for run_dir in (args.run_dir, args.against):
        if run_dir is not None:
            cli_checks.check_run_files(run_dir)
    try:
        data = lens_lib.lens(args.run_dir, args.view, args.game, args.against)
        text = json.dumps(data) if args.format == "json" else lens_lib.render(args.view, data)
    except lens_lib.LensError as err:
        raise UsageError(str(err)) from None
    except (KeyError, TypeError, ValueError, IndexError) as err:  # a hand-edited events file
        raise UsageError(f"{args.run_dir}: a results file is malformed "
                         f"({type(err).__name__}: {err})") from None
    print(text)
    return 0


def add_commands(sub) -> None:
    """Register the Battleship commands on the `bsjax` command's subparsers."""
    play = sub.add_parser("play", help="play an agent on a suite and write a run directory")
    cli_flags.add_game_args(play)
    play.set_defaults(func=cmd_play)
    paper = sub.add_parser("paper", help="the paper's unified table: every layer on the suite, "
                           "with table.md/.csv and figures")
    paper.add_argument("--config", default=None, help="an experiment file (experiments/*.toml)")
    cli_flags.add_game_args(paper, exclude=cli_flags.ROW_FLAGS)
    paper.set_defaults(func=cmd_paper)
    sweep = sub.add_parser("sweep", help="one row per value of a parameter, e.g. tau=0:1:0.05")
    sweep.add_argument("--param", default=None, help="NAME=lo:hi:step or NAME=a,b,c")
    sweep.add_argument("--config", default=None, help="an experiment file of kind sweep")
    cli_flags.add_game_args(sweep)
    sweep.set_defaults(func=cmd_sweep)
    report = sub.add_parser("report", help="rebuild tables and figures of a study or run directory")
    report.add_argument("run_dir")
    report.add_argument("--baseline", default=None, metavar="ROW",
                        help="compare every other row with ROW game by game (paired ΔF1 with a "
                        "bootstrap CI, McNemar's test of completion); default: the study's "
                        "baseline, if it names one")
    report.add_argument("--paired", default="baseline", metavar="MODE",
                        help="baseline: every row against the baseline row; adjacent: every row "
                        "against the row above it; none: no paired comparisons")
    report.add_argument("--json", action="store_true")
    report.set_defaults(func=cmd_report)
    boards = sub.add_parser("boards", help="print a board suite")
    boards.add_argument("--suite", default="synthetic", help="synthetic | grand")
    boards.add_argument("--json", action="store_true")
    boards.set_defaults(func=cmd_boards)
    bench = sub.add_parser("bench", help="throughput (games/s, steady state, compile excluded)")
    cli_flags.add_game_args(bench, with_out=False)
    bench.add_argument("--games", default="54", help="batch size(s), e.g. 1,8,54,512")
    bench.add_argument("--repeats", type=int, default=1, help="timed repetitions (median)")
    bench.set_defaults(func=cmd_bench)
    h2h = sub.add_parser("h2h", help="head-to-head F1 win rate of one run over another")
    h2h.add_argument("run_a")
    h2h.add_argument("run_b")
    h2h.add_argument("--json", action="store_true")
    h2h.set_defaults(func=cmd_h2h)
    lens = sub.add_parser("lens", help="inspect a run directory")
    lens.add_argument("run_dir")
    lens.add_argument("--view", default="run", help="run | game | confidence | llm | compare")
    lens.add_argument("--game", default=None, help="BOARD:SEED, e.g. B17:0")
    lens.add_argument("--against", default=None, help="the other run (compare)")
    lens.add_argument("--format", default="text", help="text | json")
    lens.set_defaults(func=cmd_lens)
