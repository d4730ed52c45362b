"""The plan verifier's problem collector (ptc.sched.verify and its groups verify_structure,
verify_order and verify_resources add to one)."""
from __future__ import annotations


class Problems:
    """What is wrong with a plan, one sentence each, in the order found; a problem with the
    same key as an earlier one (the message by default) is not repeated."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.item_keys: list = []      # the key of each item, in order
        self.keys: set = set()

    def add(self, message: str, key=None) -> None:
        key = key if key is not None else message
        if key not in self.keys:
            self.keys.add(key)
            self.items.append(message)
            self.item_keys.append(key)
