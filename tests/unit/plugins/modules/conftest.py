# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import json

import pytest

from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core < 2.19
    from unittest import mock

    @contextlib.contextmanager
    def patch_module_args(args=None):
        with mock.patch.object(basic, '_ANSIBLE_ARGS', to_bytes(json.dumps({'ANSIBLE_MODULE_ARGS': args or {}}))):
            yield


@pytest.fixture
def run_module(capsys):
    """Run a module's main() with args; return its JSON result (exit_json or fail_json)."""
    def run(mod, args):
        with patch_module_args(args):
            with pytest.raises(SystemExit):
                mod.main()
        out = capsys.readouterr().out
        return json.loads(out)
    return run
