# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Regression tests on the real H200 run kept in tests/data/h200-run (tests/gpu/gpu_check.yml, no GPU needed).

The raw nvidia-smi / fuser outputs of each moment are parsed again here and must give what gpu_info
and gpu_reset reported on the machine at that moment.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_holders
from ansible_collections.llmserve.sglang.plugins.module_utils import nvidia_smi as nsmi

RUN = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'data', 'h200-run')
BUSY = {'2-busy-term': 'term', '5-busy-kill': 'kill'}
PHASES = ['1-idle', '2-busy-term', '5-busy-kill']
# read at the same moment as the raw output (power and utilisation move between two reads)
STABLE = ('index', 'name', 'uuid', 'bus_id', 'compute_cap', 'arch', 'driver_version', 'memory_used_mib',
          'memory_total_mib', 'power_limit_w')


def raw(phase, name):
    """-> (argv line, rc, stdout, stderr) of tests/data/h200-run/raw/<phase>-<name>.txt."""
    with open(os.path.join(RUN, 'raw', '%s-%s.txt' % (phase, name))) as handle:
        text = handle.read()
    head, rest = text.split('# ---- stdout\n', 1)
    stdout, stderr = rest.split('# ---- stderr\n', 1)
    rc = int(head.split('rc=', 1)[1].split()[0])
    # the capture template ends each stream with one newline of its own
    return head.splitlines()[0], rc, stdout[:-1] if stdout.endswith('\n') else stdout, stderr


def result(name):
    with open(os.path.join(RUN, 'json', name + '.json')) as handle:
        return json.load(handle)


def holder_pid(which):
    with open(os.path.join(RUN, 'holders', which + '.json')) as handle:
        return json.load(handle)['pid']


@pytest.mark.parametrize('phase', PHASES)
def test_gpus_parse_like_gpu_info(phase):
    dummy, rc, out, dummy2 = raw(phase, 'query-gpu-module')
    assert rc == 0
    parsed = nsmi.parse_gpus(out)
    reported = result('gpu_info-' + phase)
    assert len(parsed) == reported['gpu_count'] == 1
    for key in STABLE:
        assert parsed[0][key] == reported['gpus'][0][key], key
    assert parsed[0]['arch'] == reported['arch'] == 'sm90'
    assert parsed[0]['name'] == reported['gpu_name'] == 'NVIDIA H200'
    assert parsed[0]['compute_cap'] == '9.0'
    assert parsed[0]['memory_total_mib'] == 143771
    assert isinstance(parsed[0]['power_draw_w'], float) and parsed[0]['utilization_pct'] == 0


@pytest.mark.parametrize('phase', PHASES)
def test_header_csv_form_matches_module_form(phase):
    """``--format=csv`` (header, units) and ``csv,noheader,nounits`` read the same."""
    fields = list(nsmi.GPU_FIELDS)
    dummy, dummy2, with_units, dummy3 = raw(phase, 'query-gpu-csv')
    # the csv capture asks for three more fields: memory.free, pstate, temperature.gpu
    wide = fields[:8] + [('memory.free', 'memory_free_mib', 'int')] + fields[8:] + [
        ('pstate', 'pstate', 'str'), ('temperature.gpu', 'temperature_c', 'int')]
    row = nsmi.parse_csv(with_units, wide)[0]
    module_row = nsmi.parse_gpus(raw(phase, 'query-gpu-module')[2])[0]
    for key in ('index', 'name', 'uuid', 'bus_id', 'compute_cap', 'driver_version', 'memory_used_mib', 'memory_total_mib'):
        assert row[key] == module_row[key]
    assert row['pstate'] == 'P0'
    # memory.free is not total - used: the driver keeps some back (and rounds on its own)
    assert row['memory_total_mib'] - row['memory_used_mib'] - row['memory_free_mib'] in (614, 615)


@pytest.mark.parametrize('phase', PHASES)
def test_apps_parse_like_gpu_info(phase):
    gpus = nsmi.parse_gpus(raw(phase, 'query-gpu-module')[2])
    apps = nsmi.parse_apps(raw(phase, 'query-apps-module')[2], gpus)
    header_apps = nsmi.parse_apps(raw(phase, 'query-apps-csv')[2], gpus)
    assert apps == header_apps
    reported = [dict((k, v) for k, v in p.items() if k != 'vmid') for p in result('gpu_info-' + phase)['processes']]
    assert apps == reported
    if phase in BUSY:
        pid = holder_pid(BUSY[phase])
        assert [a['pid'] for a in apps] == [pid]
        assert apps[0]['gpu_index'] == 0 and apps[0]['name'] == 'python3'
        # 20 GiB from torch.empty, plus the CUDA context; memory.used is the process's + 9 MiB
        assert 20480 < apps[0]['used_mib'] < 21504
        assert gpus[0]['memory_used_mib'] == apps[0]['used_mib'] + 9
    else:
        assert apps == []


@pytest.mark.parametrize('phase', PHASES + ['9-idle-end'])
def test_table_header_versions(phase):
    dummy, rc, table, dummy2 = raw(phase, 'table')
    assert rc == 0
    assert nsmi.parse_cuda_version(table) == '13.0'
    assert nsmi.parse_driver_version(table) == '580.159.04'
    if phase in PHASES:
        assert result('gpu_info-' + phase)['cuda_version'] == '13.0'
    assert all(len(line) == 91 for line in table.splitlines()[1:] if line)


@pytest.mark.parametrize('phase', sorted(BUSY))
def test_fuser_busy(phase):
    """fuser -v: PIDs on stdout, the table (without the PIDs) on stderr."""
    argv, rc, out, err = raw(phase, 'fuser-v')
    assert rc == 0
    pid = holder_pid(BUSY[phase])
    assert out.split() == [str(pid)] * 3
    assert str(pid) not in err
    rows = gpu_holders.parse_fuser(out, err)
    assert sorted((r['device'], r['pid'], r['access'], r['command'], r['user']) for r in rows) == [
        ('/dev/nvidia-uvm', pid, 'F...m', 'python3', 'root'),
        ('/dev/nvidia0', pid, 'F...m', 'python3', 'root'),
        ('/dev/nvidiactl', pid, 'F...m', 'python3', 'root'),
    ]
    # the directory and the node nobody holds are asked about but not listed
    assert '/dev/nvidia-caps' in argv and '/dev/nvidia-uvm-tools' in argv


@pytest.mark.parametrize('phase', ['1-idle', '3-idle-after-term', '6-idle-after-kill', '9-idle-end'])
def test_fuser_idle(phase):
    dummy, rc, out, err = raw(phase, 'fuser-v')
    assert rc == 1 and out.strip() == '' and err.strip() == ''
    assert gpu_holders.parse_fuser(out, err) == []


@pytest.mark.parametrize('which', ['term', 'kill'])
def test_holders_and_plan_match_gpu_reset(which):
    """merge_holders + plan on the raw outputs select what gpu_reset's check mode selected: our holder only."""
    phase = {'term': '2-busy-term', 'kill': '5-busy-kill'}[which]
    pid = holder_pid(which)
    gpus = nsmi.parse_gpus(raw(phase, 'query-gpu-module')[2])
    apps = nsmi.parse_apps(raw(phase, 'query-apps-module')[2], gpus)
    dummy, dummy2, out, err = raw(phase, 'fuser-v')
    preview = result('gpu_reset-check-' + which)
    seen = dict((h['pid'], h) for h in preview['holders'])
    infos = dict((p, {'pid': p, 'name': seen[p]['name'], 'state': seen[p]['state'], 'ppid': 1,
                      'starttime': seen[p]['starttime'], 'cmdline': seen[p]['cmdline'], 'vmid': seen[p]['vmid'],
                      'nspid': seen[p]['nspid']}) for p in seen)
    holders = gpu_holders.merge_holders(apps, gpu_holders.parse_fuser(out, err), None, infos)
    assert [(h['pid'], h['sources'], h['devices'], h['gpus'], h['used_mib']) for h in holders] == [
        (h['pid'], h['sources'], h['devices'], h['gpus'], h['used_mib']) for h in preview['holders']]
    kill, spared = gpu_holders.plan(holders, own_vmid=None)
    assert [h['pid'] for h in kill] == [h['pid'] for h in preview['would_kill']] == [pid]
    assert spared == preview['spared'] == []


def test_gpu_reset_results():
    term, kill = result('gpu_reset-term'), result('gpu_reset-kill')
    for res, which, signal_name in ((term, 'term', 'SIGTERM'), (kill, 'kill', 'SIGKILL')):
        assert [(k['pid'], k['signal']) for k in res['killed']] == [(holder_pid(which), signal_name)]
        assert res['memory_before'][0]['used_mib'] > 20480 and res['memory_after'][0]['used_mib'] < 1024
        assert res['hard_reset_done'] == [] and res['sources_used'] == ['nvidia-smi', 'fuser']
        assert res['killed'][0]['seconds'] <= res['seconds_to_free'] <= res['seconds']
    # SIGTERM honoured: gone well inside term_grace (5 s); ignored: SIGKILL right after term_grace (2 s)
    assert term['killed'][0]['seconds'] < 2.0
    assert 2.0 <= kill['killed'][0]['seconds'] < 3.0
    assert kill['seconds_to_free'] < 4.0
    timings = result('timings')
    assert timings['term']['holder_saw_sigterm'] is True and timings['kill']['holder_saw_sigterm'] is False
