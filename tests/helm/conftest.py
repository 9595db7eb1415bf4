from __future__ import annotations

from collections.abc import Iterator

import helm_python
import pytest

from tests.helm.settings_schema import CHART_DIR


@pytest.fixture(scope="session")
def chart() -> Iterator[helm_python.Chart]:
    """The chart, loaded once."""
    with helm_python.Chart.load(CHART_DIR) as loaded:
        yield loaded
