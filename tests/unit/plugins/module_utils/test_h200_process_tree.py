# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks on the real H200 process-tree run kept in tests/data/h200-run (tests/gpu/process_tree.py, no GPU needed).

gpu_reset's result of each cycle is held against what the driver measured beside it (NVML every 5 ms, /proc
every 5 ms) and against the tree it started; its check-mode selection is replayed through ``gpu_holders.plan``.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_holders

DATA = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'data', 'h200-run', 'process-tree-2026-12-02.json')
# gpu_reset polls nvidia-smi every 0.1 s; one nvidia-smi call took up to about 0.06 s on this machine
POLL_SLACK_S = 0.25


def runs():
    with open(DATA) as handle:
        return dict((run['label'], run) for run in json.load(handle)['runs'])


def reset_cycles():
    return [c for c in runs()['gpu_reset']['cycles'] if c['mode'].startswith('gr-')]


def ids(cycles):
    return [c['name'] for c in cycles]


@pytest.mark.parametrize('cycle', reset_cycles(), ids=ids(reset_cycles()))
def test_seconds_to_free_is_neither_early_nor_late(cycle):
    reported = cycle['gpu_reset']['seconds_to_free']
    measured = cycle['nvml']['under_1024']
    assert reported is not None
    assert reported >= measured['last_held_s'], 'gpu_reset said free while NVML still saw the memory held'
    assert reported - measured['first_seen_s'] <= POLL_SLACK_S
    assert cycle['gpu_reset']['hard_reset_done'] == []
    assert all(m['used_mib'] < 1024 for m in cycle['gpu_reset']['memory_after'])


@pytest.mark.parametrize('cycle', reset_cycles(), ids=ids(reset_cycles()))
def test_gpu_reset_ended_the_cuda_processes_of_the_tree_only(cycle):
    tree = dict((t['pid'], t['role']) for t in cycle['tree'])
    # the tree's processes with a device node open: read from /proc by the driver where it looked (first cycles),
    # else those of the tree that gpu_reset's preview listed as holders
    if 'device_use' in cycle:
        cuda = set(int(pid) for pid, use in cycle['device_use'].items() if use['fds'])
        assert cuda == set(h['pid'] for h in cycle['gpu_reset_check']['holders'] if h['pid'] in tree)
    else:
        cuda = set(h['pid'] for h in cycle['gpu_reset_check']['holders'] if h['pid'] in tree)
    killed = set(k['pid'] for k in cycle['gpu_reset']['killed'])
    assert killed == cuda
    assert set(role for pid, role in tree.items() if pid in killed) <= {'scheduler', 'main'}
    assert 'scheduler' in [tree[pid] for pid in killed]
    expected_signal = 'SIGKILL' if cycle['mode'] == 'gr-kill' else 'SIGTERM'
    assert set(k['signal'] for k in cycle['gpu_reset']['killed']) == {expected_signal}
    # a main process without a CUDA call is no holder: gpu_reset returns with it (and the rest) still alive
    main = [pid for pid, role in tree.items() if role == 'main'][0]
    assert (str(main) in cycle['alive_after_gpu_reset']) == (main not in cuda)


@pytest.mark.parametrize('cycle', reset_cycles(), ids=ids(reset_cycles()))
def test_check_mode_selection_replays(cycle):
    check = cycle['gpu_reset_check']
    self_pids = [s['pid'] for s in check['spared'] if s['why'] == 'this module or one of its parents']
    kill, spared = gpu_holders.plan(check['holders'], self_pids=self_pids)
    assert sorted(h['pid'] for h in kill) == sorted(check['would_kill'])
    assert sorted(h['pid'] for h in spared) == sorted(s['pid'] for s in check['spared'])


def test_main_process_becomes_a_holder_with_its_first_cuda_call():
    probe = [c for c in runs()['gpu_reset']['cycles'] if c['probe']][0]
    stages = dict((s['stage'], s) for s in probe['stages'])
    for number in (0, 1, 2):
        assert stages[number]['main_devices'] == {'fds': [], 'maps': []}
        assert stages[number]['main_in_fuser'] is False
    assert stages[2]['gpu_reset_check_main']['would_kill_main'] is False
    # torch.cuda.is_available(): device nodes open, no context, so fuser sees it and nvidia-smi does not
    assert stages[3]['main_devices']['fds'] and stages[3]['main_in_fuser'] is True
    assert stages[3]['main_in_compute_apps'] == []
    assert stages[3]['gpu_reset_check_main']['holder'][0]['sources'] == ['fuser']
    assert stages[3]['gpu_reset_check_main']['would_kill_main'] is True
    assert [a['used_mib'] for a in stages[5]['main_in_compute_apps']] == ['612']
