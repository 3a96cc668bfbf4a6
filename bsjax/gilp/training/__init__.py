"""Stage 2, train: backbone training, checkpoints, the backbone audit metrics, and the work
directory that makes tasks, transitions and backbones once and reuses them (docs/gilp/spec.md §3)."""
