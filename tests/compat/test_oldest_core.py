# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The oldest supported ansible-core (meta/runtime.yml: >=2.17.0) deploys on the lab as 2.19 does.

ansible-core before 2.19 templates differently: a scalar expression comes back as a string ('8', '' for none),
only a lone variable or a whole dict keeps its types. This runs the lab deploy with ansible-core 2.17 (the
``compat`` make target builds ``.venv-compat``): the first run serves, the second changes nothing, and the
report has the same types as the contract (numbers as numbers, null as null).

Run as root (the lab): ``make compat``.
"""

from __future__ import absolute_import, division, print_function

import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lab"))
from labsession import lab_session, recap, run_playbook  # noqa: E402  pylint: disable=wrong-import-position

CHECKOUT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("COMPAT_ANSIBLE_BIN", os.path.join(CHECKOUT, ".venv-compat", "bin"))


@pytest.fixture(scope="module")
def lab():
    if os.geteuid() != 0:
        pytest.skip("the lab needs root")
    if not os.access(os.path.join(BIN, "ansible-playbook"), os.X_OK):
        pytest.fail("no ansible-playbook in %s: run `make compat`, which builds it" % BIN)
    with lab_session():
        yield


def core_version():
    out = subprocess.run([os.path.join(BIN, "ansible"), "--version"], capture_output=True, text=True, check=True).stdout
    return re.search(r"core ([0-9.]+)", out).group(1)


def deploy():
    return run_playbook("deploy", bin_dir=BIN)


def test_deploy_with_the_oldest_core(lab):  # pylint: disable=unused-argument,redefined-outer-name
    version = core_version()
    assert version.startswith("2.17."), version
    rc, out, reports = deploy()
    assert rc == 0, out[-4000:]
    assert set(reports) == {"gpu01", "ct129"}, out[-2000:]
    for host, report in reports.items():
        assert report["final_state"] == "serving", (host, report)
        assert report["selected"] == "known-good", (host, report["selected"])
        # the report's types, as with ansible-core 2.19
        assert isinstance(report["gpu"]["count"], int) and report["gpu"]["count"] == 8, report["gpu"]
        assert report["group"] is None and report["fallback_used"] is True, (report["group"], report["fallback_used"])
        by_name = dict((c["name"], c) for c in report["candidates"])
        assert by_name["trtllm-moe"]["reason"] == "arch_unsupported"
        assert by_name["cutedsl-moe"]["reason"] == "garbage"
        assert by_name["known-good"]["outcome"] == "ready" and by_name["known-good"]["reason"] is None
        for cand in report["candidates"]:
            if cand.get("screen"):
                assert isinstance(cand["screen"]["layers"], int), cand["screen"]

    rc, out, reports = deploy()
    assert rc == 0, out[-4000:]
    counts = recap(out)
    assert set(counts) >= {"gpu01", "ct129"}, out[-2000:]
    assert all(c["changed"] == 0 and c["failed"] == 0 for c in counts.values()), counts
    assert all(r["final_state"] == "serving" for r in reports.values()), reports
