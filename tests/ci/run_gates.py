#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the gates in two lanes side by side and print one summary (``make test`` calls this).

The lab lane (the gates that bring the lab up: one lab per machine) runs in order with its output on the console.
The other lane (lint, sanity, units, ...: no lab) runs beside it at the lowest CPU priority (nice 19), so that it
only takes what the lab lane leaves idle; its output goes to the gates' logs, and a failed gate's log tail is printed
at the end. Every gate runs whatever the others do; the exit status is 1 when any failed.

A lab gate written ``A+B`` is a group: the lab lane brings up one lab with a slot for each (``labctl.py up --slots
N``, under the lab lock) and runs them at once, each on its own slot (``LLMSERVE_LAB_SLOT``; ``LLMSERVE_LAB_PROVIDED=1``
tells their lab sessions that the lab is up and held), the first with its output on the console.

    run_gates.py --log-dir DIR --side "lint sanity" --lab "molecule suite awx-tests+compat" [--make make]
"""

from __future__ import absolute_import, division, print_function

import argparse
import os
import re
import subprocess
import sys
import threading
import time

SUMMARY_LINE = re.compile(r'^(=+ .*(passed|failed|error|no tests ran).* =+|RESULT: .*|(Passed|Failed): .*|ERROR: .*)$')
PRINT = threading.Lock()


def say(text):
    with PRINT:
        sys.stdout.write(text + '\n')
        sys.stdout.flush()


def last_summary_line(log_path):
    """The last line of a gate's log that says how it ended ('' when none does)."""
    found = ''
    try:
        with open(log_path, encoding='utf-8', errors='replace') as handle:
            for line in handle:
                line = line.rstrip('\n')
                if SUMMARY_LINE.match(line):
                    found = line
    except OSError:
        pass
    return found


def run_gate(make, gate, log_path, live, nice=False, env=None):
    """``make GATE`` with its output in log_path (and on the console when ``live``) -> (passed, seconds)."""
    argv = ([] if not nice else ['nice', '-n', '19']) + [make, gate]
    start = time.time()
    with open(log_path, 'w', encoding='utf-8') as log:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        for raw in proc.stdout:
            line = raw.decode('utf-8', 'replace')
            log.write(line)
            if live:
                with PRINT:
                    sys.stdout.write(line)
                    sys.stdout.flush()
        rc = proc.wait()
    return rc == 0, time.time() - start


def group(make, gates, log_dir, results):
    """Lab gates at once, each on its own slot of one lab brought up (and held) here."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'lab'))
    from labsession import lab_session  # pylint: disable=import-outside-toplevel

    def one(slot, gate):
        env = dict(os.environ, LLMSERVE_LAB_PROVIDED='1', LLMSERVE_LAB_SLOT=str(slot))
        log_path = os.path.join(log_dir, gate + '.log')
        if slot:
            say('[slot %d of the lab] %s: started (log %s)' % (slot, gate, log_path))
        passed, seconds = run_gate(make, gate, log_path, slot == 0, env=env)
        results[gate] = (passed, seconds, last_summary_line(log_path))
        if slot:
            say('[slot %d of the lab] %s: %s in %.0f s' % (slot, gate, 'PASSED' if passed else 'FAILED', seconds))

    say('\n================================================================ %s (at once, a slot each)' % ' + '.join(gates))
    try:
        with lab_session(['--slots', str(len(gates))]):
            threads = [threading.Thread(target=one, args=(slot, gate)) for slot, gate in enumerate(gates)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    except AssertionError as e:     # the lab did not come up: every gate of the group failed
        say('the lab did not come up: %s' % e)
        for gate in gates:
            results.setdefault(gate, (False, 0.0, 'the lab did not come up'))


def lane(make, gates, log_dir, live, results, nice=False):
    for gate in gates:
        if '+' in gate:
            group(make, gate.split('+'), log_dir, results)
            continue
        if live:
            say('\n================================================================ %s' % gate)
        else:
            say('[beside the lab] %s: started (log %s)' % (gate, os.path.join(log_dir, gate + '.log')))
        log_path = os.path.join(log_dir, gate + '.log')
        passed, seconds = run_gate(make, gate, log_path, live, nice)
        results[gate] = (passed, seconds, last_summary_line(log_path))
        if not live:
            say('[beside the lab] %s: %s in %.0f s' % (gate, 'PASSED' if passed else 'FAILED', seconds))


def summary(order, results, log_dir):
    lines = ['', '================================================================ summary (logs: %s)' % log_dir]
    passed = failed = 0
    for gate in order:
        ok, seconds, line = results.get(gate, (False, 0.0, 'did not run'))
        passed += ok
        failed += not ok
        lines.append('%-11s %-6s %5ds  %s' % (gate, 'PASSED' if ok else 'FAILED', seconds, line))
    lines.append('gates: %d passed, %d failed' % (passed, failed))
    return lines, failed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    ap.add_argument('--log-dir', required=True)
    ap.add_argument('--side', default='', help='gates that need no lab, run beside the lab lane')
    ap.add_argument('--lab', default='', help='gates that use the lab, one after another')
    ap.add_argument('--make', default=os.environ.get('MAKE', 'make'))
    a = ap.parse_args(argv)
    side, lab = a.side.split(), a.lab.split()
    os.makedirs(a.log_dir, exist_ok=True)
    results = {}
    started = time.time()
    beside = threading.Thread(target=lane, args=(a.make, side, a.log_dir, False, results, True))
    beside.start()
    lane(a.make, lab, a.log_dir, True, results)
    beside.join()
    lines, failed = summary(side + [g for gate in lab for g in gate.split('+')], results, a.log_dir)
    for gate in side + [g for gate in lab if '+' in gate for g in gate.split('+')[1:]]:
        if not results.get(gate, (False,))[0]:
            say('\n---------------------------------------------------------------- %s (last 60 lines of its log)' % gate)
            with open(os.path.join(a.log_dir, gate + '.log'), encoding='utf-8', errors='replace') as handle:
                say(''.join(handle.readlines()[-60:]).rstrip('\n'))
    say('\n'.join(lines))
    say('all gates: %.0f s' % (time.time() - started))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
