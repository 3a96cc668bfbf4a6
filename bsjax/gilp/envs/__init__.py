"""The four graph-planning benchmarks as pure JAX environments (docs/gilp/spec.md §2)."""
