"""The skip reason of tests that need the real data names the folder they looked in."""

from tests._data import data_dir, missing_data_reason


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


def test_data_dir_is_beside_the_checkout_unless_bmrm_data_says(monkeypatch, tmp_path):
    import tests._data

    monkeypatch.setattr(tests._data, "CHECKOUT", tmp_path / "checkout")
    monkeypatch.delenv("BMRM_DATA", raising=False)
    assert data_dir() is None
    assert data_dir(existing=False) == tmp_path / "shared" / "data"
    (tmp_path / "shared" / "data").mkdir(parents=True)
    assert data_dir() == tmp_path / "shared" / "data"
    monkeypatch.setenv("BMRM_DATA", str(tmp_path / "elsewhere"))
    assert data_dir() is None
    assert data_dir(existing=False) == tmp_path / "elsewhere"
    monkeypatch.setenv("BMRM_DATA", str(tmp_path))
    assert data_dir() == tmp_path
