# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The screen: a seconds-long start of a candidate with dummy weights and a truncated model.

``--load-format dummy`` skips reading the checkpoint (random weights) and
``--json-model-override-args '{"num_hidden_layers": N}'`` builds only the first N layers, so a candidate whose
kernels crash, are killed or hang is dropped before a full load (minutes for a large model). The text it
serves is random and is not judged. Pure functions, stdlib only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

# flags the screen sets itself; a user's own value is replaced (load format) or merged (override args)
LOAD_FORMAT = '--load-format'
OVERRIDE = '--json-model-override-args'


def _split(args):
    """Take ``--flag value`` / ``--flag=value`` of LOAD_FORMAT and OVERRIDE out of ``args``.

    Returns ``(rest, override_json_or_None)``.
    """
    rest = []
    override = None
    i = 0
    args = [str(a) for a in args or []]
    while i < len(args):
        a = args[i]
        flag, eq, value = a.partition('=')
        if flag in (LOAD_FORMAT, OVERRIDE):
            if not eq:
                value = args[i + 1] if i + 1 < len(args) else ''
                i += 1
            if flag == OVERRIDE:
                override = value
            i += 1
            continue
        rest.append(a)
        i += 1
    return rest, override


def screen_args(extra_args, layers):
    """``extra_args`` for the screen: the candidate's own, then ``--load-format dummy`` and the layer override.

    ``layers`` 0 keeps the model's depth (dummy weights only). A ``--json-model-override-args`` the user gave is
    kept, with ``num_hidden_layers`` set in it.
    """
    layers = int(layers or 0)
    if layers < 0:
        raise ValueError('screen layers must be >= 0 (0 = all layers), got %s' % layers)
    rest, override = _split(extra_args)
    doc = {}
    if override:
        try:
            doc = json.loads(override)
        except ValueError:
            raise ValueError('%s %r is not JSON' % (OVERRIDE, override))
        if not isinstance(doc, dict):
            raise ValueError('%s %r is not a JSON object' % (OVERRIDE, override))
    if layers:
        doc['num_hidden_layers'] = layers
    out = rest + [LOAD_FORMAT, 'dummy']
    if doc:
        out += [OVERRIDE, json.dumps(doc, sort_keys=True, separators=(',', ':'))]
    return out


def _first(lines):
    if isinstance(lines, (list, tuple)):
        return lines[0] if lines else None
    return lines


def outcome(await_result, probe=None, seconds=0.0, recheck=None, layers=None):
    """The ``screen`` entry of a candidate: ``{outcome: passed|failed, reason, evidence, seconds, milestone}``.

    ``await_result``: await_server_ready on the dummy start. The roles pass it its ``probe`` option, so it sends
    the one request itself and its ``probe`` result is the request's (a server that died on the request is
    classified by the same call: status ``crashed``, ``killed``, ...; a live one whose request failed:
    ``unhealthy``).

    Or, from two more module runs: ``probe``: smoke_generate with ``judge: false`` (absent or skipped when not
    ready); ``recheck``: await_server_ready once more after a failed probe, which tells a server that died on the
    request (``crashed``) from one that only answered badly.
    """
    await_result = await_result or {}
    if not isinstance(probe, dict) or probe.get('skipped'):
        probe = None
    if not isinstance(recheck, dict) or recheck.get('skipped'):
        recheck = None
    # int() also where ansible-core < 2.19 templated the setting into a string ('4')
    res = {'seconds': round(float(seconds or 0), 2), 'milestone': await_result.get('milestone'),
           'layers': int(layers) if layers not in (None, '') else None}
    status = await_result.get('status')
    own = await_result.get('probe')
    if probe is None and isinstance(own, dict):     # the await sent the request itself
        if status == 'ready':
            res.update(outcome='passed', reason=None,
                       evidence='ready, and one request answered %ss after the start (the request took %ss; text '
                                'not judged: dummy weights)' % (await_result.get('elapsed'), own.get('seconds')))
            return res
        if status == 'unhealthy' and not own.get('ok'):
            # the request failed on a server that stayed up: its reason (http_error, timeout) says why
            res.update(outcome='failed', reason=own.get('reason') or 'http_error', evidence=own.get('detail'))
            return res
    if status != 'ready':
        res.update(outcome='failed', reason=await_result.get('reason') or status or 'unknown',
                   evidence=_first(await_result.get('evidence')) or await_result.get('msg'))
        return res
    if probe is None:
        res.update(outcome='failed', reason='http_error', evidence='the probe request was not sent')
        return res
    if probe.get('ok'):
        check = (probe.get('checks') or [{}])[0]
        res.update(outcome='passed', reason=None,
                   evidence='ready at %ss; one request answered in %ss (text not judged: dummy weights)'
                   % (await_result.get('elapsed'), check.get('seconds')))
        return res
    if recheck is not None and recheck.get('status') not in ('ready', 'loading', None):
        res.update(outcome='failed', reason=recheck.get('reason') or recheck.get('status'),
                   evidence=_first(recheck.get('evidence')) or _first(probe.get('evidence')),
                   milestone=recheck.get('milestone') or res['milestone'])
        return res
    res.update(outcome='failed', reason=probe.get('reason') or 'http_error',
               evidence=_first(probe.get('evidence')) or probe.get('msg'))
    return res


def in_record(record, fingerprint, sglang_version, key):
    """True when the host's record has an entry for this configuration on this GPU and SGLang version."""
    for entry in (record or {}).get('entries') or []:
        if (entry.get('fingerprint') == fingerprint and entry.get('sglang_version') == sglang_version
                and entry.get('config_key') == key):
            return True
    return False


def wanted(candidate, settings, record=None, fingerprint=None, sglang_version=None):
    """Whether to screen this candidate: the screen is on, and the candidate is forced or new to the record."""
    settings = settings or {}
    if not settings.get('enabled', True):
        return False
    candidate = candidate or {}
    if candidate.get('force'):
        return True
    return not in_record(record, fingerprint, sglang_version, candidate.get('config_key'))
