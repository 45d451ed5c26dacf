"""Fixtures that several test files share."""

import pytest

from nailseg_common.data.preparation import ensure_prepared
from nailseg_common.setup.profiles import select_profile


@pytest.fixture(scope="session")
def prepared(tmp_path_factory):
    """A folder whose ``data`` holds the smoke set, prepared once (``NAILSEG_DATA_DIR``)."""
    root = tmp_path_factory.mktemp("smoke_set")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NAILSEG_DATA_DIR", str(root / "data"))
        ensure_prepared(select_profile("smoke"), progress=False)
    return root
