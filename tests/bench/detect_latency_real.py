"""P1 on the real SGLang 0.5.23: a scheduler's SIGKILL -> await_server_ready's verdict.

Runs ON a lab GPU host brought up with ``labctl.py up --real-sglang``, where a deploy left the collection's
``sglang.service`` (tests/bench/run.py's ``p1real`` step does both, then runs this over SSH). Each run:

1. ``systemctl start`` the unit (the real ``python -m sglang.launch_server`` of the deploy, on the CPU);
2. start the module itself, ``await_server_ready`` with ``service_name`` (the unit's journal and main process, as
   the backend_trial role calls it; one call, ``step`` 0), as a process of its own;
3. follow the invocation's journal; a random 0 to ``--kill-delay`` seconds (default 1: SGLang's watchdog thread
   looks at its children once a second, so every phase of it is met) after the milestone ``--kill-at`` (default
   ``engine_up``: "Engine startup timings", every scheduler up, before the HTTP server and the warm-up) SIGKILL the
   ``sglang::scheduler`` process (by its process title, a child of the unit's main process, by PID);
4. latency = the module's exit (its verdict printed) - the kill; then stop the unit. Each run also splits it at
   the journal's receive time of the main process's line about the death ("Subprocess scheduler_0 (pid=N)
   crashed with exit code -9"): SGLang's own part and the module's.

A run whose verdict came before the kill (the server got ready first) is counted as ``missed`` and not timed.
Prints one line per run, and with --json one summary object (last line).

  .venv/bin/python tests/bench/detect_latency_real.py --runs 10      (on the host, PYTHONPATH=.tmp/collections)
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_log
from ansible_collections.llmserve.sglang.plugins.module_utils._systemd import parse_show

MODULE = 'ansible_collections.llmserve.sglang.plugins.modules.await_server_ready'
TITLE = 'sglang::scheduler'


def show(unit):
    out = subprocess.run(['systemctl', 'show', '-p', 'MainPID,InvocationID,ActiveState', unit], capture_output=True,
                         text=True, check=False).stdout
    return parse_show(out)


def schedulers(main_pid):
    """PIDs of the processes titled sglang::scheduler* whose parent is the unit's main process."""
    found = []
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            with open('/proc/%s/cmdline' % name, 'rb') as f:
                title = f.read().split(b'\0')[0].decode('utf-8', 'replace').strip()
            with open('/proc/%s/stat' % name) as f:
                stat = f.read()
        except (IOError, OSError):
            continue
        ppid = int(stat[stat.rfind(')') + 2:].split()[1])
        if title.startswith(TITLE) and ppid == main_pid:
            found.append(int(name))
    return found


def child_death_line_at(invocation):
    """When journald received the main process's line about its child's death (first one), or None."""
    out = subprocess.run(['journalctl', '-o', 'json', '--output-fields', 'MESSAGE', '_SYSTEMD_INVOCATION_ID=' + invocation],
                         capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get('MESSAGE')
        if isinstance(message, str) and any(rx.search(message) for rx in sglang_log.CHILD_EXIT_PATTERNS):
            return int(entry['__REALTIME_TIMESTAMP']) / 1e6
    return None


def stop(unit):
    subprocess.run(['systemctl', 'stop', unit], capture_output=True, check=False, timeout=120)
    subprocess.run(['systemctl', 'reset-failed', unit], capture_output=True, check=False)


def one(args, tmp):
    unit = args.unit
    stop(unit)
    t_start = time.time()
    subprocess.run(['systemctl', 'start', unit], check=True, timeout=60)
    props = show(unit)
    main_pid, invocation = int(props.get('MainPID') or 0), props.get('InvocationID')
    if not main_pid or not invocation:
        raise RuntimeError('%s did not start: %s' % (unit, props))
    argsfile = os.path.join(tmp, 'args.json')
    with open(argsfile, 'w') as f:
        json.dump({'ANSIBLE_MODULE_ARGS': {'service_name': unit, 'port': args.port, 'timeout': args.timeout,
                                           'hang_timeout': args.timeout}}, f)
    verdict = {}
    journal = subprocess.Popen(['journalctl', '-f', '-n', 'all', '-o', 'cat', '_SYSTEMD_INVOCATION_ID=' + invocation],
                               stdout=subprocess.PIPE, text=True)

    def module():
        cp = subprocess.run([sys.executable, '-m', MODULE, argsfile], capture_output=True, text=True, check=False)
        verdict['t'] = time.time()
        try:
            verdict['res'] = json.loads(cp.stdout)
        except ValueError:
            verdict['res'] = {'status': 'no-json', 'evidence': [(cp.stdout + cp.stderr)[-300:]]}
        if journal.poll() is None:
            journal.kill()   # a verdict before the kill: stop following (our own child, by its handle)
    th = threading.Thread(target=module)
    th.start()
    t_kill, killed, milestone, delay = None, [], None, None
    order = sglang_log.MILESTONE_ORDER
    try:
        for line in journal.stdout:
            name, _detail = sglang_log.milestone_of(line.rstrip('\n'))
            if name:
                milestone = name
            if name and order.index(name) >= order.index(args.kill_at):
                # a random phase against SGLang's watchdog thread, which looks at its children once a second
                delay = random.uniform(0, args.kill_delay)
                time.sleep(delay)
                killed = schedulers(main_pid)
                if killed:
                    t_kill = time.time()
                    for pid in killed:
                        os.kill(pid, signal.SIGKILL)
                break
    finally:
        journal.kill()       # our own child, by its handle
        journal.wait()
    th.join(args.timeout + 60)
    res = verdict.get('res') or {'status': 'no-verdict'}
    row = {'status': res.get('status'), 'milestone_at_kill': milestone, 'delay': round(delay or 0, 3),
           'start_to_kill': None, 'latency': None,
           'scheduler_pids': killed, 'evidence': (res.get('evidence') or [''])[0][:160],
           'module_seconds': res.get('seconds')}
    if t_kill is None or verdict.get('t', 0) < t_kill:
        row['status'] = 'missed:%s' % row['status']
    else:
        row['start_to_kill'] = round(t_kill - t_start, 2)
        row['latency'] = round(verdict['t'] - t_kill, 3)
        line_at = child_death_line_at(invocation)
        if line_at is not None:
            # the split: SGLang's own watchdog (kill -> its line in the journal), the module (that line -> verdict)
            row['line_after_kill'] = round(line_at - t_kill, 3)
            row['verdict_after_line'] = round(verdict['t'] - line_at, 3)
            if row['verdict_after_line'] > 0.5:
                # what the module read before deciding, to see what held it
                row['log_tail'] = [line[:160] for line in (res.get('log_tail') or [])[-12:]]
    stop(unit)
    return row


def median(values):
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--runs', type=int, default=10)
    ap.add_argument('--unit', default='sglang.service')
    ap.add_argument('--port', type=int, default=30000)
    ap.add_argument('--timeout', type=float, default=300, help="the module's timeout and hang_timeout per start")
    ap.add_argument('--kill-at', default='engine_up', choices=sglang_log.MILESTONE_ORDER[:-1],
                    help='the start-up milestone (first journal line at or past it) at which the scheduler is killed')
    ap.add_argument('--kill-delay', type=float, default=1.0,
                    help='kill a random 0 to this many seconds after the milestone line was read')
    ap.add_argument('--json', action='store_true', help='a summary object as the last line')
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    rows = []
    for i in range(args.runs):
        row = one(args, tmp)
        rows.append(row)
        print('run %2d: %s' % (i + 1, json.dumps(row)), flush=True)
    lats = sorted(r['latency'] for r in rows if r['latency'] is not None)
    split = {}
    for key in ('line_after_kill', 'verdict_after_line'):
        values = sorted(r[key] for r in rows if r.get(key) is not None)
        if values:
            split[key] = {'median': median(values), 'max': values[-1], 'n': len(values)}
    counts = {}
    for r in rows:
        counts[r['status']] = counts.get(r['status'], 0) + 1
    summary = {'kind': 'scheduler_sigkill', 'kill_at': args.kill_at, 'kill_delay': args.kill_delay, 'runs': len(rows), 'n': len(lats),
               'statuses': counts, 'split': split}
    if lats:
        summary.update(min=lats[0], max=lats[-1], median=median(lats))
    print(json.dumps(summary) if args.json else summary, flush=True)


if __name__ == '__main__':
    main()
