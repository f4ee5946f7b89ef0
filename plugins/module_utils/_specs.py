# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Argument specs shared by several modules, each the twin of a doc fragment (same names, types, defaults).

- ``endpoint_argument_spec()``: O(host), O(port), O(api_key) of an SGLang server (fragment
  ``llmserve.sglang.endpoint``); with ``tls=True`` also O(scheme) and O(validate_certs) (``llmserve.sglang.endpoint.tls``).
- ``gpu_free_argument_spec()``: the options of a GPU clean-up, as ``gpu_reset`` takes them at its top level and
  ``sglang_launch`` under ``free_gpus`` (fragment ``llmserve.sglang.gpu_free``, and ``llmserve.sglang.gpu_free.free_gpus``).

Each call returns a fresh dict, which the caller may extend. Private to this collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

_ENDPOINT = dict(
    host=dict(type='str', default='127.0.0.1'),
    port=dict(type='int', default=30000),
    api_key=dict(type='str', no_log=True),
)

_ENDPOINT_TLS = dict(
    scheme=dict(type='str', default='http', choices=['http', 'https']),
    validate_certs=dict(type='bool', default=True),
)

_GPU_FREE = dict(
    protected_pids=dict(type='list', elements='int', default=[]),
    protected_names=dict(type='list', elements='str', default=[]),
    default_protected=dict(type='bool', default=True),
    term_grace=dict(type='float', default=5),
    timeout=dict(type='float', default=30),
    memory_threshold_mib=dict(type='int', default=1024),
    devices=dict(type='str', default='/dev/nvidia*'),
    fuser=dict(type='str', default='fuser'),
    hard_reset=dict(type='bool', default=False),
    nvidia_smi=dict(type='str', default='nvidia-smi'),
    stop_timeout=dict(type='float', default=60),
    kill_unit=dict(type='bool', default=False),
    gpus=dict(type='list', elements='str'),
)


def endpoint_argument_spec(tls=False):
    """host, port and api_key of the server's HTTP endpoint; with ``tls``, scheme and validate_certs too."""
    spec = copy.deepcopy(_ENDPOINT)
    if tls:
        spec.update(copy.deepcopy(_ENDPOINT_TLS))
    return spec


def gpu_free_argument_spec():
    """The options of a GPU clean-up (what ``gpu_free.free`` reads from its params)."""
    return copy.deepcopy(_GPU_FREE)
