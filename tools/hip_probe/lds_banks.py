"""LDS bank-conflict check of mainloop.hip's operand layout, by the phase rules of
docs/hip.md ("LDS"): 32 banks of 4 bytes; a wave64 ds_write_b128 runs in 8 phases of 8
consecutive lanes; a ds_read_b128 in 8 phases of lanes {0-3, 20-23}, {4-7, 16-19},
{8-11, 28-31}, {12-15, 24-27} and the same + 32 (composable_kernel,
docs/conceptual/ck_tile/hardware/lds_bank_conflicts.rst). A phase is conflict-free when no
two lanes touch different 4-byte words of one bank.

    python3 tools/hip_probe/lds_banks.py
"""
CHUNKS = 4                                    # 16-byte chunks per 64-byte row (BK = 32 bf16)
WRITE_PHASES = [list(range(p, p + 8)) for p in range(0, 64, 8)]
READ_PHASES = [list(range(a, a + 4)) + list(range(b, b + 4)) for base in (0, 32)
               for a, b in ((base + 0, base + 20), (base + 4, base + 16),
                            (base + 8, base + 28), (base + 12, base + 24))]


def chunk_addr(row: int, chunk: int, swizzle: bool) -> int:
    return 16 * (row * CHUNKS + (chunk ^ ((row >> 1) & 3) if swizzle else chunk))


def conflicts(addrs: dict[int, int], phases: list[list[int]]) -> int:
    """Extra passes a 16-byte-per-lane access needs over all phases."""
    extra = 0
    for phase in phases:
        words: dict[int, set[int]] = {}
        for lane in phase:
            for w in range(4):
                word = addrs[lane] // 4 + w
                words.setdefault(word % 32, set()).add(word)
        extra += max(len(s) for s in words.values()) - 1
    return extra


def main() -> None:
    for swizzle in (False, True):
        # the fill: thread t writes chunk t % 4 of row t / 4 (one wave: rows 0..15)
        w = conflicts({lane: chunk_addr(lane // CHUNKS, lane % CHUNKS, swizzle)
                       for lane in range(64)}, WRITE_PHASES)
        # the fragment reads: lane l reads row l % 32, chunk 2 ks + l / 32
        r = [conflicts({lane: chunk_addr(lane % 32, 2 * ks + lane // 32, swizzle)
                        for lane in range(64)}, READ_PHASES) for ks in range(2)]
        print(f"{'swizzled' if swizzle else 'row-major'}: ds_write_b128 extra passes {w}, "
              f"ds_read_b128 extra passes {r}")


if __name__ == "__main__":
    main()
