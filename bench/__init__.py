"""Benchmarks: each measures kubelab beside a floor in the same run and prints the ratio."""
