# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/module_utils/_files.py: atomic writes (exact mode and content, no temporary left), backups and pruning."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

import pytest
import yaml

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmserve.sglang.plugins.module_utils import _files
from ansible_collections.llmserve.sglang.tests.unit.plugins.modules.utils import set_module_args

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, 'cases', '_files.yml')) as _h:
    CASES = yaml.safe_load(_h)


@pytest.fixture(autouse=True)
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


@pytest.fixture
def module():
    with set_module_args({}):
        yield AnsibleModule(argument_spec={})


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_read_missing_and_present(tmp_path):
    path = str(tmp_path / 'f')
    assert _files.read_bytes(path) is None and _files.read_text(path) is None and _files.file_mode(path) is None
    with open(path, 'wb') as handle:
        handle.write(u'ü\n'.encode('utf-8'))
    assert _files.read_bytes(path) == b'\xc3\xbc\n' and _files.read_text(path) == u'ü\n'
    os.chmod(path, 0o640)
    assert _files.file_mode(path) == 0o640


def test_read_other_errors_are_raised(tmp_path):
    with pytest.raises((IOError, OSError)):
        _files.read_bytes(str(tmp_path))  # a directory


@pytest.mark.parametrize('with_module', [False, True], ids=['os.rename', 'atomic_move'])
@pytest.mark.parametrize('file_mode', [0o600, 0o644, 0o755])
def test_atomic_write_mode_and_content(tmp_path, module, with_module, file_mode):
    path = str(tmp_path / 'unit.service')
    _files.atomic_write(path, u'[Unit]\nDescription=ü\n', file_mode, module=module if with_module else None)
    assert open(path, 'rb').read() == u'[Unit]\nDescription=ü\n'.encode('utf-8') and mode(path) == file_mode
    # replacing a file of another mode: the new mode, the new bytes
    os.chmod(path, 0o666 & ~file_mode | 0o400)
    _files.atomic_write(path, b'\x00bytes\xff', file_mode, module=module if with_module else None)
    assert open(path, 'rb').read() == b'\x00bytes\xff' and mode(path) == file_mode
    assert os.listdir(str(tmp_path)) == ['unit.service']  # no temporary left


@pytest.mark.parametrize('existing_mode', [None, 0o644, 0o666], ids=['new', 'was-0644', 'was-0666'])
def test_atomic_move_never_shows_the_data_with_another_mode(tmp_path, module, monkeypatch, existing_mode):
    """Right after atomic_move, before any chmod of the path: the new file already has its mode (0600 here)."""
    path = str(tmp_path / 'sglang.env')
    if existing_mode is not None:
        with open(path, 'w') as handle:
            handle.write('OLD=1\n')
        os.chmod(path, existing_mode)
    seen = []
    real_move = module.atomic_move

    def spy(src, dest, **kwargs):
        real_move(src, dest, **kwargs)
        seen.append((mode(dest), open(dest).read(), os.stat(dest).st_uid))

    monkeypatch.setattr(module, 'atomic_move', spy)
    _files.atomic_write(path, 'SGLANG_API_KEY="k"\n', 0o600, module=module)
    assert seen == [(0o600, 'SGLANG_API_KEY="k"\n', os.geteuid())]
    assert os.umask(0o022) == 0o022  # the caller's umask is back


def test_no_temporary_left_when_the_rename_fails(tmp_path):
    target = tmp_path / 'target'
    target.mkdir()
    (target / 'keep').write_text(u'x')
    with pytest.raises(OSError):
        _files.atomic_write(str(target), 'data', 0o600)
    assert sorted(os.listdir(str(tmp_path))) == ['target'] and os.listdir(str(target)) == ['keep']


def test_no_temporary_left_when_atomic_move_fails(tmp_path, module, monkeypatch):
    path = str(tmp_path / 'sglang.env')
    with open(path, 'w') as handle:
        handle.write('OLD=1\n')

    def broken_move(src, dest, **kwargs):
        raise Exception('Could not replace %r' % dest)

    monkeypatch.setattr(module, 'atomic_move', broken_move)
    with pytest.raises(Exception, match='Could not replace'):
        _files.atomic_write(path, 'NEW=1\n', 0o600, module=module)
    assert os.listdir(str(tmp_path)) == ['sglang.env'] and open(path).read() == 'OLD=1\n'
    assert os.umask(0o022) == 0o022


def test_no_temporary_left_when_the_directory_is_missing(tmp_path):
    with pytest.raises(OSError):
        _files.atomic_write(str(tmp_path / 'no' / 'f'), 'x', 0o600)
    assert os.listdir(str(tmp_path)) == []


def test_write_if_changed(tmp_path, module):
    path = str(tmp_path / 'f')
    assert _files.write_if_changed(path, 'a', 0o600, check_mode=True) is True and not os.path.exists(path)
    assert _files.write_if_changed(path, 'a', 0o600, module=module) is True and mode(path) == 0o600
    assert _files.write_if_changed(path, b'a', 0o600) is False
    os.chmod(path, 0o644)
    assert _files.write_if_changed(path, 'a', 0o600, check_mode=True) is True and mode(path) == 0o644
    assert _files.write_if_changed(path, 'a', 0o600) is True and mode(path) == 0o600
    assert _files.write_if_changed(path, 'b', 0o600) is True and open(path).read() == 'b'


@pytest.mark.parametrize('with_module', [False, True], ids=['os.rename', 'atomic_move'])
def test_backup_copies_0600_into_a_0700_dir(tmp_path, module, with_module):
    source = str(tmp_path / 'sglang.service')
    with open(source, 'wb') as handle:
        handle.write(b'[Unit]\n\xff not utf-8\n')
    os.chmod(source, 0o644)
    backup_dir = str(tmp_path / 'etc' / 'backup')
    made = _files.backup(source, backup_dir, 5, '20260101T000000.000000', module=module if with_module else None)
    assert made == os.path.join(backup_dir, 'sglang.service.20260101T000000.000000')
    assert open(made, 'rb').read() == b'[Unit]\n\xff not utf-8\n' and mode(made) == 0o600
    assert mode(backup_dir) == 0o700 and mode(source) == 0o644
    assert os.listdir(backup_dir) == ['sglang.service.20260101T000000.000000']


def test_backup_of_a_missing_file_is_none(tmp_path):
    backup_dir = str(tmp_path / 'backup')
    assert _files.backup(str(tmp_path / 'nothing'), backup_dir, 5, 'x') is None
    assert not os.path.exists(backup_dir)


@pytest.mark.parametrize('case', CASES['backup_pruning'], ids=lambda c: c['name'])
def test_backup_pruning(tmp_path, case):
    backup_dir = tmp_path / 'backup'
    backup_dir.mkdir()
    for name in case['existing']:
        (backup_dir / name).write_text(u'old')
    source = tmp_path / case['base']
    source.write_text(u'new')
    made = _files.backup(str(source), str(backup_dir), case['keep'], case['stamp'])
    assert made == str(backup_dir / ('%s.%s' % (case['base'], case['stamp'])))
    assert sorted(os.listdir(str(backup_dir))) == case['left']
    assert open(made).read() == 'new'
