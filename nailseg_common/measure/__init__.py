"""Measuring: timing, the benchmark of the pipelines, profiling, and the plots."""
