"""Question catalog, region DSL and in-graph region helpers (bsjax.battleship.game.questions)."""

from __future__ import annotations

import collections

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsjax.battleship.game import bitboard, region_dsl, state_regions
from bsjax.battleship.game import questions as q

SETTINGS = settings(max_examples=60, deadline=None)

hit_clusters_j = jax.jit(state_regions.hit_clusters, static_argnames=("rows", "cols"))
# With a hit bound, by platform (this CPU: the loop).
hit_clusters_by_platform_j = jax.jit(state_regions.hit_clusters,
                                     static_argnames=("rows", "cols", "max_hits"))
frontier_j = jax.jit(state_regions.frontier, static_argnames=("rows", "cols"))
frontier_ring_j = jax.jit(state_regions.frontier_ring, static_argnames=("rows", "cols"))
cluster_neighborhood_j = jax.jit(state_regions.cluster_neighborhood,
                                 static_argnames=("rows", "cols"))
answer_j = jax.jit(state_regions.answer)

SHAPES = [(8, 8), (5, 5)]


# ----------------------------------------------------------------------------- references


def neighbours(cell: int, rows: int, cols: int) -> list[int]:
    r, c = divmod(cell, cols)
    out = []
    for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
        if 0 <= rr < rows and 0 <= cc < cols:
            out.append(rr * cols + cc)
    return out


def bfs_labels(hit: list[bool], rows: int, cols: int) -> list[int]:
    """Plain-Python reference: -1 off hits, else the smallest cell index of the component."""
    labels = [-1] * (rows * cols)
    for start in range(rows * cols):  # ascending, so `start` is the component's minimum
        if not hit[start] or labels[start] != -1:
            continue
        labels[start] = start
        queue = collections.deque([start])
        while queue:
            cell = queue.popleft()
            for nb in neighbours(cell, rows, cols):
                if hit[nb] and labels[nb] == -1:
                    labels[nb] = start
                    queue.append(nb)
    return labels


def manhattan(a: int, b: int, cols: int) -> int:
    (ra, ca), (rb, cb) = divmod(a, cols), divmod(b, cols)
    return abs(ra - rb) + abs(ca - cb)


@st.composite
def board_states(draw, rows: int, cols: int):
    """(hit, unknown) lists of a random observation state: each cell unknown, hit or miss."""
    states = draw(st.lists(st.sampled_from([0, 1, 2]), min_size=rows * cols,
                           max_size=rows * cols))
    return [s == 1 for s in states], [s == 0 for s in states]


@st.composite
def shaped_states(draw):
    rows, cols = draw(st.sampled_from(SHAPES))
    hit, unknown = draw(board_states(rows, cols))
    anchor = draw(st.integers(0, rows * cols - 1))
    level = draw(st.sampled_from([1, 2]))
    return rows, cols, hit, unknown, anchor, level


# ----------------------------------------------------------------------------- catalog


def test_catalog_size_and_indices():
    assert q.N_TEMPLATES == 83
    assert len(q.CATALOG) == 83
    assert [t.index for t in q.CATALOG] == list(range(83))
    assert len({t.qid for t in q.CATALOG}) == 83
    assert len({t.text for t in q.CATALOG}) == 83


@pytest.mark.parametrize("index, family, qid, text", [
    (0, "row", "row:A", "Is there a ship in row A?"),
    (7, "row", "row:H", "Is there a ship in row H?"),
    (8, "column", "column:1", "Is there a ship in column 1?"),
    (15, "column", "column:8", "Is there a ship in column 8?"),
    (16, "quadrant", "quadrant:top-left", "Is there a ship in the top-left quadrant?"),
    (19, "quadrant", "quadrant:bottom-right", "Is there a ship in the bottom-right quadrant?"),
    (20, "row-band-2", "row-band-2:A-B", "Is there a ship in rows A-B?"),
    (26, "row-band-2", "row-band-2:G-H", "Is there a ship in rows G-H?"),
    (27, "column-band-2", "column-band-2:1-2", "Is there a ship in columns 1-2?"),
    (33, "column-band-2", "column-band-2:7-8", "Is there a ship in columns 7-8?"),
    (34, "block-2x2", "block-2x2:A1-B2", "Is there a ship in block A1-B2?"),
    (82, "block-2x2", "block-2x2:G7-H8", "Is there a ship in block G7-H8?"),
])
def test_family_boundaries(index, family, qid, text):
    t = q.CATALOG[index]
    assert (t.index, t.family, t.qid, t.text) == (index, family, qid, text)


def test_family_counts_order_and_sizes():
    counts = collections.Counter(t.family for t in q.CATALOG)
    assert counts == {"row": 8, "column": 8, "quadrant": 4, "row-band-2": 7,
                      "column-band-2": 7, "block-2x2": 49}
    sizes = {"row": 8, "column": 8, "quadrant": 16, "row-band-2": 16, "column-band-2": 16,
             "block-2x2": 4}
    for t in q.CATALOG:
        assert len(t.cells) == sizes[t.family], t.qid
        assert list(t.cells) == sorted(set(t.cells))
    # Families are contiguous and in FAMILIES order.
    ids = q.family_ids()
    assert ids.dtype == np.int32 and ids.shape == (83,)
    assert np.all(np.diff(ids) >= 0)
    assert [q.FAMILIES[i] for i in ids] == [t.family for t in q.CATALOG]
    assert q.FAMILIES == ("row", "column", "quadrant", "row-band-2", "column-band-2",
                          "block-2x2")


def test_rows_columns_bands():
    for r in range(8):
        assert q.CATALOG[r].cells == tuple(range(8 * r, 8 * r + 8))
        assert q.CATALOG[8 + r].cells == tuple(range(r, 64, 8))
    for k in range(7):
        assert q.CATALOG[20 + k].cells == tuple(range(8 * k, 8 * k + 16))
        assert q.CATALOG[27 + k].cells == tuple(sorted(list(range(k, 64, 8)) +
                                                       list(range(k + 1, 64, 8))))


def test_quadrant_cells():
    def rect(r0, c0):
        return tuple(8 * r + c for r in range(r0, r0 + 4) for c in range(c0, c0 + 4))

    assert q.CATALOG[16].cells == rect(0, 0)
    assert q.CATALOG[17].cells == rect(0, 4)
    assert q.CATALOG[18].cells == rect(4, 0)
    assert q.CATALOG[19].cells == rect(4, 4)
    assert 0 in q.CATALOG[16].cells and 63 in q.CATALOG[19].cells
    assert q.cell_index("A5") in q.CATALOG[17].cells and q.cell_index("E4") in q.CATALOG[18].cells
    union = np.zeros(64, int)
    for t in q.CATALOG[16:20]:
        union[list(t.cells)] += 1
    assert np.all(union == 1)


def test_block_anchors_row_major():
    blocks = q.CATALOG[34:]
    anchors = [t.cells[0] for t in blocks]
    assert anchors == [8 * r + c for r in range(7) for c in range(7)]
    assert [t.qid.split(":")[1].split("-")[0] for t in blocks[:8]] == [
        "A1", "A2", "A3", "A4", "A5", "A6", "A7", "B1"]
    for t in blocks:
        a = t.cells[0]
        assert t.cells == (a, a + 1, a + 8, a + 9)
        assert t.qid == f"block-2x2:{q.cell_name(a)}-{q.cell_name(a + 9)}"


def test_catalog_cells_and_bits_round_trip():
    cells = q.catalog_cells()
    assert cells.shape == (83, 64) and cells.dtype == bool
    for t in q.CATALOG:
        assert sorted(np.flatnonzero(cells[t.index]).tolist()) == list(t.cells)
    cells[0, :] = False  # a copy: the catalog is not mutated
    assert q.catalog_cells()[0].sum() == 8
    bits = q.catalog_bits()
    assert bits.shape == (83, 2) and bits.dtype == np.uint32
    np.testing.assert_array_equal(bitboard.unpack_np(bits, 64), q.catalog_cells())
    np.testing.assert_array_equal(np.asarray(bitboard.pack(jnp.asarray(q.catalog_cells()))), bits)
    # Row A is the low byte of word 0; row H the high byte of word 1.
    assert bits[0].tolist() == [0xFF, 0]
    assert bits[7].tolist() == [0, 0xFF000000]


def test_family_mask():
    coarse = q.family_mask(*q.COARSE_FAMILIES)
    local = q.family_mask(*q.LOCAL_FAMILIES)
    assert coarse.shape == (83,) and coarse.dtype == bool
    assert np.flatnonzero(coarse).tolist() == list(range(20))
    assert np.flatnonzero(local).tolist() == list(range(20, 83))
    assert np.flatnonzero(q.family_mask("quadrant")).tolist() == [16, 17, 18, 19]
    assert not q.family_mask().any()
    assert q.COARSE_FAMILIES + q.LOCAL_FAMILIES == q.FAMILIES
    with pytest.raises(ValueError, match="unknown question family"):
        q.family_mask("diagonal")


def test_template_by_qid():
    for t in q.CATALOG:
        assert q.template_by_qid(t.qid) is t
    assert q.template_by_qid("block-2x2:D5-E6").cells == (
        q.cell_index("D5"), q.cell_index("D6"), q.cell_index("E5"), q.cell_index("E6"))
    with pytest.raises(KeyError, match="no catalog template"):
        q.template_by_qid("row:Z")
    with pytest.raises(KeyError):
        q.template_by_qid("frontier-ring:E5:r1")


def test_cell_names():
    assert q.cell_index("E5") == 36
    assert q.cell_name(36) == "E5"
    assert q.cell_index("A1") == 0 and q.cell_index("H8") == 63
    assert q.cell_index(" e5 ") == 36
    for c in range(64):
        assert q.cell_index(q.cell_name(c)) == c
    for bad in ["I1", "A9", "A0", "E", "55", "", "AA1", None, 36]:
        with pytest.raises(ValueError):
            q.cell_index(bad)
    for bad in [-1, 64]:
        with pytest.raises(ValueError):
            q.cell_name(bad)


# ----------------------------------------------------------------------------- in graph


def test_hit_clusters_example():
    # . X X . . . . .    row A: cells 1, 2
    # . . X . . . . X    row B: cells 10, 15
    # . . . . . . . X    row C: cell 23
    # X . . . . . . .    row D: cell 24 (diagonal neighbours do not connect)
    # . X . . . . . .    row E: cell 33
    hit = np.zeros(64, bool)
    hit[[1, 2, 10, 15, 23, 24, 33]] = True
    labels = np.asarray(hit_clusters_j(jnp.asarray(hit), rows=8, cols=8))
    assert labels.dtype == np.int32
    expected = np.full(64, -1)
    expected[[1, 2, 10]] = 1
    expected[[15, 23]] = 15
    expected[24] = 24
    expected[33] = 33
    np.testing.assert_array_equal(labels, expected)


def test_hit_clusters_long_snake():
    # A serpentine path through every other row: the component's minimum has to travel its
    # full length, the worst case for min-label propagation.
    hit = np.zeros((8, 8), bool)
    hit[0::2, :] = True
    hit[1, 7] = hit[3, 0] = hit[5, 7] = True
    labels = np.asarray(hit_clusters_j(jnp.asarray(hit.reshape(64)), rows=8, cols=8))
    np.testing.assert_array_equal(labels, np.where(hit.reshape(64), 0, -1))
    full = np.asarray(hit_clusters_j(jnp.ones(64, bool), rows=8, cols=8))
    assert np.all(full == 0)
    empty = np.asarray(hit_clusters_j(jnp.zeros(64, bool), rows=8, cols=8))
    assert np.all(empty == -1)


@pytest.mark.parametrize("rows, cols", SHAPES)
@SETTINGS
@given(data=st.data())
def test_hit_clusters_matches_bfs(rows, cols, data):
    density = data.draw(st.sampled_from([0.2, 0.4, 0.6, 0.8]))
    seed = data.draw(st.integers(0, 2**31 - 1))
    hit = (np.random.default_rng(seed).random(rows * cols) < density).tolist()
    labels = np.asarray(hit_clusters_j(jnp.asarray(hit), rows=rows, cols=cols))
    assert labels.tolist() == bfs_labels(hit, rows, cols)


# 7 x 11: three words, and rows of 11 cells that straddle the words' boundaries.
@pytest.mark.parametrize("rows, cols", [*SHAPES, (7, 11)])
@SETTINGS
@given(data=st.data())
def test_hit_clusters_with_a_hit_bound_are_the_same_labels(rows, cols, data):
    """Unrolled to `max_hits - 1` rounds (no loop: a flood fill on bitboards), the labels are
    those of the loop (min-label propagation) whenever the hits are within the bound, the
    fleet's cells."""
    n = rows * cols
    # Bounds up to 24: every fleet's cell count (17 at most) and beyond; the rounds run eagerly,
    # a bound of C costs C - 1 rounds, and the longest snake below checks a bound of 35.
    max_hits = data.draw(st.integers(1, min(n, 24)))
    cells = data.draw(st.lists(st.integers(0, n - 1), max_size=max_hits, unique=True))
    hit = np.zeros(n, bool)
    hit[cells] = True
    # Eagerly: a jit per drawn bound would compile up to C unrolled programs.
    bounded = state_regions.hit_clusters(jnp.asarray(hit), rows, cols, max_hits, unroll=True)
    assert np.asarray(bounded).tolist() == bfs_labels(hit.tolist(), rows, cols)
    # The loop (`unroll=False` is the loop without a bound), compiled once per shape.
    loop = hit_clusters_j(jnp.asarray(hit), rows=rows, cols=cols)
    assert np.asarray(bounded).tolist() == np.asarray(loop).tolist()


def test_hit_clusters_bound_on_the_longest_snake():
    hit = np.zeros((8, 8), bool)
    hit[0::2, :] = True
    hit[1, 7] = hit[3, 0] = hit[5, 7] = True
    labels = state_regions.hit_clusters(jnp.asarray(hit.reshape(64)), 8, 8, int(hit.sum()), unroll=True)
    np.testing.assert_array_equal(np.asarray(labels), np.where(hit.reshape(64), 0, -1))
    # By platform (this CPU: the loop), the same.
    by_platform = hit_clusters_by_platform_j(jnp.asarray(hit.reshape(64)), rows=8, cols=8,
                                             max_hits=int(hit.sum()))
    np.testing.assert_array_equal(np.asarray(by_platform), np.asarray(labels))
    # One round short of the bound, the far end has not heard of cell 0 yet: the bound is tight.
    short = state_regions.hit_clusters(jnp.asarray(hit.reshape(64)), 8, 8, int(hit.sum()) - 1, unroll=True)
    assert np.asarray(short).max() > 0


@pytest.mark.parametrize("rows, cols", SHAPES)
@SETTINGS
@given(data=st.data())
def test_frontier_brute_force(rows, cols, data):
    hit, unknown = data.draw(board_states(rows, cols))
    got = np.asarray(frontier_j(jnp.asarray(hit), jnp.asarray(unknown), rows=rows, cols=cols))
    expected = [unknown[c] and any(hit[n] for n in neighbours(c, rows, cols))
                for c in range(rows * cols)]
    assert got.tolist() == expected


@SETTINGS
@given(case=shaped_states())
def test_frontier_ring_brute_force(case):
    rows, cols, _, unknown, anchor, radius = case
    got = np.asarray(frontier_ring_j(jnp.int32(anchor), jnp.int32(radius), jnp.asarray(unknown),
                                     rows=rows, cols=cols))
    expected = [unknown[c] and 1 <= manhattan(anchor, c, cols) <= radius
                for c in range(rows * cols)]
    assert got.tolist() == expected


@SETTINGS
@given(case=shaped_states())
def test_cluster_neighborhood_brute_force(case):
    rows, cols, hit, unknown, anchor, depth = case
    if not hit[anchor] and anchor % 2 == 0:
        # Half the time, force the anchor to be a hit so non-empty clusters are exercised.
        hit = list(hit)
        unknown = list(unknown)
        hit[anchor], unknown[anchor] = True, False
    got = np.asarray(cluster_neighborhood_j(jnp.int32(anchor), jnp.int32(depth), jnp.asarray(hit),
                                            jnp.asarray(unknown), rows=rows, cols=cols))
    labels = bfs_labels(hit, rows, cols)
    if not hit[anchor]:
        assert not got.any()
        return
    cluster = [c for c in range(rows * cols) if labels[c] == labels[anchor]]
    expected = [unknown[c] and c not in cluster and
                min(manhattan(c, k, cols) for k in cluster) <= depth
                for c in range(rows * cols)]
    assert got.tolist() == expected


def test_cluster_neighborhood_example():
    # Hits E5, E6 (one cluster) and A1 (another); B1 is a miss.
    hit = np.zeros(64, bool)
    hit[[36, 37, 0]] = True
    unknown = ~hit
    unknown[8] = False
    got = np.asarray(cluster_neighborhood_j(jnp.int32(36), jnp.int32(1), jnp.asarray(hit),
                                            jnp.asarray(unknown), rows=8, cols=8))
    names = sorted(q.cell_name(c) for c in np.flatnonzero(got))
    assert names == sorted(["D5", "D6", "F5", "F6", "E4", "E7"])
    a1 = np.asarray(cluster_neighborhood_j(jnp.int32(0), jnp.int32(2), jnp.asarray(hit),
                                           jnp.asarray(unknown), rows=8, cols=8))
    # Plain Manhattan distance (as in the reference): C1 counts although the miss B1 lies between.
    assert sorted(q.cell_name(c) for c in np.flatnonzero(a1)) == ["A2", "A3", "B2", "C1"]
    none = np.asarray(cluster_neighborhood_j(jnp.int32(1), jnp.int32(2), jnp.asarray(hit),
                                             jnp.asarray(unknown), rows=8, cols=8))
    assert not none.any()


def test_helpers_trace_once_and_vmap():
    chex.clear_trace_counter()
    fn = jax.jit(chex.assert_max_traces(state_regions.hit_clusters, n=1), static_argnames=("rows", "cols"))
    rng = np.random.default_rng(0)
    for _ in range(3):
        fn(jnp.asarray(rng.random(64) < 0.5), rows=8, cols=8)
    hits = rng.random((16, 64)) < 0.5
    batched = jax.jit(jax.vmap(lambda h: state_regions.hit_clusters(h, 8, 8)))(jnp.asarray(hits))
    for g in range(16):
        assert np.asarray(batched[g]).tolist() == bfs_labels(hits[g].tolist(), 8, 8)


@SETTINGS
@given(region=st.lists(st.integers(0, 2**32 - 1), min_size=2, max_size=2),
       occ=st.lists(st.integers(0, 2**32 - 1), min_size=2, max_size=2),
       use_catalog=st.integers(-1, 82))
def test_answer_is_any_overlap(region, occ, use_catalog):
    region = np.array(region, np.uint32)
    if use_catalog >= 0:
        region = q.catalog_bits()[use_catalog]
    occ = np.array(occ, np.uint32)
    got = bool(answer_j(jnp.asarray(region), jnp.asarray(occ)))
    expected = bool(np.any(bitboard.unpack_np(region, 64) & bitboard.unpack_np(occ, 64)))
    assert got == expected


def test_answer_batched_over_catalog():
    occ = np.zeros(64, bool)
    occ[[q.cell_index(n) for n in ["E5", "E6", "E7"]]] = True
    got = np.asarray(answer_j(jnp.asarray(q.catalog_bits()), jnp.asarray(bitboard.pack_np(occ))))
    expected = (q.catalog_cells() & occ).any(axis=1)
    np.testing.assert_array_equal(got, expected)
    assert got[q.template_by_qid("row:E").index]
    assert not got[q.template_by_qid("row:A").index]


# ----------------------------------------------------------------------------- DSL


def spec(**region):
    return {"predicate": "exists_ship", "region": region}


EMPTY_HIT = np.zeros(64, bool)
ALL_UNKNOWN = np.ones(64, bool)


@pytest.mark.parametrize("region, qid", [
    ({"kind": "row", "row": "A"}, "row:A"),
    ({"kind": "row", "row": "h"}, "row:H"),
    ({"kind": "column", "column": 1}, "column:1"),
    ({"kind": "column", "column": 8}, "column:8"),
    ({"kind": "quadrant", "quadrant": "top-right"}, "quadrant:top-right"),
    ({"kind": "quadrant", "quadrant": "bottom-left"}, "quadrant:bottom-left"),
    ({"kind": "row_band_2", "start_row": "D"}, "row-band-2:D-E"),
    ({"kind": "row_band_2", "startRow": "G"}, "row-band-2:G-H"),
    ({"kind": "column_band_2", "start_column": 3}, "column-band-2:3-4"),
    ({"kind": "column_band_2", "startColumn": 7}, "column-band-2:7-8"),
    ({"kind": "block_2x2", "anchor": "A1"}, "block-2x2:A1-B2"),
    ({"kind": "block_2x2", "anchor": "D5"}, "block-2x2:D5-E6"),
    ({"kind": "block_2x2", "anchor": "G7"}, "block-2x2:G7-H8"),
])
def test_compile_spec_fixed_kinds_match_catalog(region, qid):
    # Fixed kinds include revealed cells, like the templates.
    hit = np.zeros(64, bool)
    hit[:32] = True
    got = region_dsl.compile_spec(spec(**region), hit, ~hit)
    np.testing.assert_array_equal(got, q.catalog_cells()[q.template_by_qid(qid).index])


@SETTINGS
@given(case=shaped_states().filter(lambda c: c[:2] == (8, 8)))
def test_compile_spec_state_kinds_match_graph(case):
    _, _, hit, unknown, anchor, level = case
    hit, unknown = np.array(hit), np.array(unknown)
    name = q.cell_name(anchor)
    fr = np.asarray(frontier_j(jnp.asarray(hit), jnp.asarray(unknown), rows=8, cols=8))
    ring = np.asarray(frontier_ring_j(jnp.int32(anchor), jnp.int32(level), jnp.asarray(unknown),
                                      rows=8, cols=8))
    ring_spec = spec(kind="frontier_ring", anchor=name, radius=level)
    if not (hit[anchor] or fr[anchor]):
        with pytest.raises(ValueError, match="neither a hit nor a frontier"):
            region_dsl.compile_spec(ring_spec, hit, unknown)
    elif not ring.any():
        with pytest.raises(ValueError, match="empty"):
            region_dsl.compile_spec(ring_spec, hit, unknown)
    else:
        np.testing.assert_array_equal(region_dsl.compile_spec(ring_spec, hit, unknown), ring)

    hood = np.asarray(cluster_neighborhood_j(jnp.int32(anchor), jnp.int32(level),
                                             jnp.asarray(hit), jnp.asarray(unknown),
                                             rows=8, cols=8))
    hood_spec = spec(kind="cluster_neighborhood", anchor=name, depth=level)
    if not hit[anchor]:
        with pytest.raises(ValueError, match="not a hit"):
            region_dsl.compile_spec(hood_spec, hit, unknown)
    elif not hood.any():
        with pytest.raises(ValueError, match="empty"):
            region_dsl.compile_spec(hood_spec, hit, unknown)
    else:
        np.testing.assert_array_equal(region_dsl.compile_spec(hood_spec, hit, unknown), hood)


def test_compile_spec_state_kinds_example():
    hit = np.zeros(64, bool)
    hit[[36, 37]] = True                   # E5, E6
    unknown = ~hit
    unknown[q.cell_index("D5")] = False    # a miss
    ring = region_dsl.compile_spec(spec(kind="frontier_ring", anchor="E5", radius=1), hit, unknown)
    assert sorted(q.cell_name(c) for c in np.flatnonzero(ring)) == ["E4", "F5"]
    # Frontier anchors (unknown, next to a hit) are allowed; the default radius is 1.
    ring = region_dsl.compile_spec(spec(kind="frontier_ring", anchor="E7"), hit, unknown)
    assert sorted(q.cell_name(c) for c in np.flatnonzero(ring)) == ["D7", "E8", "F7"]
    hood = region_dsl.compile_spec(spec(kind="cluster_neighborhood", anchor="E6", depth=1), hit, unknown)
    assert sorted(q.cell_name(c) for c in np.flatnonzero(hood)) == [
        "D6", "E4", "E7", "F5", "F6"]
    hood2 = region_dsl.compile_spec(spec(kind="cluster_neighborhood", anchor="E5", depth=2), hit, unknown)
    assert hood2.sum() == 15 and not hood2[36] and not hood2[37] and hood2[q.cell_index("C5")]


@pytest.mark.parametrize("bad, match", [
    ("not a dict", "must be an object"),
    ({"predicate": "ship_size", "region": {"kind": "row", "row": "A"}}, "unsupported predicate"),
    ({"region": {"kind": "row", "row": "A"}}, "unsupported predicate"),
    ({"predicate": "exists_ship"}, "'region' object"),
    (spec(kind="diagonal"), "unknown region kind"),
    (spec(row="A"), "unknown region kind"),
    (spec(kind="row", row="I"), "invalid row label"),
    (spec(kind="row", row=1), "invalid row label"),
    (spec(kind="row"), "needs field 'row'"),
    (spec(kind="column", column=0), "invalid column"),
    (spec(kind="column", column=9), "invalid column"),
    (spec(kind="column", column="3"), "invalid column"),
    (spec(kind="column", column=True), "invalid column"),
    (spec(kind="quadrant", quadrant="middle"), "invalid quadrant"),
    (spec(kind="row_band_2", start_row="H"), "start_row must be A-G"),
    (spec(kind="column_band_2", start_column=8), "start_column must be 1-7"),
    (spec(kind="block_2x2", anchor="H1"), "top-left cell"),
    (spec(kind="block_2x2", anchor="A8"), "top-left cell"),
    (spec(kind="block_2x2", anchor="Z9"), "off the 8x8 board"),
    (spec(kind="block_2x2", anchor=36), "cell id must be a string"),
    (spec(kind="frontier_ring", anchor="E5", radius=3), "radius must be 1 or 2"),
    (spec(kind="frontier_ring", anchor="E5", radius=0), "radius must be 1 or 2"),
    (spec(kind="frontier_ring", anchor="A1", radius=1), "neither a hit nor a frontier"),
    (spec(kind="frontier_ring", radius=1), "needs field 'anchor'"),
    (spec(kind="cluster_neighborhood", anchor="E5", depth=3), "depth must be 1 or 2"),
    (spec(kind="cluster_neighborhood", anchor="E4", depth=1), "not a hit cell"),
    (spec(kind="cluster_neighborhood", anchor="I4", depth=1), "off the 8x8 board"),
])
def test_compile_spec_errors(bad, match):
    hit = np.zeros(64, bool)
    hit[36] = True
    with pytest.raises(ValueError, match=match) as info:
        region_dsl.compile_spec(bad, hit, ~hit)
    assert "\n" not in str(info.value)


def test_compile_spec_empty_regions_and_bad_state():
    # E5 hit, all its neighbours within distance 2 shot (misses): both state kinds are empty.
    hit = np.zeros(64, bool)
    hit[36] = True
    unknown = np.ones(64, bool)
    dist = np.array([manhattan(36, c, 8) for c in range(64)])
    unknown[dist <= 2] = False
    for region in [dict(kind="frontier_ring", anchor="E5", radius=2),
                   dict(kind="cluster_neighborhood", anchor="E5", depth=2)]:
        with pytest.raises(ValueError, match="empty"):
            region_dsl.compile_spec(spec(**region), hit, unknown)
    with pytest.raises(ValueError, match="both hit and unknown"):
        region_dsl.compile_spec(spec(kind="row", row="A"), hit, np.ones(64, bool))
    with pytest.raises(ValueError, match="shape"):
        region_dsl.compile_spec(spec(kind="row", row="A"), np.zeros(25, bool), np.ones(25, bool))
