"""The lab's slots (``labctl.py up --slots N``) and how a test session finds its own copy of the hosts, without the lab."""
import os

import pytest

import labctl
import labsession
from conftest import CHECKOUT


def test_one_slot_is_the_configured_lab():
    cfg = labctl.load_config(None)
    assert labctl.with_slots(cfg, 1)["hosts"] == cfg["hosts"]


def test_slots_copy_every_host_with_its_node_in_the_same_slot():
    cfg = labctl.load_config(None)
    lab = labctl.with_slots(cfg, 3)["hosts"]
    assert len(lab) == 3 * len(cfg["hosts"])
    assert lab["gpu01s1"]["ip"] == "10.77.0.51" and lab["gpu01s2"]["ip"] == "10.77.0.91"
    assert lab["ct129s2"]["node"] == "pve01s2" and lab["ct129s2"]["vmid"] == cfg["hosts"]["ct129"]["vmid"]
    assert lab["ct130s1"]["unprivileged"] is True and lab["ct130s1"]["onboot"] is False
    assert len(set(h["ip"] for h in lab.values())) == len(lab)
    assert cfg["hosts"]["ct129"]["node"] == "pve01"      # the configured hosts are not changed


@pytest.mark.parametrize("slots, why", [(0, "at least 1"), (8, "no copy in 10.77.0.0/24")])
def test_slots_refused(slots, why):
    with pytest.raises(ValueError, match=why):
        labctl.with_slots(labctl.load_config(None), slots)


def test_a_worker_finds_its_slot(monkeypatch):
    monkeypatch.delenv("LLMSERVE_LAB_SLOT", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert labsession.slot() == 0
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    assert labsession.slot() == 2
    assert labsession.slot_ips({"gpu01": "10.77.0.11"}) == {"gpu01": "10.77.0.91"}
    assert labsession.lab_host("ct129") == "ct129s2"
    monkeypatch.setenv("LLMSERVE_LAB_SLOT", "1")
    assert labsession.slot() == 1


def test_slot_inventory_moves_only_the_addresses():
    assert labsession.slot_inventory(0) == os.path.join(CHECKOUT, "inventories", "lab")
    path = labsession.slot_inventory(1)
    with open(os.path.join(CHECKOUT, "inventories", "lab", "hosts.yml"), encoding="utf-8") as f:
        mine = f.read()
    with open(os.path.join(path, "hosts.yml"), encoding="utf-8") as f:
        theirs = f.read()
    assert theirs == mine.replace("10.77.0.11", "10.77.0.51").replace("10.77.0.12", "10.77.0.52").replace(
        "10.77.0.13", "10.77.0.53").replace("10.77.0.10", "10.77.0.50")
    assert sorted(os.listdir(os.path.join(path, "group_vars"))) == sorted(
        os.listdir(os.path.join(CHECKOUT, "inventories", "lab", "group_vars")))


class _Item(object):
    def __init__(self, path):
        self.fspath = path


class _Config(object):
    def __init__(self, workers, worker=False):
        self.option = type("Option", (), {"numprocesses": workers})()
        if worker:
            self.workerinput = {"workerid": "gw1"}


def test_long_files_first_only_side_by_side():
    names = ["/t/test_a.py", "/t/test_b.py", "/t/test_b.py", "/t/test_c.py"]
    items = [_Item(n) for n in names]
    labsession.long_files_first(_Config(0), items, ("test_c.py", "test_b.py"))
    assert [i.fspath for i in items] == names                      # no workers: the usual order
    items = [_Item(n) for n in names]
    for item, n in zip(items, range(4)):
        item.n = n
    labsession.long_files_first(_Config(3), items, ("test_c.py", "test_b.py"))
    assert [i.n for i in items] == [3, 1, 2, 0]                     # c, then b's two in their order, then a
    items = [_Item(n) for n in names]
    labsession.long_files_first(_Config(None, worker=True), items, ("test_c.py",))
    assert [i.fspath for i in items][0] == "/t/test_c.py"          # a worker orders as its controller does


def test_a_provided_lab_is_used_as_it_is(monkeypatch):
    """Under tests/ci/run_gates.py's group the lab is up and held: a session neither brings it up nor takes it down
    (labctl here would fail: /bin/false)."""
    monkeypatch.setenv("LLMSERVE_LAB_PROVIDED", "1")
    with labsession.lab_session(labctl=["/bin/false"]) as out:
        assert out == ""
