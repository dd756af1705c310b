"""Where the tests look for the shared real data, and the reason they give when it is absent.

The data live outside the package: ``$BMRM_DATA``, else ``../shared/data`` beside the
development checkout that holds these tests.
"""

import os
from pathlib import Path

# the development checkout (the folder holding tests/)
CHECKOUT = Path(__file__).resolve().parents[1]


def data_dir(*, existing: bool = True) -> Path | None:
    """The shared real-data folder: ``$BMRM_DATA``, else ``../shared/data`` beside the
    checkout; None when ``existing`` and that folder does not exist."""
    env = os.environ.get("BMRM_DATA")
    path = Path(env) if env else CHECKOUT.parent / "shared" / "data"
    return path if not existing or path.is_dir() else None


def missing_data_reason() -> str:
    """The skip reason when :func:`data_dir` finds no folder: the folder tried."""
    tried = data_dir(existing=False)
    if os.environ.get("BMRM_DATA"):
        return f"real data not found: BMRM_DATA={tried} is not a folder"
    return f"real data not found at {tried}: set BMRM_DATA or place the data there"
