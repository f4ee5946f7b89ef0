#!/usr/bin/env python
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make bench`: every performance figure of the collection from one run, each beside its goal and anchor.

  P1  failure detection latency (event in the server -> await_server_ready's verdict)  tests/bench/detect_latency.py
      and on the real SGLang 0.5.23 (a scheduler's SIGKILL, on a lab up --real-sglang)    tests/bench/detect_latency_real.py
  P2  seconds spent on candidates ruled out by the arch matrix / the installed SGLang's flags (report JSON)
  P3  collection overhead of a 3-candidate deploy over SSH (wall - the fake servers' own time), by role
  P4  clean-up to verified-free, 8 GPUs held on a host and in a container (holders obey SIGTERM)
  P5  load generator accuracy, 64 streams at 2,500 tok/s                               tests/bench/loadgen_accuracy.py
      and on the real SGLang 0.5.23: the load test beside bench_serving (random-ids) on one server  tests/realserver/benchcompare.py
  P6  deploy wall time to 8 GPU hosts vs 1 (tests/bench/lab-8gpu.yml); P3c the controller's CPU per host there
      (with --baseline DIR, the same deploys with the collection of another checkout, side by side)
  P7  tests/bench/p7_screen.py, when it exists (run under the same lock, LLMSERVE_LAB_LOCK_HELD=1)
  P8  controller CPU of awaiting a 30-minute model load against a 1-minute one, time-scaled 20x
      (tests/bench/await_cost/await_cost.yml), beside an idle task of the same lengths
  P9  tests/bench/p9_rolling.py: a candidate change through three servers behind the router under a constant load,
      rolling (rolling.yml, batch 1) and at once (deploy.yml): failed requests, fewest serving, wall time

Also: a `sglang_selection: fastest` deploy (tests/bench/vars/fastest.yml) whose report (Markdown + SVG, GPU power and
utilisation sampled during each level) lands in reports/bench/fastest/.

The lab parts run under `flock /var/tmp/llmserve-lab.lock` (held for about four minutes, plus P7), on fresh labs, and
leave the lab down. Needs root and `make setup` (the Makefile's `bench` target runs it). Speed is printed, never
asserted: the exit status is non-zero only when a step could not be measured.
Traffic: loopback and the lab's 10.77.0.0/24 only.
"""

from __future__ import absolute_import, division, print_function

import argparse
import glob
import json
import os
import resource
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LABCTL = ['/usr/bin/python3', os.path.join(ROOT, 'tests', 'lab', 'labctl.py')]
LAB_KEY = '/var/tmp/llmserve-lab/ssh/id_ed25519'
BIN = os.path.dirname(sys.executable)
LINK_ROOT = os.path.join(ROOT, '.tmp', 'collections')
LAB_CGROUPS = '/sys/fs/cgroup/unified/llmlab'   # tests/lab/labctl.py: one cgroup per mock host
RULED_OUT = ('arch_unsupported', 'unknown_flag')
REAL_VARS = os.path.join(ROOT, 'tests', 'realserver', 'vars.yml')   # the real SGLang 0.5.23 and its tiny model

sys.path.insert(0, os.path.join(ROOT, 'tests', 'lab'))
from labsession import LOCK, lab_lock  # noqa: E402  pylint: disable=wrong-import-position
sys.path.insert(0, os.path.join(ROOT, 'tests', 'realserver'))
import benchcompare  # noqa: E402  pylint: disable=wrong-import-position
sys.path.insert(0, HERE)
import ansible_costs  # noqa: E402  pylint: disable=wrong-import-position


# actions the controller does alone (no module runs on the host)
CONTROLLER_ACTIONS = ('set_fact', 'debug', 'assert', 'fail', 'include_tasks', 'include_role', 'import_tasks', 'meta',
                      'validate_argument_spec', 'set_stats', 'report_files', 'include_vars')


def log(msg):
    print('[bench %s] %s' % (time.strftime('%H:%M:%S'), msg), flush=True)


class Bench(object):
    def __init__(self, out):
        self.out = out
        self.rows = []          # (id, figure, measured, goal, anchor, met)
        self.notes = []
        self.failed = []
        self.controller_per_host = {}   # label ('' for this checkout) -> controller CPU per host, 8-host deploy

    def add(self, pid, figure, measured, goal, anchor, met):
        self.rows.append((pid, figure, measured, goal, anchor, met))

    # ------------------------------------------------------------------ helpers
    def sh(self, argv, name, env=None, timeout=600, check=True):
        """Run argv with output in OUT/logs/NAME.log; returns (rc, seconds, output).

        self.last_cpu: CPU seconds (user + system) of argv and every descendant it waited for (for
        ansible-playbook: the controller's forks, module runs on the controller and its ssh clients)."""
        path = os.path.join(self.out, 'logs', name + '.log')
        t0 = time.time()
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(path, 'w') as f:
            proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout,
                                  check=False)
        seconds = time.time() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.last_cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        with open(path) as f:
            text = f.read()
        if check and proc.returncode != 0:
            raise RuntimeError('%s failed (rc %s), see %s:\n%s' % (name, proc.returncode, path, text[-2000:]))
        return proc.returncode, seconds, text

    def ansible_env(self, timing_file=None, collections=LINK_ROOT):
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections, ANSIBLE_NOCOLOR='1', ANSIBLE_FORCE_COLOR='0',
                   ANSIBLE_CALLBACK_PLUGINS=os.path.join(HERE, 'callback_plugins'))
        env['PATH'] = BIN + os.pathsep + env.get('PATH', '')
        if timing_file:
            env['ANSIBLE_CALLBACKS_ENABLED'] = 'bench_timing'
            env['BENCH_TIMING_FILE'] = timing_file
            env['BENCH_HOST_CGROUPS'] = LAB_CGROUPS
        return env

    def playbook(self, name, playbook, inventory, args=(), forks=None, collections=LINK_ROOT, costs=None):
        """ansible-playbook with the timing callback; returns (wall seconds, timing dict).

        With ``costs`` (a path), it runs under tests/bench/ansible_costs.py, which writes each task worker's CPU
        and Jinja compiles there."""
        timing = os.path.join(self.out, 'logs', name + '.timing.json')
        argv = [os.path.join(BIN, 'ansible-playbook'), playbook, '-i', inventory] + list(args)
        if costs:
            if os.path.exists(costs):
                os.unlink(costs)
            argv = [sys.executable, os.path.join(HERE, 'ansible_costs.py'), costs] + argv[1:]
        if forks:
            argv += ['--forks', str(forks)]
        rc, seconds, dummy = self.sh(argv, name, env=self.ansible_env(timing, collections))
        with open(timing) as f:
            return seconds, json.load(f)

    @staticmethod
    def lab_cpu():
        """CPU seconds used so far in each mock host's cgroup (its systemd, sshd, modules, fake servers)."""
        out = {}
        for path in glob.glob(os.path.join(LAB_CGROUPS, '*', 'cpu.stat')):
            with open(path) as f:
                for line in f:
                    if line.startswith('usage_usec '):
                        out[os.path.basename(os.path.dirname(path))] = int(line.split()[1]) / 1e6
        return out

    def lab(self, *args):
        words = [os.path.basename(a).split('.')[0] for a in args if not a.startswith('-')]
        self.sh(LABCTL + list(args), 'labctl-' + '-'.join(words))

    def lab_down(self):
        self.sh(LABCTL + ['down'], 'labctl-down', check=False)

    def ssh(self, ip, command):
        return subprocess.run(['ssh', '-i', LAB_KEY, '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null',
                               '-o', 'LogLevel=ERROR', '-o', 'BatchMode=yes', 'root@' + ip, command],
                              capture_output=True, text=True, timeout=60, check=False)

    # ------------------------------------------------------------------ P5, P1 (no lab)
    def p5_loadgen(self):
        log('P5: load generator accuracy (64 streams, 2,500 tok/s nominal, loopback)')
        dummy, dummy2, text = self.sh([sys.executable, os.path.join(HERE, 'loadgen_accuracy.py'), '--concurrency', '64',
                                       '--num-prompts', '128', '--output-len', '256', '--itl', '0.0256', '--ttft', '0.1'],
                                      'p5-loadgen-accuracy')
        worst = None
        measured = None
        for line in text.splitlines():
            if line.startswith('worst error'):
                worst = float(line.split(':')[1].strip().rstrip('%'))
            if line.startswith('output_throughput'):
                measured = line.split()[1:3]
        self.add('P5', 'load generator error (throughput/ITL/E2E, worst)',
                 '%.2f %% (%s tok/s measured vs %s true)' % (worst, measured[0], measured[1]) if measured else '%.2f %%' % worst,
                 '<= 3 %', 'bench_serving (the reference tool)', worst is not None and worst <= 3)

    def p1_detect(self, runs):
        log('P1: failure detection latency, %d trials per failure class' % runs)
        env = dict(os.environ, PYTHONPATH=LINK_ROOT)
        dummy, dummy2, text = self.sh([sys.executable, os.path.join(HERE, 'detect_latency.py'), '--runs', str(runs),
                                       '--start-wait', '0.3', '--pre-event', '0.4', '--json'], 'p1-detect-latency', env=env)
        names = {'crash': 'crashed (traceback, then SIGKILL)', 'killed': 'killed (SIGKILL, empty log)',
                 'fatal_alive': 'hang (watchdog line, process alive)',
                 'rank_killed': "killed (a scheduler's SIGKILL, main process alive, empty log)"}
        for line in text.splitlines():
            if not line.startswith('{'):
                continue
            d = json.loads(line)
            self.add('P1', 'detect %s -> %s, n=%d' % (names.get(d['kind'], d['kind']), '/'.join(d['statuses']), d['n']),
                     'median %.2f s, max %.2f s' % (d['median'], d['max']), 'median <= 0.3 s, max <= 1 s',
                     'seeds: 5 s poll (2.5 s median, 5 s max)', d['median'] <= 0.3 and d['max'] <= 1.0)

    def p1_real(self, runs, p5_rounds=16):
        """P1 on the real SGLang 0.5.23: a fresh lab with the real server on gpu01 (one fake GPU, so one
        scheduler), one deploy of the known-good configuration to install sglang.service, then
        tests/bench/detect_latency_real.py on gpu01: RUNS starts of the unit, each with its scheduler SIGKILLed 0 to
        1 s after the engine_up milestone while the module await_server_ready watches; the time from the kill to
        the module's verdict."""
        log('P1 real: lab with the real SGLang on gpu01, %d scheduler kills' % runs)
        self.lab_down()
        self.lab('up', '--gpu-count', '1', '--real-sglang', 'gpu01')
        self.playbook('p1real-deploy', 'playbooks/deploy.yml', 'inventories/lab',
                      ['-l', 'gpu01', '-e', '@' + REAL_VARS, '-e', '{"sglang_screen": false, "sglang_candidates": []}',
                       '-e', 'sglang_report_dir=' + os.path.join(self.out, 'p1real-deploy')])
        self.p5_real(p5_rounds)
        if not runs:
            return
        script = os.path.join(HERE, 'detect_latency_real.py')
        command = 'PYTHONPATH=%s %s %s --runs %d --json' % (LINK_ROOT, sys.executable, script, runs)
        rc, dummy, text = self.sh(LABCTL + ['ssh', 'gpu01', '--', command], 'p1real-detect-latency',
                                  timeout=300 * runs, check=False)
        summary = [json.loads(line) for line in text.splitlines() if line.startswith('{')]
        if rc != 0 or not summary:
            path = os.path.join(self.out, 'logs', 'p1real-detect-latency.log')
            raise RuntimeError('P1 real: rc %s, see %s:\n%s' % (rc, path, text[-1500:]))
        d = summary[-1]
        counts = ', '.join('%s %d' % kv for kv in sorted(d['statuses'].items()))
        if not d['n']:
            raise RuntimeError('P1 real: no run timed (%s)' % counts)
        # the module sees the dead rank in /proc (looked at every 0.1 s), not SGLang's watchdog line (polled once a
        # second, utils/watchdog.py)
        self.add('P1', 'REAL SGLang 0.5.23: scheduler SIGKILLed 0-%g s after %s -> %s, n=%d of %d' % (
            d['kill_delay'], d['kill_at'], counts, d['n'], d['runs']), 'median %.2f s, max %.2f s' % (d['median'], d['max']),
            'median <= 0.3 s, max <= 0.5 s', "SGLang's own 1 s watchdog poll; fake killed above; seeds: 5 s poll",
            d['median'] <= 0.3 and d['max'] <= 0.5 and set(d['statuses']) == {'killed'})
        split = d.get('split') or {}
        if split:
            self.notes.append(
                'P1 real, where the time goes (journal receive time of "Subprocess scheduler_0 ... crashed with exit '
                'code -9"): kill -> that line %s; that line -> the module\'s verdict %s; log %s' % (tuple(
                    'median %.2f s, max %.2f s (n=%d)' % (split[k]['median'], split[k]['max'], split[k]['n'])
                    if k in split else 'not found' for k in ('line_after_kill', 'verdict_after_line')) +
                    (os.path.join(self.out, 'logs', 'p1real-detect-latency.log'),)))

    def p5_real(self, rounds=16):
        """P5 on the real SGLang 0.5.23 serving the known-good configuration: playbooks/benchmark.yml and SGLang's
        own bench_serving (random-ids as ids, same lengths and concurrency) on the same server, ``rounds`` rounds,
        the two one right after the other in each round and in alternate order (ours first in even rounds,
        bench_serving first in odd ones), the server's prefix cache flushed before each run (each tool sends the
        same seeded prompts every time, which a warm cache would serve faster). The 2-core lab's speed drifts from
        minute to minute (each tool's own spread over the rounds is printed), so the goal is judged on each
        round's difference, whose two runs share that minute's speed: their median over the rounds (and the
        middle half of them) beside each tool's median."""
        log('P5 real: the collection\'s load test beside bench_serving on the real server, %d rounds' % rounds)
        env = dict(self.ansible_env(), ANSIBLE_STDOUT_CALLBACK='ansible.builtin.json')
        bench = benchcompare.BENCH_P5
        ours, theirs = [], []

        def flush(name):
            # POST /flush_cache (entrypoints/http_server.py): "Cache flushed." when nothing runs
            self.sh(LABCTL + ['ssh', 'gpu01', '--', 'curl', '-sS', '-X', 'POST', 'http://127.0.0.1:30000/flush_cache'],
                    name + '-flush', check=False)

        def run_ours(n):
            flush('p5real-benchmark-%d' % n)
            dummy, dummy2, out = self.sh([os.path.join(BIN, 'ansible-playbook'), 'playbooks/benchmark.yml', '-i',
                                          'inventories/lab', '-l', 'gpu01', '-e', '@' + REAL_VARS,
                                          '-e', json.dumps({'sglang_benchmark': bench})],
                                         'p5real-benchmark-%d' % n, env=env, check=False)
            ours.append(benchcompare.collection_result(out, 'gpu01', bench)[1])

        def run_theirs(n):
            flush('p5real-bench-serving-%d' % n)
            dummy, dummy2, text = self.sh(LABCTL + ['ssh', 'gpu01', '--', benchcompare.bench_serving_command(bench)],
                                          'p5real-bench-serving-%d' % n, check=False)
            theirs.append(benchcompare.bench_serving_result(text) or {})
        for n in range(rounds):
            for step in ((run_ours, run_theirs) if n % 2 == 0 else (run_theirs, run_ours)):
                step(n)
        paired = benchcompare.paired(ours, theirs)
        met = all(paired[key] is not None and abs(paired[key][0]) <= benchcompare.TOLERANCE
                  for key in benchcompare.COMPARED)
        label = 'REAL SGLang 0.5.23: load test vs bench_serving, %d paired rounds (c%d, %d x %d/%d tokens)' % (
            rounds, bench['concurrency'][0], bench['num_prompts'], bench['input_len'], bench['output_len'])
        figures = '; '.join(
            '%s %s' % (key, '%+.1f %% (middle half %+.1f to %+.1f %%, %d rounds)' % (
                100 * paired[key][0], 100 * paired[key][1], 100 * paired[key][2], paired[key][3])
                if paired[key] else '-') for key in benchcompare.COMPARED)
        self.add('P5', label, figures,
                 'within %d %%' % (100 * benchcompare.TOLERANCE), 'bench_serving random-ids (as ids), same server', met)
        self.notes.append('P5 real, each tool\'s median over the rounds (the collection vs bench_serving): %s' %
                          benchcompare.row(benchcompare.medians(ours), benchcompare.medians(theirs)))
        self.notes.append('P5 real, each round (the collection / bench_serving): %s' % '; '.join(
            benchcompare.row(a, b) for a, b in zip(ours, theirs)))
        self.notes.append('P5 real, each tool\'s own spread over these rounds ((max - min) / median: the machine\'s '
                          'drift, which the differences of the rounds do not share): %s' % '; '.join(
                              '%s: the collection %s, bench_serving %s' % (
                                  key, '%.0f %%' % (100 * a) if a is not None else '-',
                                  '%.0f %%' % (100 * b) if b is not None else '-')
                              for key, (a, b) in sorted((k, (benchcompare.spread(ours)[k],
                                                             benchcompare.spread(theirs)[k]))
                                                        for k in benchcompare.COMPARED)))

    # ------------------------------------------------------------------ lab phase A: P4, fastest, P2
    def p4_cleanup(self):
        log('P4: clean-up with 8 GPUs held on gpu01 and in ct129 (holders obey SIGTERM)')
        hold = ('setsid -f /usr/bin/python3 %s hold --gpus 0-7 --mib 20000 --name python3 >/dev/null 2>&1 < /dev/null'
                % os.path.join(ROOT, 'tests', 'lab', 'fakes', 'fakegpu.py'))
        for ip in ('10.77.0.11', '10.77.0.13'):
            r = self.ssh(ip, hold)
            if r.returncode != 0:
                raise RuntimeError('could not start a GPU holder on %s: %s' % (ip, r.stderr))
        deadline = time.time() + 20
        while True:
            used = [self.ssh(ip, 'nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits').stdout.split()
                    for ip in ('10.77.0.11', '10.77.0.13')]
            if all(len(u) == 8 and all(int(x) >= 20000 for x in u) for u in used):
                break
            if time.time() > deadline:
                raise RuntimeError('GPU holders did not show up: %s' % used)
            time.sleep(0.2)
        wall, timing = self.playbook('p4-cleanup', 'playbooks/cleanup.yml', 'inventories/lab',
                                     ['-l', 'gpu01,ct129'])
        resets = [t for t in timing['tasks'] if t['action'] == 'gpu_reset' and t['status'] == 'ok']
        for t in resets:
            res = t['result']
            role = sum(x['seconds'] for x in timing['tasks'] if x['host'] == t['host'] and x['role'] == 'gpu_cleanup')
            self.add('P4', 'clean-up to verified free, %s (8 GPUs x 20,000 MiB held%s)' % (
                t['host'], ', ended from pve01' if t['host'] == 'ct129' else ''),
                '%.2f s (gpu_reset %.2f s)' % (role, res.get('seconds', -1)), '<= 2 s',
                'by hand: minutes (find PIDs, map container PIDs, kill, re-check)', role <= 2)
        self.notes.append('P4: the whole clean-up playbook (2 hosts, unit stop + gpu_reset) took %.1f s wall' % wall)
        if len(resets) != 2:
            raise RuntimeError('P4: expected 2 gpu_reset results, got %d' % len(resets))

    def fastest(self):
        log('fastest: deploy on gpu01 with sglang_selection=fastest (tests/bench/vars/fastest.yml)')
        rep = os.path.join(self.out, 'fastest')
        wall, dummy = self.playbook('fastest-deploy', 'playbooks/deploy.yml', 'inventories/lab',
                                    ['-l', 'gpu01', '-e', '@tests/bench/vars/fastest.yml', '-e', 'sglang_report_dir=' + rep])
        with open(os.path.join(rep, 'gpu01.json')) as f:
            report = json.load(f)
        self.reports.append(report)
        best, best_v = None, -1
        for c in report['candidates']:
            levels = (c.get('benchmark') or {}).get('concurrency') or {}
            if not levels:
                continue
            top = max(levels, key=int)
            v = levels[top].get('output_throughput') or 0
            if v > best_v:
                best, best_v = c['name'], v
            for level in sorted(levels, key=int):
                fig = levels[level]
                self.fastest_rows.append('  %-18s c%-3s %8.1f output tok/s   GPU util %5s %%   power %6s W/GPU = %5s %% of limit%s' % (
                    c['name'], level, fig.get('output_throughput') or 0, fig.get('gpu_util_pct_mean'),
                    fig.get('power_w_mean'), fig.get('power_pct_of_limit'),
                    '   <- selected' if c['name'] == report['selected'] and level == top else ''))
        ok = report['selected'] == best and report['final_state'] == 'serving'
        self.add('sel', 'sglang_selection: fastest serves the best output tok/s at the top concurrency',
                 'selected %s (%.0f tok/s), %s' % (report['selected'], best_v, report['final_state']),
                 'the fastest ready candidate', 'first_ready would serve the first good one', ok)
        self.notes.append('fastest deploy: %.1f s wall; report %s/report.md, chart %s/benchmark.svg' % (wall, rep, rep))

    def p8_await_cost(self):
        """The controller's CPU for one await task over a time-scaled load: 1 and 30 minutes, 20 times faster.

        Progress every 0.5 s and a module call every 3 s stand for a deploy's 10 s and 60 s; the loads last 3 s and
        90 s. An idle task (``sleep``) of the same lengths gives what any task that long costs the controller.
        """
        log('P8: controller CPU of a time-scaled 1-minute and 30-minute load (20x)')
        inv = os.path.join(ROOT, 'inventories', 'lab')
        # the steps before leave sglang.service serving on gpu01: free its GPUs for the fake server started here
        self.sh([os.path.join(BIN, 'ansible-playbook'), os.path.join(ROOT, 'playbooks', 'cleanup.yml'), '-i', inv,
                 '-l', 'gpu01'], 'p8-cleanup', env=self.ansible_env())
        cost = {}
        for minutes, load in ((1, 3), (30, 90)):
            self.sh([os.path.join(BIN, 'ansible-playbook'), os.path.join(HERE, 'await_cost', 'await_cost.yml'), '-i', inv,
                     '-e', 'bench_load_seconds=%d' % load, '-e', 'bench_progress=0.5', '-e', 'bench_step=3'],
                    'p8-await-%dmin' % minutes, env=self.ansible_env())
            cost[('await', minutes)] = self.last_cpu
            self.sh([os.path.join(BIN, 'ansible-playbook'), os.path.join(HERE, 'await_cost', 'idle.yml'), '-i', inv,
                     '-e', 'bench_seconds=%d' % (load + 3)], 'p8-idle-%dmin' % minutes, env=self.ansible_env())
            cost[('idle', minutes)] = self.last_cpu
        extra = cost[('await', 30)] - cost[('await', 1)]
        idle = cost[('idle', 30)] - cost[('idle', 1)]
        self.add('P8', 'await a 30-min load vs a 1-min one, controller CPU (20x time-scaled; %.1f s vs %.1f s)' % (
            cost[('await', 30)], cost[('await', 1)]), '+%.1f s (an idle task as long: +%.1f s)' % (extra, idle),
            '<= +2 s', 'a task file that includes itself per line: grows with nesting', extra <= 2)

    def task_costs(self, n=50):
        """What one task costs, by kind: playbooks of ``n`` equal tasks on gpu01 against one with a single skipped
        task (the start of ansible-playbook). The controller's CPU (ansible-playbook, its forks and ssh clients) and
        gpu01's (its sshd and the module's Python) per task: the unit P3c's deploy is made of."""
        log('costs: %d tasks of each kind on gpu01' % n)
        inv = os.path.join(ROOT, 'inventories', 'lab')
        kinds = (('start', 'ansible.builtin.debug: {msg: x}\n      when: false', 1),
                 ('skipped', 'ansible.builtin.debug: {msg: x}\n      when: false', n),
                 ('debug (no connection)', 'ansible.builtin.debug: {msg: x}', n),
                 ('raw (one ssh exec, no Python)', 'ansible.builtin.raw: "true"', n),
                 ('ping (a module run over ssh)', 'ansible.builtin.ping:', n),
                 ('sglang_status (a module of the collection)', 'llmserve.sglang.sglang_status: {}', n))
        cost = {}
        for name, task, count in kinds:
            path = os.path.join(self.out, 'costs-%s.yml' % name.split()[0])
            with open(path, 'w') as f:
                f.write('- name: %d tasks\n  hosts: gpu01\n  gather_facts: false\n  tasks:\n' % count)
                for i in range(count):
                    f.write('    - name: t%d\n      %s\n' % (i, task))
            cpu0 = self.lab_cpu()
            dummy, seconds, dummy2 = self.sh([os.path.join(BIN, 'ansible-playbook'), path, '-i', inv],
                                             'costs-' + name.split()[0], env=self.ansible_env())
            cost[name] = (self.last_cpu, self.cpu_since(cpu0, ['gpu01'])['gpu01'], seconds, count)
        ctl0, host0, dummy, dummy2 = cost['start']
        lines = ['start of ansible-playbook (one skipped task): controller %.2f s, gpu01 %.2f s' % (ctl0, host0)]
        for name, (ctl, host, seconds, count) in cost.items():
            if name != 'start':
                lines.append('%-44s controller %4.0f ms, gpu01 %4.0f ms, wall %4.0f ms per task' % (
                    name, 1000 * (ctl - ctl0) / count, 1000 * (host - host0) / count, 1000 * seconds / count))
        self.notes.append('Cost of one task by kind (tests/bench/run.py --only costs; %d tasks each, minus the start):'
                          '\n  %s' % (n, '\n  '.join(lines)))

    def p2(self):
        spent = 0.0
        names = []
        for report in self.reports:
            for c in report['candidates']:
                if c.get('outcome') == 'skipped' and c.get('reason') in RULED_OUT:
                    spent += float(c.get('seconds') or 0)
                    names.append('%s/%s' % (c['name'], c['reason']))
        self.add('P2', 'seconds on candidates ruled out before any start (%d: %s)' % (
            len(names), ', '.join(sorted(set(names)))), '%.1f s' % spent, '0 s',
            'seeds: a full model load (minutes) per doomed backend', spent == 0 and bool(names))

    # ------------------------------------------------------------------ lab phase B: P3, P6
    def inventory_8(self):
        inv = os.path.join(self.out, 'inventory-8gpu')
        if os.path.isdir(inv):
            shutil.rmtree(inv)
        os.makedirs(os.path.join(inv, 'group_vars'))
        for name in ('all.yml', 'sglang_servers.yml'):
            shutil.copy(os.path.join(ROOT, 'inventories', 'lab', 'group_vars', name), os.path.join(inv, 'group_vars', name))
        import yaml  # in .venv (ansible-core depends on it)
        with open(os.path.join(HERE, 'lab-8gpu.yml')) as f:
            cfg = yaml.safe_load(f)
        hosts = dict((name, {'ansible_host': h['ip']}) for name, h in sorted(cfg['hosts'].items()))
        with open(os.path.join(inv, 'hosts.yml'), 'w') as f:
            f.write('---\n# written by tests/bench/run.py for tests/bench/lab-8gpu.yml\n')
            yaml.safe_dump({'all': {'children': {'sglang_servers': {'hosts': hosts}}}}, f, default_flow_style=False)
        return inv, sorted(hosts)

    @staticmethod
    def overhead(timing, host):
        """Wall, the fake server's own time (load + ready, answering the smoke/benchmark requests, stopping when the
        next candidate starts), by role."""
        rows = sorted((t for t in timing['tasks'] if t['host'] == host), key=lambda t: t['start'])
        wall = timing['end'] - timing['start']
        by_role = {}
        server_by_role = {}
        server = 0.0
        fresh = False
        for t in rows:
            role = t['role'] or '(play)'
            by_role[role] = by_role.get(role, 0.0) + t['seconds']
            res = t.get('result') or {}
            s = 0.0
            # trial_run: its module runs, each as the task that ran it alone would be
            runs = [(run['module'], run, 'failed' if run.get('failed') else 'ok') for run in res.get('runs') or []] \
                if t['action'] == 'trial_run' else [(t['action'], res, t['status'])]
            for action, one, status in runs:
                if action == 'sglang_launch' and status == 'ok':
                    fresh = fresh or any(a in ('start', 'restart') for a in one.get('actions') or [])
                    # the previous server's stop (free_gpus): SGLang's own drain and shut-down after SIGTERM
                    s += float((one.get('unit_stop') or {}).get('seconds') or 0)
                elif action == 'await_server_ready' and status == 'ok' and one.get('status') != 'loading':
                    # a fresh start: the server's time from its start to the verdict; else only this call's wait
                    s += float(one.get('elapsed') or 0) if fresh else float(one.get('module_seconds', one.get('seconds')) or 0)
                    fresh = False
                elif action == 'smoke_generate' and status == 'ok':
                    s += float(one.get('module_seconds', one.get('seconds')) or 0)
            server += s
            server_by_role[role] = server_by_role.get(role, 0.0) + s
        tasks_sum = sum(by_role.values())
        out = dict((role, by_role[role] - server_by_role.get(role, 0.0)) for role in by_role)
        out['(start-up, between tasks)'] = wall - tasks_sum
        return wall, server, out, len(rows)

    @staticmethod
    def task_counts(timing, host):
        """(tasks, skipped, module runs) of ``host``: a module run is a task that ran a module on the host (not
        skipped, not an action the controller does alone), and each run of a trial_run task; an await with progress
        that called its module more than once counts once."""
        rows = [t for t in timing['tasks'] if t['host'] == host]
        skipped = sum(1 for t in rows if t['status'] == 'skipped')
        modules = sum(len((t.get('result') or {}).get('runs') or []) if t['action'] == 'trial_run' else 1
                      for t in rows if t['status'] != 'skipped' and t['action'] not in CONTROLLER_ACTIONS)
        return len(rows), skipped, modules

    def p3_p6(self, checkout=ROOT, label=''):
        """P3 and P6 with the collection of ``checkout`` (another checkout: the baseline, its rows marked ``label``)."""
        inv, hosts = self.inventory_8()
        collections = LINK_ROOT if checkout == ROOT else self.link_checkout(checkout)
        deploy = os.path.join(checkout, 'playbooks', 'deploy.yml')
        tag = label.replace(' ', '-') if label else ''
        log('P3/P6%s: lab of 8 GPU hosts; deploy to gpu01 alone (3 candidates: trtllm-moe, cutedsl-moe, known-good)'
            % label)
        self.lab_down()
        self.lab('--config', os.path.join(HERE, 'lab-8gpu.yml'), 'up')
        cpu0 = self.lab_cpu()
        out1 = os.path.join(self.out, 'deploy-1host' + tag)
        t1, timing1 = self.playbook('p6-deploy-1host' + tag, deploy, inv,
                                    ['-l', hosts[0], '-e', 'sglang_report_dir=' + out1], forks=10, collections=collections)
        ctl1, hosts1 = self.last_cpu, self.cpu_since(cpu0, hosts[:1])
        if not label:
            for h in hosts[:1]:
                with open(os.path.join(out1, h + '.json')) as f:
                    self.reports.append(json.load(f))
        wall, server, by_role, dummy = self.overhead(timing1, hosts[0])
        ntasks, nskipped, nmodules = self.task_counts(timing1, hosts[0])
        self.add('P3', 'collection overhead, 3-candidate deploy over SSH%s (%d tasks, %d of them skipped, %d module '
                 'runs; wall %.1f s - servers %.1f s)' % (label, ntasks, nskipped, nmodules, wall, server),
                 '%.1f s' % (wall - server), '<= 10 s', 'by hand: each try is minutes of typing and reading logs',
                 wall - server <= 10)
        if not label:
            self.p3_roles = sorted(by_role.items(), key=lambda kv: -kv[1])
        log('P6%s: fresh lab, deploy to all 8 GPU hosts (forks 10)' % label)
        self.lab_down()
        self.lab('--config', os.path.join(HERE, 'lab-8gpu.yml'), 'up')
        cpu0 = self.lab_cpu()
        out8 = os.path.join(self.out, 'deploy-8hosts' + tag)
        costs = os.path.join(self.out, 'logs', 'p6-deploy-8hosts%s.workers.jsonl' % tag)
        t8, timing8 = self.playbook('p6-deploy-8hosts' + tag, deploy, inv, ['-e', 'sglang_report_dir=' + out8],
                                    forks=10, collections=collections, costs=costs)
        ctl8, hosts8 = self.last_cpu, self.cpu_since(cpu0, hosts)
        split8 = (timing8.get('main_cpu'), len(timing8['tasks']))
        # the 8 fake servers now serve and are idle: what do they cost while nobody asks them anything?
        cpu_idle0, idle_t0 = self.lab_cpu(), time.time()
        time.sleep(5)
        idle = sum(self.cpu_since(cpu_idle0, hosts).values()) / (time.time() - idle_t0)
        states = []
        for h in hosts:
            with open(os.path.join(out8, h + '.json')) as f:
                r = json.load(f)
            if not label:
                self.reports.append(r)
            states.append(r['final_state'])
        self.add('P6', 'deploy wall time, 8 GPU hosts vs 1%s (all %s)' % (label, ','.join(sorted(set(states)))),
                 '%.1f s vs %.1f s = %.2fx' % (t8, t1, t8 / t1), '<= 1.5x', 'seeds: hosts one after another (8x)',
                 t8 / t1 <= 1.5)
        self.controller_per_host[label] = ctl8 / len(hosts)
        self.p6_cpu_note(label, ctl1, hosts1, t1, ctl8, hosts8, t8, hosts, idle, split8)
        self.worker_costs_note(label, costs, len(hosts))

    def p6_cpu_note(self, label, ctl1, hosts1, t1, ctl8, hosts8, t8, hosts, idle, split8):
        cores = os.cpu_count() or 1
        self.notes.append(
            'P6 CPU%s (%d cores here; controller = ansible-playbook and everything it ran, ssh clients included):\n'
            '  1 host : controller %5.1f s CPU, the host %5.1f s; %.1f s wall\n'
            '  8 hosts: controller %5.1f s CPU (%.1f s per host), the hosts %5.1f s (%.1f s per host); %.1f s wall\n'
            '  CPU needed by the 8-host run: %.1f s = %.2f s of wall time at best on %d cores; '
            'the 8 serving fake servers idle: %.2f cores' % (
                label, cores, ctl1, sum(hosts1.values()), t1, ctl8, ctl8 / len(hosts), sum(hosts8.values()),
                sum(hosts8.values()) / len(hosts), t8, ctl8 + sum(hosts8.values()),
                (ctl8 + sum(hosts8.values())) / cores, cores, idle))
        # what one more host adds, and what a run costs whatever its hosts (the start of ansible-playbook, loading
        # the playbook, building each module's payload once): P3c is the second over the hosts plus the first
        per_host = (ctl8 - ctl1) / (len(hosts) - 1)
        self.notes[-1] += ('\n  a further host: %.2f s of controller CPU ((8-host - 1-host) / 7); the run whatever its '
                           'hosts: %.1f s (1-host - that), %.2f s per host of the 8' % (
                               per_host, ctl1 - per_host, (ctl1 - per_host) / len(hosts)))
        main_cpu, workers = split8
        if main_cpu is not None:
            # a task on a host is one fork of ansible-playbook (its worker), skipped or not
            self.notes[-1] += ('\n  8 hosts, the controller split: ansible-playbook\'s own process %.1f s, its %d task '
                               'workers (one fork each) and their ssh clients %.1f s (%.1f ms a worker)' % (
                                   main_cpu, workers, ctl8 - main_cpu, 1000 * (ctl8 - main_cpu) / max(workers, 1)))

    def worker_costs_note(self, label, path, nhosts, top=8):
        """Where the 8-host run's task workers spent the controller's CPU: by role, and the costliest tasks."""
        if not os.path.exists(path):
            return
        roles, tasks = ansible_costs.summary(path)
        lines = ['P3c%s: the task workers of the 8-host deploy by role (per host: CPU of the workers and their ssh '
                 'clients; of it, compiling Jinja templates and building module payloads (once a run per module, '
                 'shared by the hosts); %s):' % (label, os.path.basename(path))]
        row = '  %-16s %3d tasks, %3d workers  %5.2f s  %4d compiles %5.2f s  building %5.2f s'
        for role, r in sorted(roles.items(), key=lambda kv: -kv[1]['cpu']):
            lines.append(row % (role, r['tasks'], r['workers'] // nhosts, r['cpu'] / nhosts, r['compiles'] // nhosts,
                                r['compile_cpu'] / nhosts, r['build_cpu'] / nhosts))
        lines.append(row % ('all', sum(r['tasks'] for r in roles.values()),
                            sum(r['workers'] for r in roles.values()) // nhosts,
                            sum(r['cpu'] for r in roles.values()) / nhosts,
                            sum(r['compiles'] for r in roles.values()) // nhosts,
                            sum(r['compile_cpu'] for r in roles.values()) / nhosts,
                            sum(r['build_cpu'] for r in roles.values()) / nhosts))
        lines.append('  the costliest tasks, per host:')
        for (role, task), t in tasks[:top]:
            lines.append('    %5.3f s %4d compiles %5.3f s  %-14s %-16s %s' % (
                t['cpu'] / nhosts, t['compiles'] // nhosts, t['compile_cpu'] / nhosts, role, t['action'],
                task.split(' : ')[-1][:60]))
        self.notes.append('\n'.join(lines))

    def link_checkout(self, checkout):
        """An ANSIBLE_COLLECTIONS_PATH root whose llmserve.sglang is ``checkout`` (a link)."""
        root = os.path.join(self.out, 'baseline-collections')
        target = os.path.join(root, 'ansible_collections', 'llmserve')
        os.makedirs(target, exist_ok=True)
        link = os.path.join(target, 'sglang')
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(os.path.abspath(checkout), link)
        return root

    def controller_rows(self):
        """The controller's CPU per host of the 8-host deploy, beside the baseline's when one ran."""
        if '' not in self.controller_per_host:
            return
        mine = self.controller_per_host['']
        base = [v for k, v in self.controller_per_host.items() if k]
        anchor = 'baseline %.1f s per host (%.1fx this)' % (base[0], base[0] / mine) if base else 'no baseline run'
        self.add('P3c', 'controller CPU per host, 3-candidate deploy to 8 GPU hosts', '%.2f s' % mine,
                 '<= 1.5 s, 3x under the baseline', anchor, mine <= 1.5 and bool(base) and base[0] >= 3 * mine)

    def cpu_since(self, before, hosts):
        now = self.lab_cpu()
        return dict((h, now.get(h, 0.0) - before.get(h, 0.0)) for h in hosts)

    def p7(self):
        """tests/bench/p7_screen.py (the screen), under the lock this run holds."""
        p7 = os.path.join(HERE, 'p7_screen.py')
        if not os.path.exists(p7):
            return
        log('P7: %s' % p7)
        self.lab_down()
        env = self.ansible_env()
        env['LLMSERVE_LAB_LOCK_HELD'] = '1'
        rc, dummy, text = self.sh([sys.executable, p7], 'p7-screen', env=env, check=False, timeout=1500)
        lines = [line for line in text.splitlines() if line.startswith('P7')]
        self.notes.append('P7 (tests/bench/p7_screen.py, rc %s; log %s):\n  %s' % (
            rc, os.path.join(self.out, 'logs', 'p7-screen.log'), '\n  '.join(lines or text.strip().splitlines()[-15:])))

    def p9(self):
        """tests/bench/p9_rolling.py (a rolling change under load behind the router), under the lock this run holds."""
        p9 = os.path.join(HERE, 'p9_rolling.py')
        log('P9: %s' % p9)
        self.lab_down()
        env = self.ansible_env()
        env['LLMSERVE_LAB_LOCK_HELD'] = '1'
        rc, dummy, text = self.sh([sys.executable, p9], 'p9-rolling', env=env, check=False, timeout=1500)
        lines = [line for line in text.splitlines() if line.startswith('P9')]
        self.notes.append('P9 (tests/bench/p9_rolling.py, rc %s; log %s):\n  %s' % (
            rc, os.path.join(self.out, 'logs', 'p9-rolling.log'), '\n  '.join(lines or text.strip().splitlines()[-15:])))

    # ------------------------------------------------------------------ output
    def print_table(self):
        print()
        print('=' * 30, 'make bench: results', '=' * 30)
        w = max(len(r[1]) for r in self.rows) if self.rows else 10
        w = min(w, 92)
        print('%-4s %-*s | %-38s | %-26s | %s' % ('id', w, 'figure', 'measured', 'goal', 'anchor'))
        print('-' * (w + 110))
        # rows of one id together (the real server's P1, measured in the lab phase, beside the fake's)
        first = {}
        for i, row in enumerate(self.rows):
            first.setdefault(row[0], i)
        for pid, figure, measured, goal, anchor, met in sorted(self.rows, key=lambda r: first[r[0]]):
            verdict = goal + (' met' if met else ' MISSED')
            print('%-4s %-*s | %-38s | %-26s | %s' % (pid, w, figure[:w], measured, verdict, anchor))
        if self.p3_roles:
            print('\nP3 overhead by role (task time minus the fake servers\' own time), gpu01:')
            for role, s in self.p3_roles:
                print('  %-28s %6.2f s' % (role, s))
        if self.fastest_rows:
            print('\nsglang_selection: fastest on gpu01 (GPU figures sampled with nvidia-smi during each level):')
            print('\n'.join(self.fastest_rows))
        for n in self.notes:
            print('note: ' + n)
        print('logs and reports: %s' % self.out)


def run_steps(b, steps, named=False):
    """Run each step; a failure is logged and kept in b.failed (with the step's name when ``named``), the next runs."""
    for step in steps:
        try:
            step()
        except Exception as e:  # print what was measured, report the rest
            msg = '%s: %s' % (step.__name__, e) if named else str(e)
            b.failed.append(msg)
            log('FAILED: %s' % msg)


def lab_phase(b, lab_steps, default_lab):
    """The lab steps under the lab lock: the lab taken down first (and brought up when ``default_lab``), left down."""
    log('waiting for the lab lock %s' % LOCK)
    try:
        with lab_lock():
            log('lab lock held')
            try:
                b.lab_down()
                if default_lab:
                    b.lab('up')
                run_steps(b, lab_steps, named=True)
            finally:
                b.lab_down()
    finally:
        log('lab down, lock released')


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', default=os.path.join(ROOT, 'reports', 'bench'))
    ap.add_argument('--runs', type=int, default=20, help='P1 trials per failure class')
    ap.add_argument('--skip-lab', action='store_true', help='only P1 and P5')
    ap.add_argument('--p5-rounds', type=int, default=16, help='P5 on the real SGLang: rounds of the two load tests '
                    '(each round about 30 s)')
    ap.add_argument('--real-runs', type=int, default=10, help='P1 on the real SGLang (0: P5 on it alone): scheduler kills (each a real '
                    'start of 30 to 90 s)')
    ap.add_argument('--only', default='', help='comma-separated steps to run (p5, p1, p4, fastest, p8, p3p6, p2, costs, p7, '
                    'p9, p1real); default: all')
    ap.add_argument('--baseline', default='', help='another checkout of the collection (e.g. a worktree of an earlier '
                    'commit): p3p6 runs its deploy too, on a fresh lab, and prints both side by side')
    args = ap.parse_args()
    if os.geteuid() != 0 and not args.skip_lab:
        print('make bench needs root (the lab uses network namespaces and systemd); or run with --skip-lab')
        return 2
    if os.path.isdir(args.out):
        shutil.rmtree(args.out)
    os.makedirs(os.path.join(args.out, 'logs'))
    b = Bench(args.out)
    b.reports, b.fastest_rows, b.p3_roles = [], [], []
    t0 = time.time()
    only = set(w.strip() for w in args.only.split(',') if w.strip())

    def wanted(name):
        return not only or name in only

    def p1_real():
        b.p1_real(args.real_runs, args.p5_rounds)

    def p3p6():
        b.p3_p6()
        if args.baseline:
            b.p3_p6(os.path.abspath(args.baseline), ' (baseline)')
        b.controller_rows()

    steps = [step for name, step in (('p5', b.p5_loadgen), ('p1', lambda: b.p1_detect(args.runs))) if wanted(name)]
    lab_steps = [step for name, step in (('p4', b.p4_cleanup), ('fastest', b.fastest), ('p8', b.p8_await_cost),
                                         ('costs', b.task_costs), ('p3p6', p3p6), ('p2', b.p2),
                                         ('p7', b.p7), ('p9', b.p9), ('p1real', p1_real)) if wanted(name)]
    # p3p6, p7, p9 and p1real bring up labs of their own; the others share the default lab
    default_lab = any(wanted(name) for name in ('p4', 'fastest', 'p8', 'p2', 'costs'))
    run_steps(b, steps)
    if not args.skip_lab and lab_steps:
        lab_phase(b, lab_steps, default_lab)
    b.print_table()
    print('bench: %.0f s in all' % (time.time() - t0))
    if b.failed:
        print('\nnot measured:')
        for f in b.failed:
            print('  ' + f.splitlines()[0])
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
