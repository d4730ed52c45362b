"""What a device description holds, as frozen dataclasses (built by `ptc.devices.loader`).

Units of measure: every throughput is *per clock, per EU, for the whole group of `count`
units*; latencies are in EU clock cycles. A task of `work` (bytes or FLOPs or ops) on a unit
is modelled as

    the issuing warp is busy for   issue_latency_cycles   (+ work / throughput when not async)
    the unit is busy for           issue_latency_cycles + work / throughput
    the result is usable after     latency_cycles + work / throughput

so `latency_cycles` is the fixed pipeline / round-trip cost on top of the time the work itself
takes at the unit's throughput.

Throughput keys by unit kind: copy -- `bytes`; mma -- FLOPs per input dtype (an FMA is 2;
`tf32` is the tensor-core path for f32 inputs, `f32` a true f32 matrix instruction); simt --
elementwise results per dtype (an FMA is one); sfu -- transcendental results per dtype.
A unit with `shares: other` issues through `other`'s pipeline (AMD's transcendentals run on
the VALU): time on one is time on both.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path


class UnitKind(StrEnum):
    """What an execution unit does (a StrEnum: it equals, prints and writes as its value,
    the device YAML's `kind`)."""

    COPY = "copy"
    MMA = "mma"
    SIMT = "simt"
    SFU = "sfu"


# what a copy unit is, for the passes that treat copies differently (they read the role,
# never a unit's name): a bulk tensor copy moves a whole box from a descriptor, one thread
# issuing it, laid out in its own panels and completing on an mbarrier (TMA); a per-thread
# copy is issued by every thread for its own elements (cp.async, global/buffer loads)
COPY_ROLES = ("bulk_tensor_copy", "per_thread_copy")
# the name a device's shared memory goes by in plans and reports
SHARED_SPACES = ("smem", "lds")


@dataclass(frozen=True)
class Throughput(Mapping):
    """An immutable, hashable mapping: dtype (or `bytes`) -> amount per clock per EU."""

    pairs: tuple[tuple[str, float], ...]

    def __getitem__(self, key: str) -> float:
        for k, v in self.pairs:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self.pairs)

    def __len__(self) -> int:
        return len(self.pairs)

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k}: {v:g}" for k, v in self.pairs) + "}"


@dataclass(frozen=True)
class Unit:
    """One kind of specialized execution unit (sEU) of an EU."""

    name: str
    kind: UnitKind
    is_async: bool  # False: issuing it occupies the issuing warp for the whole task
    count: int  # how many such units per EU (throughput already covers all of them)
    throughput: Throughput
    issue_latency_cycles: int
    latency_cycles: int
    shares: str | None = None  # another unit whose pipeline this one issues through
    # an async unit whose operations one thread sees complete in issue order (cp.async and
    # wgmma groups, counted by wait_group; vmcnt): when a later one has completed, so have
    # the earlier ones. TMA loads are not (each completes its own mbarrier).
    in_order: bool = False
    role: str | None = None  # a copy unit's COPY_ROLES entry (None for other kinds)

    @property
    def is_bulk_tensor_copy(self) -> bool:
        return self.role == "bulk_tensor_copy"

    def cycles(self, work: float, dtype: str = "bytes") -> float:
        """Cycles the unit is busy for `work` bytes/FLOPs/ops of `dtype` (issue included)."""
        rate = self.throughput.get(dtype)
        if rate is None:
            raise KeyError(f"unit {self.name!r} has no throughput for {dtype!r} "
                           f"(it has: {', '.join(self.throughput)})")
        return self.issue_latency_cycles + work / rate


@dataclass(frozen=True)
class Memory:
    dram_bandwidth_gbs: float  # GB/s (10^9 bytes per second)
    dram_bytes: int
    l2_bytes: int
    l2_bandwidth_gbs: float
    dram_latency_cycles: int


@dataclass(frozen=True)
class Resources:
    """What one EU offers the blocks resident on it."""

    shared_memory_bytes: int  # usable by one block
    shared_memory_per_eu_bytes: int  # shared by all resident blocks
    registers: int  # 32-bit registers per EU
    max_registers_per_thread: int
    max_threads: int  # resident per EU
    max_threads_per_block: int
    warp_size: int
    warpgroup_size: int  # warps per warpgroup; 1 where there is no such thing
    named_barriers: int  # per block
    max_blocks: int  # resident per EU
    shared_bytes_per_cycle: int  # shared memory (LDS) bandwidth of one EU
    exchanges_per_cycle: float  # warp-wide lane exchanges (shuffles) one EU completes per cycle
    schedulers_per_eu: int  # what its warps are spread over: SM sub-partitions, CDNA's SIMDs
    fragment_load_bytes: int  # bytes one matrix-fragment load moves per warp
    # registers per thread the vector ALU reads (CDNA's arch VGPRs); beyond them, up to
    # max_registers_per_thread, registers only matrix-core accumulators use (AGPRs). The
    # YAML may leave it out: then every register is an ALU register.
    alu_registers_per_thread: int = 0

    @property
    def alu_registers(self) -> int:
        return self.alu_registers_per_thread or self.max_registers_per_thread

    def resident_blocks(self, threads: int, block_registers: int, shared_bytes: int) -> int:
        """Blocks of `threads` threads holding `block_registers` registers and
        `shared_bytes` of shared memory each that one EU keeps resident at once (0: not
        one fits). The one occupancy formula: the lowering, the cost model, explain and the
        printers read it (through the lowered launch or the plan)."""
        if threads <= 0 or threads > self.max_threads_per_block:
            return 0
        return max(0, min(self.max_blocks,
                          self.max_threads // threads,
                          self.registers // block_registers if block_registers > 0
                          else self.max_blocks,
                          self.shared_memory_per_eu_bytes // max(shared_bytes, 1)))


@dataclass(frozen=True)
class Terms:
    """The device's own words for what plans count, in explain's text and messages: the
    lanes that issue together, the block of threads, the execution unit, the reads
    that fill matrix fragments from shared memory, and the block's shared memory itself."""

    warp: str = "warp"
    block: str = "CTA"
    eu: str = "SM"
    fragment_load: str = "ldmatrix"
    shared: str = "shared memory"

    def warps(self, n: int) -> str:
        return f"{n} {self.warp}" + ("" if n == 1 else "s")

    def blocks(self, n: int) -> str:
        return f"{n} {self.block}" + ("" if n == 1 else "s")


@dataclass(frozen=True)
class Device:
    name: str
    description: str
    vendor: str  # nvidia | amd
    backend: str  # cuda | hip
    arch: str  # what nvcc -arch / hipcc --offload-arch gets
    clock_ghz: float
    eu_count: int
    memory: Memory
    resources: Resources
    units: tuple[Unit, ...]
    features: frozenset[str]
    path: Path
    shared_space: str = "smem"  # SHARED_SPACES: what plans call a block's shared memory
    terms: Terms = Terms()

    @property
    def clock_hz(self) -> float:
        return self.clock_ghz * 1e9

    @property
    def dram_bytes_per_cycle_per_eu(self) -> float:
        """This EU's fair share of DRAM bandwidth, in bytes per EU clock."""
        return self.memory.dram_bandwidth_gbs * 1e9 / self.clock_hz / self.eu_count

    @property
    def l2_bytes_per_cycle_per_eu(self) -> float:
        return self.memory.l2_bandwidth_gbs * 1e9 / self.clock_hz / self.eu_count

    def units_of(self, kind: UnitKind) -> tuple[Unit, ...]:
        if kind not in tuple(UnitKind):
            raise ValueError(f"unknown unit kind {kind!r} "
                             f"(expected one of {', '.join(UnitKind)})")
        return tuple(u for u in self.units if u.kind == kind)

    def unit(self, name: str) -> Unit:
        for u in self.units:
            if u.name == name:
                return u
        raise KeyError(f"{self.name} has no unit {name!r} "
                       f"(it has: {', '.join(u.name for u in self.units)})")

    def mma_dtypes(self) -> tuple[str, ...]:
        """The input dtypes some mma unit of this device multiplies."""
        seen: dict[str, None] = {}
        for u in self.units_of(UnitKind.MMA):
            seen.update(dict.fromkeys(u.throughput))
        return tuple(seen)

    def peak_flops(self, dtype: str) -> float:
        """Dense FLOP/s of the whole device for mma inputs of `dtype` (e.g. 'f16', 'tf32')."""
        per_clock = sum(u.throughput.get(dtype, 0.0) for u in self.units_of(UnitKind.MMA))
        if not per_clock:
            raise ValueError(f"{self.name} has no mma unit for {dtype!r} "
                             f"(it multiplies: {', '.join(self.mma_dtypes())})")
        return per_clock * self.clock_hz * self.eu_count

    def peak_dram_bytes_per_s(self) -> float:
        return self.memory.dram_bandwidth_gbs * 1e9
