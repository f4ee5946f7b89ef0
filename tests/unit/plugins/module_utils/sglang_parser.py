# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test helper: an argparse parser built from a flag-table dump the way SGLang builds its own.

Each option: its flags, dest, nargs, choices, type (int/float, else str), default; ``nargs: 0`` -> store_true
(or BooleanOptionalAction for a ``--x``/``--no-x`` pair). Stdlib only: also loaded by the fake SGLang the
introspection tests run.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse

TYPES = {'int': int, 'float': float}


def add_options(parser, options):
    for option in options:
        flags = list(option['flags'])
        if '--help' in flags:
            continue
        kwargs = {'dest': option['dest']}
        if option.get('default') != '==SUPPRESS==':
            kwargs['default'] = option.get('default')
        if option.get('nargs') == 0:
            positive = [f for f in flags if not f.startswith('--no-')]
            if len(positive) != len(flags) and hasattr(argparse, 'BooleanOptionalAction'):
                parser.add_argument(*positive, action=argparse.BooleanOptionalAction, **kwargs)
            else:
                parser.add_argument(*flags, action='store_true', **kwargs)
            continue
        if option.get('nargs') is not None:
            kwargs['nargs'] = option['nargs']
        if option.get('choices') is not None:
            kwargs['choices'] = option['choices']
        kwargs['type'] = TYPES.get(option.get('type'), str)
        parser.add_argument(*flags, **kwargs)
    return parser


def build_parser(options, prog='launch_server'):
    parser = argparse.ArgumentParser(prog=prog, allow_abbrev=True)
    return add_options(parser, options)
