# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real-server gate's model download (see test_real_server.py): the collection against the real SGLang 0.5.23.

- ``sglang_model_download``: a hub repo id downloaded from a mirror on the lab network (olah, offline, serving a git
  repository of the tiny model) into ``sglang_model_cache``, served by the real server under the repo id; a repo the
  mirror lacks stops the run before any change; a second run changes nothing; ``HF_TOKEN`` appears in no output

Run as root: ``make realserver`` (part of ``make test``).
"""

from __future__ import absolute_import, division, print_function

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".tmp", "collections"))
# pylint: disable-next=wrong-import-position
from labsession import BRIDGE, bridge_server, recap  # noqa: E402
# pylint: disable-next=wrong-import-position
from realserver import CHECKOUT, RESULTS, playbook, ssh  # noqa: E402


REPO = "llmlab/tiny-qwen2-chat"
TOKEN = "hf_llmlabDownloadToken0123456789"
MODEL_DIR = "/var/lib/llmserve-lab/models/tiny-qwen2-chat"  # the tiny model the hosts load by path elsewhere


@pytest.fixture(scope="module")
def mirror(lab):  # pylint: disable=unused-argument,redefined-outer-name
    """olah (a self-hosted Hugging Face mirror, from PyPI) on the lab bridge, offline, serving REPO from a local git
    repository of the tiny model's files; -> its URL."""
    olah = os.path.join(CHECKOUT, ".venv-mirror", "bin", "olah-cli")
    if not os.path.exists(olah):
        pytest.fail("no .venv-mirror: run `make setup`")
    folder = tempfile.mkdtemp(prefix="llmserve-mirror-")
    repo = os.path.join(folder, "mirrors", "models", REPO)
    shutil.copytree(MODEL_DIR, repo)
    git = ["git", "-C", repo, "-c", "user.name=lab", "-c", "user.email=lab@lab.invalid"]
    subprocess.run(["git", "init", "-q", "-b", "main", repo], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "tiny model"], check=True)

    def argv(port):
        with open(os.path.join(folder, "olah.toml"), "w", encoding="utf-8") as handle:
            netloc = "%s:%d" % (BRIDGE, port)
            handle.write('[basic]\nhost = "%s"\nport = %d\nrepos-path = "%s/cache"\nmirror-scheme = "http"\n'
                         'mirror-netloc = "%s"\nmirror-lfs-netloc = "%s"\nmirrors-path = ["%s/mirrors"]\n'
                         '[accessibility]\noffline = true\n' % (BRIDGE, port, folder, netloc, netloc, folder))
        return [olah, "-c", "olah.toml"]

    try:
        with bridge_server(argv, os.path.join(folder, "olah.log"), cwd=folder, timeout=60) as port:
            yield "http://%s:%d" % (BRIDGE, port)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_model_downloaded_from_a_mirror_serves(mirror):  # pylint: disable=redefined-outer-name
    """sglang_model_download: true with HF_ENDPOINT at a mirror on the lab network: a repo the mirror lacks stops the
    run before any change; check mode downloads nothing; the deploy downloads the repo into sglang_model_cache and the
    real server serves it; a second run fetches and changes nothing. HF_TOKEN is in no output."""
    env = {"CUDA_HOME": "/usr/local/cuda-13.0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "HF_ENDPOINT": mirror,
           "HF_TOKEN": TOKEN}
    # no served name of its own (the lab's inventory gives one): clients name the model by the repo id
    extra = {"sglang_screen": False, "sglang_candidates": [], "sglang_model_download": True,
             "sglang_model_path": REPO, "sglang_env": env, "sglang_served_model_name": ""}
    cache = "/var/lib/llmserve/models"
    folder = cache + "/" + REPO
    state = "systemctl show sglang.service -p ActiveState -p InvocationID; ls -A /var/lib/llmserve/sglang 2>/dev/null"
    before = ssh("gpu01", state)

    # a repo the mirror does not have: a clear error naming sglang_model_path, nothing changed, the lock given back
    rc, out, _reports = playbook("deploy", dict(extra, sglang_model_path="llmlab/no-such-model"), limit="gpu01")
    flat = " ".join(out.split())
    assert rc != 0 and "sglang_model_path=llmlab/no-such-model: the hub at %s has no such model repo" % mirror in flat, \
        flat[-3000:]
    assert ssh("gpu01", state) == before
    assert ssh("gpu01", "ls -A %s 2>/dev/null" % cache).strip() == "", "a failed download left a folder"
    assert TOKEN not in out
    said = re.search(r"sglang_model_path=llmlab/no-such-model: the hub at \S+ has no such model repo", flat).group(0)
    RESULTS.append("%-28s %-6s %s; nothing changed" % ("download: repo not on mirror", "gpu01", said))

    # check mode: says it would download, downloads nothing
    rc, out, _reports = playbook("deploy", extra, limit="gpu01", args=["--check"])
    assert rc == 0, out[-4000:]
    assert ssh("gpu01", "test -e %s && echo there || echo absent" % folder).strip() == "absent"
    assert TOKEN not in out

    started = time.time()
    rc, out, reports = playbook("deploy", extra, limit="gpu01")
    took = time.time() - started
    assert rc == 0, out[-4000:]
    assert TOKEN not in out and TOKEN not in json.dumps(reports)
    rep = reports["gpu01"]
    assert (rep["final_state"], rep["selected"]) == ("serving", "known-good"), rep
    same = ssh("gpu01", "cd %s && find . -path ./.cache -prune -o -type f -print | sort | xargs md5sum | md5sum; "
                        "cd %s && find . -type f | sort | xargs md5sum | md5sum" % (folder, MODEL_DIR)).split("\n")
    assert same[0] == same[1], same
    unit = ssh("gpu01", "systemctl cat sglang.service")
    assert "--model-path %s" % folder in unit and "--served-model-name %s" % REPO in unit, unit
    models = json.loads(ssh("gpu01", "curl -s -m 30 http://127.0.0.1:30000/v1/models"))
    assert [m["id"] for m in models["data"]] == [REPO], models
    answer = ssh("gpu01", "curl -s -m 30 -H 'Content-Type: application/json' -d '{\"text\": \"The capital city of "
                          "France is\", \"sampling_params\": {\"max_new_tokens\": 12, \"temperature\": 0}}' "
                          "http://127.0.0.1:30000/generate")
    assert "Paris" in json.loads(answer)["text"], answer
    RESULTS.append("%-28s %-6s deploy %.0f s: %s from %s into %s; known-good serves it as %s: %r" % (
        "download from a mirror", "gpu01", took, REPO, mirror, folder, REPO, json.loads(answer)["text"][:30]))

    # again: nothing fetched, nothing changed
    rc, out, _reports = playbook("deploy", extra, limit="gpu01")
    assert rc == 0 and recap(out)["gpu01"]["changed"] == 0, out[-3000:]
    assert TOKEN not in out
