# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/module_utils/_systemd.py: the ``systemctl show`` parser (cases/_systemd.yml) and Systemctl on a fake module."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import _systemd

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, 'cases', '_systemd.yml')) as _h:
    CASES = yaml.safe_load(_h)


class Failed(Exception):
    pass


class FakeModule(object):
    """What Systemctl uses of an AnsibleModule: answers is a list of (rc, out, err), one per call, in order."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []
        self.bin_asked = []

    def get_bin_path(self, name, required=False):
        self.bin_asked.append((name, required))
        return '/bin/%s' % name

    def run_command(self, argv):
        self.calls.append(argv)
        return self.answers.pop(0)

    def fail_json(self, **kwargs):
        raise Failed(kwargs)


@pytest.mark.parametrize('case', CASES['parse_show'], ids=lambda c: c['name'])
def test_parse_show(case):
    assert _systemd.parse_show(case['text']) == case['want']


@pytest.mark.parametrize('case', CASES['show_argv'], ids=lambda c: c['unit'])
def test_show_argv(case):
    assert _systemd.show_argv(case['unit'], case['properties']) == case['want']


@pytest.mark.parametrize('case', CASES['is_active'], ids=lambda c: repr(c['out']))
def test_is_active(case):
    module = FakeModule((0 if case['want'] else 3, case['out'], ''))
    assert _systemd.Systemctl(module).is_active('u.service') is case['want']
    assert module.calls == [['/bin/systemctl', 'is-active', 'u.service']]


@pytest.mark.parametrize('case', CASES['is_enabled'], ids=lambda c: repr(c['out']))
def test_is_enabled(case):
    module = FakeModule((0 if case['want'] else 1, case['out'], ''))
    assert _systemd.Systemctl(module).is_enabled('u.service') is case['want']
    assert module.calls == [['/bin/systemctl', 'is-enabled', 'u.service']]


def test_systemctl_is_required():
    module = FakeModule()
    _systemd.Systemctl(module)
    assert module.bin_asked == [('systemctl', True)] and module.calls == []


def test_query_strips_and_never_fails():
    module = FakeModule((4, '  no such unit \n', 'err'))
    assert _systemd.Systemctl(module).query('status', 'x.service') == (4, 'no such unit')
    assert module.calls == [['/bin/systemctl', 'status', 'x.service']]


def test_do_passes_and_fails_with_systemctls_words():
    module = FakeModule((0, '', ''), (5, 'out words\n', ' Unit x.service not found.\n'), (1, ' only stdout \n', ''))
    systemctl = _systemd.Systemctl(module)
    assert systemctl.do('daemon-reload') is None
    with pytest.raises(Failed) as failed:
        systemctl.do('start', 'x.service')
    assert failed.value.args[0] == {'msg': 'systemctl start x.service failed (rc=5): Unit x.service not found.', 'rc': 5,
                                    'stdout': 'out words\n', 'stderr': ' Unit x.service not found.\n'}
    with pytest.raises(Failed) as failed:
        systemctl.do('stop', 'x.service')
    assert failed.value.args[0]['msg'] == 'systemctl stop x.service failed (rc=1): only stdout'
    assert module.calls == [['/bin/systemctl', 'daemon-reload'], ['/bin/systemctl', 'start', 'x.service'],
                            ['/bin/systemctl', 'stop', 'x.service']]


def test_show():
    module = FakeModule((0, 'LoadState=loaded\nActiveState=failed\n', ''), (1, 'LoadState=x\n', 'boom'))
    systemctl = _systemd.Systemctl(module)
    assert systemctl.show('u.service', ['LoadState', 'ActiveState']) == {'LoadState': 'loaded', 'ActiveState': 'failed'}
    assert systemctl.show('u.service', ['LoadState']) == {}
    assert module.calls[0] == ['/bin/systemctl', 'show', '--property=LoadState,ActiveState', 'u.service']


@pytest.mark.parametrize('answer, want', [
    ((0, 'systemd 255 (255.4-1ubuntu8)\n+PAM +AUDIT\n', ''), 255),
    ((0, 'systemd 249 (249.11-0ubuntu3)\n', ''), 249),
    ((1, '', 'no systemd'), None),
])
def test_version(answer, want):
    module = FakeModule(answer)
    assert _systemd.Systemctl(module).version() == want
    assert module.calls == [['/bin/systemctl', '--version']]


@pytest.mark.parametrize('answer, want', [
    ((0, '6c0a5f4d6b0e4a0e9f1f2f0c2d7e8a11\n', ''), '6c0a5f4d6b0e4a0e9f1f2f0c2d7e8a11'),
    ((0, '\n', ''), ''),
    ((1, 'junk', 'failed'), ''),
])
def test_invocation_id(answer, want):
    module = FakeModule(answer)
    assert _systemd.Systemctl(module).invocation_id('u.service') == want
    assert module.calls == [['/bin/systemctl', 'show', '--property=InvocationID', '--value', 'u.service']]
