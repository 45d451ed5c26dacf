"""The lab: one folder per question the course asked of itself, each a frozen record (lab/README.md)."""
