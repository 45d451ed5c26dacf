"""Measuring: timing, the benchmark of the pipelines, profiling, targets judged against their spread, and the plots."""
