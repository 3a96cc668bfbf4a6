"""GILP planners: the parametric planners, the skeleton and the pure gate functions (docs/gilp/spec.md §4)."""
