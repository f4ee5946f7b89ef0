# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import model_check

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, 'cases', 'model_check.yml')) as _f:
    CASES = yaml.safe_load(_f)


class FakeFS(object):
    def __init__(self, root, files):
        self.root, self.files = root.rstrip('/'), files

    def isdir(self, path):
        return self.files is not None and path.rstrip('/') == self.root

    def listdir(self, path):
        return sorted(self.files)

    def _name(self, path):
        return path[len(self.root) + 1:]

    def read(self, path):
        value = self.files[self._name(path)]
        return value if isinstance(value, str) else 'x' * value

    def size(self, path):
        value = self.files.get(self._name(path))
        if value is None:
            return None
        return len(value) if isinstance(value, str) else value


@pytest.mark.parametrize('case', CASES['check'], ids=[c['name'] for c in CASES['check']])
def test_check(case):
    got = model_check.check(case['path'], FakeFS(case['path'], case['files']))
    want = dict(case['want'])
    errors = want.pop('errors')
    assert len(got['errors']) == len(errors), got['errors']
    for error, text in zip(got['errors'], errors):
        assert text in error, (error, text)
    for key, value in want.items():
        assert got[key] == value, key


def test_check_reads_a_real_folder(tmp_path):
    (tmp_path / 'config.json').write_text('{"architectures": ["Qwen2ForCausalLM"]}')
    (tmp_path / 'model.safetensors').write_bytes(b'\0' * 64)
    (tmp_path / 'tokenizer.json').write_text('{}')
    got = model_check.check(str(tmp_path))
    assert got['errors'] == [] and got['bytes'] == 64 and got['tokenizer'] == ['tokenizer.json']
    os.unlink(str(tmp_path / 'tokenizer.json'))
    assert 'a tokenizer' in model_check.check(str(tmp_path))['errors'][0]
