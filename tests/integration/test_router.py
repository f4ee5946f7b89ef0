# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The router: playbooks/router.yml runs PyPI's smg 1.13.0 (the lab's wheelhouse) on rt01 in front of the baseline's
servers (gpu01, ct129); requests through it are answered by both; a server that stops answering while its unit stays
active (its main process stopped) gets no more traffic within the health window, status.yml names it, and it comes
back when it answers again; a second run changes nothing."""

from __future__ import absolute_import, division, print_function

import json
import time
import urllib.error
import urllib.request

from conftest import IPS, play as _play, serving_pids, ssh, wait_for

SERVERS = ("ct129", "gpu01")
KEY = "router-key-for-the-lab"
ROUTER_PORT = 30080
# round_robin: the same prompt from cache_aware (the default) goes to the same server, by its prefix cache
ROUTER_VARS = {"router_control_plane_key": KEY, "router_policy": "round_robin", "router_health_interval": 2,
               "router_health_failures": 2, "router_health_timeout": 2}


def _router(path, body=None, key=True, timeout=20):
    """(status, JSON or text) from the router on rt01 (from the controller, over the lab bridge)."""
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + KEY
    req = urllib.request.Request("http://%s:%d%s" % (IPS["rt01"], ROUTER_PORT, path),
                                 data=json.dumps(body).encode() if body is not None else None, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()[:300]
    except OSError as exc:
        return None, str(exc)


def _healthy():
    status, body = _router("/workers")
    if status != 200:
        return {}
    return dict((w["url"], w.get("is_healthy")) for w in body.get("workers", []))


def _model():
    """The model the router's workers serve (smg reads it from each server)."""
    status, body = _router("/workers")
    return body["workers"][0]["model_id"] if status == 200 and body.get("workers") else None


def _generate(model):
    # smg with file discovery routes by model: /generate must name it (else 400 missing_model)
    return _router("/generate", {"text": "The capital city of France is", "model": model,
                                 "sampling_params": {"max_new_tokens": 4}}, key=False, timeout=60)[0]


def _answered(host):
    """How many /generate requests the host's server has answered (SGLang's own counter, /metrics)."""
    text = ssh(host, "curl -s -m 10 http://127.0.0.1:30000/metrics", check=False).stdout
    for line in text.splitlines():
        if line.startswith('sglang:http_responses_total{endpoint="/generate",method="POST",status_code="200"}'):
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


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
