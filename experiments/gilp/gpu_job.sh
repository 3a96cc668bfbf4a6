#!/usr/bin/env bash
# The GILP jobs that want a GPU, as one resumable job with a time budget.
#
# What it runs (docs/gilp/spec.md §7; every stage picks up what is already on disk):
#   generate  bsjax gilp generate --resume: the task splits in WORK/tasks (optional: the other
#             stages generate missing splits themselves)
#   train     bsjax gilp train --profile paper --backbone all: the 24 paper-profile backbones
#             (6 architectures x 4 benchmarks) in WORK/backbones; trained checkpoints are loaded,
#             not retrained
#   mcts      bsjax gilp run --methods Parametric-WM-MCTS on the test split of all four
#             benchmarks (Table 1's MCTS row), into RESULTS/mcts; continued with --resume
#   tau       experiments/gilp/tau_sweep.py: GILP's τ_low sweep on the whole val split (Table 5b),
#             into RESULTS/tau; a finished sweep is read back, an interrupted one starts again
#   table4    experiments/gilp/table4.py: standalone Parametric-WM-MPC and Hybrid-Full with each
#             backbone (Table 4 and F4; its MPNN run is also Table 1's MPC row), into
#             RESULTS/table4; each backbone's run directory is continued
#   pack      RESULTS/packed/{mcts,tau,table4}.tar.xz, small archives to copy off the GPU
#             machine (Table 4's event files are left out except the MPNN planner's); not marked
#             done, so it remakes the archives each time it is named
# The default stages are: train mcts tau table4.
#
# Requirements: a checkout of bsjax with a CUDA build of JAX (an NVIDIA GPU), installed with
#   pip install -e '.[cuda12]'
# or with `make install EXTRAS=cuda12` (`make run EXTRAS=cuda12` also works, and then runs the
# Battleship paper table too); make installs into .venv, so run this script with
# PYTHON=.venv/bin/python. Without a GPU the stages run on the CPU, only much more slowly.
#
# Usage, from the repository root:
#   bash experiments/gilp/gpu_job.sh [options] [STAGE ...]
#   bash experiments/gilp/gpu_job.sh --minutes 30                  # the default stages, 30 min
#   bash experiments/gilp/gpu_job.sh --minutes 10 mcts             # one stage
#   bash experiments/gilp/gpu_job.sh --dry-run                     # print the plan, run nothing
# Options (each also read from the environment variable in brackets):
#   -m, --minutes N     time budget in minutes [GILP_MINUTES, default 60]
#   -o, --out RESULTS   results folder [GILP_OUT, default results/gpu]
#   -w, --work DIR      GILP work directory: tasks, training data, checkpoints
#                       [GILP_WORK, default .gilpwork]
#   -p, --params P      simulator parameters: calibrated (the shipped fit) or a
#                       gilp_sim_params.json file [GILP_PARAMS, default calibrated]
#   -s, --seeds N       seeds per task [GILP_SEEDS, default 8, the protocol's]
#   -b, --backbones L   Table 4's backbones [GILP_BACKBONES, default all six]
#   -j, --jobs N        backbones trained at once by the train stage [GILP_JOBS, default 6]
#   -r, --redo          run stages again even if they finished before (their commands still
#                       continue what is on disk)
#   -n, --dry-run       print the stages and their commands, run nothing
#   -h, --help          this text
# PYTHON picks the interpreter (default python3).
#
# A stage starts only if at least GILP_MIN_STAGE_SECONDS (default 60) of the budget is left, and
# it is stopped (SIGTERM, then SIGKILL 30 s later) when the budget runs out. Every file is written
# atomically and every stage resumes, so a stopped job loses at most the unit of work in flight;
# the script then prints the command that continues it. A finished stage leaves a marker in
# RESULTS/.stages/ and is skipped the next time with the same settings. Everything the script and
# its stages print is appended to RESULTS/gpu_job.log. Exit status: 0 when every stage is done,
# 1 when a stage failed, 2 on bad arguments, 3 when the budget ran out first.
#
# To share one GPU among several processes (for example one table4.py per backbone, with
# --backbones NAME and the same --out), give each a slice of its memory with
# XLA_PYTHON_CLIENT_MEM_FRACTION=0.2.
set -u

usage() { sed -n '2,/^set -u/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PY=${PYTHON:-python3}
MINUTES=${GILP_MINUTES:-60}
RESULTS=${GILP_OUT:-results/gpu}
WORK=${GILP_WORK:-.gilpwork}
PARAMS=${GILP_PARAMS:-calibrated}
SEEDS=${GILP_SEEDS:-8}
BACKBONES=${GILP_BACKBONES:-MPNN,MLP,GCN,GPS,ActionNode,ErrorAware}
JOBS=${GILP_JOBS:-6}
MIN_STAGE=${GILP_MIN_STAGE_SECONDS:-60}
REDO=0
DRY=0
ALL_STAGES="generate train mcts tau table4 pack"
STAGES=()

die() { echo "gpu_job.sh: $*" >&2; exit 2; }
need_value() { [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value"; }

while [ $# -gt 0 ]; do
    case $1 in
        -m|--minutes) need_value "$@"; MINUTES=$2; shift 2 ;;
        -o|--out) need_value "$@"; RESULTS=$2; shift 2 ;;
        -w|--work) need_value "$@"; WORK=$2; shift 2 ;;
        -p|--params) need_value "$@"; PARAMS=$2; shift 2 ;;
        -s|--seeds) need_value "$@"; SEEDS=$2; shift 2 ;;
        -b|--backbones) need_value "$@"; BACKBONES=$2; shift 2 ;;
        -j|--jobs) need_value "$@"; JOBS=$2; shift 2 ;;
        -r|--redo) REDO=1; shift ;;
        -n|--dry-run) DRY=1; shift ;;
        -h|--help) usage; exit 0 ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) STAGES+=("$1"); shift ;;
    esac
done
[ ${#STAGES[@]} -gt 0 ] || STAGES=(train mcts tau table4)
for s in "${STAGES[@]}"; do
    case " $ALL_STAGES " in *" $s "*) ;; *) die "unknown stage '$s' (stages: $ALL_STAGES)" ;; esac
done
for pair in "--minutes:$MINUTES" "--seeds:$SEEDS" "--jobs:$JOBS" "GILP_MIN_STAGE_SECONDS:$MIN_STAGE"; do
    case ${pair#*:} in ''|*[!0-9]*) die "${pair%%:*} must be a whole number (got '${pair#*:}')" ;; esac
done
[ "$MINUTES" -gt 0 ] || die "--minutes must be positive"
[ "$SEEDS" -gt 0 ] || die "--seeds must be positive"
[ "$JOBS" -gt 0 ] || die "--jobs must be positive"

BSJAX=("$PY" -m bsjax.cli)
stage_command() {  # stage $1's command in the array CMD, and in SIG its settings (the command
                   # without --resume), which a finished stage's marker records
    case $1 in
        generate) CMD=("${BSJAX[@]}" gilp generate --bench all --out "$WORK/tasks" --resume) ;;
        train) CMD=("${BSJAX[@]}" gilp train --bench all --backbone all --profile paper
                    --jobs "$JOBS" --work "$WORK") ;;
        mcts) CMD=("${BSJAX[@]}" gilp run --methods Parametric-WM-MCTS --bench all --profile paper
                   --seeds "$SEEDS" --params "$PARAMS" --work "$WORK" --out "$RESULTS/mcts") ;;
        tau) CMD=("$PY" "$ROOT/experiments/gilp/tau_sweep.py" --work "$WORK" --params "$PARAMS"
                  --seeds "$SEEDS" --out "$RESULTS/tau") ;;
        table4) CMD=("$PY" "$ROOT/experiments/gilp/table4.py" --work "$WORK" --params "$PARAMS"
                     --seeds "$SEEDS" --backbones "$BACKBONES" --out "$RESULTS/table4") ;;
        pack) CMD=(pack "$RESULTS/packed") ;;
    esac
    SIG=$(quoted "${CMD[@]}")
    if [ "$1" = mcts ] && [ -f "$RESULTS/mcts/run.json" ]; then CMD+=(--resume); fi
}

finished_before() {  # stage $1 left a marker with the same settings (and --redo is off)
    [ "$REDO" = 0 ] && [ -f "$RESULTS/.stages/$1.done" ] && [ "$(cat "$RESULTS/.stages/$1.done")" = "$SIG" ]
}

pack() {  # small archives of the finished results in $1, for copying off the machine
    mkdir -p "$1"
    local name
    for name in mcts tau; do
        [ -d "$RESULTS/$name" ] && tar -C "$RESULTS" -I "xz -T0" -cf "$1/$name.tar.xz" "$name"
    done
    # Table 4's event files are large: keep the MPNN planner's (Table 1's MPC row) and every
    # backbone's summaries.
    [ -d "$RESULTS/table4" ] && tar -C "$RESULTS" -I "xz -T0" -cf "$1/table4.tar.xz" \
        --exclude='table4/backbones/[!M]*/events' --exclude='table4/backbones/MLP/events' \
        --exclude='*/Hybrid-Full__*' table4
    ls -l "$1"
}

quoted() {  # the words, shell-quoted where they need it
    local out="" w
    for w in "$@"; do
        if [[ $w =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then out+="$w "; else out+="$(printf '%q' "$w") "; fi
    done
    echo "${out% }"
}

continue_command() {  # the command line that continues with the stages in $@
    local cmd=(bash "$0" --minutes "$MINUTES" --out "$RESULTS" --work "$WORK" --params "$PARAMS"
               --seeds "$SEEDS")
    [ "$BACKBONES" = "MPNN,MLP,GCN,GPS,ActionNode,ErrorAware" ] || cmd+=(--backbones "$BACKBONES")
    [ "$JOBS" = 6 ] || cmd+=(--jobs "$JOBS")
    quoted "${cmd[@]}" "$@"
}

if [ "$DRY" = 1 ]; then
    echo "budget $MINUTES min; results in $RESULTS; work directory $WORK; log $RESULTS/gpu_job.log"
    for s in "${STAGES[@]}"; do
        stage_command "$s"
        state=""
        finished_before "$s" && state=" (finished before: skipped)"
        echo "== $s$state: $(quoted "${CMD[@]}")"
    done
    exit 0
fi

mkdir -p "$RESULTS/.stages" || die "cannot create $RESULTS"
LOG="$RESULTS/gpu_job.log"
exec > >(tee -a "$LOG") 2>&1
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

end=$((SECONDS + MINUTES * 60))
left() { echo $((end - SECONDS)); }
stamp() { date '+%Y-%m-%d %H:%M:%S'; }

echo "== $(stamp) gpu_job.sh: stages ${STAGES[*]}; budget $MINUTES min; results in $RESULTS"
"$PY" -c "import jax, bsjax; print('jax', jax.__version__, jax.devices())" \
    || die "cannot import jax and bsjax with $PY (pip install -e '.[cuda12]')"
"$PY" -c "import jax, sys; sys.exit(jax.default_backend() == 'cpu')" \
    || echo "== warning: JAX sees no GPU; the stages will run on the CPU, slowly"

status=0
failed=()
remaining=()
for i in "${!STAGES[@]}"; do
    s=${STAGES[$i]}
    stage_command "$s"
    if finished_before "$s"; then
        echo "== $(stamp) $s: finished before, skipped (--redo runs it again)"
        continue
    fi
    if [ "$(left)" -lt "$MIN_STAGE" ]; then
        echo "== $(stamp) $s: not started, $(left) s of the budget left"
        remaining=("${STAGES[@]:$i}")
        status=3
        break
    fi
    echo "== $(stamp) $s ($(left) s of the budget left): $(quoted "${CMD[@]}")"
    t0=$SECONDS
    if [ "$s" = pack ]; then
        "${CMD[@]}"; rc=$?
    else
        timeout --signal=TERM --kill-after=30 "$(left)" "${CMD[@]}"; rc=$?
    fi
    echo "== $(stamp) $s: exit status $rc after $((SECONDS - t0)) s"
    if [ "$rc" = 0 ]; then
        [ "$s" = pack ] || echo "$SIG" > "$RESULTS/.stages/$s.done"  # archives are always remade
    elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        echo "== $s was stopped when the budget ran out; what it finished is on disk"
        remaining=("${STAGES[@]:$i}")
        status=3
        break
    else
        echo "== $s failed; the later stages still run (see $LOG)"
        failed+=("$s")
        status=1
    fi
done

remaining=(${failed[@]+"${failed[@]}"} ${remaining[@]+"${remaining[@]}"})  # (bash < 4.4 and set -u)
if [ ${#remaining[@]} -gt 0 ]; then
    echo "== $(stamp) not done: ${remaining[*]}. Continue with:"
    echo "   $(continue_command "${remaining[@]}")"
else
    echo "== $(stamp) all stages done; results in $RESULTS"
fi
exit $status
