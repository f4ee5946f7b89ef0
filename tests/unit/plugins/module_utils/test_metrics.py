# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import metrics

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, 'cases', 'metrics.yml')) as _f:
    CASES = yaml.safe_load(_f)


@pytest.mark.parametrize('case', CASES['server_args'], ids=[c['name'] for c in CASES['server_args']])
def test_server_args(case):
    args = metrics.server_args(case['enabled'], case['host'], case.get('labels'), case.get('extra_args'))
    assert args == case['want']
    assert metrics.enabled_in(list(case.get('extra_args') or []) + args) == case['enabled']


@pytest.mark.parametrize('case', CASES['label_errors'], ids=[c['name'] for c in CASES['label_errors']])
def test_label_errors(case):
    errors = metrics.label_errors(case['labels'])
    assert len(errors) == len(case['errors']), errors
    for part, error in zip(case['errors'], errors):
        assert part in error


@pytest.mark.parametrize('case', CASES['file_sd'], ids=[c['name'] for c in CASES['file_sd']])
def test_file_sd(case):
    assert metrics.file_sd(case['report'], case['service'], case['enabled']) == case['want']


@pytest.mark.parametrize('case', CASES['targets_files'], ids=[c['name'] for c in CASES['targets_files']])
def test_targets_files(case):
    files = metrics.targets_files(case['hosts'])
    assert dict((name, json.loads(text)) for name, text in files.items()) == case['want']
    assert all(text.endswith('\n') for text in files.values())


@pytest.mark.parametrize('case', CASES['in_flight'], ids=[c['name'] for c in CASES['in_flight']])
def test_in_flight(case):
    assert metrics.in_flight(case['text']) == case['want']
