# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real-server gate's lab and its result rows.

Each test file brings up its own lab (the ``lab`` fixture, module scope). Side by side (``pytest -n N``,
pytest-xdist; ``make realserver`` does) the run's controller brings up one lab of N slots with the real SGLang on
every ML host, each worker runs whole files (``--dist loadfile``) on its own slot, and the rows each file prints
come back to the controller, which shows them at the end."""

from __future__ import absolute_import, division, print_function

import os
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(CHECKOUT, "tests", "lab"))
# pylint: disable-next=wrong-import-position
from labsession import (is_xdist_worker, lab_session, long_files_first, xdist_lab_configure,  # noqa: E402
                        xdist_lab_unconfigure, xdist_workers)

# what the files' labs need: the real SGLang beside the fake one on gpu01 and ct129, one GPU per host; no router
UP_ARGS = ["--real-sglang", "--gpu-count", "1", "--without", "rt01", "--without", "gpu02"]
ROWS_ENV = "LLMSERVE_REALSERVER_ROWS"
# the files' order (labsession.long_files_first); pytest-xdist hands them out by their number of tests, most first,
# and gives a worker the next file once it has 2 tests or fewer left: the differential (9 scenarios, about 680 s) on
# one slot, test_real_server.py (6, about 350 s) on the other, which takes test_real_deploys.py (3, about 400 s, the
# two-node group first) before its last two tests; the differential's slot is first to be down to 2 again and takes
# test_real_download.py (1, about 100 s)
LONG_FIRST = ("test_differential.py", "test_real_server.py", "test_real_deploys.py", "test_real_download.py")


def pytest_configure(config):
    if xdist_workers(config) and not is_xdist_worker(config):
        os.environ[ROWS_ENV] = tempfile.mkdtemp(prefix="llmserve-realserver-rows-")   # the workers inherit it
    xdist_lab_configure(config, UP_ARGS)


def pytest_unconfigure(config):
    xdist_lab_unconfigure(config)


def pytest_collection_modifyitems(session, config, items):  # pylint: disable=unused-argument
    long_files_first(config, items, LONG_FIRST)


def emit(title, rows):
    """Show a file's result rows under ``title``: printed, or under pytest-xdist left for the controller to show."""
    text = "\n================ %s\n%s\n" % (title, "\n".join(rows))
    folder = os.environ.get(ROWS_ENV)
    if folder and os.path.isdir(folder):
        with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".txt", delete=False, encoding="utf-8") as handle:
            handle.write(text)
    else:
        print(text)


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # pylint: disable=unused-argument
    folder = os.environ.get(ROWS_ENV)
    if is_xdist_worker(config) or not folder or not os.path.isdir(folder):
        return
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as handle:
            for line in handle.read().splitlines():
                terminalreporter.write_line(line)


@pytest.fixture(scope="module")
def lab(request):
    """The lab with the real SGLang (this worker's slot of it under pytest-xdist); the file's rows shown at its end."""
    if os.geteuid() != 0:
        pytest.skip("the lab needs root")
    check = subprocess.run([sys.executable, os.path.join(CHECKOUT, "tests", "lab", "realsglang", "install.py"),
                            "--check"], capture_output=True, text=True, check=False)
    if check.returncode != 0:
        pytest.fail("the real SGLang is not installed: run `make setup` (%s)" % check.stdout.strip())
    from realserver import RESULTS  # pylint: disable=import-outside-toplevel
    with lab_session(UP_ARGS):
        yield
    emit("real-server gate (%s): what the collection reported / what SGLang 0.5.23 logged"
         % os.path.basename(str(request.node.fspath)), list(RESULTS))
    del RESULTS[:]
