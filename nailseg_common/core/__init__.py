"""The ground layer: errors, the clock, statistics and files. It imports no other layer."""
