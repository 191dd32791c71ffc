#!/usr/bin/python3
"""Reference outputs for Volt's image tests, from PIL 9 and torchvision 0.14 (Debian's python3-pil and
python3-torchvision). Run with /usr/bin/python3.

  image_reference.py decode OUTDIR      writes test images (PNG of every colour type, JPEGs) into OUTDIR,
                                        each with PIL's decode as NAME.RGB.raw and NAME.L.raw (uint8 HxWxC)
                                        and manifest.json {name: {file, height, width}}
  image_reference.py folder ROOT        prints torchvision ImageFolder(ROOT)'s classes, class_to_idx,
                                        samples (paths relative to ROOT) and targets as JSON; a refusal
                                        prints {"error": type, "message": text}
  image_reference.py transforms CASES   CASES is a JSON file {"input": PNG, "outdir": DIR, "cases": [...]};
                                        each case's output goes to DIR/INDEX.bin (uint8 HxWxC or float32
                                        CxHxW, raw) and DIR/manifest.json lists shape, dtype and extra values
"""
import json
import os
import sys

import numpy as np
from PIL import Image


def write_decode_set(outdir):
    rng = np.random.default_rng(19)
    h, w = 37, 53
    # A smooth picture with noise: JPEG has structure to code, PNG filters have work to do.
    yy, xx = np.mgrid[0:h, 0:w]
    rgb = np.stack([(xx * 255 // (w - 1)), (yy * 255 // (h - 1)), ((xx + yy) * 3) % 256], axis=-1)
    rgb = np.clip(rgb + rng.integers(-20, 21, size=rgb.shape), 0, 255).astype(np.uint8)
    alpha = rng.integers(0, 256, size=(h, w), dtype=np.uint8)
    gray = np.asarray(Image.fromarray(rgb).convert("L"))
    images = {
        "rgb.png": (Image.fromarray(rgb), {}),
        "rgba.png": (Image.fromarray(np.dstack([rgb, alpha]), "RGBA"), {}),
        "gray.png": (Image.fromarray(gray, "L"), {}),
        "gray_alpha.png": (Image.fromarray(np.dstack([gray, alpha]), "LA"), {}),
        "palette.png": (Image.fromarray(rgb).quantize(colors=37), {}),
        "palette_trns.png": (Image.fromarray(rgb).quantize(colors=16), {"transparency": 3}),
        "bilevel.png": (Image.fromarray(gray > 128), {}),
        "rgb_q90.jpg": (Image.fromarray(rgb), {"quality": 90}),
        "rgb_q75_444.jpg": (Image.fromarray(rgb), {"quality": 75, "subsampling": 0}),
        "rgb_q95_422.jpg": (Image.fromarray(rgb), {"quality": 95, "subsampling": 1}),
        "rgb_progressive.jpg": (Image.fromarray(rgb), {"quality": 85, "progressive": True}),
        "gray.jpg": (Image.fromarray(gray, "L"), {"quality": 90}),
        # A file named .png that holds a JPEG: the format comes from the bytes.
        "jpeg_named.png": (Image.fromarray(rgb), {"quality": 80, "format": "JPEG"}),
    }
    manifest = {}
    for name, (img, opts) in images.items():
        path = os.path.join(outdir, name)
        opts = dict(opts)
        fmt = opts.pop("format", None)
        img.save(path, format=fmt, **opts)
        with Image.open(path) as decoded:
            decoded.load()
            for mode in ("RGB", "L"):
                arr = np.asarray(decoded.convert(mode), dtype=np.uint8)
                arr.tofile(os.path.join(outdir, name + "." + mode + ".raw"))
            manifest[name] = {"file": path, "height": decoded.height, "width": decoded.width, "mode": decoded.mode}
    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


def folder(root):
    from torchvision.datasets import ImageFolder

    try:
        ds = ImageFolder(root)
    except Exception as e:  # the refusal is what the test compares
        print(json.dumps({"error": type(e).__name__, "message": str(e)}))
        return
    print(json.dumps({
        "classes": ds.classes,
        "class_to_idx": ds.class_to_idx,
        "samples": [os.path.relpath(p, root) for p, _ in ds.samples],
        "targets": ds.targets,
    }))


def transforms(cases_file):
    import torch
    import torchvision.transforms as T
    import torchvision.transforms.functional as F

    with open(cases_file) as f:
        spec = json.load(f)
    rgb = Image.open(spec["input"]).convert("RGB")
    outdir = spec["outdir"]
    manifest = []
    for k, case in enumerate(spec["cases"]):
        op = case["op"]
        extra = {}
        img = rgb.convert("L") if case.get("mode") == "L" else rgb
        if op == "resize":
            out = F.resize(img, case["size"], interpolation=T.InterpolationMode.BILINEAR)
        elif op == "resize_tensor":  # the tensor path, antialias as torchvision 0.14's default for tensors (off)
            t = torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1)
            out = F.resize(t, case["size"], interpolation=T.InterpolationMode.BILINEAR, antialias=case["antialias"])
            out = out.permute(1, 2, 0).contiguous().numpy()
        elif op == "center_crop":
            out = F.center_crop(img, case["size"])
        elif op == "resized_crop":
            out = F.resized_crop(img, *case["box"], case["size"], interpolation=T.InterpolationMode.BILINEAR)
        elif op == "hflip":
            out = F.hflip(img)
        elif op == "brightness":
            out = F.adjust_brightness(img, case["factor"])
        elif op == "contrast":
            out = F.adjust_contrast(img, case["factor"])
        elif op == "saturation":
            out = F.adjust_saturation(img, case["factor"])
        elif op == "to_tensor":
            out = F.to_tensor(img)
        elif op == "normalize":
            out = F.normalize(F.to_tensor(img), case["mean"], case["std"])
        elif op == "rrc_params":
            torch.manual_seed(case["seed"])
            extra["params"] = list(T.RandomResizedCrop.get_params(img, case["scale"], case["ratio"]))
            out = None
        elif op == "jitter_params":
            torch.manual_seed(case["seed"])
            # ColorJitter(x) gives get_params the range [max(0, 1 - x), 1 + x].
            ranges = [[max(0.0, 1 - case[k]), 1 + case[k]] for k in ("brightness", "contrast", "saturation")]
            order, b, c, s, _ = T.ColorJitter.get_params(*ranges, None)
            extra["order"] = order.tolist()
            extra["factors"] = [b, c, s]
            out = None
        elif op == "pipeline":
            torch.manual_seed(case["seed"])
            pipe = T.Compose([
                T.RandomResizedCrop(case["size"], scale=case["scale"], ratio=case["ratio"]),
                T.RandomHorizontalFlip(),
                T.ColorJitter(brightness=case["jitter"][0], contrast=case["jitter"][1], saturation=case["jitter"][2]),
                T.ToTensor(),
                T.Normalize(case["mean"], case["std"]),
            ])
            out = pipe(img)
        else:
            raise SystemExit("unknown op " + op)
        entry = {"op": op, **extra}
        if out is not None:
            if isinstance(out, torch.Tensor):
                arr = out.numpy().astype(np.float32)
                entry["dtype"] = "float32"
            else:
                arr = np.asarray(out, dtype=np.uint8)
                entry["dtype"] = "uint8"
            entry["shape"] = list(arr.shape)
            arr.tofile(os.path.join(outdir, "%d.bin" % k))
        manifest.append(entry)
    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump(manifest, f)


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "decode":
        write_decode_set(sys.argv[2])
    elif cmd == "folder":
        folder(sys.argv[2])
    elif cmd == "transforms":
        transforms(sys.argv[2])
    else:
        raise SystemExit(__doc__)
