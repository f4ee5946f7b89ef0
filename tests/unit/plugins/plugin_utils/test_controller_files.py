# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""report_files' writer: plain names only, atomic, a newline at the end, unchanged files left alone."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

import pytest

from ansible_collections.llmserve.sglang.plugins.plugin_utils import controller_files


def test_writes_creates_the_directory_and_ends_with_a_newline(tmp_path):
    dest = str(tmp_path / 'reports' / 'run')
    out = controller_files.write_files(dest, {'gpu01.json': '{}', 'report.md': '# r\n'})
    assert out == {'changed': ['gpu01.json', 'report.md'], 'unchanged': [], 'created_dir': True}
    with open(os.path.join(dest, 'gpu01.json')) as handle:
        assert handle.read() == '{}\n'
    with open(os.path.join(dest, 'report.md')) as handle:
        assert handle.read() == '# r\n'
    assert stat.S_IMODE(os.stat(os.path.join(dest, 'report.md')).st_mode) == 0o644
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o755
    assert sorted(os.listdir(dest)) == ['gpu01.json', 'report.md']


def test_unchanged_files_are_left_alone(tmp_path):
    dest = str(tmp_path)
    controller_files.write_files(dest, {'a.json': 'x'})
    before = os.stat(os.path.join(dest, 'a.json')).st_ino
    out = controller_files.write_files(dest, {'a.json': 'x\n', 'b.md': u'\u00e9'})
    assert out['changed'] == ['b.md'] and out['unchanged'] == ['a.json'] and not out['created_dir']
    assert os.stat(os.path.join(dest, 'a.json')).st_ino == before
    with open(os.path.join(dest, 'b.md'), 'rb') as handle:
        assert handle.read() == u'\u00e9\n'.encode('utf-8')


def test_check_mode_writes_nothing(tmp_path):
    dest = str(tmp_path / 'new')
    out = controller_files.write_files(dest, {'a.json': 'x'}, check_mode=True)
    assert out['changed'] == ['a.json'] and out['created_dir'] and not os.path.exists(dest)


@pytest.mark.parametrize('name', ['', '.', '..', 'a/b', '../x'])
def test_only_plain_names(tmp_path, name):
    with pytest.raises(ValueError, match='not a plain file name'):
        controller_files.write_files(str(tmp_path), {name: 'x'})
