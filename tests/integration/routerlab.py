# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The suite's side of the router on rt01 (smg 1.13.0 from the lab's wheelhouse): its settings for the lab, its
control plane, requests through it, and SGLang's own count of the requests a server answered."""

from __future__ import absolute_import, division, print_function

import json
import urllib.error
import urllib.request

from conftest import IPS, ssh

KEY = "router-key-for-the-lab"
ROUTER_PORT = 30080
# round_robin: the same prompt from cache_aware (the default) goes to the same server, by its prefix cache
ROUTER_VARS = {"router_control_plane_key": KEY, "router_policy": "round_robin", "router_health_interval": 2,
               "router_health_failures": 2, "router_health_timeout": 2}


def router(path, body=None, key=True, timeout=20):
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


def healthy():
    status, body = router("/workers")
    if status != 200:
        return {}
    return dict((w["url"], w.get("is_healthy")) for w in body.get("workers", []))


def model():
    """The model the router's workers serve (smg reads it from each server)."""
    status, body = router("/workers")
    return body["workers"][0]["model_id"] if status == 200 and body.get("workers") else None


def generate(served):
    # smg with file discovery routes by model: /generate must name it (else 400 missing_model)
    return router("/generate", {"text": "The capital city of France is", "model": served,
                                "sampling_params": {"max_new_tokens": 4}}, key=False, timeout=60)[0]


def answered(host):
    """How many /generate requests the host's server has answered (SGLang's own counter, /metrics)."""
    text = ssh(host, "curl -s -m 10 http://127.0.0.1:30000/metrics", check=False).stdout
    for line in text.splitlines():
        if line.startswith('sglang:http_responses_total{endpoint="/generate",method="POST",status_code="200"}'):
            return int(float(line.rsplit(" ", 1)[1]))
    return 0
