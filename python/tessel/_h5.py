"""HDF5 output as Tessel's C++ writer makes it: no timestamps, no fill writes, little-endian types,
row chunks only where asked, and a `description` attribute on every dataset."""

import struct
import zlib

import h5py
import numpy
from h5py import h5d, h5f, h5g, h5p, h5s, h5t

# The file type of each numpy dtype Tessel stores.
_FILE_TYPES = {
    numpy.dtype(numpy.float32): h5t.IEEE_F32LE,
    numpy.dtype(numpy.float64): h5t.IEEE_F64LE,
    numpy.dtype(numpy.int32): h5t.STD_I32LE,
    numpy.dtype(numpy.int64): h5t.STD_I64LE,
}


class Writer:
    """An HDF5 file created for writing; `close()` flushes and closes it (call it exactly once)."""

    def __init__(self, path):
        fcpl = h5p.create(h5p.FILE_CREATE)
        fcpl.set_obj_track_times(False)
        # Room for the whole-file checksum close() writes, as the C++ writer leaves it.
        fcpl.set_userblock(USER_BLOCK_BYTES)
        fapl = h5p.create(h5p.FILE_ACCESS)
        # Closing the file closes every object still open in it, so close() really flushes.
        fapl.set_fclose_degree(h5f.CLOSE_STRONG)
        fid = h5f.create(str(path).encode(), h5f.ACC_TRUNC, fcpl=fcpl, fapl=fapl)
        self.file = h5py.File(fid)
        self.path = str(path)

    def group(self, name):
        """Creates group `name` (with its parents) unless it exists."""
        if name.strip("/") == "" or name in self.file:
            return
        parent = name.rsplit("/", 1)[0]
        if parent:
            self.group(parent)
        gcpl = h5p.create(h5p.GROUP_CREATE)
        gcpl.set_obj_track_times(False)
        h5g.create(self.file.id, name.encode(), gcpl=gcpl)

    def dataset(self, name, values, description, chunk_rows=0):
        """Writes `values` (a C-ordered numpy array of a type in _FILE_TYPES) as dataset `name`,
        chunked by `chunk_rows` rows when that is positive and the array is not empty."""
        values = numpy.ascontiguousarray(values)
        self.group(name.rsplit("/", 1)[0])
        space = h5s.create_simple(values.shape)
        dcpl = h5p.create(h5p.DATASET_CREATE)
        dcpl.set_obj_track_times(False)
        # Nothing is read before it is written: skip writing fill values.
        dcpl.set_fill_time(h5d.FILL_TIME_NEVER)
        if chunk_rows > 0 and values.size > 0:
            dcpl.set_chunk((min(chunk_rows, values.shape[0]),) + values.shape[1:])
        h5d.create(self.file.id, name.encode(), _FILE_TYPES[values.dtype], space,
                   dcpl=dcpl).close()
        self.attr(name, "description", description)
        if values.size == 0:
            return
        # The C++ writer's steps from here on: it writes through a handle with a 32 MiB chunk
        # cache and keeps that open until the next dataset is written, which places the data
        # where its files have them (the same bytes for the same arrays).
        self._close_open()
        dapl = h5p.create(h5p.DATASET_ACCESS)
        dapl.set_chunk_cache(1021, 32 << 20, 1.0)
        self._open = h5d.open(self.file.id, name.encode(), dapl=dapl)
        self._open.write(h5s.ALL, h5s.ALL, values)

    def _close_open(self):
        if getattr(self, "_open", None) is not None:
            self._open.close()
            self._open = None

    def attr(self, obj, name, value):
        """Sets a scalar attribute: a str as variable-length UTF-8, an int as int64, a float as
        float64."""
        attrs = self.file[obj].attrs
        if isinstance(value, str):
            attrs.create(name, value, dtype=h5py.string_dtype("utf-8"))
        elif isinstance(value, (bool, int, numpy.integer)):
            attrs.create(name, numpy.int64(value), dtype=numpy.dtype("<i8"))
        else:
            attrs.create(name, numpy.float64(value), dtype=numpy.dtype("<f8"))

    def close(self):
        self._close_open()
        self.file.flush()
        self.file.close()
        write_file_checksum(self.path)


# The whole-file checksum header in the user block (docs/formats.md, "Whole-file checksum").
USER_BLOCK_BYTES = 512


def write_file_checksum(path):
    """Writes magic, version, algorithm (zlib's CRC-32), length and the CRC-32 of every byte after
    the user block into the first 40 bytes of a closed file made with a 512-byte user block."""
    with open(path, "r+b") as f:
        f.seek(USER_BLOCK_BYTES)
        crc = 0
        length = USER_BLOCK_BYTES
        while True:
            block = f.read(8 << 20)
            if not block:
                break
            crc = zlib.crc32(block, crc)
            length += len(block)
        head = b"TESSELCK" + struct.pack("<IIQQI", 1, 1, length, USER_BLOCK_BYTES, crc)
        f.seek(0)
        f.write(head + struct.pack("<I", zlib.crc32(head)))
