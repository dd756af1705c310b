import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def data_dir() -> Path | None:
    """The shared real-data folder: $BMRM_DATA, else ../shared/data beside the checkout."""
    env = os.environ.get("BMRM_DATA")
    path = Path(env) if env else REPO.parent / "shared" / "data"
    return path if path.is_dir() else None


@pytest.fixture
def shared_data():
    path = data_dir()
    if path is None:
        pytest.skip("real data not found: set BMRM_DATA or place it at ../shared/data")
    return path
