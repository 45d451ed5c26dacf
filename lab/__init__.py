"""The lab: one folder per question the course asked of itself, with its scripts, results and README."""
