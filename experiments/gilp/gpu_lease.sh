#!/usr/bin/env bash
# The GILP jobs that need a GPU, for one lease of the device machine (spec §7, 8 seeds):
#   1. Parametric-WM-MCTS on all four benchmarks' test split (Table 1's MCTS row);
#   2. the τ_low sweep on the whole val split (Table 5b);
#   3. Table 4: standalone MPC and Hybrid-Full with each of the six paper backbones (its MPNN
#      run is also Table 1's MPC row).
# Every job resumes from results/gpu/ (kept while the machine stays warm), so the script can be
# run again in the next 10-minute sitting. Usage, from the repository root on the device:
#   bash experiments/gilp/gpu_lease.sh SECONDS      (with .gilpwork and .whl carried)
# Results are packed into $OUT as mcts.tar.xz, tau.tar.xz and table4.tar.xz.
set -u
budget=${1:-540}
end=$((SECONDS + budget))
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=results/gpu
mkdir -p "$R"
python3 -c "import jax; print(jax.__version__, jax.devices())"

left() { echo $((end - SECONDS)); }
stage() {  # stage NAME CMD...: run CMD within the time left, timing it
    local name=$1; shift
    [ "$(left)" -gt 30 ] || { echo "== $name: no time left"; return 1; }
    echo "== $name (budget $(left) s)"
    local t0=$SECONDS
    timeout "$(left)" "$@"
    echo "== $name: rc $? in $((SECONDS - t0)) s"
}
resume=""; [ -f "$R/mcts/run.json" ] && resume=--resume
stage mcts python3 -c "import sys; from bsjax.cli import main; sys.exit(main())" gilp run --methods Parametric-WM-MCTS --bench all --profile paper --seeds 8 \
    --params calibrated --work .gilpwork --out "$R/mcts" $resume
stage tau python3 experiments/gilp/tau_sweep.py --work .gilpwork --params calibrated --seeds 8 \
    --out "$R/tau"
stage table4 python3 experiments/gilp/table4.py --work .gilpwork --params calibrated --seeds 8 \
    --backbones MPNN,MLP,GCN,GPS,ActionNode,ErrorAware --out "$R/table4"
if [ -n "${OUT:-}" ]; then
    tar -C "$R" -I "xz -T0" -cf "$OUT/mcts.tar.xz" mcts 2>/dev/null
    tar -C "$R" -I "xz -T0" -cf "$OUT/tau.tar.xz" tau 2>/dev/null
    # Table 4's events are large; keep the MPNN planner's (Table 1's MPC row) and the summaries.
    tar -C "$R" -I "xz -T0" -cf "$OUT/table4.tar.xz" --exclude='table4/backbones/[!M]*/events' \
        --exclude='table4/backbones/MLP/events' --exclude='*/Hybrid-Full__*' table4 2>/dev/null
    ls -la "$OUT"
fi
