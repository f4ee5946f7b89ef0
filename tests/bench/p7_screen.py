#!/usr/bin/env python
"""P7: seconds wasted on a crashing candidate, without and with the screen (dummy weights, truncated model).

On the lab (gpu01, 8x SM120): a forced flashinfer_trtllm candidate whose full load takes --load-seconds (120 s, via
FAKE_SGLANG_LOAD_SECONDS in the candidate's env) and which crashes at its first forward, then the known-good
config. The deploy runs twice from a clean host: `sglang_screen: false` (the full trial pays the load, then
crashes) and `sglang_screen: true` (the screen crashes in seconds; no full trial). Figures come from the
reports' candidate entries (`seconds`, `screen.seconds`) and the playbook wall time. Goal: >= 10x less.

  python3 tests/bench/p7_screen.py [--load-seconds 120] [--keep-lab]

Takes /var/tmp/llmserve-lab.lock itself around the lab (unless an ancestor already holds it, e.g. when run
under `flock /var/tmp/llmserve-lab.lock ...`), brings the lab up, and leaves it down. Needs root and `make setup`.
Prints `P7 ...` lines (tests/bench/run.py collects them) and exits 1 when the goal is missed.
"""
from __future__ import absolute_import, division, print_function

import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV_BIN = os.path.join(ROOT, '.venv', 'bin')
GOAL = 10.0

sys.path.insert(0, os.path.join(ROOT, 'tests', 'lab'))
from benchutil import ansible_env, measured, run  # noqa: E402  pylint: disable=wrong-import-position


def deploy(screen, load_seconds, workdir, env):
    report_dir = os.path.join(workdir, 'screen-on' if screen else 'screen-off')
    extra = {
        'sglang_report_dir': report_dir,
        'sglang_screen': screen,
        'sglang_candidates': [{'name': 'trtllm-forced', 'moe_runner_backend': 'flashinfer_trtllm', 'force': True,
                               'env': {'FAKE_SGLANG_LOAD_SECONDS': str(load_seconds)}}],
        'sglang_ready_timeout': int(load_seconds) * 3 + 60,
        'sglang_hang_timeout': int(load_seconds) * 2 + 60,   # the full load logs little: no false hang
    }
    vars_file = os.path.join(workdir, 'vars-%s.json' % ('on' if screen else 'off'))
    with open(vars_file, 'w') as f:
        json.dump(extra, f)
    rc, out, _secs = run([os.path.join(VENV_BIN, 'ansible-playbook'), '-i', 'inventories/lab',
                          'extensions/molecule/resources/reset.yml', '--limit', 'gpu01'], env=env)
    if rc != 0:
        raise RuntimeError('reset failed:\n' + out[-3000:])
    rc, out, secs = run([os.path.join(VENV_BIN, 'ansible-playbook'), '-i', 'inventories/lab', 'playbooks/deploy.yml',
                         '--limit', 'gpu01', '-e', '@' + vars_file], env=env, timeout=int(load_seconds) * 4 + 600)
    if rc != 0:
        raise RuntimeError('deploy (screen=%s) failed:\n%s' % (screen, out[-3000:]))
    with open(os.path.join(report_dir, 'gpu01.json')) as f:
        report = json.load(f)
    entry = [c for c in report['candidates'] if c['name'] == 'trtllm-forced'][0]
    return report, entry, secs


def measure(args):
    env = ansible_env()
    workdir = tempfile.mkdtemp(prefix='p7-screen-')
    labctl = [sys.executable, os.path.join(ROOT, 'tests', 'lab', 'labctl.py')]
    rc, out, up_secs = run(labctl + ['up'], timeout=900)
    if rc != 0:
        raise RuntimeError('labctl up failed:\n' + out[-3000:])
    try:
        rep_off, off, wall_off = deploy(False, args.load_seconds, workdir, env)
        rep_on, on, wall_on = deploy(True, args.load_seconds, workdir, env)
    finally:
        if not args.keep_lab:
            run(labctl + ['down'], timeout=600)
    return {'workdir': workdir, 'lab_up_s': round(up_secs, 1), 'off': off, 'on': on, 'wall_off': wall_off,
            'wall_on': wall_on, 'final_off': rep_off['final_state'], 'final_on': rep_on['final_state']}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    ap.add_argument('--load-seconds', type=float, default=120, help='full load time of the crashing candidate')
    ap.add_argument('--keep-lab', action='store_true', help='leave the lab up afterwards')
    ap.add_argument('--json', help='also write the figures to this file')
    args = ap.parse_args()
    res = measured('P7', measure, args)
    if res is None:
        return 2
    off, on = res['off'], res['on']
    wasted_off = float(off.get('seconds') or 0)
    screen = on.get('screen') or {}
    wasted_on = float(screen.get('seconds') or 0) if screen.get('outcome') == 'failed' else float(on.get('seconds') or 0)
    ratio = wasted_off / wasted_on if wasted_on > 0 else float('inf')
    ok = (ratio >= GOAL and screen.get('outcome') == 'failed' and off.get('outcome') == 'failed'
          and res['final_off'] == res['final_on'] == 'serving')
    print('P7 crashing candidate: flashinfer_trtllm (forced) on SM120, full load %.0f s, crash at first forward'
          % args.load_seconds)
    print('P7 wasted without screen: %.1f s (full trial: %s, %s)'
          % (wasted_off, off.get('reason'), (off.get('diagnosis') or {}).get('id')))
    print('P7 wasted with screen:    %.1f s (screen: %s/%s, %s layers; full trial skipped; %s)'
          % (wasted_on, screen.get('outcome'), screen.get('reason'), screen.get('layers'),
             (on.get('diagnosis') or {}).get('id')))
    print('P7 ratio: %.1fx less with the screen (goal >= %.0fx) %s' % (ratio, GOAL, 'PASS' if ok else 'FAIL'))
    print('P7 deploy wall time (gpu01, incl. known-good): without %.1f s, with %.1f s; both %s/%s'
          % (res['wall_off'], res['wall_on'], res['final_off'], res['final_on']))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(dict(res, wasted_off=wasted_off, wasted_on=wasted_on, ratio=ratio, goal=GOAL, ok=ok), f, indent=2)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
