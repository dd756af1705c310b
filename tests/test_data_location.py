"""The skip reason of tests that need the real data names the folder they looked in."""

from bmrm.io import data_dir
from tests._data import missing_data_reason


def test_reason_names_the_folder_of_bmrm_data(monkeypatch, tmp_path):
    missing = tmp_path / "nowhere"
    monkeypatch.setenv("BMRM_DATA", str(missing))
    assert data_dir() is None
    assert missing_data_reason() == f"real data not found: BMRM_DATA={missing} is not a folder"
    monkeypatch.setenv("BMRM_DATA", str(tmp_path))
    assert data_dir() == tmp_path


def test_reason_names_the_default_folder(monkeypatch):
    monkeypatch.delenv("BMRM_DATA", raising=False)
    default = data_dir(existing=False)
    assert default.parts[-2:] == ("shared", "data")
    assert missing_data_reason() == (
        f"real data not found at {default}: set BMRM_DATA or place the data there"
    )
