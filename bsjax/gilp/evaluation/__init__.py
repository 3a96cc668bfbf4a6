"""Stages 4-5, evaluate and report: methods × benchmarks × splits to event files and tables
(`harness`), and the whole pipeline in one command (`paper`)."""
