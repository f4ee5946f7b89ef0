# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import threading

from ansible_collections.llmserve.sglang.plugins.modules import gpu_info
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_flags
from ansible_collections.llmserve.sglang.tests.unit.plugins.modules.utils import run_mocked

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'data')
with open(os.path.join(DATA, 'nvidia-smi-h200', 'nvidia-smi-busy.txt')) as _h:
    TABLE = _h.read()
with open(os.path.join(DATA, 'sglang', 'server-args-0.5.23.json')) as _h:
    DUMP = json.load(_h)
GPU_ROW = ('0, NVIDIA H200, GPU-a4fbce9b-25f7-f038-11e1-b07ee93c4d63, 00000000:00:06.0, 9.0, 580.159.04, '
           '21265, 143771, 120.30, 700.00, 0\n')
APP_ROW = '%d, python3, 21256, GPU-a4fbce9b-25f7-f038-11e1-b07ee93c4d63, 00000000:00:06.0\n'


def nvidia_smi(apps_pid=None, fail=None):
    def run(argv):
        if argv[0].endswith('nvidia-smi'):
            if fail:
                return fail
            if len(argv) == 1:
                return 0, TABLE, ''
            if argv[1].startswith('--query-gpu='):
                return 0, GPU_ROW, ''
            if argv[1].startswith('--query-compute-apps='):
                return 0, APP_ROW % apps_pid if apps_pid else '', ''
        if argv[1:2] == ['-c'] and argv[2] == sglang_flags.INTROSPECT_SNIPPET:
            payload = {'installed': True, 'version': '0.5.23', 'python': '3.12.3', 'options': DUMP['options'],
                       'source': DUMP['source']}
            return 0, 'noise\n%s%s\n' % (sglang_flags.MARKER, json.dumps(payload)), 'a warning\n'
        raise AssertionError('unexpected command %r' % argv)
    return run


def test_facts_in_three_nvidia_smi_calls(monkeypatch):
    monkeypatch.setattr(gpu_info.os, 'access', lambda path, mode: True)  # the mocked interpreter path exists
    result, failed, calls = run_mocked(gpu_info.main, {'sglang_python': '/root/ml-env/bin/python3'}, monkeypatch,
                                       nvidia_smi(apps_pid=os.getpid()))
    assert not failed, result
    assert result['changed'] is False
    assert [c[0] for c in calls].count('/usr/bin/nvidia-smi') == 3
    assert result['gpu_count'] == 1 and result['gpu_name'] == 'NVIDIA H200'
    assert result['compute_cap'] == '9.0' and result['arch'] == 'sm90' and result['mixed'] is False
    assert result['driver_version'] == '580.159.04' and result['cuda_version'] == '13.0'
    gpu = result['gpus'][0]
    assert gpu['memory_used_mib'] == 21265 and gpu['power_limit_w'] == 700.0 and gpu['bus_id'] == '00000000:00:06.0'
    proc = result['processes'][0]
    assert proc['pid'] == os.getpid() and proc['gpu_index'] == 0 and proc['used_mib'] == 21256
    assert 'vmid' in proc
    assert result['sglang']['installed'] and result['sglang']['version'] == '0.5.23'
    assert len(result['sglang']['options']) == len(DUMP['options'])


def test_without_sglang_python(monkeypatch):
    result, failed, calls = run_mocked(gpu_info.main, {}, monkeypatch, nvidia_smi())
    assert not failed and result['sglang']['installed'] is None and result['processes'] == []


def test_check_mode_reads_the_same(monkeypatch):
    result, failed, calls = run_mocked(gpu_info.main, {'_ansible_check_mode': True}, monkeypatch, nvidia_smi())
    assert not failed and result['gpu_count'] == 1


def test_missing_nvidia_smi_names_the_option(monkeypatch):
    result, failed, calls = run_mocked(gpu_info.main, {}, monkeypatch, nvidia_smi(), bin_paths={'nvidia-smi': None})
    assert failed and result['msg'].startswith('nvidia_smi: ') and 'full path' in result['msg']
    assert calls == []


def test_nvidia_smi_error_carries_stderr(monkeypatch):
    fail = (9, '', 'NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver.\n')
    result, failed, calls = run_mocked(gpu_info.main, {}, monkeypatch, nvidia_smi(fail=fail))
    assert failed and 'rc=9' in result['msg'] and "couldn't communicate" in result['msg']


def test_proxmox_never(monkeypatch):
    result, failed, calls = run_mocked(gpu_info.main, {'proxmox': 'never'}, monkeypatch, nvidia_smi(apps_pid=1))
    assert not failed and result['proxmox_node'] is False and result['processes'][0]['vmid'] is None


def test_option_help_false_drops_only_the_help_texts(monkeypatch):
    monkeypatch.setattr(gpu_info.os, 'access', lambda path, mode: True)
    args = {'sglang_python': '/root/ml-env/bin/python3'}
    full, failed, calls = run_mocked(gpu_info.main, args, monkeypatch, nvidia_smi())
    assert not failed and any(o['help'] for o in full['sglang']['options'])
    lean, failed, calls = run_mocked(gpu_info.main, dict(args, option_help=False), monkeypatch, nvidia_smi())
    assert not failed and all(o['help'] is None for o in lean['sglang']['options'])
    assert [dict(o, help=None) for o in full['sglang']['options']] == lean['sglang']['options']
    assert len(json.dumps(lean['sglang']['options'])) < 0.6 * len(json.dumps(full['sglang']['options']))


def test_compact_options_keeps_what_validation_reads(monkeypatch):
    monkeypatch.setattr(gpu_info.os, 'access', lambda path, mode: True)
    args = {'sglang_python': '/root/ml-env/bin/python3'}
    full, failed, calls = run_mocked(gpu_info.main, args, monkeypatch, nvidia_smi())
    compact, failed, calls = run_mocked(gpu_info.main, dict(args, compact_options=True), monkeypatch, nvidia_smi())
    assert not failed
    options = compact['sglang']['options']
    assert len(options) == len(full['sglang']['options'])
    assert all('help' not in o and 'default' not in o for o in options)
    assert [o['dest'] for o in options] == [o['dest'] for o in full['sglang']['options']]
    assert len(json.dumps(options)) < 0.6 * len(json.dumps([dict(o, help=None) for o in full['sglang']['options']]))


def test_options_json_carries_the_same_table_as_text(monkeypatch):
    monkeypatch.setattr(gpu_info.os, 'access', lambda path, mode: True)
    args = {'sglang_python': '/root/ml-env/bin/python3', 'compact_options': True}
    as_list, failed, calls = run_mocked(gpu_info.main, args, monkeypatch, nvidia_smi())
    as_text, failed, calls = run_mocked(gpu_info.main, dict(args, options_json=True), monkeypatch, nvidia_smi())
    assert not failed and as_text['sglang']['options'] == []
    assert json.loads(as_text['sglang']['options_json']) == as_list['sglang']['options']
    assert as_text['sglang']['option_count'] == as_list['sglang']['option_count'] == len(as_list['sglang']['options']) > 0


def test_sglang_is_asked_while_nvidia_smi_runs(monkeypatch):
    """Importing SGLang takes seconds on a real host: the introspection must not wait for nvidia-smi (or the reverse)."""
    monkeypatch.setattr(gpu_info.os, 'access', lambda path, mode: True)
    smi_started = threading.Event()
    sglang_started = threading.Event()
    seen = {}
    base = nvidia_smi()

    def run(argv):
        # each side waits (at most 2 s) for the other to have begun: done one after the other, one waits in vain
        if argv[0].endswith('nvidia-smi'):
            smi_started.set()
            seen.setdefault('sglang_began_meanwhile', sglang_started.wait(2))
        else:
            sglang_started.set()
            seen['smi_began_meanwhile'] = smi_started.wait(2)
        return base(argv)
    result, failed, calls = run_mocked(gpu_info.main, {'sglang_python': '/root/ml-env/bin/python3'}, monkeypatch, run)
    assert not failed, result
    assert seen == {'sglang_began_meanwhile': True, 'smi_began_meanwhile': True}
    assert result['sglang']['version'] == '0.5.23'
