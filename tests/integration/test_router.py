# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The router: playbooks/router.yml runs PyPI's smg 1.13.0 (the lab's wheelhouse) on rt01 in front of the baseline's
servers (gpu01, ct129); requests through it are answered by both; a server that stops answering while its unit stays
active (its main process stopped) gets no more traffic within the health window, status.yml names it, and it comes
back when it answers again; a second run changes nothing."""

from __future__ import absolute_import, division, print_function

import time

from conftest import IPS, play as _play, serving_pids, ssh, wait_for
from routerlab import KEY, ROUTER_VARS, answered as _answered, generate as _generate, healthy as _healthy, model as _model, router as _router

SERVERS = ("ct129", "gpu01")


def test_router_in_front_of_the_servers(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    rc, out = _play("playbooks/router.yml", ROUTER_VARS)
    assert rc == 0, out[-3000:]
    assert KEY not in out, "the control-plane key is in the playbook's output"
    urls = sorted("http://%s:30000" % IPS[h] for h in SERVERS)
    assert sorted(_healthy()) == urls, _router("/workers")
    assert _router("/workers", key=False)[0] == 401
    assert "0600" == ssh("rt01", "stat -c %a /etc/llmserve/smg/smg.env").stdout.strip().rjust(4, "0")
    assert KEY not in ssh("rt01", "cat /etc/systemd/system/smg.service").stdout

    model = _model()
    before = dict((h, _answered(h)) for h in SERVERS)
    codes = [_generate(model) for _request in range(8)]
    after = dict((h, _answered(h)) for h in SERVERS)
    spread = dict((h, after[h] - before[h]) for h in SERVERS)
    results.add("router", "router.yml: smg 1.13.0 on rt01, 8 requests through it",
                "codes %s; answered by %s" % (sorted(set(codes)), spread), codes == [200] * 8)
    assert codes == [200] * 8, codes
    assert all(n > 0 for n in spread.values()), spread

    # gpu01 stops answering, its unit still active: SIGSTOP its server's processes
    pids = serving_pids("gpu01")
    assert pids
    ssh("gpu01", "kill -STOP %s" % " ".join(str(p) for p in pids))
    t0 = time.time()
    try:
        out_of_service = wait_for(lambda: _healthy().get("http://%s:30000" % IPS["gpu01"]) is not True, 30, step=0.5)
        taken_out = time.time() - t0
        before = _answered("ct129")
        codes = [_generate(model) for _request in range(6)]
        through_ct129 = _answered("ct129") - before
        rc, out = _play("playbooks/status.yml", limit="gpu01")
        named = "active, health" in out
    finally:
        ssh("gpu01", "kill -CONT %s" % " ".join(str(p) for p in pids))
    back = wait_for(lambda: _healthy().get("http://%s:30000" % IPS["gpu01"]) is True, 90, step=1)
    back_after = time.time() - t0
    rc2, out2 = _play("playbooks/router.yml", ROUTER_VARS)
    again = [line for line in out2.splitlines() if line.startswith("rt01 ")]
    ok = (out_of_service and codes == [200] * 6 and through_ct129 == 6 and named and back and rc2 == 0
          and again and "changed=0" in again[0])
    results.add("router", "gpu01 stops answering (SIGSTOP, unit active)",
                "out of the traffic after %.1f s (health every 2 s, 2 failures); 6 requests: %s, %d answered by ct129; "
                "status.yml: %s; back %.0f s after the stop; router.yml again: %s" % (
                    taken_out, sorted(set(codes)), through_ct129, "named" if named else "NOT named", back_after,
                    again[0].split(":", 1)[1].split()[:2] if again else out2[-200:]), ok)
    assert out_of_service, _router("/workers")
    assert codes == [200] * 6 and through_ct129 == 6, (codes, through_ct129)
    assert named, out[-3000:]
    assert back, _router("/workers")
    assert rc2 == 0 and again and "changed=0" in again[0], out2[-2000:]


def test_heal_restarts_a_server_that_stops_answering(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    """heal.yml: gpu01 stops answering (SIGSTOP, unit active); the play restarts it alone, out of the router and back
    in it healthy; ct129, which answers, is left alone."""
    rc, out = _play("playbooks/router.yml", ROUTER_VARS)
    assert rc == 0, out[-3000:]
    url = "http://%s:30000" % IPS["gpu01"]
    gpu01_pid, pids = serving_pids("gpu01")
    ct129_pid = serving_pids("ct129")[0]
    ssh("gpu01", "kill -STOP %s" % " ".join(str(p) for p in pids))
    try:
        out_of_service = wait_for(lambda: _healthy().get(url) is not True, 30, step=0.5)
        t0 = time.time()
        rc, out = _play("playbooks/heal.yml", ROUTER_VARS)
        took = time.time() - t0
    finally:
        ssh("gpu01", "kill -CONT %s" % " ".join(str(p) for p in pids), check=False)
    new_pid = serving_pids("gpu01")[0]
    healthy_again = _healthy().get(url) is True
    codes = [_generate(_model()) for _request in range(4)]
    left_alone = serving_pids("ct129")[0] == ct129_pid
    ok = (out_of_service and rc == 0 and new_pid != gpu01_pid and healthy_again and codes == [200] * 4 and left_alone)
    results.add("router", "heal.yml: gpu01 stops answering (SIGSTOP, unit active)",
                "rc %d in %.0f s; gpu01 main PID %d -> %d, healthy in the router: %s; ct129 %s; 4 requests: %s" % (
                    rc, took, gpu01_pid, new_pid, healthy_again, "left alone" if left_alone else "RESTARTED",
                    sorted(set(codes))), ok)
    assert out_of_service, _router("/workers")
    assert rc == 0, out[-3000:]
    assert new_pid != gpu01_pid and healthy_again, (new_pid, _router("/workers"))
    assert left_alone and codes == [200] * 4, codes
