"""Session fixtures shared with the sibling test directory (see tests/support.py)."""

from __future__ import annotations

import pytest

from tests import support


@pytest.fixture(scope="session")
def prefect_api():
    """A temporary Prefect server for real flow runs (one per session)."""
    with support.prefect_server() as url:
        yield url


@pytest.fixture(scope="session")
def trained(prefect_api, tmp_path_factory):
    """(root, state): a tiny repo copy after one real `training` flow run (one per session)."""
    return support.trained_repo(tmp_path_factory.mktemp("tiny"))
