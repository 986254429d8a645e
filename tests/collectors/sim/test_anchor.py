"""Anchor keys: the same screen at two clock times shares a key, different screens do not."""

from __future__ import annotations

import io
import random

import pytest
from PIL import Image

from episodelake.collectors.envs.sim.navigation import tap
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.lake.derive.anchor import (
    AnchorKeyer,
    group_anchor_keys,
    hamming,
    phash64,
    ui_tree_hash,
)


def screen(seed: int, *actions: dict) -> Phone:
    phone = Phone(seed)
    for action in actions:
        assert phone.step(action).valid
    return phone


OPEN_SETTINGS = {"action": "open", "text": "Settings"}


def test_same_screen_at_two_clock_times_gets_the_same_key():
    early, late = screen(1, OPEN_SETTINGS), screen(2, {"action": "wait"}, OPEN_SETTINGS)
    assert early.state.clock_text != late.state.clock_text
    assert early.screenshot() != late.screenshot()
    assert early.screen_id() == late.screen_id()
    assert phash64(early.screenshot()) == phash64(late.screenshot()) == phash64(late.image())
    assert ui_tree_hash(early.ui_tree()) == ui_tree_hash(late.ui_tree())
    for mode in ("phash", "ui_tree", "auto"):
        keyer = AnchorKeyer(mode=mode)
        keys = [keyer.key("g", image=p.screenshot(), ui_tree=p.ui_tree()) for p in (early, late)]
        assert keys[0] == keys[1]


def test_different_screens_get_different_keys():
    phones = [screen(0), screen(0, OPEN_SETTINGS), screen(0, {"action": "open", "text": "Contacts"}),
              screen(0, {"action": "open", "text": "Shop"})]
    network = screen(0, OPEN_SETTINGS)
    network.step(tap(network, "network"))
    phones.append(network)
    for mode in ("phash", "ui_tree"):
        keyer = AnchorKeyer(mode=mode)
        keys = [keyer.key("g", image=p.image(), ui_tree=p.ui_tree()) for p in phones]
        assert len(set(keys)) == len(keys), mode


def test_phash_is_a_signed_64_bit_integer_robust_to_small_changes():
    phone = screen(0, {"action": "open", "text": "Contacts"})
    value = phash64(phone.screenshot())
    assert -(1 << 63) <= value < 1 << 63
    buffer = io.BytesIO()
    phone.image().save(buffer, format="JPEG", quality=85)
    assert hamming(value, phash64(buffer.getvalue())) <= 4
    smaller = phone.image().resize((432, 960))
    assert hamming(value, phash64(smaller)) <= 4
    other = phash64(screen(0, {"action": "open", "text": "Clock"}).image())
    assert hamming(value, other) > 10


def test_phash_checks_the_status_bar_height():
    with pytest.raises(ValueError, match="status_bar_px"):
        phash64(Image.new("RGB", (10, 20)), status_bar_px=25)


def test_hamming_treats_signed_and_unsigned_alike():
    assert hamming(-1, (1 << 64) - 1) == 0
    assert hamming(0, -1) == 64
    assert hamming(0b1011, 0b0001) == 2


def test_ui_tree_hash_ignores_only_the_status_bar():
    phone = screen(0, OPEN_SETTINGS)
    tree = phone.ui_tree()
    moved = tree.replace(f'text="{phone.state.clock_text}"', 'text="23:59"')
    assert moved != tree and ui_tree_hash(moved) == ui_tree_hash(tree)
    assert ui_tree_hash(tree.replace("Network &amp; internet", "Network")) != ui_tree_hash(tree)


def test_keyer_clusters_within_a_group_only():
    keyer = AnchorKeyer(threshold=2, mode="phash")
    assert keyer.key("a", phash=0b0000) == keyer.key("a", phash=0b0011) == "ph:0000000000000000"
    assert keyer.key("a", phash=0b1111) == "ph:000000000000000f"  # 4 bits from 0: a new cluster
    assert keyer.key("a", phash=0b0111) == "ph:000000000000000f"  # the nearest representative
    assert keyer.key("b", phash=0b0011) == "ph:0000000000000003"  # b has its own clusters
    keyer.forget("a")
    assert keyer.key("a", phash=0b0011) == "ph:0000000000000003"


def test_keyer_arguments_are_checked():
    with pytest.raises(ValueError, match="threshold"):
        AnchorKeyer(threshold=64)
    with pytest.raises(ValueError, match="mode"):
        AnchorKeyer(mode="exact")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs ui_tree"):
        AnchorKeyer(mode="ui_tree").key("g", phash=1)
    with pytest.raises(ValueError, match="screenshot"):
        AnchorKeyer().key("g")


def test_group_keys_do_not_depend_on_order():
    hashes = [0, 1, 3, 0xFF00, 0xFF01, -1, 7]
    keys = dict(zip(hashes, group_anchor_keys(hashes, threshold=1), strict=True))
    shuffled = hashes[:]
    random.Random(0).shuffle(shuffled)
    assert dict(zip(shuffled, group_anchor_keys(shuffled, threshold=1), strict=True)) == keys
    assert keys[0] == keys[1] == keys[3] == keys[7] and keys[0xFF00] == keys[0xFF01] != keys[0]


def test_screen_ids_and_ui_trees_agree(oracle_runs):
    """The ground-truth label and the tree describe the same thing: equal labels have equal
    trees and equal trees have equal labels (so the label misses no visible state). The dark
    theme is drawn, not dumped (as on Android, a uiautomator tree has no colours), so a
    screen in either theme is one tree; the long settings tour visits pages after turning
    the dark theme on."""
    by_label: dict[str, set[str]] = {}
    by_tree: dict[str, set[str]] = {}
    for run in oracle_runs:
        for label, tree in run.labels:
            by_label.setdefault(label, set()).add(tree)
            by_tree.setdefault(tree, set()).add(label.replace(",theme=dark", ""))
    assert len(by_label) > 100
    assert {k: v for k, v in by_label.items() if len(v) > 1} == {}
    assert {k: v for k, v in by_tree.items() if len(v) > 1} == {}
