# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollback snapshot: what served before a deploy's trials, kept on the host.

Pure Python (stdlib only); the ``trial_snapshot`` module is a thin wrapper.

Layout, under the service's state directory (``<sglang_state_dir>/<service>``)::

    previous/              0700
    previous/state.json    0600  the unit's state before the run (systemctl show: ActiveState, UnitFileState, ...)
    previous/<name>        0600  a copy of each file that existed (``unit``, ``env``); absent when it did not
    trial-in-progress      0600  the marker: trials are running, the unit on disk may be a trial's

The snapshot is taken once per deploy. While the marker is there (for example after an interrupted run) the unit on
disk is a trial's, so the snapshot from before that run is kept and only the marker is (re)written.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.llmserve.sglang.plugins.module_utils import _files

MARKER = 'trial-in-progress'
MARKER_TEXT = 'started by ansible-playbook\n'
SNAPSHOT_DIR = 'previous'
STATE_FILE = 'state.json'
DIR_MODE = 0o700
FILE_MODE = 0o600


def state_json(state):
    """The text of state.json (as Ansible's to_nice_json writes it)."""
    return json.dumps(state, indent=4, sort_keys=True, separators=(',', ': '))


def _ensure_dir(path, mode, check_mode):
    if os.path.isdir(path):
        if _files.file_mode(path) == mode:
            return False
        if not check_mode:
            os.chmod(path, mode)
        return True
    if not check_mode:
        os.makedirs(path)
        os.chmod(path, mode)
    return True


def take(state_dir, files, state, check_mode=False, module=None):
    """Take the snapshot (unless a trial is in progress) and set the marker.

    ``files``: {name: path} of the files to keep (``unit``, ``env``); ``state``: what was there before (a dict, written
    as ``state.json``). Returns {changed, taken, snapshot_dir, saved: [names], absent: [names], marker}.
    In check mode nothing is written and ``changed`` says whether something would be. Each file is written with
    ``_files.write_if_changed`` (through ``module.atomic_move`` when a module is given).
    """
    def write(path, data):
        return _files.write_if_changed(path, data, FILE_MODE, check_mode=check_mode, module=module)

    marker = os.path.join(state_dir, MARKER)
    snap = os.path.join(state_dir, SNAPSHOT_DIR)
    result = {'changed': False, 'taken': False, 'snapshot_dir': snap, 'saved': [], 'absent': [], 'marker': marker}
    changed = False
    if not os.path.isdir(state_dir):
        changed = True
        if not check_mode:
            os.makedirs(state_dir, 0o700)
    if not os.path.exists(marker):
        result['taken'] = True
        changed = _ensure_dir(snap, DIR_MODE, check_mode) or changed
        changed = write(os.path.join(snap, STATE_FILE), state_json(state)) or changed
        for name in sorted(files):
            copy = os.path.join(snap, name)
            if os.path.isfile(files[name]):
                with open(files[name], 'rb') as handle:
                    data = handle.read()
                result['saved'].append(name)
                changed = write(copy, data) or changed
            else:
                result['absent'].append(name)
                if os.path.lexists(copy):
                    changed = True
                    if not check_mode:
                        os.unlink(copy)
    changed = write(marker, MARKER_TEXT) or changed
    result['changed'] = changed
    return result
