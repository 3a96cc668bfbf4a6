"""The real-LLM path (docs/gilp/spec.md §7 T7): the host episode loop, its LLM phases, task
selection and resumable runs."""
