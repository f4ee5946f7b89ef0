# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import sys
import time

import pytest

from ansible_collections.llmserve.sglang.plugins.module_utils import activity
from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_holders


@pytest.mark.parametrize('text, want', [
    ('usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n', 2.5),
    ('user_usec 1\n', None),
    ('', None),
    ('usage_usec x\n', None),
])
def test_parse_cpu_stat(text, want):
    assert activity.parse_cpu_stat(text) == want


def test_parse_io_stat_sums_devices():
    text = '8:0 rbytes=1048576 wbytes=0 rios=4 wios=0\n259:0 rbytes=1024 wbytes=5 rios=1 wios=1\n'
    assert activity.parse_io_stat(text) == 1049600
    assert activity.parse_io_stat('') == 0


def test_cpu_ticks_from_the_shared_stat_parser():
    line = '4242 (sglang::schedul er) S 4200 4242 4242 0 -1 4194560 1 0 0 0 150 25 0 0 20 0 1 0 99 0 0'
    st = gpu_holders.parse_stat(line)
    assert (st['ppid'], st['cpu_ticks'], st['comm']) == (4200, 175, 'sglang::schedul er')
    assert gpu_holders.parse_stat('garbage') is None


def test_parse_proc_io():
    assert activity.parse_proc_io('rchar: 123\nwchar: 5\nread_bytes: 0\n') == 123
    assert activity.parse_proc_io('') == 0


@pytest.mark.parametrize('text, want', [
    ('543151657 235259 39\n', 0.000235259),
    ('1 2500000000 3\n', 2.5),
    ('1\n', 0.0),
    ('', 0.0),
    (None, 0.0),
    ('1 x 3\n', 0.0),
])
def test_parse_schedstat(text, want):
    assert activity.parse_schedstat(text) == pytest.approx(want)


def _proc(tmp_path, procs):
    """A fake /proc: pid -> (ppid, cpu ticks, rchar[, {tid: ns waited on a run queue}])."""
    for pid, row in procs.items():
        ppid, ticks, rchar = row[:3]
        d = tmp_path / str(pid)
        d.mkdir(parents=True)
        (d / 'stat').write_text('%d (python3) S %d 1 1 0 -1 0 0 0 0 0 %d 0 0 0 20 0 1 0 5 0 0' % (pid, ppid, ticks))
        (d / 'io').write_text('rchar: %d\nwchar: 0\n' % rchar)
        for tid, waited in (row[3] if len(row) > 3 else {}).items():
            (d / 'task' / str(tid)).mkdir(parents=True)
            (d / 'task' / str(tid) / 'schedstat').write_text('1000 %d 7\n' % waited)
    return str(tmp_path)


def test_tree_usage_sums_the_descendants_only(tmp_path):
    hz = float(os.sysconf('SC_CLK_TCK'))
    proc = _proc(tmp_path, {10: (1, 100, 5, {10: 1000000000, 13: 500000000}), 11: (10, 50, 7, {11: 250000000}),
                            12: (11, 25, 0), 20: (1, 999, 999, {20: 9000000000})})
    cpu, rbytes, waited = activity.tree_usage(10, proc=proc)
    assert cpu == pytest.approx(175 / hz) and rbytes == 12 and waited == pytest.approx(1.75)
    assert activity.tree_usage(99, proc=proc) is None
    assert activity.tree_usage(0, proc=proc) is None


def test_cgroup_usage(tmp_path):
    d = tmp_path / 'cg' / 'system.slice' / 'sglang.service'
    d.mkdir(parents=True)
    (d / 'cpu.stat').write_text('usage_usec 3000000\n')
    (d / 'io.stat').write_text('8:0 rbytes=10 wbytes=0\n')
    (d / 'cgroup.procs').write_text('10\n11\n')
    proc = _proc(tmp_path / 'proc', {10: (1, 0, 0, {10: 2000000000}), 11: (10, 0, 0, {11: 1000000000}),
                                     20: (1, 0, 0, {20: 7000000000})})
    root = str(tmp_path / 'cg')
    assert activity.cgroup_usage('/system.slice/sglang.service', root=root, proc=proc) == (3.0, 10, 3.0)
    (d / 'cgroup.procs').write_text('')
    assert activity.cgroup_usage('/system.slice/sglang.service', root=root, proc=proc) == (3.0, 10, 0.0)
    assert activity.cgroup_usage('/system.slice/other.service', root=root, proc=proc) is None
    assert activity.cgroup_usage('', root=root, proc=proc) is None


# (seconds, cpu seconds, bytes read) samples -> was it busy at each poll?
ACTIVITY_CASES = [
    ('idle', [(0, 1.0, 0), (1, 1.01, 0), (2, 1.02, 0)], [False, False, False]),
    ('cpu-bound silent load', [(0, 1.0, 0), (1, 1.9, 0), (2, 2.8, 0)], [False, True, True]),
    ('reads its weights', [(0, 1.0, 0), (1, 1.0, 4 << 20), (2, 1.0, 4 << 20)], [False, True, False]),
    ('sampled too soon is not judged', [(0, 1.0, 0), (0.5, 9.0, 0), (1.0, 9.0, 0)], [False, False, True]),
    # (seconds, cpu seconds, bytes read, seconds waited on a run queue)
    ('starved of CPU: 1 % of a core, waiting the rest', [(0, 1.0, 0, 5.0), (1, 1.01, 0, 5.99), (2, 1.02, 0, 6.98)],
     [False, True, True]),
    ('idle with timer wake-ups that wait milliseconds', [(0, 1.0, 0, 5.0), (1, 1.01, 0, 5.02), (2, 1.02, 0, 5.04)],
     [False, False, False]),
]


@pytest.mark.parametrize('name, samples, want', ACTIVITY_CASES, ids=[c[0] for c in ACTIVITY_CASES])
def test_activity(name, samples, want):
    feed = iter([sample[1:] for sample in samples])
    act = activity.Activity(lambda: next(feed))
    got = []
    for sample in samples:
        got.append(act.poll(sample[0]))
    if name == 'sampled too soon is not judged':
        # the second poll is not due: the reader is not called, and the third sees 8 CPU-s over 1 s
        assert got == want
        return
    assert got == want


def test_activity_unknown_usage_is_never_busy():
    act = activity.Activity(lambda: None)
    assert [act.poll(t) for t in (0, 1, 2)] == [False, False, False]
    failing = activity.Activity(lambda: 1 / 0)
    assert failing.poll(0) is False


def test_judged_after_three_idle_samples_in_a_row_or_when_unknown():
    # idle, idle, busy (resets the run), idle, idle, idle: judged only at the last
    feed = iter([(1.0, 0), (1.0, 0), (1.0, 0), (2.0, 0), (2.0, 0), (2.0, 0), (2.0, 0)])
    act = activity.Activity(lambda: next(feed))
    seen = []
    for t in range(7):
        act.poll(t)
        seen.append(act.judged())
    assert seen == [False, False, False, False, False, False, True]
    unknown = activity.Activity(lambda: None)
    unknown.poll(0)
    assert unknown.judged()


HOGS = 40


def _pinned(argv, cpu):
    """A child of this test that runs on one CPU only."""
    return subprocess.Popen(argv, preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))


@pytest.mark.skipif(not hasattr(os, 'sched_setaffinity'), reason='needs sched_setaffinity')
def test_a_starved_busy_process_is_working_an_idle_one_is_not():
    """Real processes: a busy loop that shares one CPU with 40 other busy loops of the same priority gets about
    1/41 of it and waits the rest on the run queue; a sleeping process neither uses CPU nor waits."""
    cpu = min(os.sched_getaffinity(0))
    children = []
    try:
        # the sleeper first, asleep before the CPU is crowded (its start-up would wait on the run queue)
        sleeper = subprocess.Popen([sys.executable, '-c', 'import time; print("asleep", flush=True); time.sleep(60)'],
                                   stdout=subprocess.PIPE, preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
        children.append(sleeper)
        assert sleeper.stdout.readline() == b'asleep\n'
        for _i in range(HOGS):
            children.append(_pinned(['/bin/sh', '-c', 'while :; do :; done'], cpu))
        starved = _pinned([sys.executable, '-c', 'while True: pass'], cpu)
        children.append(starved)
        time.sleep(1.0)   # the starved loop on the crowded CPU
        first = dict((p.pid, activity.tree_usage(p.pid)) for p in (starved, sleeper))
        acts = dict((p.pid, activity.Activity(lambda pid=p.pid: activity.tree_usage(pid))) for p in (starved, sleeper))
        t0 = time.time()
        for act in acts.values():
            act.poll(t0)
        time.sleep(2.0)
        t1 = time.time()
        busy = dict((pid, act.poll(t1)) for pid, act in acts.items())
        last = dict((p.pid, activity.tree_usage(p.pid)) for p in (starved, sleeper))
    finally:
        for p in children:
            p.kill()      # this test's own children, by their handles
            p.wait()
        if children:
            children[0].stdout.close()
    dt = t1 - t0
    used = last[starved.pid][0] - first[starved.pid][0]
    waited = last[starved.pid][2] - first[starved.pid][2]
    # on CPU use alone it would look idle; its wait on the run queue tells it is working
    assert used < activity.MIN_CPU_SHARE * dt, (used, waited, dt)
    assert waited >= activity.MIN_WAIT_SHARE * dt, (used, waited, dt)
    assert busy[starved.pid] is True
    assert busy[sleeper.pid] is False
    assert last[sleeper.pid][2] - first[sleeper.pid][2] < 0.05
