# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

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


def _proc(tmp_path, procs):
    for pid, (ppid, ticks, rchar) in procs.items():
        d = tmp_path / str(pid)
        d.mkdir()
        (d / 'stat').write_text('%d (python3) S %d 1 1 0 -1 0 0 0 0 0 %d 0 0 0 20 0 1 0 5 0 0' % (pid, ppid, ticks))
        (d / 'io').write_text('rchar: %d\nwchar: 0\n' % rchar)
    return str(tmp_path)


def test_tree_usage_sums_the_descendants_only(tmp_path):
    hz = float(os.sysconf('SC_CLK_TCK'))
    proc = _proc(tmp_path, {10: (1, 100, 5), 11: (10, 50, 7), 12: (11, 25, 0), 20: (1, 999, 999)})
    cpu, rbytes = activity.tree_usage(10, proc=proc)
    assert cpu == pytest.approx(175 / hz) and rbytes == 12
    assert activity.tree_usage(99, proc=proc) is None
    assert activity.tree_usage(0, proc=proc) is None


def test_cgroup_usage(tmp_path):
    d = tmp_path / 'system.slice' / 'sglang.service'
    d.mkdir(parents=True)
    (d / 'cpu.stat').write_text('usage_usec 3000000\n')
    (d / 'io.stat').write_text('8:0 rbytes=10 wbytes=0\n')
    assert activity.cgroup_usage('/system.slice/sglang.service', root=str(tmp_path)) == (3.0, 10)
    assert activity.cgroup_usage('/system.slice/other.service', root=str(tmp_path)) is None
    assert activity.cgroup_usage('', root=str(tmp_path)) is None


# (seconds, cpu seconds, bytes read) samples -> was it busy at each poll?
ACTIVITY_CASES = [
    ('idle', [(0, 1.0, 0), (1, 1.01, 0), (2, 1.02, 0)], [False, False, False]),
    ('cpu-bound silent load', [(0, 1.0, 0), (1, 1.9, 0), (2, 2.8, 0)], [False, True, True]),
    ('reads its weights', [(0, 1.0, 0), (1, 1.0, 4 << 20), (2, 1.0, 4 << 20)], [False, True, False]),
    ('sampled too soon is not judged', [(0, 1.0, 0), (0.5, 9.0, 0), (1.0, 9.0, 0)], [False, False, True]),
]


@pytest.mark.parametrize('name, samples, want', ACTIVITY_CASES, ids=[c[0] for c in ACTIVITY_CASES])
def test_activity(name, samples, want):
    feed = iter([(cpu, rb) for _t, cpu, rb in samples])
    act = activity.Activity(lambda: next(feed))
    got = []
    for t, _cpu, _rb in samples:
        got.append(act.poll(t))
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
