#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: model_download
short_description: Download a hub model into a folder on the host before SGLang loads it
version_added: 0.3.0
description:
  - Runs C(hf download REPO --revision REV --local-dir CACHE/OWNER/NAME) with the C(hf) command of the
    huggingface_hub in SGLang's own venv (beside O(python)), so that the first trial loads a whole folder instead of
    downloading during its start.
  - The hub is C(https://huggingface.co) unless O(env) sets C(HF_ENDPOINT) (a mirror). C(HF_TOKEN), C(HF_ENDPOINT),
    the proxy variables and C(REQUESTS_CA_BUNDLE) reach the command through its environment only, never its argv;
    the module keeps none of the command's output but the last line of a failure, with the token masked.
  - Files already there and unchanged on the hub are not fetched again (the C(hf) command compares them with the
    hub); C(changed) says whether a file was added or rewritten.
  - A failure names the variable to change first (C(sglang_model_path) for a repo the hub does not have,
    C(sglang_model_revision), C(HF_TOKEN), C(HF_ENDPOINT), C(sglang_model_cache)) and what C(hf) said.
author:
  - llmserve maintainers (@llmserve)
extends_documentation_fragment:
  - llmserve.sglang.attributes
  - llmserve.sglang.attributes.platform
attributes:
  check_mode:
    support: full
    details: Downloads nothing; C(changed) is true when the folder is not yet a whole model (the hub is not asked).
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  repo_id:
    description: The hub repo id, C(owner/name).
    type: str
    required: true
  revision:
    description: The branch, tag or commit to download.
    type: str
    default: main
  cache:
    description: The folder the model goes into, as C(CACHE/OWNER/NAME); made (0755) when missing.
    type: path
    required: true
  python:
    description: The python of SGLang's venv; its C(hf) command downloads.
    type: path
    required: true
  endpoint:
    description:
      - The hub or mirror to download from (C(HF_ENDPOINT)); empty takes C(HF_ENDPOINT) of O(env), else
        C(https://huggingface.co).
      - Given apart from O(env) so that messages can show it (every value of O(env) is masked).
    type: str
    default: ""
  env:
    description:
      - The server's environment (C(sglang_env)); only C(HF_TOKEN), C(HF_ENDPOINT), C(HF_HUB_ENABLE_HF_TRANSFER),
        C(HF_HUB_OFFLINE), the proxy variables and C(REQUESTS_CA_BUNDLE) are passed on. Its values appear in no
        output.
    type: dict
    default: {}
notes:
  - The download can take hours for a large model; run the play with a long enough C(ansible_command_timeout) or
    C(async) where a connection would drop.
seealso:
  - module: llmserve.sglang.model_check
'''

EXAMPLES = r'''
- name: Download the model from a site mirror
  llmserve.sglang.model_download:
    repo_id: Qwen/Qwen3-8B
    cache: /var/lib/llmserve/models
    python: /opt/sglang/bin/python3
    endpoint: https://hf-mirror.example.internal
    env:
      HF_TOKEN: "{{ vault_hf_token }}"
  register: model
'''

RETURN = r'''
path:
  description: The folder the model is (or would be) in; the value of C(--model-path).
  returned: always
  type: str
  sample: /var/lib/llmserve/models/Qwen/Qwen3-8B
written:
  description: The files the download added or rewrote, relative to RV(path).
  returned: always
  type: list
  elements: str
files:
  description: The number of files in RV(path) after the download (the hf client's C(.cache) left out).
  returned: always
  type: int
bytes:
  description: Their size together.
  returned: always
  type: int
endpoint:
  description: The hub the model came from.
  returned: always
  type: str
cmd:
  description: The command that ran (no token in it).
  returned: always
  type: list
  elements: str
msg:
  description: What was done, or why it failed.
  returned: always
  type: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmserve.sglang.plugins.module_utils import model_download
from ansible_collections.llmserve.sglang.plugins.module_utils import redact


def main():
    module = AnsibleModule(
        argument_spec=dict(
            repo_id=dict(type='str', required=True),
            revision=dict(type='str', default='main'),
            cache=dict(type='path', required=True),
            python=dict(type='path', required=True),
            endpoint=dict(type='str', default=''),
            env=dict(type='dict', default={}, no_log=True),
        ),
        supports_check_mode=True,
    )
    p = module.params

    def _run(argv, env):
        return module.run_command(argv, environ_update=env)

    result = model_download.download(_run, p['repo_id'], p['revision'], p['cache'], p['python'], p['env'],
                                     endpoint=p['endpoint'], check_mode=module.check_mode)
    # HF_TOKEN is no_log (env) and masked again by name in case hf echoed it in another form
    result['msg'] = redact.redact_text(result['msg'], redact.secret_values('', [p['env']]))
    if result.pop('failed'):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
