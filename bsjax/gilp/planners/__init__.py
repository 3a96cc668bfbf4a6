"""GILP planners: the parametric planners, the skeleton and the pure gate functions (spec/gilp.md §4)."""
