# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Metrics: the deploy turns on SGLang's /metrics with the host's label and writes a Prometheus file_sd target per
serving host; playbooks/prometheus.yml runs Debian's Prometheus on the lab's monitoring host (pve01), which scrapes
every server; a second run changes nothing."""

from __future__ import absolute_import, division, print_function

import json
import os

from conftest import play, ssh, wait_for

SERVERS = ("gpu01", "ct129")


def _prometheus(targets_src):
    return play("playbooks/prometheus.yml", {"prometheus_targets_src": targets_src, "prometheus_scrape_interval": "1s"})


def _api(path):
    out = ssh("pve01", "curl -s 'http://127.0.0.1:9090%s'" % path, check=False).stdout
    try:
        return json.loads(out).get("data")
    except ValueError:
        return None


def _sglang_targets():
    data = _api("/api/v1/targets") or {}
    return dict((t["labels"].get("sglang_host"), t) for t in data.get("activeTargets", [])
                if t["labels"].get("job") == "sglang")


def test_prometheus_scrapes_every_server(lab, results):  # pylint: disable=redefined-outer-name
    src = os.path.join(lab["report_dir"], "file_sd")
    files = dict((n, json.load(open(os.path.join(src, n), encoding="utf-8"))) for n in sorted(os.listdir(src)))
    assert sorted(files) == ["%s.json" % h for h in sorted(SERVERS)], files
    for host in SERVERS:
        (group,) = files[host + ".json"]
        assert group["labels"] == {"sglang_host": host, "sglang_service": "sglang"}, group
        assert group["targets"] == [lab["baseline"][host]["endpoint"].split("://", 1)[1]], group
    unit = ssh("gpu01", "systemctl cat sglang.service").stdout
    assert "--enable-metrics" in unit and '--extra-metric-labels "{\\"host\\": \\"gpu01\\"}"' in unit, unit

    rc, out = _prometheus(src)
    assert rc == 0, out[-3000:]
    up = wait_for(lambda: sorted(h for h, t in _sglang_targets().items() if t["health"] == "up") == sorted(SERVERS),
                  30)
    # Prometheus 2.42 asks for OpenMetrics, in which the server escapes ":" as "_" (as the real 0.5.23 does)
    series = (_api("/api/v1/query?query=sglang_num_running_reqs") or {}).get("result", [])
    hosts = sorted(s["metric"].get("host") for s in series)
    rc2, out2 = _prometheus(src)
    again = [line for line in out2.splitlines() if line.startswith("pve01 ")]
    ok = up and hosts == sorted(SERVERS) and rc2 == 0 and again and "changed=0" in again[0]
    results.add("metrics", "prometheus.yml on pve01, the baseline's file_sd",
                "targets up: %s; sglang_num_running_reqs from %s; again: %s" % (
                    sorted(h for h, t in _sglang_targets().items() if t["health"] == "up"), hosts,
                    again[0].split(":", 1)[1].split()[:2] if again else out2[-300:]), ok)
    assert up, _sglang_targets()
    assert hosts == sorted(SERVERS), series
    assert rc2 == 0 and again and "changed=0" in again[0], out2[-2000:]
