# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import nvidia_smi as nsmi

HERE = os.path.dirname(__file__)
DATA = os.path.join(HERE, '..', '..', '..', 'data', 'nvidia-smi-h200')
CASES = yaml.safe_load(open(os.path.join(HERE, 'cases', 'nvidia_smi.yml')))


def ids(key, field='name'):
    return [str(c.get(field, i)) for i, c in enumerate(CASES[key])]


@pytest.mark.parametrize('case', CASES['arch_family'], ids=ids('arch_family', 'cap'))
def test_arch_family(case):
    assert nsmi.arch_family(case['cap']) == case['want']


@pytest.mark.parametrize('case', CASES['convert'], ids=ids('convert', 'value'))
def test_convert(case):
    assert nsmi.convert(case['value'], case['kind']) == case['want']


@pytest.mark.parametrize('case', CASES['gpus'], ids=ids('gpus'))
def test_parse_gpus(case):
    if 'error' in case:
        with pytest.raises(nsmi.NvidiaSmiParseError, match=case['error']):
            nsmi.parse_gpus(case['text'])
        return
    assert nsmi.parse_gpus(case['text']) == case['want']


@pytest.mark.parametrize('case', CASES['apps'], ids=ids('apps'))
def test_parse_apps(case):
    assert nsmi.parse_apps(case['text'], case['gpus']) == case['want']


@pytest.mark.parametrize('case', CASES['cuda_version'], ids=ids('cuda_version', 'want'))
def test_cuda_version(case):
    text = case.get('text')
    if 'file' in case:
        with open(os.path.join(DATA, case['file'])) as handle:
            text = handle.read()
    assert nsmi.parse_cuda_version(text) == case['want']


@pytest.mark.parametrize('case', CASES['argv'], ids=ids('argv', 'fn'))
def test_argv(case):
    assert getattr(nsmi, case['fn'])() == case['want']


def test_real_capture_table_driver():
    with open(os.path.join(DATA, 'nvidia-smi-busy.txt')) as handle:
        assert nsmi.parse_driver_version(handle.read()) == '580.159.04'


def test_summarize_mixed():
    gpus = nsmi.parse_gpus('0, A, u0, b0, 9.0, 1, 0, 10, 1, 1, 0\n1, B, u1, b1, 12.0, 1, 0, 10, 1, 1, 0\n')
    summary = nsmi.summarize(gpus)
    assert summary == {'gpu_count': 2, 'gpu_name': 'A', 'compute_cap': '9.0', 'arch': 'sm90', 'mixed': True}
    assert nsmi.memory_by_index(gpus) == [{'index': 0, 'used_mib': 0, 'total_mib': 10},
                                          {'index': 1, 'used_mib': 0, 'total_mib': 10}]
