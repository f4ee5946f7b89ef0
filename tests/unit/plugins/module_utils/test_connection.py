# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import connection

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, 'cases', 'connection.yml')) as _f:
    CASES = yaml.safe_load(_f)


@pytest.mark.parametrize('case', CASES['errors'], ids=[c['name'] for c in CASES['errors']])
def test_errors(case):
    got = connection.errors(*case['args'])
    assert len(got) == len(case['want']), got
    for message, text in zip(got, case['want']):
        assert text in message, (message, text)


@pytest.mark.parametrize('case', CASES['address'], ids=[c['name'] for c in CASES['address']])
def test_address(case):
    assert connection.address(*case['args']) == case['want']


def test_is_pct():
    assert connection.is_pct('community.proxmox.proxmox_pct_remote')
    assert not connection.is_pct('ssh') and not connection.is_pct(None) and not connection.is_pct('community.general.lxc')
