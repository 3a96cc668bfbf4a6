"""Kernel launches of a compiled XLA program, read from its optimised HLO text.

On a GPU every fusion, custom call and unfused operation of a computation is one kernel launch,
and a `while` loop launches its condition and body once per iteration. At small and medium batch
sizes a GPU's time is these launches (a few µs each), so "launches per iteration of the outer
loop" (one game-turn of a batch) is the figure to keep small. `launch_counts` reads them from
`compiled.as_text()` of any backend (the counting is the same; a CPU program's "launches" are
its kernel calls), counting nested loops by their trip counts.
"""

from __future__ import annotations

import dataclasses
import re

# Opcodes that launch nothing: bookkeeping, control flow (counted through their computations).
NO_LAUNCH = frozenset({
    "parameter", "constant", "get-tuple-element", "tuple", "bitcast", "while", "conditional",
    "call", "after-all", "add-dependency", "opt-barrier", "partition-id", "replica-id",
    "domain", "get-dimension-size"})
COLLECTIVES = frozenset({
    "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
    "all-reduce-start", "all-gather-start", "collective-permute-start", "reduce-scatter-start",
    "all-to-all-start", "send", "recv", "collective-broadcast"})

_ARRAY = re.compile(r"\b(pred|s8|u8|s16|u16|f16|bf16|s32|u32|f32|s64|u64|f64|c64|c128)"
                    r"\[([0-9,]*)\]")
_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4,
          "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s+\(.*\)\s*->\s*.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s+(?:ROOT\s+)?%?([\w.\-]+)\s+=\s+(.*)$")


def _type_bytes(text: str) -> int:
    """Bytes of every array in an HLO type (a tuple's elements summed)."""
    total = 0
    for dtype, dims in _ARRAY.findall(text):
        size = 1
        for d in filter(None, dims.split(",")):
            size *= int(d)
        total += size * _BYTES[dtype]
    return total


def _result_type(rhs: str) -> str:
    """The type at the start of an instruction's right-hand side."""
    if rhs.startswith("("):
        depth = 0
        for index, char in enumerate(rhs):
            depth += (char == "(") - (char == ")")
            if depth == 0:
                return rhs[:index + 1]
    return rhs.split(" ", 1)[0]


def _opcode(rhs: str) -> str | None:
    """The opcode of an instruction's right-hand side `TYPE opcode(operands), attrs`."""
    if rhs.startswith("("):  # a tuple type: skip to its closing parenthesis
        depth, start = 0, len(rhs)
        for index, char in enumerate(rhs):
            depth += (char == "(") - (char == ")")
            if depth == 0:
                start = index + 1
                break
    else:
        start = rhs.find(" ")
    match = re.match(r"\s*([a-z][a-z0-9\-]*)\(", rhs[start:])
    return match.group(1) if match else None


def computations(hlo_text: str) -> tuple[dict[str, list[tuple[str, str | None, str]]], str]:
    """`({name: [(instruction, opcode, rhs)]}, entry name)` of an HLO module's text."""
    found: dict[str, list] = {}
    entry, current = "", None
    for line in hlo_text.splitlines():
        if current is None:
            header = _HEADER.match(line)
            if header:
                current = header.group(2)
                found[current] = []
                entry = current if header.group(1) else entry
            continue
        if line.strip() == "}":
            current = None
            continue
        instruction = _INSTRUCTION.match(line)
        if instruction:
            name, rhs = instruction.groups()
            found[current].append((name, _opcode(rhs), rhs))
    return found, entry


@dataclasses.dataclass
class Loop:
    """One `while` loop: its launches per iteration (condition and body, nested loops by their
    trip counts) and its trip count (None when XLA does not know it: the turn loop)."""

    name: str
    depth: int
    trip_count: int | None
    own: int            # launches of the body and condition themselves, per iteration
    per_iteration: int  # own + the nested loops' launches, per iteration
    collectives: int    # collectives per iteration, nested loops included
    loops: list[Loop]
    # Bytes the launches of one iteration read and write (nested loops by their trip counts):
    # each launch's operands and results counted whole, an upper bound on its memory traffic
    # (a kernel that updates a slice of a buffer in place is counted as the whole buffer).
    bytes_per_iteration: int = 0


def _own(instructions) -> tuple[int, int]:
    """(kernel launches, collectives) of one computation's own instructions."""
    launches = collectives = 0
    for _, op, _ in instructions:
        if op is None or op in NO_LAUNCH or op == "copy":
            # A copy is a memcpy, not a kernel; it is not counted as a launch.
            continue
        if op in COLLECTIVES or op.endswith("-done"):
            collectives += op in COLLECTIVES
            continue
        launches += 1
    return launches, collectives


def _launches(instructions):
    """The instructions of one computation that launch a kernel."""
    return [(name, op, rhs) for name, op, rhs in instructions
            if not (op is None or op in NO_LAUNCH or op == "copy" or op in COLLECTIVES
                    or op.endswith("-done"))]


def _walk_bytes(comps, name: str) -> int:
    """Bytes read and written by the launches of computation `name` per execution."""
    instructions = comps.get(name, [])
    types = {n: _result_type(rhs) for n, _, rhs in instructions}
    total = 0
    for _, _, rhs in _launches(instructions):
        result = _result_type(rhs)
        operands = re.search(r"\(([^)]*)\)", rhs[len(result):])
        names = re.findall(r"%?([\w.\-]+)", operands.group(1)) if operands else []
        total += _type_bytes(result) + sum(_type_bytes(types.get(n, "")) for n in names)
    for _, op, rhs in instructions:
        if op == "while":
            body = re.search(r"body=%?([\w.\-]+)", rhs).group(1)
            cond = re.search(r"condition=%?([\w.\-]+)", rhs).group(1)
            trip = re.search(r'"known_trip_count":\{"n":"(\d+)"', rhs)
            times = int(trip.group(1)) if trip else 1
            total += times * (_walk_bytes(comps, body) + _walk_bytes(comps, cond))
        elif op == "conditional":
            branches = re.search(r"branch_computations=\{([^}]*)\}", rhs)
            called = (re.findall(r"%?([\w.\-]+)", branches.group(1)) if branches else
                      re.findall(r"(?:true|false)_computation=%?([\w.\-]+)", rhs))
            total += sum(_walk_bytes(comps, c) for c in called)
        elif op == "call":
            total += sum(_walk_bytes(comps, c) for c in re.findall(r"to_apply=%?([\w.\-]+)", rhs))
    return total


def _walk(comps, name: str, depth: int) -> tuple[int, int, list[Loop]]:
    """(launches, collectives, loops) of computation `name` per execution."""
    launches, collectives = _own(comps.get(name, []))
    loops = []
    for instruction, op, rhs in comps.get(name, []):
        called = []
        if op == "while":
            body = re.search(r"body=%?([\w.\-]+)", rhs).group(1)
            cond = re.search(r"condition=%?([\w.\-]+)", rhs).group(1)
            trip = re.search(r'"known_trip_count":\{"n":"(\d+)"', rhs)
            b_launch, b_coll, b_loops = _walk(comps, body, depth + 1)
            c_launch, c_coll, c_loops = _walk(comps, cond, depth + 1)
            own = _own(comps.get(body, []))[0] + _own(comps.get(cond, []))[0]
            loop = Loop(instruction, depth, int(trip.group(1)) if trip else None, own,
                        b_launch + c_launch, b_coll + c_coll, b_loops + c_loops,
                        _walk_bytes(comps, body) + _walk_bytes(comps, cond))
            loops.append(loop)
            times = loop.trip_count if loop.trip_count is not None else 1
            launches += times * loop.per_iteration
            collectives += times * loop.collectives
            continue
        if op == "conditional":
            branches = re.search(r"branch_computations=\{([^}]*)\}", rhs)
            called = (re.findall(r"%?([\w.\-]+)", branches.group(1)) if branches else
                      re.findall(r"(?:true|false)_computation=%?([\w.\-]+)", rhs))
        elif op == "call":
            called = re.findall(r"to_apply=%?([\w.\-]+)", rhs)
        for callee in called:  # every branch counted: an upper bound for a conditional
            c_launch, c_coll, c_loops = _walk(comps, callee, depth)
            launches, collectives = launches + c_launch, collectives + c_coll
            loops.extend(c_loops)
    return launches, collectives, loops


def launch_counts(hlo_text: str) -> dict:
    """Kernel launches of an optimised HLO module.

    Returns:
      `entry`: launches of one execution of the whole program, a loop of unknown trip count
      (the turn loop) counted once; `loops`: the top-level `Loop`s (nested ones inside);
      `turn`: the `Loop` whose iteration the per-iteration figures count (None without loops);
      `outer_per_iteration`: launches per iteration of the first loop of unknown trip count, or
      of the outermost loop (for bsjax's turn loop: launches per game-turn); `collectives` per
      such iteration; `bytes_per_iteration` the bytes its launches read and write (an upper
      bound: see `Loop.bytes_per_iteration`); `data_dependent_loops`: the loops of unknown trip
      count inside that iteration, each counted once above (so a lower bound) and each a
      round trip to the host per round on a GPU.
    """
    comps, entry = computations(hlo_text)
    total, collectives, loops = _walk(comps, entry, 0)

    def outer(found: list[Loop]) -> Loop | None:
        for loop in found:
            if loop.trip_count is None:
                return loop
        for loop in found:
            inner = outer(loop.loops)
            if inner is not None:
                return inner
        return found[0] if found else None

    turn = outer(loops)

    def unknown_trips(found: list[Loop]) -> int:
        return sum((loop.trip_count is None) + unknown_trips(loop.loops) for loop in found)

    return {"entry": total, "collectives_entry": collectives, "loops": loops, "turn": turn,
            "data_dependent_loops": unknown_trips(turn.loops) if turn else unknown_trips(loops),
            "outer_per_iteration": turn.per_iteration if turn else total,
            "collectives_per_iteration": turn.collectives if turn else collectives,
            "bytes_per_iteration": (turn.bytes_per_iteration if turn
                                    else _walk_bytes(comps, entry))}


def _table(lines: list[str], title: str) -> dict[int, str]:
    """`{id: text}` of one of the module's tables (`FileNames`, ..., `StackFrames`)."""
    if title not in lines:
        return {}
    rows, index = {}, lines.index(title) + 1
    while index < len(lines) and re.match(r"\d+ ", lines[index]):
        key, text = lines[index].split(" ", 1)
        rows[int(key)] = text
        index += 1
    return rows


def source_frames(hlo_text: str) -> dict[int, tuple[str, ...]]:
    """Each stack frame of the module (`stack_frame_id=` in an instruction's metadata) as its
    call chain, innermost first, each `path:line (function)`; a path inside the `bsjax` package
    is given from it (`bsjax/...`). Empty where the text has no frame table."""
    lines = hlo_text.splitlines()
    files, functions = _table(lines, "FileNames"), _table(lines, "FunctionNames")
    locations, frames = _table(lines, "FileLocations"), _table(lines, "StackFrames")

    def where(location: int) -> str:
        fields = dict(re.findall(r"(\w+)=(\d+)", locations[location]))
        path = files[int(fields["file_name_id"])].strip('"')
        path = "bsjax/" + path.rsplit("/bsjax/", 1)[1] if "/bsjax/" in path else path
        function = functions[int(fields["function_name_id"])].strip('"')
        return f"{path}:{fields['line']} ({function})"

    chains = {}
    for frame in frames:
        chain, seen, current = [], set(), frame
        while current in frames and current not in seen:  # a root frame names itself
            seen.add(current)
            fields = dict(re.findall(r"(\w+)=(\d+)", frames[current]))
            chain.append(where(int(fields["file_location_id"])))
            current = int(fields.get("parent_frame_id", 0))
        chains[frame] = tuple(chain)
    return chains


def loop_launches(hlo_text: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """The launches of one iteration of the outer loop (`launch_counts`' turn), its body's and
    condition's own, in program order: `(instruction, result type, source chain)`. Loops nested
    in it are not expanded. What to read when a launch count moves: which code each kernel is."""
    comps, _ = computations(hlo_text)
    turn = launch_counts(hlo_text)["turn"]
    if turn is None:
        return []
    rhs = next(r for instructions in comps.values() for name, _, r in instructions
               if name == turn.name)
    frames = source_frames(hlo_text)
    found = []
    for part in ("body", "condition"):
        computation = re.search(part + r"=%?([\w.\-]+)", rhs).group(1)
        for name, _, text in _launches(comps.get(computation, [])):
            frame = re.search(r"stack_frame_id=(\d+)", text)
            found.append((name, _result_type(text),
                          frames.get(int(frame.group(1)), ()) if frame else ()))
    return found


def instruction_sources(hlo_text: str) -> dict[str, tuple[str, ...]]:
    """Every instruction of the module that names a stack frame, as `name: source chain`
    (innermost first): what a profiler's kernel is in the code (a GPU kernel is named after its
    instruction, with "." as "_")."""
    comps, _ = computations(hlo_text)
    frames = source_frames(hlo_text)
    found = {}
    for instructions in comps.values():
        for name, _, text in instructions:
            frame = re.search(r"stack_frame_id=(\d+)", text)
            if frame and int(frame.group(1)) in frames:
                found[name] = frames[int(frame.group(1))]
    return found


__all__ = ["COLLECTIVES", "Loop", "NO_LAUNCH", "computations", "instruction_sources",
           "launch_counts", "loop_launches", "source_frames"]
