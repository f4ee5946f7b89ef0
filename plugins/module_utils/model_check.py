# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is the model there, whole, before the first multi-minute load?

Pure functions over a small filesystem interface (``fs.isdir``, ``fs.listdir``, ``fs.read``, ``fs.size``), so that
the ``model_check`` module reads the host and the tests give plain data.

A model folder passes when ``config.json`` reads as a JSON object, its weights are there (every shard that
``model.safetensors.index.json`` (or ``pytorch_model.bin.index.json``) names, each not empty, together at least the
index's ``metadata.total_size``; without an index at least one ``*.safetensors``, ``*.bin``, ``*.pt`` or ``*.gguf``
file that is not empty) and a tokenizer is there (``tokenizer.json``, ``tokenizer.model``, ``tiktoken.model``, or
``vocab.json`` with ``merges.txt``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

INDEXES = ('model.safetensors.index.json', 'pytorch_model.bin.index.json')
WEIGHT_RE = re.compile(r'\.(safetensors|bin|pt|gguf)$')
TOKENIZERS = (('tokenizer.json',), ('tokenizer.model',), ('tiktoken.model',), ('vocab.json', 'merges.txt'))
# a repo id: owner/name, as the hub spells it (no leading slash, no .. )
REPO_ID_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$')


class LocalFS(object):
    """The host's filesystem."""

    @staticmethod
    def isdir(path):
        return os.path.isdir(path)

    @staticmethod
    def listdir(path):
        return sorted(os.listdir(path))

    @staticmethod
    def read(path, limit=64 * 1024 * 1024):
        with open(path, 'rb') as handle:
            return handle.read(limit).decode('utf-8', 'replace')

    @staticmethod
    def size(path):
        try:
            return os.stat(path).st_size
        except OSError:
            return None


def _json(fs, path):
    try:
        data = json.loads(fs.read(path))
    except (IOError, OSError) as exc:
        return None, 'cannot be read (%s)' % exc
    except ValueError as exc:
        return None, 'is not valid JSON (%s)' % exc
    if not isinstance(data, dict):
        return None, 'is not a JSON object'
    return data, None


def check(path, fs=None, where='sglang_model_path'):
    """-> {'kind': 'folder' | 'repo_id' | 'missing', 'errors': [...], 'missing': [...], 'shards': N, 'bytes': N,
    'index_total_size': N or None, 'tokenizer': [...]}; ``errors`` empty when the folder can be served."""
    fs = fs or LocalFS()
    out = {'kind': 'folder', 'errors': [], 'missing': [], 'shards': 0, 'bytes': 0, 'index_total_size': None,
           'tokenizer': []}
    if not path or not str(path).strip():
        out.update(kind='missing', errors=['%s must not be empty: give the model folder' % where])
        return out
    path = str(path)
    if not path.startswith('/'):
        if REPO_ID_RE.match(path):
            out.update(kind='repo_id', errors=[
                '%s=%s is a hub repo id, not a folder on the host: SGLang would download it during the first '
                'trial, under sglang_ready_timeout. Set sglang_model_download: true to download it first, give the folder, or set '
                'sglang_model_check: false to let SGLang download it' % (where, path)])
        else:
            out.update(kind='missing', errors=['%s=%s is neither an absolute folder path nor a repo id (owner/name)'
                                               % (where, path)])
        return out
    if not fs.isdir(path):
        out.update(kind='missing', errors=['%s=%s: no such folder on the host' % (where, path)])
        return out
    names = fs.listdir(path)
    present = set(names)

    def full(name):
        return path.rstrip('/') + '/' + name

    if 'config.json' not in present:
        out['missing'].append('config.json')
    else:
        _config, error = _json(fs, full('config.json'))
        if error:
            out['errors'].append('%s=%s: config.json %s' % (where, path, error))
    index_name = [n for n in INDEXES if n in present]
    if index_name:
        index, error = _json(fs, full(index_name[0]))
        if error:
            out['errors'].append('%s=%s: %s %s' % (where, path, index_name[0], error))
        else:
            shards = sorted(set(str(v) for v in (index.get('weight_map') or {}).values()))
            if not shards:
                out['errors'].append('%s=%s: %s lists no weight file (weight_map is empty)'
                                     % (where, path, index_name[0]))
            total = (index.get('metadata') or {}).get('total_size')
            out['index_total_size'] = total if isinstance(total, int) else None
            empty = []
            for shard in shards:
                size = fs.size(full(shard)) if shard in present or '/' in shard else None
                if size is None:
                    out['missing'].append(shard)
                elif size == 0:
                    empty.append(shard)
                else:
                    out['bytes'] += size
            out['shards'] = len(shards)
            if empty:
                out['errors'].append('%s=%s: %d weight file(s) are empty: %s (an interrupted download?)'
                                     % (where, path, len(empty), ', '.join(empty[:5])))
            total = out['index_total_size'] or 0
            if not out['missing'] and not empty and out['bytes'] < total:
                out['errors'].append(
                    '%s=%s: the weight files hold %d bytes, less than the %d the index says (a partial download?)'
                    % (where, path, out['bytes'], total))
    else:
        weights = [n for n in names if WEIGHT_RE.search(n) and not n.endswith('.index.json')]
        sizes = [(n, fs.size(full(n))) for n in weights]
        good = [(n, s) for n, s in sizes if s]
        out['shards'] = len(good)
        out['bytes'] = sum(s for _n, s in good)
        if not weights:
            out['missing'].append('*.safetensors (no weight file, no %s)' % INDEXES[0])
        elif not good:
            out['errors'].append('%s=%s: every weight file is empty: %s' % (where, path, ', '.join(weights[:5])))
    found = [group for group in TOKENIZERS if all(n in present for n in group)]
    if found:
        out['tokenizer'] = list(found[0])
    else:
        out['missing'].append('a tokenizer (tokenizer.json, tokenizer.model, or vocab.json + merges.txt)')
    if out['missing']:
        shown = out['missing'][:8]
        more = len(out['missing']) - len(shown)
        tail = (' and %d more' % more) if more > 0 else ''
        out['errors'].insert(0, '%s=%s is missing %s%s' % (where, path, ', '.join(shown), tail))
    return out
