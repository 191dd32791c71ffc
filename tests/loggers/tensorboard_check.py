#!/usr/bin/env python3
"""An independent reader of TensorBoard event files, for Volt's tests.

Follows the TFRecord framing (length, masked CRC-32C of it, data, masked CRC-32C of the
data) and the protobuf wire format of tensorboard's event.proto, summary.proto,
tensor.proto and plugins/hparams/plugin_data.proto, with the standard library only
(CRC-32C computed here; PNGs decoded with zlib). It shares no code with Volt's reader.

    tensorboard_check.py dump PATH...   every event of every events.out.tfevents.* file
                                        (PATH: a file or a folder searched recursively) as
                                        JSON on stdout; exit 1 naming the file and offset
                                        of the first bad record.
"""
import json
import os
import struct
import sys
import zlib

_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class Bad(Exception):
    pass


def records(blob, name):
    pos = 0
    while pos < len(blob):
        if len(blob) - pos < 12:
            raise Bad(f"{name}: cut record header at offset {pos}")
        header = blob[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (crc,) = struct.unpack("<I", blob[pos + 8:pos + 12])
        if crc != masked(header):
            raise Bad(f"{name}: length CRC mismatch at offset {pos}")
        data = blob[pos + 12:pos + 12 + length]
        if len(data) != length or len(blob) < pos + 16 + length:
            raise Bad(f"{name}: cut record at offset {pos}")
        (dcrc,) = struct.unpack("<I", blob[pos + 12 + length:pos + 16 + length])
        if dcrc != masked(data):
            raise Bad(f"{name}: data CRC mismatch at offset {pos}")
        yield pos, data
        pos += 16 + length


def fields(msg):
    """(field number, wire type, value) of a message; value: int, or bytes for types 1, 2, 5."""
    out, pos = [], 0

    def varint():
        nonlocal pos
        shift = result = 0
        while True:
            b = msg[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    while pos < len(msg):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            out.append((number, wire, varint()))
        elif wire == 1:
            out.append((number, wire, msg[pos:pos + 8]))
            pos += 8
        elif wire == 2:
            n = varint()
            out.append((number, wire, msg[pos:pos + n]))
            pos += n
        elif wire == 5:
            out.append((number, wire, msg[pos:pos + 4]))
            pos += 4
        else:
            raise Bad(f"wire type {wire}")
    return out


def f64(b):
    return struct.unpack("<d", b)[0]


def signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def png_pixels(png):
    """Width, height, channels and the row-major bytes of an 8-bit PNG (any filter)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    pos, idat, width = 8, b"", None
    while pos < len(png):
        (n,) = struct.unpack(">I", png[pos:pos + 4])
        kind, body = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", png[pos + 8 + n:pos + 12 + n])
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc, "PNG chunk CRC"
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8, "bit depth"
            channels = {0: 1, 2: 3, 4: 2, 6: 4}[color]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev, p = [], bytearray(stride), 0
    for _ in range(height):
        ftype, line = raw[p], bytearray(raw[p + 1:p + 1 + stride])
        p += 1 + stride
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 0xFF
            elif ftype == 2:
                line[i] = (line[i] + b) & 0xFF
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif ftype == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, channels, list(b"".join(rows))


def struct_value(msg):
    for number, _, v in fields(msg):
        if number == 2:
            return f64(v)
        if number == 3:
            return v.decode()
        if number == 4:
            return bool(v)
    return None


def hparams_content(content):
    out = {}
    for number, _, v in fields(content):
        if number == 1:
            out["version"] = v
        elif number == 2:
            exp = {"hparam_infos": [], "metric_infos": []}
            for n, _, w in fields(v):
                if n == 4:
                    info = dict((k, x) for k, _, x in fields(w))
                    exp["hparam_infos"].append({"name": info[1].decode(), "type": info.get(4, 0)})
                elif n == 5:
                    name = dict((k, x) for k, _, x in fields(w))[1]
                    exp["metric_infos"].append(dict((k, x) for k, _, x in fields(name))[2].decode())
            out["experiment"] = exp
        elif number == 3:
            hp = {}
            for n, _, w in fields(v):
                if n == 1:
                    entry = dict((k, x) for k, _, x in fields(w))
                    hp[entry[1].decode()] = struct_value(entry[2])
            out["session_start_info"] = {"hparams": hp}
        elif number == 4:
            end = dict((k, x) for k, _, x in fields(v))
            out["session_end_info"] = {"status": end.get(1, 0)}
    return out


def summary_value(msg):
    value, plugin, content = {}, None, b""
    for number, wire, v in fields(msg):
        if number == 1:
            value["tag"] = v.decode()
        elif number == 2:
            value["kind"], value["value"] = "scalar", struct.unpack("<f", v)[0]
        elif number == 4:
            img = dict((k, x) for k, _, x in fields(v))
            w, h, c, pixels = png_pixels(img[4])
            assert (w, h, c) == (img[2], img[1], img[3]), "Summary.Image size disagrees with its PNG"
            value.update(kind="image", height=h, width=w, colorspace=c, pixels=pixels)
        elif number == 5:
            histo = {"bucket_limit": [], "bucket": []}
            for n, _, x in fields(v):
                if n <= 5:
                    histo[["min", "max", "num", "sum", "sum_squares"][n - 1]] = f64(x)
                else:
                    key = "bucket_limit" if n == 6 else "bucket"
                    histo[key] += [f64(x[i:i + 8]) for i in range(0, len(x), 8)]
            value.update(kind="histogram", **histo)
        elif number == 8:
            t = fields(v)
            strings = [x.decode() for n, _, x in t if n == 8]
            dtype = [x for n, _, x in t if n == 1]
            value.update(kind="tensor", dtype=dtype[0] if dtype else 0, strings=strings)
        elif number == 9:
            for n, _, x in fields(v):
                if n == 1:
                    pd = dict((k, y) for k, _, y in fields(x))
                    plugin, content = pd[1].decode(), pd.get(2, b"")
    if plugin is not None:
        value["plugin"] = plugin
        if plugin == "hparams":
            value["hparams"] = hparams_content(content)
        if plugin == "text":
            value["kind"] = "text"
            value["text"] = value.get("strings", [""])[0]
    return value


def event(data):
    out = {"values": []}
    for number, wire, v in fields(data):
        if number == 1:
            out["wall_time"] = f64(v)
        elif number == 2:
            out["step"] = signed(v)
        elif number == 3:
            out["file_version"] = v.decode()
        elif number == 5:
            for n, _, x in fields(v):
                if n == 1:
                    out["values"].append(summary_value(x))
    return out


def event_files(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in sorted(os.walk(p)):
                for n in sorted(names):
                    if n.startswith("events.out.tfevents."):
                        yield os.path.join(root, n)
        else:
            yield p


def main(argv):
    if len(argv) < 3 or argv[1] != "dump":
        print(__doc__, file=sys.stderr)
        return 2
    out = []
    try:
        for path in event_files(argv[2:]):
            with open(path, "rb") as f:
                blob = f.read()
            events = []
            for offset, data in records(blob, path):
                try:
                    events.append(event(data))
                except (Bad, IndexError, KeyError, AssertionError, struct.error, zlib.error) as e:
                    raise Bad(f"{path}: record at offset {offset} does not decode: {e!r}")
            out.append({"path": path, "name": os.path.basename(path), "events": events})
    except Bad as e:
        print(f"tensorboard_check: {e}", file=sys.stderr)
        return 1
    json.dump({"files": out}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
