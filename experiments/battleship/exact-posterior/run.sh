#!/usr/bin/env bash
# The exact posterior against the particle belief, paired: greedy and bayes on the 18 synthetic
# boards of the paper protocol. Run from the repository root:
#   bash experiments/battleship/exact-posterior/run.sh [FIRST_CHUNK] [LAST_CHUNK]
# Chunk c plays seed indices 3c .. 3c + 2 on every board (54 games); chunks 0..9 are the
# 540 games. The particle rows play all 540 games at once (they are fast). A chunk that is
# already there is skipped, so the script resumes where it stopped.
set -euo pipefail
BSJAX=${BSJAX:-bsjax}
OUT=experiments/battleship/exact-posterior/runs
FIRST=${1:-0}
LAST=${2:-9}
play() {  # name, then the play options
  local name=$1; shift
  if [ -f "$OUT/$name/summary.json" ]; then return; fi
  rm -rf "${OUT:?}/$name"             # an interrupted chunk is played again
  $BSJAX play --protocol paper --batch-size 54 --out "$OUT/$name" "$@"
  rm -f "$OUT/$name/events.jsonl"   # regenerated exactly by the same command
}
play greedy-particles --agent greedy --sampler particles --seeds 30
play bayes-particles --agent bayes --sampler particles --seeds 30
for c in $(seq "$FIRST" "$LAST"); do
  play "bayes-exact/s$c" --agent bayes --sampler exact --seeds 3 --first-seed $((3 * c))
done
for c in $(seq "$FIRST" "$LAST"); do
  play "greedy-exact/s$c" --agent greedy --sampler exact --seeds 3 --first-seed $((3 * c))
done
