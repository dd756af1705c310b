import pytest

from bmrm.io import data_dir


@pytest.fixture
def shared_data():
    path = data_dir()
    if path is None:
        pytest.skip("real data not found: set BMRM_DATA or place it at ../shared/data")
    return path
