#!/usr/bin/env python
"""P9: a change of the candidate list through three servers behind the router, under a constant load, rolling and not.

On the lab: gpu01, ct129 and gpu02 (sglang_servers, gpu02 added by an inventory file of this script) behind smg 1.13.0
on rt01 (playbooks/router.yml, health every 2 s). A constant load goes through the router: the collection's load
generator (module_utils/loadgen.py, streaming /generate, 4 clients, 16 tokens in and out) in rounds of 40 requests
until the change ends (a failed request is answered at once, so while no server serves the clients send far more
requests: the seconds with no server are the figure to compare). The change (a candidate with another
--max-running-requests) is made twice:
playbooks/rolling.yml with sglang_rolling_batch 1, then playbooks/deploy.yml (every server stops together). Figures:
failed requests (goal 0 rolling), the fewest servers the router listed healthy and ready at any moment (sampled every
0.25 s; goal N-1 with batch 1), the change's wall time. Anchor: a Kubernetes rolling update with maxUnavailable: 1.

  python3 tests/bench/p9_rolling.py [--keep-lab] [--json FILE]

Takes /var/tmp/llmserve-lab.lock itself around the lab (unless an ancestor holds it: LLMSERVE_LAB_LOCK_HELD), brings
the lab up and leaves it down. Needs root and `make setup`. Prints `P9 ...` lines (tests/bench/run.py collects them)
and exits 1 when the rolling change fails a request or leaves fewer than N-1 servers serving.
"""
from __future__ import absolute_import, division, print_function

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV_BIN = os.path.join(ROOT, '.venv', 'bin')
SERVERS = {'gpu01': '10.77.0.11', 'ct129': '10.77.0.13', 'gpu02': '10.77.0.15'}
ROUTER, ROUTER_PORT, KEY = '10.77.0.10', 30080, 'p9-router-key'
BASE = {'sglang_candidates': [], 'sglang_hang_timeout': 8, 'gpu_cleanup_term_grace': 2, 'gpu_cleanup_stop_timeout': 8,
        'sglang_env': {'CUDA_HOME': '/usr/local/cuda-13.0', 'CUDA_DEVICE_ORDER': 'PCI_BUS_ID',
                       'FAKE_SGLANG_LOAD_SECONDS': '0.3'},
        'router_control_plane_key': KEY, 'router_policy': 'round_robin', 'router_health_interval': 2,
        'router_health_failures': 2, 'router_health_timeout': 2}

sys.path.insert(0, os.path.join(ROOT, 'tests', 'lab'))
sys.path.insert(0, os.path.join(ROOT, '.tmp', 'collections'))
from benchutil import ansible_env, measured, run  # noqa: E402  pylint: disable=wrong-import-position
from fleetload import FleetLoad, workers  # noqa: E402  pylint: disable=wrong-import-position


def change(rounds):
    return {'sglang_candidates': [{'name': 'mrr-%d' % rounds, 'moe_runner_backend': 'flashinfer_cutlass',
                                   'fp4_gemm_backend': 'flashinfer_cudnn',
                                   'extra_args': ['--max-running-requests', str(rounds)]}]}


def playbook(name, inventory, extra, workdir, env):
    path = os.path.join(workdir, 'vars-%d.json' % len(os.listdir(workdir)))
    with open(path, 'w') as f:
        json.dump(dict(BASE, **extra), f)
    rc, out, secs = run([os.path.join(VENV_BIN, 'ansible-playbook'), 'playbooks/%s.yml' % name, '-i', inventory,
                         '-e', '@' + path], env=env)
    with open(os.path.join(workdir, '%s-%d.log' % (name, len(os.listdir(workdir)))), 'w') as f:
        f.write(out)
    return rc, out, secs


def under_load(name, inventory, extra, workdir, env, model):
    urls = ['http://%s:30000' % ip for ip in SERVERS.values()]
    with FleetLoad(ROUTER, ROUTER_PORT, KEY, urls, model) as load:
        time.sleep(3)
        rc, out, secs = playbook(name, inventory, extra, workdir, env)
        time.sleep(3)
    return dict(load.figures(), rc=rc, wall_s=round(secs, 1), tail=out[-1500:] if rc else '')


def measure(args):
    env = ansible_env()
    workdir = tempfile.mkdtemp(prefix='p9-rolling-')
    inventory = os.path.join(workdir, 'inventory')
    shutil.copytree(os.path.join(ROOT, 'inventories', 'lab'), inventory)
    with open(os.path.join(inventory, 'fleet.yml'), 'w') as f:
        json.dump({'all': {'children': {'sglang_servers': {'hosts': {'gpu02': {'ansible_host': SERVERS['gpu02']}}}}}}, f)
    runs = os.path.join(workdir, 'runs')
    os.makedirs(runs)
    labctl = [sys.executable, os.path.join(ROOT, 'tests', 'lab', 'labctl.py')]
    rc, out, dummy = run(labctl + ['up'], timeout=900)
    if rc != 0:
        raise RuntimeError('labctl up failed:\n' + out[-3000:])
    try:
        for name in ('deploy', 'router'):
            rc, out, dummy = playbook(name, inventory, {}, runs, env)
            if rc != 0:
                raise RuntimeError('%s failed:\n%s' % (name, out[-3000:]))
        model = workers(ROUTER, ROUTER_PORT, KEY)[0]['model_id']
        rolling = under_load('rolling', inventory, dict(change(48), sglang_rolling_batch=1), runs, env, model)
        at_once = under_load('deploy', inventory, change(40), runs, env, model)
    finally:
        if not args.keep_lab:
            run(labctl + ['down'], timeout=600)
    return {'workdir': workdir, 'rolling': rolling, 'at_once': at_once}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    ap.add_argument('--keep-lab', action='store_true', help='leave the lab up afterwards')
    ap.add_argument('--json', help='also write the figures to this file')
    args = ap.parse_args()
    res = measured('P9', measure, args)
    if res is None:
        return 2
    servers = len(SERVERS)
    for label, key in (('rolling (rolling.yml, batch 1)', 'rolling'), ('at once (deploy.yml)', 'at_once')):
        fig = res[key]
        print('P9 %-31s rc %d; %d requests, %d failed; fewest serving %s of %d (%d samples), none for %.1f s; '
              'wall %.1f s%s' % (label, fig['rc'], fig['requests'], fig['failed'], fig['fewest_serving'], servers,
                                 fig['samples'], fig['no_server_s'], fig['wall_s'],
                                 ('; errors: %s' % ' | '.join(fig['errors'])) if fig['errors'] else ''))
    roll = res['rolling']
    ok = roll['rc'] == 0 and roll['failed'] == 0 and roll['fewest_serving'] == servers - 1
    print('P9 goal: rolling 0 failed and never fewer than %d serving: %s (runs in %s)'
          % (servers - 1, 'PASS' if ok else 'FAIL', res['workdir']))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(dict(res, ok=ok), f, indent=2)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
