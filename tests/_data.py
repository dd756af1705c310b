"""Where the tests look for the shared real data, and the reason they give when it is absent."""

import os

from bmrm.io import data_dir


def missing_data_reason() -> str:
    """The skip reason when :func:`bmrm.io.data_dir` finds no folder: the folder tried."""
    tried = data_dir(existing=False)
    if os.environ.get("BMRM_DATA"):
        return f"real data not found: BMRM_DATA={tried} is not a folder"
    return f"real data not found at {tried}: set BMRM_DATA or place the data there"
