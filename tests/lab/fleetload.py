# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A constant load through the lab's router while a fleet changes, and a sampler of the servers the router sends it
to (the suite's rolling test and make bench's P9).

The load is the collection's own load generator (module_utils/loadgen.py: streaming /generate, here 4 clients,
16 tokens in and out, words) in rounds of 40 requests until the change ends; the sampler asks smg's GET /workers
every 0.25 s how many of ``urls`` it lists healthy and ready. Needs the collection importable as
``ansible_collections.llmserve.sglang`` (``make links``: .tmp/collections on sys.path)."""

from __future__ import absolute_import, division, print_function

import json
import threading
import time
import urllib.request

from ansible_collections.llmserve.sglang.plugins.module_utils import loadgen, rolling


def workers(address, port, key, timeout=5):
    """smg's GET /workers (its ``workers`` list)."""
    req = urllib.request.Request('http://%s:%d/workers' % (address, port), headers={'Authorization': 'Bearer ' + key})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read()).get('workers', [])


class FleetLoad(object):
    """``with FleetLoad(...) as load:`` runs the load and the sampler until the block ends; then ``results``
    (loadgen's per-request results), ``ready`` ([(time, how many of ``urls`` are ready)]) and :meth:`figures`."""

    def __init__(self, address, port, key, urls, model, clients=4):
        self.address, self.port, self.key, self.urls, self.model = address, port, key, set(urls), model
        self.clients, self.stop, self.results, self.ready = clients, threading.Event(), [], []
        self.threads = [threading.Thread(target=self._load), threading.Thread(target=self._sample)]

    def _load(self):
        while not self.stop.is_set():
            dummy, results = loadgen.run_level(self.address, self.port, self.clients, 40, input_len=16, output_len=16,
                                               warmup=0, timeout=120, mode='text', extra={'model': self.model})
            self.results.extend(results)

    def _sample(self):
        while not self.stop.is_set():
            try:
                listed = workers(self.address, self.port, self.key)
            except (OSError, ValueError):
                listed = []
            # read as the rollout itself reads smg's answer
            self.ready.append((time.time(), len(rolling.router_view({'workers': listed}, list(self.urls))['ready'])))
            time.sleep(0.25)

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join(180)

    def figures(self):
        """{'requests', 'failed', 'errors' (two kinds at most), 'fewest_serving', 'samples', 'no_server_s' (seconds
        with none of ``urls`` ready: each sample's count holds until the next)}."""
        failed = [r for r in self.results if not r.ok]
        none_s = sum(later[0] - now[0] for now, later in zip(self.ready, self.ready[1:]) if now[1] == 0)
        return {'requests': len(self.results), 'failed': len(failed),
                'errors': sorted(set(str(r.error)[:60] for r in failed))[:2],
                'fewest_serving': min(n for dummy, n in self.ready) if self.ready else None,
                'samples': len(self.ready), 'no_server_s': round(none_s, 1)}
