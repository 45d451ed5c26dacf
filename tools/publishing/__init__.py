"""Building the course, not taking it: exporting notebook code into the package, rendering posts.

Students never import from here; ``make export`` and ``make blog`` do.
"""
