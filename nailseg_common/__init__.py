"""Helper package of the nail-segmentation course on fast input pipelines.

One module per concern; the notebooks import from here and only teach and show.
"""

import os

# Albumentations checks PyPI for updates on import; the course runs offline.
os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")

__version__ = "0.1.0"
