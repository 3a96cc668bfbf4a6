"""L3: the declared reflective runtime — record, computed signals, presets as data."""
