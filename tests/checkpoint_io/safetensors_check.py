"""An independent .safetensors reader and writer for Volt's tests (standard library and
numpy only, so it does not share a line of code or a library with Volt's C++ side).

  safetensors_check.py check FILE EXPECT_JSON
      Parses FILE's header by hand and compares every tensor with EXPECT_JSON:
      {"tensors": {name: {"dtype": "F32", "shape": [2, 3], "values": [flat list]}},
       "metadata": {key: value}}. Also checks the layout rules: header length a
      multiple of 8, byte ranges tiling the data section in sorted-name order.
      Exit status 0 when everything matches, 1 otherwise (reasons on stderr).

  safetensors_check.py write FILE
      Writes a small file by hand: F32 "a" [2, 3] = 0..5, I64 "b" [4] = 10..13,
      metadata {"from": "python"}.
"""
import json
import struct
import sys

import numpy as np

# Little-endian numpy dtypes by safetensors code. BF16 has no numpy type: it is read as
# uint16 and widened to float32 below.
DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "BF16": "<u2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "BOOL": "u1",
}


def decode(dtype, shape, raw):
    array = np.frombuffer(raw, dtype=DTYPES[dtype])
    if dtype == "BF16":
        array = (array.astype(np.uint32) << 16).view(np.float32)
    elif dtype == "BOOL":
        if not np.isin(array, [0, 1]).all():
            raise ValueError("BOOL bytes other than 0 and 1")
        array = array.astype(bool)
    return array.reshape(shape)


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
    return n, header, data[8 + n :]


def check(path, expect_path):
    with open(expect_path, encoding="utf-8") as f:
        expect = json.load(f)
    n, header, body = read(path)
    errors = []
    if n % 8 != 0:
        errors.append("header length %d is not a multiple of 8" % n)
    metadata = header.pop("__metadata__", {})
    if metadata != expect.get("metadata", {}):
        errors.append("metadata %r, expected %r" % (metadata, expect.get("metadata", {})))
    offset = 0
    for name in sorted(header):
        begin, end = header[name]["data_offsets"]
        if begin != offset:
            errors.append("%s begins at %d, expected %d (sorted, no gaps)" % (name, begin, offset))
        offset = end
    if offset != len(body):
        errors.append("tensors end at %d but the data section has %d bytes" % (offset, len(body)))
    expected = expect["tensors"]
    if set(header) != set(expected):
        errors.append("tensor names %s, expected %s" % (sorted(header), sorted(expected)))
    for name in sorted(set(header) & set(expected)):
        info, want = header[name], expected[name]
        if info["dtype"] != want["dtype"] or info["shape"] != want["shape"]:
            errors.append("%s: %s %s, expected %s %s" % (name, info["dtype"], info["shape"], want["dtype"], want["shape"]))
            continue
        begin, end = info["data_offsets"]
        got = decode(info["dtype"], info["shape"], body[begin:end])
        # Floats compare exactly: the C++ side writes each value as the double it
        # widens to, and JSON keeps doubles exact.
        if got.dtype.kind == "f":
            got = got.astype(np.float64)
        values = np.array(want["values"], dtype=got.dtype).reshape(info["shape"])
        same = np.array_equal(got, values)
        if not same:
            errors.append("%s: values %s, expected %s" % (name, got.ravel().tolist(), values.ravel().tolist()))
    for e in errors:
        print("safetensors_check: " + e, file=sys.stderr)
    return 0 if not errors else 1


def write(path):
    a = np.arange(6, dtype="<f4")
    b = np.arange(10, 14, dtype="<i8")
    header = {
        "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, a.nbytes]},
        "b": {"dtype": "I64", "shape": [4], "data_offsets": [a.nbytes, a.nbytes + b.nbytes]},
        "__metadata__": {"from": "python"},
    }
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.write(a.tobytes())
        f.write(b.tobytes())
    return 0


def main(argv):
    if len(argv) == 4 and argv[1] == "check":
        return check(argv[2], argv[3])
    if len(argv) == 3 and argv[1] == "write":
        return write(argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
