"""``_layout.rows_layout``: the row addressing that the row kernel and the reduction kernel
use to read a strided view in place. Over random views (permuted, sliced, expanded, with
size-1 dims), every layout it returns must name exactly the elements of each row in order,
as aten's own view does; contiguous inputs and views of at most three kept dims must get one."""
import random

import pytest
import torch
from tritonjit_ops import _layout


def _random_view(rng: random.Random) -> torch.Tensor:
    """A view of a storage whose element at address i holds i (from address 3 on): permuted, maybe sliced with steps,
    maybe one dim expanded."""
    nd = rng.randint(1, 5)
    shape = [rng.choice([1, 2, 3, 4, 5]) for _ in range(nd)]
    perm = list(range(nd))
    rng.shuffle(perm)
    big = [s * rng.choice([1, 1, 2]) + rng.choice([0, 0, 1]) for s in shape]
    base = torch.arange(int(torch.tensor(big).prod()) + 3)[3:].reshape([big[p] for p in perm])
    t = base.permute([perm.index(i) for i in range(nd)])
    cut = []
    for s, b in zip(shape, big):
        step = rng.choice([1, 1, 2])
        cut.append(slice(0, s * step, step) if s * step <= b else slice(0, s))
    t = t[tuple(cut)]
    if rng.random() < 0.2:
        d = rng.randrange(nd)
        idx = [slice(None)] * nd
        idx[d] = slice(0, 1)
        shape_e = list(t.shape)
        t = t[tuple(idx)].expand(shape_e)
    return t


def _addresses(layout: tuple, m: int, n: int, offset: int) -> torch.Tensor:
    s1, s2, t0, t1, t2, tc = layout
    r = torch.arange(m)[:, None]
    j = torch.arange(n)[None, :]
    return offset + (r // (s1 * s2)) * t0 + ((r // s2) % s1) * t1 + (r % s2) * t2 + j * tc


@pytest.mark.parametrize("seed", range(4))
def test_every_layout_names_each_rows_elements(seed):
    rng = random.Random(seed)
    found = 0
    for _ in range(300):
        x = _random_view(rng)
        nd = x.dim()
        k = rng.randint(1, nd)
        first = rng.randint(0, nd - k) if rng.random() < 0.3 else nd - k  # mostly trailing dims
        dims = list(range(first, first + k))
        layout = _layout.rows_layout(x, dims)
        if layout is None:
            continue
        found += 1
        kept = [d for d in range(nd) if d not in dims]
        # x's elements are their own storage addresses: moved to (kept..., dims...), the rows
        n = int(torch.tensor([x.shape[d] for d in dims]).prod())
        want = x.permute(*kept, *dims).reshape(-1, n)
        got = _addresses(layout, want.shape[0], n, x.storage_offset())
        assert torch.equal(got, want), (x.shape, x.stride(), dims, layout)
    assert found > 100


@pytest.mark.parametrize("shape, dims", [((3, 4, 5), [2]), ((3, 4, 5), [1, 2]), ((2, 3, 4, 5, 6), [4])])
def test_contiguous_inputs_are_one_flat_row_axis(shape, dims):
    """The arguments the kernels' compiler folds to ``row * n + j`` (S1 = S2 = TC = 1)."""
    x = torch.empty(shape)
    n = 1
    for d in dims:
        n *= shape[d]
    assert _layout.rows_layout(x, dims) == (1, 1, n, 0, 0, 1)
    assert _layout.rows_layout(torch.empty(6), [0]) == (1, 1, 0, 0, 0, 1)  # one row


def test_head_views_get_a_layout_and_four_unmerged_kept_dims_do_not():
    heads = torch.empty(2, 7, 3, 8).transpose(1, 2)  # [B, H, L, D] of [B, L, H, D]
    assert _layout.rows_layout(heads, [3]) == (3, 7, 168, 8, 24, 1)
    four = torch.empty(2, 3, 2, 3, 4).permute(0, 2, 1, 3, 4)[..., ::2]
    assert _layout.rows_layout(four, [4]) is None
    assert _layout.rows_layout(torch.empty(4, 6).t(), [0, 1]) is None  # dims in no one stride
