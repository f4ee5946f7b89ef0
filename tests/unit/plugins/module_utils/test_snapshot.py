# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollback snapshot: taken once per deploy, kept while a trial is in progress, atomic, 0600."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

from ansible_collections.llmserve.sglang.plugins.module_utils import snapshot

STATE = {'LoadState': 'loaded', 'ActiveState': 'active', 'UnitFileState': 'enabled'}


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def files(tmp_path, unit='[Unit]\n', env='A=1\n'):
    etc = tmp_path / 'etc'
    etc.mkdir(exist_ok=True)
    out = {'unit': str(etc / 'sglang.service'), 'env': str(etc / 'sglang.env')}
    for name, text in (('unit', unit), ('env', env)):
        if text is None:
            if os.path.exists(out[name]):
                os.unlink(out[name])
        else:
            with open(out[name], 'w') as handle:
                handle.write(text)
    return out


def test_first_snapshot_copies_writes_state_and_marks(tmp_path):
    state_dir = str(tmp_path / 'state' / 'sglang')
    got = snapshot.take(state_dir, files(tmp_path), STATE)
    assert got['changed'] and got['taken'] and got['saved'] == ['env', 'unit'] and got['absent'] == []
    snap = os.path.join(state_dir, 'previous')
    assert mode(snap) == 0o700
    with open(os.path.join(snap, 'state.json')) as handle:
        assert json.load(handle) == STATE
    with open(os.path.join(snap, 'unit')) as handle:
        assert handle.read() == '[Unit]\n'
    for name in ('state.json', 'unit', 'env'):
        assert mode(os.path.join(snap, name)) == 0o600
    with open(got['marker']) as handle:
        assert handle.read() == snapshot.MARKER_TEXT
    assert mode(got['marker']) == 0o600
    assert not [n for n in os.listdir(snap) if n.startswith('.')]  # no temporary file left


def test_marker_keeps_the_snapshot_of_the_interrupted_run(tmp_path):
    state_dir = str(tmp_path / 'sglang')
    snapshot.take(state_dir, files(tmp_path, unit='before\n'), STATE)
    # an interrupted run left a trial's unit on disk and the marker
    got = snapshot.take(state_dir, files(tmp_path, unit='a trial\n'), {'ActiveState': 'failed'})
    assert not got['taken'] and not got['changed']
    with open(os.path.join(state_dir, 'previous', 'unit')) as handle:
        assert handle.read() == 'before\n'
    with open(os.path.join(state_dir, 'previous', 'state.json')) as handle:
        assert json.load(handle) == STATE


def test_missing_file_removes_its_stale_copy(tmp_path):
    state_dir = str(tmp_path / 'sglang')
    snapshot.take(state_dir, files(tmp_path), STATE)
    os.unlink(os.path.join(state_dir, snapshot.MARKER))  # that run finished
    got = snapshot.take(state_dir, files(tmp_path, env=None), STATE)
    assert got['changed'] and got['saved'] == ['unit'] and got['absent'] == ['env']
    assert not os.path.exists(os.path.join(state_dir, 'previous', 'env'))


def test_same_content_is_no_change_but_the_marker(tmp_path):
    state_dir = str(tmp_path / 'sglang')
    snapshot.take(state_dir, files(tmp_path), STATE)
    os.unlink(os.path.join(state_dir, snapshot.MARKER))
    got = snapshot.take(state_dir, files(tmp_path), STATE)
    assert got['changed']  # the marker is new
    got = snapshot.take(state_dir, files(tmp_path), STATE)
    assert not got['changed']


def test_check_mode_writes_nothing(tmp_path):
    state_dir = str(tmp_path / 'sglang')
    got = snapshot.take(state_dir, files(tmp_path), STATE, check_mode=True)
    assert got['changed'] and got['taken'] and got['saved'] == ['env', 'unit']
    assert not os.path.exists(state_dir)


class Module(object):
    """An AnsibleModule's atomic_move, recorded."""

    def __init__(self):
        self.moves = []

    def atomic_move(self, src, dest, **kwargs):
        self.moves.append(os.path.basename(dest))
        os.rename(src, dest)


def test_with_a_module_each_file_is_moved_in_place_by_it(tmp_path):
    state_dir = str(tmp_path / 'sglang')
    module = Module()
    got = snapshot.take(state_dir, files(tmp_path), STATE, module=module)
    assert got['changed'] and sorted(module.moves) == sorted(['env', snapshot.MARKER, 'state.json', 'unit'])
    snap = os.path.join(state_dir, 'previous')
    for path in [os.path.join(snap, n) for n in ('state.json', 'unit', 'env')] + [got['marker']]:
        assert mode(path) == 0o600
    with open(os.path.join(snap, 'env')) as handle:
        assert handle.read() == 'A=1\n'
    with open(os.path.join(snap, 'state.json')) as handle:
        assert handle.read() == snapshot.state_json(STATE)
