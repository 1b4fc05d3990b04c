"""Input checks for the writers: every array is converted and validated before anything is
written, and a bad one is a ValueError that names the array and the row."""

import numpy


def _is_tensor(value):
    return all(hasattr(value, a) for a in ("detach", "cpu", "numpy"))


def _ragged_row(value, name):
    """Raises when a nested list or tuple has rows of different lengths."""
    if not isinstance(value, (list, tuple)) or not value:
        return
    lengths = []
    for row in value:
        if _is_tensor(row):
            lengths.append(row.shape[0] if len(row.shape) else None)
        elif isinstance(row, (str, bytes)) or not hasattr(row, "__len__"):
            lengths.append(None)
        else:
            lengths.append(len(row))
    if all(n is None for n in lengths):
        return
    def count(n):
        return "a single value" if n is None else f"{n} value{'' if n == 1 else 's'}"

    for i, n in enumerate(lengths):
        if n != lengths[0]:
            what, first = count(n), count(lengths[0])
            raise ValueError(f"{name}: row {i} has {what}, but row 0 has {first} (ragged rows)")


def array(value, name):
    """`value` (numpy array, torch tensor, list, ...) as a numpy array."""
    if value is None:
        raise ValueError(f"{name}: missing (None)")
    if _is_tensor(value):
        value = value.detach().cpu().numpy()
    _ragged_row(value, name)
    try:
        out = numpy.asarray(value)
    except ValueError as e:  # numpy >= 1.24 refuses ragged input that _ragged_row let through
        raise ValueError(f"{name}: not a rectangular array ({e})") from None
    if out.dtype == object:
        raise ValueError(f"{name}: not a numeric array (numpy makes it an array of Python "
                         "objects: ragged rows or mixed types?)")
    return out


def shape_text(shape):
    return "[" + ", ".join(str(d) for d in shape) + "]"


def integers(value, name, ndim=1):
    """An integer array of `ndim` dimensions as int64. Booleans and floats are refused."""
    a = array(value, name)
    if a.ndim != ndim:
        raise ValueError(f"{name}: shape {shape_text(a.shape)}, expected {ndim} dimension"
                         f"{'s' if ndim > 1 else ''}")
    if a.dtype.kind not in "iu":
        raise ValueError(f"{name}: dtype {a.dtype}, expected integers (node ids)")
    if a.dtype.kind == "u" and a.size and a.max() > numpy.iinfo(numpy.int64).max:
        flat = int(numpy.argmax(a.reshape(-1) > numpy.iinfo(numpy.int64).max))
        raise ValueError(f"{name}: entry {flat} = {a.reshape(-1)[flat]} does not fit in int64")
    return a.astype("<i8", copy=False)


def floats(value, name, ndim):
    """A floating-point array of `ndim` dimensions as float32, every value finite."""
    a = array(value, name)
    if a.ndim != ndim:
        hint = " (one feature per node: pass x.reshape(-1, 1))" if ndim == 2 and a.ndim == 1 else ""
        raise ValueError(f"{name}: shape {shape_text(a.shape)}, expected {ndim} dimensions{hint}")
    if a.dtype.kind != "f":
        raise ValueError(f"{name}: dtype {a.dtype}, expected floating point (convert with "
                         f"{name}.astype(numpy.float32))")
    with numpy.errstate(over="ignore", invalid="ignore"):
        out = a.astype("<f4", copy=False)
    finite = numpy.isfinite(out)
    if not finite.all():
        at = numpy.unravel_index(int(numpy.argmin(finite)), out.shape)
        where = f"row {at[0]}" + (f" column {at[1]}" if len(at) > 1 else "")
        given = a[at]
        if numpy.isfinite(given):
            raise ValueError(f"{name}: {where} is {given}, which float32 cannot hold")
        raise ValueError(f"{name}: {where} is {given}, expected a finite number")
    return out


def node_ids(ids, name, num_nodes, first=0):
    """Raises when an entry of the int64 array `ids` is not in [0, num_nodes)."""
    bad = (ids < 0) | (ids >= num_nodes)
    if bad.any():
        i = int(numpy.argmax(bad))
        raise ValueError(f"{name}[{i + first}] = {ids[i]} is not a node id (the graph has "
                         f"{num_nodes} nodes, ids 0 to {num_nodes - 1})")
