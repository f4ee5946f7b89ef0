# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers for module tests: module args in, exit_json/fail_json out as exceptions."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import json

from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

try:  # ansible-core >= 2.19
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # pragma: no cover - older ansible-core
    patch_module_args = None


class AnsibleExitJson(Exception):
    def __init__(self, kwargs):
        super(AnsibleExitJson, self).__init__(kwargs)
        self.result = kwargs


class AnsibleFailJson(Exception):
    def __init__(self, kwargs):
        super(AnsibleFailJson, self).__init__(kwargs)
        self.result = kwargs


def exit_json(self, **kwargs):
    kwargs.setdefault('changed', False)
    raise AnsibleExitJson(kwargs)


def fail_json(self, **kwargs):
    kwargs['failed'] = True
    raise AnsibleFailJson(kwargs)


@contextlib.contextmanager
def set_module_args(args):
    args = dict(args)
    args.setdefault('_ansible_remote_tmp', '/tmp')
    args.setdefault('_ansible_keep_remote_files', False)
    if patch_module_args is not None:
        with patch_module_args(args):
            yield
        return
    old = basic._ANSIBLE_ARGS  # pragma: no cover
    basic._ANSIBLE_ARGS = to_bytes(json.dumps({'ANSIBLE_MODULE_ARGS': args}))
    try:
        yield
    finally:
        basic._ANSIBLE_ARGS = old


def run_mocked(main, args, monkeypatch, run_command, bin_paths=None):
    """Run main() with args; run_command(argv) -> (rc, out, err). -> (result, failed, calls)."""
    calls = []
    bin_paths = bin_paths if bin_paths is not None else {}

    def fake_run(self, argv, *a, **kw):
        calls.append(list(argv))
        return run_command(list(argv))

    def fake_bin(self, name, required=False, opt_dirs=None):
        path = bin_paths.get(name, '/usr/bin/%s' % name)
        if path is None and required:
            self.fail_json(msg='Failed to find required executable "%s"' % name)
        return path

    monkeypatch.setattr(basic.AnsibleModule, 'exit_json', exit_json)
    monkeypatch.setattr(basic.AnsibleModule, 'fail_json', fail_json)
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', fake_run)
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', fake_bin)
    with set_module_args(args):
        try:
            main()
        except AnsibleExitJson as exc:
            return exc.result, False, calls
        except AnsibleFailJson as exc:
            return exc.result, True, calls
    raise AssertionError('module returned without exit_json/fail_json')
