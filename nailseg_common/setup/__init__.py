"""Set-up: the run's profiles, paths, the environment report, DALI's availability, progress."""
