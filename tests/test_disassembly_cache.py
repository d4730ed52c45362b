"""A disassembly kept by content (ptc.runtime.object_cache.disassembly), without a compiler:
the SASS checks of a warm suite read cuobjdump's text from the cache."""
from __future__ import annotations

import pytest

from ptc.runtime import object_cache


@pytest.mark.parametrize("change", ["nothing", "bytes", "tool"])
def test_a_disassembly_is_kept_by_the_tool_and_the_files_bytes(change, tmp_path, monkeypatch):
    """object_cache.disassembly (cuobjdump's SASS of a built library): the same bytes in
    another folder are not disassembled again; other bytes, or a reinstalled tool, are."""
    monkeypatch.setenv("PTC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PTC_STAGE_CACHE", raising=False)
    tool = tmp_path / "cuobjdump"
    tool.write_text("#!/bin/sh\n")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "lib.so").write_bytes(b"\x7fELF one")
    (tmp_path / "b" / "lib.so").write_bytes(b"\x7fELF one")
    runs = []

    def dump(folder):
        return lambda: runs.append(folder) or f"SASS of {folder}"
    first = object_cache.disassembly(str(tool), ("--dump-sass",), tmp_path / "a" / "lib.so",
                                     dump("a"))
    if change == "bytes":
        (tmp_path / "b" / "lib.so").write_bytes(b"\x7fELF two")
    if change == "tool":
        tool.write_text("#!/bin/sh\n# a newer release\n")
    second = object_cache.disassembly(str(tool), ("--dump-sass",), tmp_path / "b" / "lib.so",
                                      dump("b"))
    assert first == "SASS of a"
    if change == "nothing":
        assert runs == ["a"] and second == first
    else:
        assert runs == ["a", "b"] and second == "SASS of b"
