# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model's vocabulary size, read from its folder: how many token ids the load generator may draw from.

SGLang does not check that the ``input_ids`` of a ``/generate`` request are in the model's vocabulary: an id past
the embedding table ends the scheduler (``IndexError: index out of range in self`` on CPU, the device assert
``srcIndex < srcSelectDimSize`` on a GPU). The load generator therefore draws ids from ``[0, vocab_size)``, as
``python -m sglang.bench_serving --dataset-name random-ids`` draws them from ``[0, tokenizer.vocab_size)``.

The size, from the model folder:

- ``config.json``: ``vocab_size`` (the rows of the embedding table); a multimodal model's own ``vocab_size`` may be
  missing, then its language model's is used (``text_config``, ``language_config``, ``llm_config``,
  ``thinker_config.text_config``);
- ``tokenizer.json``: the tokens of its model (``model.vocab``), without the added special tokens, which is what
  ``tokenizer.vocab_size`` of the Hugging Face tokenizer gives bench_serving. Leaving the added tokens out keeps
  image and audio placeholders out of a multimodal model's prompts.

With both, the smaller one; with one, that one. ``tokenizer_config.json`` names added tokens but holds no size, so
it is not read. Stdlib only; private to this collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.llmserve.sglang.plugins.module_utils import _files
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_http as sghttp

# where a multimodal model's config.json keeps its language model's settings, in the order they are looked at
NESTED = (('text_config',), ('language_config',), ('llm_config',), ('thinker_config', 'text_config'))


def _size(value):
    """A positive int, or None (a bool is not a size)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def from_config(config):
    """``(size, where)`` from a parsed config.json, e.g. ``(662, 'vocab_size')``; ``(None, why)`` without one."""
    if not isinstance(config, dict):
        return None, 'is not a JSON object'
    size = _size(config.get('vocab_size'))
    if size:
        return size, 'vocab_size'
    for keys in NESTED:
        node = config
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        size = _size(node.get('vocab_size')) if isinstance(node, dict) else None
        if size:
            return size, '%s.vocab_size' % '.'.join(keys)
    return None, 'has no vocab_size (nor %s)' % ', '.join('%s.vocab_size' % '.'.join(k) for k in NESTED)


def from_tokenizer(tokenizer):
    """``(size, where)`` from a parsed tokenizer.json: the tokens of ``model.vocab`` (a dict for BPE and WordPiece, a
    list for Unigram), without the added tokens; ``(None, why)`` without one."""
    model = tokenizer.get('model') if isinstance(tokenizer, dict) else None
    vocab = model.get('vocab') if isinstance(model, dict) else None
    if not isinstance(vocab, (dict, list)) or not vocab:
        return None, 'has no model.vocab'
    return len(vocab), 'model.vocab, %d added tokens left out' % len(tokenizer.get('added_tokens') or [])


def _read_json(path, read):
    """(data, None) or (None, why)."""
    try:
        text = read(path)
    except (IOError, OSError) as exc:
        return None, 'cannot be read (%s)' % exc
    except UnicodeDecodeError:
        return None, 'is not UTF-8 text'
    if text is None:
        return None, 'is missing'
    try:
        return json.loads(text), None
    except ValueError as exc:
        return None, 'is not valid JSON (%s)' % exc


def from_folder(path, read=_files.read_text):
    """The vocabulary size of the model folder ``path`` on this host.

    Returns ``{'vocab_size': N or None, 'source': 'PATH/config.json vocab_size (662); ...', 'problems': [...]}``:
    ``source`` says which files gave the size, ``problems`` what could not be read (a file that is missing or
    holds no size).
    """
    out = {'vocab_size': None, 'source': None, 'problems': []}
    if not path or not os.path.isabs(str(path)):
        out['problems'].append('%r is not an absolute folder on this host (a hub repo id?)' % (path,))
        return out
    found = []
    for name, parse in (('config.json', from_config), ('tokenizer.json', from_tokenizer)):
        file_path = os.path.join(str(path), name)
        data, why = _read_json(file_path, read)
        if why is None:
            size, why = parse(data)
            if size:
                found.append((size, '%s %s (%d)' % (file_path, why, size)))
                continue
        out['problems'].append('%s %s' % (file_path, why))
    if found:
        out['vocab_size'] = min(size for size, dummy in found)
        out['source'] = '; '.join(text for dummy, text in found)
    return out


def server_model_path(base, api_key=None, timeout=10, validate_certs=True):
    """The folder the server at ``base`` loaded its model from: ``model_path`` of ``GET /model_info`` (SGLang 0.5.23;
    ``/get_model_info`` on older releases). Raises ValueError with the reason when it does not say."""
    reply = None
    for path in ('/model_info', '/get_model_info'):
        reply = sghttp.get(base + path, api_key=api_key, timeout=timeout, validate_certs=validate_certs)
        if reply.status != 404:
            break
    data = reply.data if reply.status == 200 else None
    if isinstance(data, dict) and data.get('model_path'):
        return data['model_path']
    if reply.status == 200:
        why = 'no model_path in the answer'
    else:
        why = 'no HTTP answer: %s' % reply.error if reply.status is None else 'HTTP %s' % reply.status
    raise ValueError('the server did not name its model folder (GET %s: %s)' % (path, why))


def resolve(vocab_size=None, folders=(), read=_files.read_text):
    """How the load generator's prompts are made: token ids in ``[0, vocab_size)`` or, without a size, random words.

    ``vocab_size``: a size given by the user (used as it is). ``folders``: model folders to read, in order (the
    first that gives a size wins); an entry may be a callable that returns the folder or None (asked only when the
    entries before it gave no size), or raises ValueError with the reason.

    Returns ``{'mode': 'ids' | 'text', 'vocab_size', 'source', 'note'}``; ``note`` says why it fell back to text.
    """
    if _size(vocab_size):
        return {'mode': 'ids', 'vocab_size': vocab_size, 'source': 'the vocab_size option', 'note': None}
    problems = []
    for folder in folders:
        if callable(folder):
            try:
                folder = folder()
            except ValueError as exc:
                problems.append(str(exc))
                continue
        if folder in (None, ''):
            continue
        got = from_folder(folder, read)
        if got['vocab_size']:
            return {'mode': 'ids', 'vocab_size': got['vocab_size'], 'source': got['source'], 'note': None}
        problems.extend(got['problems'])
    note = ('the vocabulary size is unknown (%s): random words were sent instead of token ids, so that no id can '
            'be out of the vocabulary; give benchmark.vocab_size or benchmark.model_path for token ids'
            % ('; '.join(problems) or 'no model folder given'))
    return {'mode': 'text', 'vocab_size': None, 'source': None, 'note': note}
