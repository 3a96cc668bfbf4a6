"""Stage 1, generate: tasks and their splits, and the labelled transitions a backbone trains on
(docs/gilp/spec.md §2.7, §3.5)."""
