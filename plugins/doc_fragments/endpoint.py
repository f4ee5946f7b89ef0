# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The HTTP endpoint of an SGLang server; the argument spec is ``_specs.endpoint_argument_spec()``."""

    # llmserve.sglang.endpoint: address, port and API key (endpoint_argument_spec())
    DOCUMENTATION = r'''
options:
  host:
    description: Address of the server's HTTP endpoint.
    type: str
    default: 127.0.0.1
  port:
    description: Port of the server's HTTP endpoint.
    type: int
    default: 30000
  api_key:
    description: The server's API key, sent as a bearer token in the C(Authorization) header.
    type: str
'''

    # llmserve.sglang.endpoint.tls: added by endpoint_argument_spec(tls=True)
    TLS = r'''
options:
  scheme:
    description: URL scheme of the server's HTTP endpoint.
    type: str
    choices: [http, https]
    default: http
  validate_certs:
    description: Verify the server's TLS certificate when O(scheme=https).
    type: bool
    default: true
'''
