/**
 * Throughput driver for the reference TypeScript implementation (B1: greedy + MCMC(500)).
 *
 * It does NOT re-implement the game loop: it calls the reference's own experiment runner,
 * `runStrategyExperiment` from scripts/lib/run-strategy-experiment.ts, i.e. exactly what
 *   pnpm run exp:run -- --strategy greedy --boards all --seeds 3 --protocol paper --belief mcmc --particles 500
 * does (docs/how-to-run.md "Greedy baseline"), minus the console printing of run-v2.ts.
 * That covers: boards B01..B18 = generateBoard(1000+k), seeds hashSeed(boardId, 0..2),
 * boards outer / seed index inner, the Manifesto runtime + bridge, playGame (40 shots), GreedyStrategy
 * (selectBestShot = argmax hit prob, lowest index on ties), MCMCBeliefState(500, gameSeed), ε = 0.1,
 * and the reference's per-game file logging (run dir under --log-dir).
 *
 * Usage (from the reference checkout, REFIMPL_DIR pointing at it):
 *   REFIMPL_DIR=$PWD npx tsx PATH/TO/bsjax/benchmarks/reference/greedy54.ts [N=54] [--log-dir DIR] [--per-game]
 *   N: play the first N of the 54 games in the reference order (B01 s0, B01 s1, B01 s2, B02 s0, ...).
 *   For N = 54 this is one runStrategyExperiment call (boards all, seeds 3); otherwise at most two calls:
 *   the first floor(N/3) boards with 3 seeds, then the next board with N mod 3 seeds.
 * Prints one JSON line on stdout (last line):
 *   {"games","seconds","games_per_second","avg_f1","wins", ...}
 */
import { resolve } from "node:path";

const REF = process.env.REFIMPL_DIR ?? process.cwd();

const argv = process.argv.slice(2);
let n = 54;
let logDir = "reference-runs";
let perGame = false;
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === "--log-dir") logDir = argv[++i];
  else if (a === "--per-game") perGame = true;
  else if (/^\d+$/.test(a)) n = Number.parseInt(a, 10);
  else throw new Error(`unknown argument ${a}`);
}
if (!(n >= 1 && n <= 54)) throw new Error(`N must be in 1..54, got ${n}`);

// Import the reference's own modules (dynamic so REFIMPL_DIR can point elsewhere).
const runner = await import(resolve(REF, "scripts/lib/run-strategy-experiment.ts"));
const boardsMod = await import(resolve(REF, "src/board/boards.ts"));
const allBoards: string[] = boardsMod.getAllBoardIds();

const fullBoards = Math.floor(n / 3);
const rest = n % 3;
const calls: { boards: string; seeds: number }[] = [];
if (fullBoards > 0) {
  calls.push({ boards: fullBoards === 18 ? "all" : allBoards.slice(0, fullBoards).join(","), seeds: 3 });
}
if (rest > 0) calls.push({ boards: allBoards[fullBoards], seeds: rest });

const perGameRows: Record<string, unknown>[] = [];
let results: any[] = [];
const t0 = process.hrtime.bigint();
let tGame = t0;
for (const call of calls) {
  const out = await runner.runStrategyExperiment({
    strategyName: "greedy",
    protocol: "paper",
    boards: call.boards,
    seeds: call.seeds,
    particles: 500,
    belief: "mcmc",
    model: "gemma4:e4b", // CLI default; unused by greedy
    label: `greedy54-n${n}`,
    logDir,
    onGameComplete: ({ boardId, seedIndex, result }: any) => {
      const now = process.hrtime.bigint();
      const row = {
        board: boardId,
        seed_index: seedIndex,
        game_seed: result.seed,
        hits: result.hitCount,
        shots: result.shotsFired,
        won: result.won,
        f1: result.targetingF1,
        seconds: Number(now - tGame) / 1e9,
      };
      tGame = now;
      perGameRows.push(row);
      if (perGame) process.stderr.write(JSON.stringify(row) + "\n");
    },
  });
  results = results.concat(out.results);
}
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;

const games = results.length;
const avgF1 = games ? results.reduce((s, r) => s + r.targetingF1, 0) / games : 0;
// F1 = 2*hits/(shots+14) recomputed from the counters, as a cross-check of the MEL computed value.
const avgF1Closed = games ? results.reduce((s, r) => s + (2 * r.hitCount) / (r.shotsFired + 14), 0) / games : 0;
const wins = results.filter((r) => r.won).length;
console.log(JSON.stringify({
  agent: "greedy",
  sampler: "reference-mcmc",
  rng: "reference",
  protocol: "paper",
  particles: 500,
  games,
  seconds,
  games_per_second: games / seconds,
  avg_f1: avgF1,
  avg_f1_closed_form: avgF1Closed,
  wins,
  node: process.version,
  device: "cpu (node, single thread)",
  reference_commit: process.env.REFIMPL_COMMIT ?? null,
  timestamp: new Date().toISOString(),
  per_game: perGameRows,
}));
