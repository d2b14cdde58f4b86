"""Benchmarks (not tests): ``make bench`` / ``python -m benchmarks.run_all``; see run_all.py."""
