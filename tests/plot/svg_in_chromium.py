#!/usr/bin/env python3
"""volt plot's SVG end to end: two runs' metrics.csv drawn as SVG, parsed as XML, rendered by
Debian's headless Chromium, and the screenshot decoded (zlib, no imaging library) to check that
each run's colour is on screen; the same runs as PNG through the command, its size and colours
checked and no temporary file left. Exit 0 passes, 1 fails, 77 skips (no Chromium)."""
import argparse
import os
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib

# The first two colours of volt plot's palette (tools/volt/plot/figure.cpp, run_color).
RUN_COLOURS = [(0x1B, 0x6A, 0xC9), (0xE4, 0x57, 0x2E)]


def read_png(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB or RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    pos, idat, width = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            if depth != 8 or colour not in (2, 6):
                raise ValueError(f"unexpected PNG format: depth {depth}, colour type {colour}")
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(height):
        filt, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b = prev[x]
            c = prev[x - channels] if x >= channels else 0
            if filt == 1:
                line[x] = (line[x] + a) & 255
            elif filt == 2:
                line[x] = (line[x] + b) & 255
            elif filt == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif filt == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, channels)])
        prev = line
    return width, height, rows


def write_run(path, scale, steps):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "metrics.csv"), "w") as f:
        f.write("epoch,step,train_loss,val_loss\n")
        for s in range(9, steps, 10):
            f.write(f"{s // 50},{s},{scale / (1 + s * 0.05)},\n")
            if (s + 1) % 50 == 0:
                f.write(f"{s // 50},{s},,{scale * 0.9 / (1 + s * 0.04)}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--volt", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("skipped: no chromium on PATH (scripts/setup.sh installs Debian's chromium)")
        return 77
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    runs = [os.path.join(args.workdir, "run_a"), os.path.join(args.workdir, "run_b")]
    write_run(runs[0], 1.0, 200)
    write_run(runs[1], 2.0, 150)
    svg = os.path.join(args.workdir, "curves.svg")
    subprocess.run([args.volt, "plot", *runs, "--out", svg], check=True)
    # The same runs as PNG through the command: its size as printed, its colours, no temporary left.
    png = os.path.join(args.workdir, "curves.png")
    out = subprocess.run([args.volt, "plot", *runs, "--out", png], check=True, stdout=subprocess.PIPE).stdout.decode()
    pw, ph, prow = read_png(png)
    if f"({pw}x{ph} PNG" not in out:
        print(f"FAIL: the PNG is {pw}x{ph} but volt plot said: {out}")
        return 1
    for c in RUN_COLOURS:
        if not any(px == c for row in prow for px in row):
            print(f"FAIL: the PNG has no pixel of run colour {c}")
            return 1
    left = sorted(f for f in os.listdir(args.workdir) if ".tmp." in f)
    if left:
        print(f"FAIL: temporary files left next to the output: {left}")
        return 1

    root = ET.parse(svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    if root.tag != ns + "svg":
        print(f"FAIL: the root element is {root.tag}, not svg")
        return 1
    texts = [t.text for t in root.iter(ns + "text")]
    for wanted in ("train_loss", "val_loss", "step", "validation"):
        if wanted not in texts:
            print(f"FAIL: no <text> element says {wanted!r}; texts: {texts[:20]}")
            return 1
    width, height = int(root.get("width")), int(root.get("height"))

    shot = os.path.join(args.workdir, "screenshot.png")
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--force-device-scale-factor=1", f"--window-size={width},{height}",
           f"--user-data-dir={os.path.join(args.workdir, 'profile')}", f"--screenshot={shot}",
           "file://" + os.path.abspath(svg)]
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=90)
    if result.returncode != 0 or not os.path.exists(shot):
        print("FAIL: chromium did not take the screenshot:\n" + result.stdout.decode(errors="replace")[-2000:])
        return 1
    w, h, rows = read_png(shot)
    if (w, h) != (width, height):
        print(f"FAIL: the screenshot is {w}x{h}, the SVG {width}x{height}")
        return 1
    counts = {c: 0 for c in RUN_COLOURS}
    white = 0
    for row in rows:
        for px in row:
            if px == (255, 255, 255):
                white += 1
            for c in RUN_COLOURS:
                if all(abs(px[k] - c[k]) <= 12 for k in range(3)):
                    counts[c] += 1
    print(f"screenshot {w}x{h}: white {white} px; " +
          ", ".join(f"#{c[0]:02x}{c[1]:02x}{c[2]:02x}: {n} px" for c, n in counts.items()))
    if white < w * h // 2:
        print("FAIL: less than half the screenshot is the white background: the SVG did not render")
        return 1
    for c, n in counts.items():
        if n < 200:
            print(f"FAIL: run colour #{c[0]:02x}{c[1]:02x}{c[2]:02x} covers {n} pixels, fewer than 200")
            return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
