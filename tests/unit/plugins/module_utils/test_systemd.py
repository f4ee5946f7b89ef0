# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_systemd.parse_show: the one ``systemctl show`` parser, as modules, module_utils and the systemctl_show filter use it."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.llmserve.sglang.plugins.filter import trial as trial_filters
from ansible_collections.llmserve.sglang.plugins.module_utils import _systemd
from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_holders
from ansible_collections.llmserve.sglang.plugins.module_utils import status

SHOW = ('LoadState=loaded\nActiveState=active\nFragmentPath=/etc/systemd/system/sglang.service\n'
        'ExecMainStartTimestamp=Tue 2026-01-06 10:00:00 UTC\nEnvironment=A=1 B=2\n')


@pytest.mark.parametrize('text, want', [
    (SHOW, {'LoadState': 'loaded', 'ActiveState': 'active', 'FragmentPath': '/etc/systemd/system/sglang.service',
            'ExecMainStartTimestamp': 'Tue 2026-01-06 10:00:00 UTC', 'Environment': 'A=1 B=2'}),
    ('MainPID=0\r\nInvocationID=\n', {'MainPID': '0', 'InvocationID': ''}),
    (' ActiveState = failed \nnot a property\n\n', {'ActiveState': 'failed'}),
    ('', {}),
    (None, {}),
], ids=['properties', 'empty-value-crlf', 'stripped-and-skipped', 'empty', 'none'])
def test_parse_show(text, want):
    assert _systemd.parse_show(text) == want


def test_systemctl_show_filter_is_the_parser():
    filters = trial_filters.FilterModule().filters()
    assert filters['systemctl_show'](SHOW) == _systemd.parse_show(SHOW)
    assert filters['systemctl_show']('ActiveState=inactive\n') == {'ActiveState': 'inactive'}


def test_show_argv():
    assert _systemd.show_argv('sglang.service', ('LoadState', 'ActiveState')) == [
        'systemctl', 'show', '--property=LoadState,ActiveState', 'sglang.service']
    assert status.show_argv('sglang') == ['systemctl', 'show', '--property=' + ','.join(status.SHOW_PROPERTIES),
                                          'sglang.service']


def test_stop_unit_reads_the_state_with_the_parser():
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, 'LoadState=loaded\nActiveState=inactive\n', ''

    got = gpu_holders.stop_unit(run, 'sglang.service', 5, now=lambda: 0.0)
    assert calls == [['systemctl', 'show', '--property=LoadState,ActiveState', 'sglang.service']]
    assert got['before'] == 'inactive' and got['result'] == 'not_active'
