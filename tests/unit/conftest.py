# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plain pytest (PYTHONPATH set to the folder that holds ansible_collections/): load the collection through Ansible's
collection loader before any test imports it, as ansible-test units does, so that a template finds its plugins."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys


def pytest_configure():
    from ansible.utils.collection_loader import AnsibleCollectionConfig
    if AnsibleCollectionConfig.collection_finder is not None:  # ansible-test units installed it
        return
    from ansible.plugins.loader import init_plugin_loader
    init_plugin_loader([p for p in sys.path if p and os.path.isdir(os.path.join(p, 'ansible_collections'))])
