#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: dist_init_check
short_description: Check the dist-init address of a multi-node SGLang group from one member
version_added: 0.2.0
description:
  - Multi-node tensor parallel joins every node at C(--dist-init-addr HOST:PORT), hosted by rank 0.
    This module checks that address before anything starts, so a wrong address fails in preflight, not after a
    model load that waits for ranks which never arrive.
  - On the head (O(role=head)) the host must resolve to an address of this host.
  - On any other member (O(role=member)) a TCP connection to the address must get an answer within O(timeout).
    C(refused) (the head answered; nothing listens yet) and C(listening) (a server of the group already runs
    there) both prove the path; no answer, no route or a name that does not resolve fail.
  - Changes nothing.
author:
  - llmserve maintainers (@llmserve)
extends_documentation_fragment:
  - llmserve.sglang.attributes
  - llmserve.sglang.attributes.platform
attributes:
  check_mode:
    support: full
    details: Runs the same checks; nothing is ever changed.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  address:
    description: The dist-init address, C(HOST:PORT) or C([IPV6]:PORT).
    type: str
    required: true
  role:
    description: V(head) for rank 0, which hosts the address; V(member) for the other ranks.
    type: str
    choices: [head, member]
    required: true
  timeout:
    description: Seconds a member waits for an answer from the address.
    type: float
    default: 3
'''

EXAMPLES = r'''
- name: Check that rank 1 reaches rank 0's dist-init address
  llmserve.sglang.dist_init_check:
    address: 10.0.0.11:20000
    role: member
'''

RETURN = r'''
host:
  description: The host part of O(address).
  returned: always
  type: str
  sample: 10.0.0.11
port:
  description: The port part of O(address).
  returned: always
  type: int
  sample: 20000
addresses:
  description: What the host resolved to.
  returned: success
  type: list
  elements: str
  sample: [10.0.0.11]
state:
  description: V(local) on the head; V(refused) or V(listening) on a member.
  returned: success
  type: str
  sample: refused
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmserve.sglang.plugins.module_utils import serving_group


def main():
    module = AnsibleModule(
        argument_spec=dict(
            address=dict(type='str', required=True),
            role=dict(type='str', required=True, choices=['head', 'member']),
            timeout=dict(type='float', default=3.0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        host, port = serving_group.parse_addr(p['address'])
    except ValueError as exc:
        module.fail_json(msg='address %s' % exc)
    result = dict(changed=False, host=host, port=port)
    try:
        addresses = serving_group.resolve(host)
    except ValueError as exc:
        module.fail_json(msg='dist-init address %s: %s; use an address every member can resolve' % (p['address'], exc),
                         **result)
    result['addresses'] = addresses
    if p['role'] == 'head':
        if not any(serving_group.is_local_address(ip) for ip in addresses):
            module.fail_json(msg='dist-init address %s (%s) is not an address of this host, rank 0, which must host '
                                 'it: use one of rank 0\'s own addresses' % (p['address'], ', '.join(addresses)),
                             **result)
        result['state'] = 'local'
        module.exit_json(**result)
    state = serving_group.probe(addresses[0], port, p['timeout'])
    result['state'] = state
    if state == 'unreachable':
        module.fail_json(msg='dist-init address %s cannot be reached from this member (no answer from %s within %s s): '
                             'check the network and firewall between the members, or set sglang_dist_init_addr to an '
                             'address of rank 0 that the members reach' % (p['address'], addresses[0], p['timeout']),
                         **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
