# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The diagnose filter: explain a failed candidate from the failure signatures (logic in module_utils/diagnosis.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleFilterError
from ansible_collections.llmserve.sglang.plugins.module_utils import diagnosis

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    yaml = None

# the table shipped with the collection (the backend_trial role passes it explicitly)
DEFAULT_SIGNATURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'roles', 'backend_trial',
                                  'files', 'failure_signatures.yml')


def load_default():
    if yaml is None:
        raise AnsibleFilterError('diagnose: PyYAML is needed to read %s' % DEFAULT_SIGNATURES)
    with open(DEFAULT_SIGNATURES, encoding='utf-8') as f:
        return (yaml.safe_load(f) or {}).get('signatures') or []


_SHIPPED = []  # the shipped table, checked and compiled (diagnosis.validate), once per process


def shipped_table():
    """The shipped table as diagnosis.validate returns it, read once per process: ansible-playbook's main process
    reads it when its first task loads the filters (roles/preflight/tasks/main.yml), and every fork inherits it."""
    if not _SHIPPED:
        try:
            _SHIPPED.append(diagnosis.validate(load_default()))
        except diagnosis.SignatureError as e:
            raise AnsibleFilterError('diagnose: bad failure signature in %s: %s' % (DEFAULT_SIGNATURES, e))
    return _SHIPPED[0]


def with_shipped(extra):
    """The user's signatures (checked here, each time) ahead of the shipped table."""
    try:
        return diagnosis.validate(list(extra or [])) + shipped_table()
    except diagnosis.SignatureError as e:
        raise AnsibleFilterError('diagnose: bad failure signature: %s' % e)


try:
    shipped_table()
except (AnsibleFilterError, IOError, OSError):  # said again, with the reason, by the first filter that needs it
    pass


def diagnose(entry, signatures=None, results=None, arch=None, candidate=None, phase=None, quantization=None,
             flags=None, sglang_version=None):
    if signatures is None:
        signatures = shipped_table()
    if isinstance(signatures, dict):
        signatures = signatures.get('signatures') or []
    if results is not None and not isinstance(results, list):
        results = [results]
    try:
        table = diagnosis.flag_table(flags, version=sglang_version)
    except ValueError as e:
        raise AnsibleFilterError('diagnose: %s' % e)
    try:
        return diagnosis.diagnose(signatures, entry if isinstance(entry, dict) else {}, results or [],
                                  arch=arch, candidate=candidate if isinstance(candidate, dict) else None,
                                  phase=phase, quantization=quantization, flags=table)
    except diagnosis.SignatureError as e:
        raise AnsibleFilterError('diagnose: bad failure signature: %s' % e)


class FilterModule(object):
    def filters(self):
        return {'diagnose': diagnose}
