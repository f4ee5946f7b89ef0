# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the filter tests share: ansible's Templar, the trusted text it renders (ansible-core 2.19 templates trusted
strings only), the checkout's root and the data cases beside module_utils' tests."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

try:  # ansible-core >= 2.19 templates trusted strings only
    from ansible.template import trust_as_template
except ImportError:  # pragma: no cover - older ansible-core
    def trust_as_template(text):
        return text

__all__ = ['ROOT', 'load_cases', 'make_templar', 'trust_as_template']

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'module_utils')
ROOT = os.path.join(HERE, '..', '..', '..', '..')


def make_templar(variables):
    """A Templar over ``variables``, with the collection's filters."""
    return Templar(loader=DataLoader(), variables=variables)


def load_cases(name):
    """The data cases of module_utils/cases/``name``."""
    with open(os.path.join(HERE, 'cases', name), encoding='utf-8') as f:
        return yaml.safe_load(f)
