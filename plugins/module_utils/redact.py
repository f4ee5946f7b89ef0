# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Secrets out of every text a module or filter returns.

Two ways, both applied by :func:`redact`:

- *known values*: the API key and the values of environment variables whose names say they are secrets (``*KEY*``,
  ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*CREDENTIAL*``), given by the caller (:func:`secret_values`);
- *shapes*, for secrets nobody told us about (another service's key on the same host): ``--api-key VALUE`` and
  ``--api-key=VALUE`` on a command line, ``'api_key': 'VALUE'`` in the ``server_args={...}`` line SGLang logs at
  start-up (it hides only its watermark keys), and ``NAME=VALUE`` of a secret-named variable.

Pure functions, no Ansible imports. The modules also declare the known values ``no_log``, so that Ansible scrubs
them from the whole result (``invocation`` included) as well.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

MASK = '********'
SECRET_NAME_RE = re.compile(r'(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)', re.IGNORECASE)
# values shorter than this are not searched for (a "1" would blank every digit); shapes still apply
MIN_VALUE_LEN = 4

_FLAG_RE = re.compile(r'(--(?:admin-)?api-key(?:=|\s+))(?!\*{8}|\$\{)(\S+)')
_DICT_RE = re.compile(r'''(['"][A-Za-z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)[A-Za-z0-9_]*['"]\s*:\s*)'''
                      r'''(['"])(?!\*{8})(.*?)\2''', re.IGNORECASE)
_ASSIGN_RE = re.compile(r'''\b([A-Za-z_][A-Za-z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)[A-Za-z0-9_]*)'''
                        r'''(=)(?!["']?\*{8}|["']?\$\{)("[^"]*"|'[^']*'|\S+)''', re.IGNORECASE)


def secret_values(api_key=None, envs=()):
    """The values to hide: ``api_key`` and each secret-named variable's value of the dicts in ``envs``."""
    out = []
    if api_key:
        out.append(str(api_key))
    for env in envs or ():
        for name, value in (env or {}).items():
            if value not in (None, '') and SECRET_NAME_RE.search(str(name)):
                out.append(str(value))
    return sorted(set(v for v in out if len(v) >= MIN_VALUE_LEN), key=len, reverse=True)


def redact_text(text, values=()):
    """``text`` with the known ``values`` and the secret shapes masked."""
    if not isinstance(text, str) or not text:
        return text
    for value in values or ():
        if value and len(value) >= MIN_VALUE_LEN and value in text:
            text = text.replace(value, MASK)
    text = _FLAG_RE.sub(lambda m: m.group(1) + MASK, text)
    text = _DICT_RE.sub(lambda m: m.group(1) + m.group(2) + MASK + m.group(2), text)
    text = _ASSIGN_RE.sub(lambda m: m.group(1) + m.group(2) + MASK, text)
    return text


def redact_argv(argv, values=()):
    """An argv list with the value after ``--api-key`` (and known values anywhere) masked."""
    out = []
    hide_next = False
    for item in argv or []:
        item = str(item)
        if hide_next:
            out.append(item if item.startswith('${') else MASK)  # the unit's ${SGLANG_API_KEY} is no secret
            hide_next = False
            continue
        if item in ('--api-key', '--admin-api-key'):
            hide_next = True
            out.append(item)
            continue
        out.append(redact_text(item, values))
    return out


def redact(obj, values=()):
    """``obj`` (dicts, lists, strings) with every string redacted; other types as they are."""
    if isinstance(obj, str):
        return redact_text(obj, values)
    if isinstance(obj, dict):
        return dict((k, redact(v, values)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return [redact(v, values) for v in obj]
    return obj


def argument_spec():
    """The option each module that returns host text takes (doc fragment llmserve.sglang.redact)."""
    return {'redact_values': dict(type='list', elements='str', default=[], no_log=True)}


def guard(module, values=None):
    """Redact every result, failure message and warning of an AnsibleModule: the known ``values`` (default: its
    ``redact_values`` option) and the secret shapes. Ansible itself also scrubs ``no_log`` values."""
    if values is None:
        values = module.params.get('redact_values') or []
    values = sorted(set(v for v in values if v and len(v) >= MIN_VALUE_LEN), key=len, reverse=True)
    exit_json, fail_json, warn = module.exit_json, module.fail_json, module.warn

    def _exit(**kwargs):
        exit_json(**redact(kwargs, values))

    def _fail(msg, **kwargs):
        fail_json(msg=redact_text(msg, values), **redact(kwargs, values))

    def _warn(msg):
        warn(redact_text(msg, values))

    module.exit_json, module.fail_json, module.warn = _exit, _fail, _warn
    return values


def deploy_secret_values(api_key=None, env=None, candidates=None, known_good=None):
    """:func:`secret_values` of a deploy's public inputs: ``sglang_api_key``, ``sglang_env`` and the ``env`` of each
    of ``sglang_candidates`` and ``sglang_known_good`` (anything that is not a dict is ignored)."""
    envs = [env if isinstance(env, dict) else {}]
    for cand in list(candidates if isinstance(candidates, list) else []) + [known_good]:
        if isinstance(cand, dict) and isinstance(cand.get('env'), dict):
            envs.append(cand['env'])
    return secret_values(api_key if isinstance(api_key, str) else None, envs)
