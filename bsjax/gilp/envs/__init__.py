"""The four graph-planning benchmarks as pure JAX environments (spec/gilp.md §2)."""
