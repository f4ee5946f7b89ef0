"""pytest fixture ``server``: start fake SGLang servers (fakesg_helpers.Server), kill them at teardown."""
from __future__ import annotations

import pytest

from fakesg_helpers import Server


@pytest.fixture
def server(tmp_path):
    started = []

    def start(args=(), **kw):
        s = Server(tmp_path / f"s{len(started)}", list(args), **kw)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()
