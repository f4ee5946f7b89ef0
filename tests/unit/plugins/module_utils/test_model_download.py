# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/model_download.py, from the YAML cases in cases/model_download.yml."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import model_download as md

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, 'cases', 'model_download.yml')) as _handle:
    CASES = yaml.safe_load(_handle)


@pytest.mark.parametrize('case', CASES['errors'], ids=[c['name'] for c in CASES['errors']])
def test_errors(case):
    got = md.errors(**case['args'])
    assert len(got) == len(case['errors']), got
    for want, message in zip(case['errors'], got):
        assert want in message


@pytest.mark.parametrize('case', CASES['argv'], ids=[c['name'] for c in CASES['argv']])
def test_argv(case):
    assert md.download_argv(**case['args']) == case['argv']


@pytest.mark.parametrize('case', CASES['env'], ids=[c['name'] for c in CASES['env']])
def test_env(case):
    env = md.download_env(case['server_env'], case['endpoint'])
    assert env == case['env']
    assert 'hf_secret' not in ' '.join(md.download_argv('/v/bin/python3', 'a/b', 'main', '/m'))
