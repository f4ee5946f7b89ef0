# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the bench scripts that drive playbooks on the lab share (p7_screen.py, p9_rolling.py): a command run from the
checkout with its output and wall time, and the environment ansible-playbook runs in (the checkout's venv and the
collection as .tmp/collections)."""
from __future__ import absolute_import, division, print_function

import os
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_BIN = os.path.join(ROOT, '.venv', 'bin')


def run(argv, env=None, timeout=900):
    """-> (exit status, stdout and stderr together, wall seconds); run in the checkout."""
    t0 = time.time()
    proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=timeout, check=False)
    return proc.returncode, proc.stdout, time.time() - t0


def ansible_env():
    env = dict(os.environ)
    env['PATH'] = VENV_BIN + os.pathsep + env.get('PATH', '')
    env['ANSIBLE_COLLECTIONS_PATH'] = os.path.join(ROOT, '.tmp', 'collections')
    env['MOLECULE_PROJECT_DIRECTORY'] = ROOT     # read by extensions/molecule/resources/reset.yml
    env['ANSIBLE_FORCE_COLOR'] = '0'
    return env


def measured(label, measure, args):
    """``measure(args)`` under the lab lock (unless an ancestor holds it: LLMSERVE_LAB_LOCK_HELD), or None with a
    line saying why when not root (the lab needs root)."""
    from labsession import lab_lock, lab_lock_inherited  # pylint: disable=import-outside-toplevel
    if os.geteuid() != 0:
        print('%s skipped: the lab needs root' % label)
        return None
    if lab_lock_inherited():
        return measure(args)
    with lab_lock():
        return measure(args)
