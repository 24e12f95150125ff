"""The layout of a GGUF file as the lit helpers read it (GGUF v3 spec: header, key/value pairs,
tensor infos, data section aligned to general.alignment, 32 by default). Shared by gguf_edit_kv.py
and gguf_fill_tensor.py."""
import struct
import sys

SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
TYPES = {"u32": 4, "i32": 5, "f32": 6, "bool": 7, "str": 8}


def skip_value(data, at, vtype):
    """The offset just past a value of type vtype at `at`."""
    if vtype in SCALARS:
        return at + struct.calcsize("<" + SCALARS[vtype])
    if vtype == 8:
        return at + 8 + struct.unpack_from("<Q", data, at)[0]
    if vtype == 9:
        etype, count = struct.unpack_from("<IQ", data, at)
        at += 12
        for _ in range(count):
            at = skip_value(data, at, etype)
        return at
    sys.exit("unknown GGUF value type %d" % vtype)


def read_string(data, at):
    """A GGUF string at `at` and the offset past it."""
    n = struct.unpack_from("<Q", data, at)[0]
    return data[at + 8:at + 8 + n].decode(), at + 8 + n


class Gguf:
    """magic, version; kvs: [key, type + value bytes]; tensors: [(name, ne, type, offset)];
    infos_start / infos_end: the tensor-info section; alignment; data_start: the data section."""

    def __init__(self, data):
        self.magic, self.version, n_tensors, n_kv = struct.unpack_from("<IIQQ", data, 0)
        at = 24
        self.kvs = []
        for _ in range(n_kv):
            key, at = read_string(data, at)
            vtype = struct.unpack_from("<I", data, at)[0]
            end = skip_value(data, at + 4, vtype)
            self.kvs.append([key, data[at:end]])
            at = end
        self.infos_start = at
        self.tensors = []
        for _ in range(n_tensors):
            name, at = read_string(data, at)
            n_dims = struct.unpack_from("<I", data, at)[0]
            ne = struct.unpack_from("<%dQ" % n_dims, data, at + 4)
            ttype, offset = struct.unpack_from("<IQ", data, at + 4 + 8 * n_dims)
            self.tensors.append((name, ne, ttype, offset))
            at += 4 + 8 * n_dims + 12
        self.infos_end = at
        self.alignment = 32
        for key, raw in self.kvs:
            if key == "general.alignment":
                self.alignment = struct.unpack_from("<I", raw, 4)[0]
        self.data_start = (at + self.alignment - 1) // self.alignment * self.alignment
