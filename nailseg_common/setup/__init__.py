"""Set-up: profiles, paths, the one `start()` of a notebook, the environment, files, progress."""
