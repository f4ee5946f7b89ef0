# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`ansible-builder create` turns extensions/ee/execution-environment.yml into a build context (no engine, no network)."""

from __future__ import absolute_import, division, print_function

import os
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(os.path.dirname(HERE))
EE_FILE = os.path.join(CHECKOUT, "extensions", "ee", "execution-environment.yml")
TARBALL = os.path.join(CHECKOUT, ".tmp", "ee", "llmserve-sglang.tar.gz")
BIN = os.path.dirname(sys.executable)


def tool(name):
    path = os.path.join(BIN, name)
    return path if os.path.exists(path) else shutil.which(name)


def tracked_copy(dest):
    """The files git tracks or would track (as `make tree`), under dest/ansible_collections/llmserve/sglang."""
    coll = os.path.join(dest, "ansible_collections", "llmserve", "sglang")
    os.makedirs(coll)
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=CHECKOUT,
                         capture_output=True, check=True).stdout.decode()
    for rel in filter(None, out.split("\0")):
        src = os.path.join(CHECKOUT, rel)
        if os.path.isfile(src):
            os.makedirs(os.path.dirname(os.path.join(coll, rel)), exist_ok=True)
            shutil.copy2(src, os.path.join(coll, rel))
    return coll


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    """Build the collection tarball into .tmp/ee/ (as `make ee-context`), then `ansible-builder create`."""
    missing = [name for name, path in (("ansible-builder", tool("ansible-builder")),
                                       ("ansible-galaxy", tool("ansible-galaxy")), ("git", shutil.which("git")))
               if not path]
    if missing:
        pytest.fail("%s not installed: run make setup" % ", ".join(missing), pytrace=False)
    work = tmp_path_factory.mktemp("ee")
    coll = tracked_copy(str(work / "tree"))
    subprocess.run([tool("ansible-galaxy"), "collection", "build", coll, "--output-path", str(work / "dist"),
                    "--force"], check=True, capture_output=True)
    built = [n for n in os.listdir(str(work / "dist")) if n.endswith(".tar.gz")]
    assert len(built) == 1, built
    os.makedirs(os.path.dirname(TARBALL), exist_ok=True)
    shutil.copy2(str(work / "dist" / built[0]), TARBALL)
    ctx = work / "context"
    env = dict(os.environ, http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9")  # no network wanted
    cp = subprocess.run([tool("ansible-builder"), "create", "-f", EE_FILE, "-c", str(ctx),
                         "--output-filename", "Containerfile", "-v", "3"],
                        capture_output=True, text=True, env=env, check=False)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "No matches" not in cp.stdout + cp.stderr, cp.stdout + cp.stderr
    return ctx


def read(path):
    with open(str(path), encoding="utf-8") as handle:
        return handle.read()


def test_definition_is_v3():
    with open(EE_FILE, encoding="utf-8") as handle:
        definition = yaml.safe_load(handle)
    assert definition["version"] == 3
    deps = definition["dependencies"]
    assert {"ansible_core", "ansible_runner", "galaxy", "python", "system"} <= set(deps)
    # the collection's own EE metadata points at the same requirement files
    with open(os.path.join(CHECKOUT, "meta", "execution-environment.yml"), encoding="utf-8") as handle:
        meta = yaml.safe_load(handle)
    assert meta["dependencies"] == {"python": "requirements.txt", "system": "bindep.txt"}


def test_containerfile(context):
    text = read(context / "Containerfile")
    assert "FROM $EE_BASE_IMAGE AS base" in text
    assert "ansible-galaxy collection install" in text and "-r requirements.yml" in text
    assert "COPY _build /build" in text
    assert "introspect" in text and "requirements.txt" in text and "bindep.txt" in text
    assert "ansible-core" in text and "ansible-runner" in text


def test_copied_requirement_files(context):
    build = context / "_build"
    assert read(build / "requirements.txt") == read(os.path.join(CHECKOUT, "requirements.txt"))
    assert read(build / "bindep.txt") == read(os.path.join(CHECKOUT, "bindep.txt"))
    galaxy = yaml.safe_load(read(build / "requirements.yml"))
    entry = galaxy["collections"][0]
    assert entry["type"] == "file"
    # the galaxy stage runs in /build, a copy of _build/: the tarball must be where the requirement says
    tarball = build / entry["name"]
    assert tarball.is_file()
    with tarfile.open(str(tarball)) as handle:
        manifest = handle.extractfile("MANIFEST.json").read().decode()
        names = handle.getnames()
    assert '"namespace": "llmserve"' in manifest and '"name": "sglang"' in manifest
    assert "meta/execution-environment.yml" in names and "playbooks/deploy.yml" in names
    assert not [n for n in names if n.startswith((".venv", ".tmp/", "tests/output"))]
