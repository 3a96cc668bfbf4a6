import os
import subprocess
import sys

# Tests import helpers from tests/support.py.
sys.path.insert(0, os.path.dirname(__file__))

# XLA's persistent compilation cache: many tests play the same agent on the same shapes, each
# through a fresh `jax.jit`, so each would compile the same program again. The cache reuses the
# binary (keyed by the program, the JAX version and the flags; behaviour is unchanged), between
# the xdist workers and the tests' own subprocesses too (set before JAX is imported, so they
# inherit it). It lives in .pytest_cache/ (git-ignored) and keeps the next run warm.
_XLA_CACHE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          ".pytest_cache", "xla")
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", _XLA_CACHE)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")
# The embedded model on one thread: two workers on two cores, each running llama.cpp on two
# spinning threads, made every reply many times slower (replies do not depend on the count).
os.environ.setdefault("BSJAX_LLM_THREADS", "1")

# Two XLA flags that cut compile time and keep every game: the classic CPU emitters instead of
# the fusion emitters (19-25% less compile time, the same run time), and LLVM's optimisation
# level 1 instead of 2 (code runs slower, but the tests' games are small: the default tier took
# 611 s against 690-701 s). The committed games, made with neither, are replayed here game for
# game (docs/throughput.md). Only where this jaxlib knows the flags (XLA aborts on an unknown
# one), asked once: the xdist workers and subprocesses inherit them. Level 0 would compile
# faster still but changes results, so it is not used.
_TEST_XLA_FLAGS = "--xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=1"


def _with_test_flags(flags: str) -> str:
    probe = subprocess.run([sys.executable, "-c", "import jax; jax.devices('cpu')"],
                           env={**os.environ, "XLA_FLAGS": f"{flags} {_TEST_XLA_FLAGS}"},
                           capture_output=True)
    return f"{flags} {_TEST_XLA_FLAGS}".strip() if probe.returncode == 0 else flags


if "xla_cpu_use_fusion_emitters" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = _with_test_flags(os.environ.get("XLA_FLAGS", ""))

import chex  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_trace_counter():
    """chex counts traces per function *name* across the whole process, so two test files with a
    same-named jitted helper in one xdist worker would share a count; every test starts at 0."""
    chex.clear_trace_counter()
    yield


# The longest test files of the default suite, longest first (worker-seconds of one cold run:
# three workers on a 2-core CPU, cold XLA cache). `make test` hands whole files to the workers in
# collection order (--dist loadfile --no-loadscope-reorder); starting with the longest keeps one
# long file from running alone at the end while the other workers idle.
LONGEST_FIRST = (
    "test_llm.py",
    "test_samplers.py",
    "test_api.py",
    "test_sharding.py",
    "test_freshness.py",
    "test_cli.py",
    "test_env.py",
    "test_lens.py",
    "gilp/test_backbones.py",
    "test_planning.py",
    "test_importance.py",
    "test_fastpath.py",
    "test_play.py",
    "gilp/test_sim.py",
    "test_mh_kernel.py",
    "test_chain_tables.py",
    "gilp/test_env_repairflow.py",
)

# The full tier: whole tests that took 14 s or more each in a cold suite (the seconds below; three
# workers on a 2-core CPU, cold XLA cache, 2026-11-29), marked `slow` here to bring `make test`
# toward 10 minutes from a fresh clone (from 23-27 min to 13-14 that day; the rest is the default
# tier's own compiles). `make test-all` (or `pytest -m slow`) runs them.
# What the default suite keeps of what they check: committed games replayed (B1 and B6 of the
# paper's table), the conformance check of greedy, random, LM-only and the exact sampler and its
# failing case, the notebook API's games equal to the harness's, traced params, a torn-write
# resume, the quickstart notebook, and every property, enumeration and retrace test under 14 s.
# Cases of a parametrized test that are slow by their size are marked in their own file instead.
FULL_TIER = {
    "gilp/test_calibrate.py::test_batched_evaluations_equal_one_at_a_time": 34,
    "gilp/test_calibrate.py::test_from_real_refits_stage_one_to_measured_episodes": 33,
    "gilp/test_calibrate.py::test_objective_is_deterministic_and_a_fit_improves_it": 15,
    "gilp/test_calibrate.py::test_token_model_fits_rendered_prompts": 17,
    "gilp/test_gilp_bench.py::test_training_row_and_markdown": 17,
    "gilp/test_masked_oracle.py::test_masked_oracle_and_values_equal_the_direct_definitions[repairflow]": 94,
    "gilp/test_paper.py::test_run_then_report_rebuilds_the_same_tables": 228,
    "gilp/test_parametric.py::test_compact_scoring_matches_full_size_scoring": 14,
    "gilp/test_parametric.py::test_mcts_depth_is_capped_by_the_remaining_budget": 20,
    "gilp/test_parametric.py::test_planners_follow_an_optimal_plan_with_a_perfect_backbone[mpc]": 59,
    "gilp/test_parametric.py::test_the_oracle_stand_in_returns_the_exact_labels": 17,
    "gilp/test_parametric.py::test_untrained_mpnn_mpc_smoke": 30,
    "gilp/test_pipeline.py::test_train_command_trains_saves_and_reuses_a_backbone": 31,
    "gilp/test_pipeline.py::test_train_jobs_trains_backbones_in_child_processes": 38,
    "gilp/test_real.py::test_agent_and_gilp_episodes_correct_the_contradicting_draft": 21,
    "gilp/test_real.py::test_cli_real_runs_resumes_and_writes_table_7": 93,
    "gilp/test_sim.py::test_agent_reads_only_the_observable_state": 38,
    "gilp/test_sim.py::test_gate_detects_wrong_entity_and_false_completion_but_not_wrong_value": 54,
    "gilp/test_sim.py::test_noiseless_agent_is_the_observable_oracle": 47,
    "gilp/test_sim.py::test_sweep_equals_separate_runs_set_by_set": 79,
    "gilp/test_sim.py::test_traced_flags_and_slot_cuts_give_the_per_method_events": 153,
    "gilp/test_train.py::test_erroraware_extra_terms_are_finite": 16,
    "gilp/test_train.py::test_overfits_tiny_data_and_epoch_traces_once[ErrorAware]": 24,
    "gilp/test_train.py::test_scanned_epoch_equals_stepping_batch_by_batch": 31,
    "test_api.py::test_a_rule_plugs_into_every_planner_and_its_weight_is_traced": 14,
    "test_api.py::test_a_sweep_is_params_by_games_and_each_point_is_its_own_play": 26,
    "test_api.py::test_load_run_reads_a_study": 30,
    "test_bench.py::test_rows_and_png": 19,
    "test_env.py::test_every_registered_agent_passes_the_conformance_check[bayes]": 37,
    "test_env.py::test_every_registered_agent_passes_the_conformance_check[lookahead]": 20,
    "test_env.py::test_every_registered_agent_passes_the_conformance_check[mra-llm]": 16,
    "test_env.py::test_every_registered_agent_passes_the_conformance_check[mra]": 22,
    "test_env.py::test_every_registered_agent_passes_the_conformance_check[wma-reflective]": 17,
    "test_env.py::test_every_registered_agent_passes_the_conformance_check[wma]": 15,
    "test_env.py::test_the_samplers_pass_the_conformance_check[chain-config0]": 26,
    "test_env.py::test_the_samplers_pass_the_conformance_check[importance-config2]": 18,
    "test_env.py::test_the_samplers_pass_the_conformance_check[particles-config3]": 29,
    "test_exact_sampler.py::test_contradictory_evidence_gives_zeros_not_nan": 20,
    "test_examples.py::test_custom_scoring_rule_plugs_into_the_harness": 43,
    "test_fastpath.py::test_count_at_most_counts_the_entries_at_most_the_target": 16,
    "test_fastpath.py::test_set_at_and_add_at_equal_the_scatters": 22,
    "test_gpu_bench.py::test_a_short_budget_measures_the_first_point_and_skips_the_rest": 34,
    "test_importance.py::test_a_subclass_that_overrides_update_is_not_bypassed": 20,
    "test_llm.py::test_an_engine_dropped_as_soon_as_it_is_made_stops": 25,
    "test_llm.py::test_local_engine_faults_are_llm_errors_and_the_next_call_recovers": 18,
    "test_llm.py::test_tau_zero_is_mra_with_revision_off": 56,
    "test_lookahead.py::test_a_zero_budget_plays_bayes_games": 37,
    "test_lookahead.py::test_every_search_acts_legally_and_a_traced_param_does_not_retrace": 26,
    "test_lookahead.py::test_least_cost_is_the_first_argmin_and_its_gathers": 15,
    "test_lookahead.py::test_the_tpus_columns_from_bitboards_equal_the_occupancys": 21,
    "test_memory.py::test_auto_batch_plays_the_same_games_as_a_fixed_batch": 14,
    "test_memory.py::test_memory_per_game_grows_with_the_particles_and_not_with_the_probe": 39,
    "test_mh_kernel.py::test_chain_games_identical_with_the_kernel[1]": 56,
    "test_mh_kernel.py::test_games_identical_with_the_kernel[B01,B07-1]": 107,
    "test_mh_kernel.py::test_kernel_moves_every_particle_as_the_xla_loop[paper-3]": 45,
    "test_mh_kernel.py::test_kernel_moves_every_particle_as_the_xla_loop[tiny-3]": 36,
    "test_mh_kernel.py::test_lowering_picks_the_kernel_for_a_gpu_and_auto_the_loop_on_a_cpu": 21,
    "test_mh_kernel.py::test_the_chain_kernel_visits_the_boards_of_the_xla_loops[2]": 33,
    "test_mh_kernel.py::test_the_tpu_loop_without_tables_moves_as_the_table_loop": 30,
    "test_notebooks.py::test_scoring_rules_notebook": 30,
    "test_play.py::test_agents_with_one_belief_share_its_compiled_init_and_get_init_ones_values": 48,
    "test_play.py::test_an_l4_batch_returns_to_the_host_only_when_a_gate_opens": 23,
    "test_play.py::test_play_in_memory_equals_the_harness_batch[wma]": 41,
    "test_play.py::test_the_turn_loop_carries_the_agent_state_as_words_and_back_bit_for_bit": 47,
    "test_profile.py::test_bench_profiles_a_batch_and_names_its_kernels_source_lines": 16,
    "test_questions.py::test_hit_clusters_with_a_hit_bound_are_the_same_labels[7-11]": 21,
    "test_questions.py::test_hit_clusters_with_a_hit_bound_are_the_same_labels[8-8]": 21,
    "test_samplers.py::test_particles_match_exact_under_colour_and_sunk_evidence": 19,
    "test_samplers.py::test_particles_track_a_sequence_of_observations": 15,
    "test_sharding.py::test_two_processes_play_the_one_process_games": 52,
    "test_structured.py::test_local_replies_do_not_depend_on_earlier_calls": 50,
    "test_structured.py::test_serve_ollama_enforces_the_schema_for_the_ollama_client": 66,
    "test_study.py::test_paper_command_writes_the_table_and_figures": 40,
    "test_wma_reflective.py::test_a_preset_subset_revises_only_with_its_presets": 14,
    "test_wma_reflective.py::test_revision_off_plays_wma_game_for_game": 47,
}


def _mark_full_tier(config, items, tests_dir: str) -> None:
    """Marks FULL_TIER's tests slow; an entry that names no test of a collected file is an error
    (a renamed test would otherwise slip back into the default suite unnoticed)."""
    found = set()
    for item in items:
        node = f"{os.path.relpath(str(item.path), tests_dir)}::{item.name}"
        if node in FULL_TIER:
            item.add_marker(pytest.mark.slow)
            found.add(node)
    if any("::" in arg for arg in config.args):
        return  # a selection of tests: the other entries of their files were not collected
    files = {os.path.relpath(str(item.path), tests_dir) for item in items}
    missing = sorted(n for n in FULL_TIER if n.split("::")[0] in files and n not in found)
    if missing:
        raise pytest.UsageError(f"conftest FULL_TIER names tests that do not exist: {missing}")


@pytest.hookimpl(tryfirst=True)  # before `-m 'not slow'` deselects
def pytest_collection_modifyitems(config, items):
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    _mark_full_tier(config, items, tests_dir)

    def rank(item):
        path = os.path.relpath(str(item.path), tests_dir)
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the order within a file, and of the other files, is kept
