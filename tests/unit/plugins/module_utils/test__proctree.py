# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import _proctree

HERE = os.path.dirname(__file__)
CASES = yaml.safe_load(open(os.path.join(HERE, 'cases', '_proctree.yml'), encoding='utf-8'))
UNIT_CGROUP = '/system.slice/sglang.service'
LAUNCH_CMDLINE = 'python\x00-m\x00sglang.launch_server\x00--model-path\x00/m\x00'


def ids(cases):
    return [c['name'] for c in cases]


def stat_line(pid, spec):
    """A /proc/PID/stat line: fields 3 (state) to 52 (exit_code), 22 the start time."""
    rest = ['0'] * 50
    rest[0] = spec.get('state', 'S')
    rest[1] = str(spec.get('ppid', 1))
    rest[19] = str(spec.get('start', 500))
    rest[49] = str(spec.get('exit', 0))
    return '%d (%s) %s\n' % (pid, spec['comm'], ' '.join(rest))


def write_proc(root, pid, spec):
    """One process of the fake tree: its stat and its command line (a zombie's is empty)."""
    base = os.path.join(root, str(pid))
    if not os.path.isdir(base):
        os.makedirs(base)
    with open(os.path.join(base, 'stat'), 'w') as f:
        f.write(stat_line(pid, spec))
    cmdline = '' if spec.get('state') == 'Z' else (spec['title'] + '\x00' if 'title' in spec else LAUNCH_CMDLINE)
    with open(os.path.join(base, 'cmdline'), 'w') as f:
        f.write(cmdline)


def test_stat_of_reads_a_zombie_s_wait_status(tmp_path):
    root = str(tmp_path)
    write_proc(root, 7, {'comm': 'sglang::schedul', 'state': 'Z', 'ppid': 3, 'start': 42, 'exit': 9})
    write_proc(root, 8, {'comm': 'a) b', 'state': 'S', 'ppid': 3, 'exit': 9})
    assert _proctree.stat_of(7, root) == dict(_proctree.stat_of(7, root), comm='sglang::schedul', state='Z', ppid=3,
                                              starttime=42, exit_status=9)
    assert _proctree.stat_of(8, root)['exit_status'] is None      # only a zombie has one
    assert _proctree.stat_of(8, root)['comm'] == 'a) b'
    assert _proctree.stat_of(9, root) is None


def test_title_of_prefers_the_command_line(tmp_path):
    root = str(tmp_path)
    write_proc(root, 7, {'comm': 'sglang::schedul', 'title': 'sglang::scheduler_TP3'})
    write_proc(root, 8, {'comm': 'sglang::schedul'})
    assert _proctree.title_of(7, 'sglang::schedul', root) == 'sglang::scheduler_TP3'
    assert _proctree.title_of(8, 'sglang::schedul', root) == 'sglang::schedul'
    assert _proctree.title_of(9, 'gone', root) == 'gone'


def test_unit_pids_from_cgroup_v2_and_v1(tmp_path):
    croot = str(tmp_path)
    assert _proctree.unit_pids(UNIT_CGROUP, croot) is None
    assert _proctree.unit_pids(None, croot) is None
    v1 = os.path.join(croot, 'systemd', 'system.slice', 'sglang.service')
    os.makedirs(v1)
    with open(os.path.join(v1, 'cgroup.procs'), 'w') as f:
        f.write('12\n13\n')
    assert _proctree.unit_pids(UNIT_CGROUP, croot) == [12, 13]
    v2 = os.path.join(croot, 'system.slice', 'sglang.service')
    os.makedirs(v2)
    with open(os.path.join(v2, 'cgroup.procs'), 'w') as f:
        f.write('4\n')
    assert _proctree.unit_pids(UNIT_CGROUP, croot) == [4]


@pytest.mark.parametrize('case', CASES['is_rank'], ids=[repr(c['title']) for c in CASES['is_rank']])
def test_is_rank(case):
    assert _proctree.is_rank(case['title']) is case['rank']


@pytest.mark.parametrize('case', CASES['exit_facts'], ids=[str(c['status']) for c in CASES['exit_facts']])
def test_exit_facts(case):
    assert _proctree.exit_facts(case['status']) == (case['exit_code'], case['signal'])


def write_cgroup(croot, pids):
    base = os.path.join(croot, UNIT_CGROUP.lstrip('/'))
    os.makedirs(base)
    with open(os.path.join(base, 'cgroup.procs'), 'w') as f:
        f.write(''.join('%d\n' % pid for pid in pids))


@pytest.mark.parametrize('case', CASES['polls'], ids=ids(CASES['polls']))
def test_polls(case, tmp_path):
    root, croot = str(tmp_path / 'proc'), str(tmp_path / 'cgroup')
    os.makedirs(root)
    if 'cgroup' in case:
        write_cgroup(croot, case['cgroup'])
    watch = _proctree.RankWatch(root=root, croot=croot)
    t0 = 1000.0
    for step in case['steps']:
        for pid in step.get('gone', []):
            shutil.rmtree(os.path.join(root, str(pid)))
        for pid, spec in (step.get('set') or {}).items():
            write_proc(root, int(pid), spec)
        got = watch.poll(t0 + step['at'], step.get('main', 100), UNIT_CGROUP if 'cgroup' in case else None)
        want = step['death']
        where = 'at %s: %r' % (step['at'], got)
        if want is None:
            assert got is None, where
        else:
            assert got is not None, where
            assert dict((k, got.get(k)) for k in want) == want, where
        if 'checks' in step:
            assert watch.checks == step['checks'], where
