# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shared argument specs and their doc fragments name the same options with the same type, default and choices."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.doc_fragments import endpoint as endpoint_doc
from ansible_collections.llmserve.sglang.plugins.doc_fragments import gpu_free as gpu_free_doc
from ansible_collections.llmserve.sglang.plugins.module_utils import _specs
from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_free

KEYS = ('type', 'default', 'choices', 'elements')


def _options(fragment_text, nested=None):
    options = yaml.safe_load(fragment_text)['options']
    return options[nested]['suboptions'] if nested else options


def _shape(options):
    return dict((name, dict((k, o[k]) for k in KEYS if k in o)) for name, o in options.items())


PAIRS = [
    ('endpoint', endpoint_doc.ModuleDocFragment.DOCUMENTATION, None, _specs.endpoint_argument_spec()),
    ('endpoint.tls', endpoint_doc.ModuleDocFragment.TLS, None,
     dict((k, v) for k, v in _specs.endpoint_argument_spec(tls=True).items()
          if k not in _specs.endpoint_argument_spec())),
    ('gpu_free', gpu_free_doc.ModuleDocFragment.DOCUMENTATION, None, _specs.gpu_free_argument_spec()),
    ('gpu_free.free_gpus', gpu_free_doc.ModuleDocFragment.FREE_GPUS, 'free_gpus', _specs.gpu_free_argument_spec()),
]


@pytest.mark.parametrize('name, text, nested, spec', PAIRS, ids=[p[0] for p in PAIRS])
def test_fragment_documents_the_spec(name, text, nested, spec):
    assert _shape(_options(text, nested)) == _shape(spec)


@pytest.mark.parametrize('name, text, nested, spec', PAIRS, ids=[p[0] for p in PAIRS])
def test_every_option_has_a_description(name, text, nested, spec):
    for option, doc in _options(text, nested).items():
        assert doc.get('description'), option


def test_free_gpus_variant_says_what_the_top_level_one_says():
    top = _options(gpu_free_doc.ModuleDocFragment.DOCUMENTATION)
    nested = yaml.safe_load(gpu_free_doc.ModuleDocFragment.FREE_GPUS)['options']
    assert list(nested) == ['free_gpus'] and list(nested['free_gpus']) == ['suboptions']
    assert nested['free_gpus']['suboptions'] == top


def test_tls_adds_scheme_and_validate_certs():
    assert sorted(_specs.endpoint_argument_spec()) == ['api_key', 'host', 'port']
    assert sorted(_specs.endpoint_argument_spec(tls=True)) == ['api_key', 'host', 'port', 'scheme', 'validate_certs']
    assert _specs.endpoint_argument_spec()['api_key']['no_log'] is True


def test_each_call_returns_a_fresh_spec():
    first = _specs.gpu_free_argument_spec()
    first['protected_pids']['default'].append(1)
    first['extra'] = dict(type='str')
    again = _specs.gpu_free_argument_spec()
    assert again['protected_pids']['default'] == [] and 'extra' not in again
    assert _specs.endpoint_argument_spec() is not _specs.endpoint_argument_spec()


def test_gpu_free_defaults_follow_the_spec():
    spec = _specs.gpu_free_argument_spec()
    assert gpu_free.DEFAULTS == dict([(k, v.get('default')) for k, v in spec.items()], vmid=None)
