# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The first task of the roles a run starts with loads the collection's filters in ansible-playbook's main process.

Ansible finds a collection filter by loading the filter files in name order until one has it, and each fork that
runs a task starts from the main process's loaded plugins: a filter the main process never loaded is loaded and
compiled again by every fork that uses one (about half of the controller's CPU in a deploy: ``make bench``,
P3c). The task's condition must name a filter of the last file, so that every file is loaded."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import glob
import os
import re

import pytest
import yaml

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..')
FIRST_ROLES = ('preflight', 'gpu_cleanup')  # deploy.yml's first role on every run; cleanup.yml's only role


def filters_of(path):
    """The names a filter file's FilterModule.filters() returns (read from its source, not imported)."""
    tree = ast.parse(open(path).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == 'filters':
            for sub in ast.walk(node):
                if isinstance(sub, ast.Dict):
                    return [k.value for k in sub.keys if isinstance(k, ast.Constant)]
    return []


def last_filter_file():
    files = sorted(p for p in glob.glob(os.path.join(ROOT, 'plugins', 'filter', '*.py'))
                   if os.path.basename(p) != '__init__.py')
    return files[-1]


@pytest.mark.parametrize('role', FIRST_ROLES)
def test_first_task_loads_every_filter_file(role):
    with open(os.path.join(ROOT, 'roles', role, 'tasks', 'main.yml')) as f:
        first = yaml.safe_load(f)[0]
    assert first.get('ansible.builtin.meta') == 'end_host', first  # its condition is evaluated in the main process
    when = first['when']
    assert when.startswith('false and '), when  # never true: it only names the filters
    named = set(re.findall(r'llmserve\.sglang\.(\w+)', when))
    last = last_filter_file()
    assert named & set(filters_of(last)), '%s names no filter of %s, the last filter file' % (when, last)
    assert re.search(r'\bis \w+', when), 'no test named: the builtin tests would load in every fork'


def test_filters_of_reads_a_filter_file():
    names = filters_of(os.path.join(ROOT, 'plugins', 'filter', 'trial.py'))
    assert 'trial_init' in names and 'trial_select' in names
