#!/usr/bin/python3
"""Writes the seed corpus of the fuzz targets (tests/fuzz/corpus/<target>/): small valid inputs, one file
each, made from the formats' own writers where Python has them (torch.save for checkpoints). Run with
Debian's /usr/bin/python3 (it has torch) from anywhere; the files are committed, so this runs only when a
format changes. corpus/checkpoint/volt_written is a checkpoint Volt itself wrote (volt_dist_program --strategy
single_device --devices 1 --steps 2 --samples 8 --batch 8 --checkpoint 1); this script adds its .pkl form."""
import gzip
import io
import json
import os
import struct
import sys
import zipfile

import torch

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


# cli: config text, NUL, argv words ("@CFG@" is the config file's path).
put("cli", "config_and_flags", "trainer:\n  max_epochs: 3\n  devices: [0, 1]\n  limit_val_batches: 0.25\n"
    "model:\n  lr: 0.01\n  name: cnn\n\0--trainer.precision\0bf16-mixed\0--model.hidden=64")
put("cli", "flags_only", "\0--trainer.devices=auto\0--trainer.deterministic\0--data.shuffle\0false\0"
    "--trainer.seed\0null\0--trainer.limit_train_batches\0+10")
put("cli", "print_config", "data:\n  root: \"~\"\n  shuffle: off\ntrainer: {check_val_every_n_epoch: null}\n"
    "\0--config\0@CFG@\0--print-config")
put("cli", "flow_and_anchors", "trainer: &t {max_steps: 100, val_check_interval: 0.5}\nmodel: {name: 'yes', "
    "lr: 1e-4}\n")
put("cli", "help", "\0--help")


def save(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


# checkpoint: Volt's layout, {"tensors", "blobs", "meta"} (dicts of two or more entries: LibTorch 1.13's
# unpickler lacks the SETITEM opcode Python uses for one entry).
meta = {"format_version": 1, "volt_version": "0.1.0", "torch_version": "1.13.0", "epoch": 1, "global_step": 8,
        "weights_only": False, "metrics": {"val_loss": 0.5, "val_acc": 0.75}, "hyper_parameters": {"lr": 0.01},
        "loops": {"epoch": 1, "global_step": 8, "batches_done": 0, "batches_seen": 8}}
put("checkpoint", "volt_layout", save({
    "tensors": {"state_dict.fc.weight": torch.arange(6, dtype=torch.float32).reshape(2, 3),
                "state_dict.fc.bias": torch.zeros(2, dtype=torch.float64),
                "rng.cpu": torch.zeros(8, dtype=torch.uint8)},
    "blobs": {"optimizer.0": torch.tensor(list(b"state"), dtype=torch.uint8),
              "optimizer.1": torch.tensor([], dtype=torch.uint8)},
    "meta": json.dumps(meta)}))
put("checkpoint", "weights_only", save({
    "tensors": {"state_dict.w": torch.ones(3, dtype=torch.int64), "state_dict.b": torch.tensor(True)},
    "blobs": {"a": torch.tensor([1], dtype=torch.uint8), "b": torch.tensor([2], dtype=torch.uint8)},
    "meta": json.dumps({"format_version": 1, "weights_only": True})}))

# The same checkpoints as the harness's second input form: a NUL byte, then the archive's data.pkl.
for name in ("volt_layout", "weights_only", "volt_written"):
    with zipfile.ZipFile(os.path.join(CORPUS, "checkpoint", name)) as z:
        pickle = z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))
    put("checkpoint", name + ".pkl", b"\0" + pickle)


def safetensors(tensors, metadata=None):
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


put("safetensors", "two_tensors.safetensors", safetensors(
    {"fc.weight": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)), "fc.bias": ("I64", [1], struct.pack("<q", 7))},
    {"format": "pt"}))
put("safetensors", "dtypes.safetensors", safetensors(
    {"a": ("BF16", [2], b"\x80\x3f\x00\x40"), "b": ("BOOL", [3], b"\x01\x00\x01"), "c": ("U8", [0], b""),
     "d": ("F16", [1, 1], b"\x00\x3c")}))
put("safetensors", "empty.safetensors", safetensors({}))


def idx(type_code, shape, raw):
    return bytes([0, 0, type_code, len(shape)]) + b"".join(struct.pack(">i", d) for d in shape) + raw


images = idx(0x08, [2, 3, 3], bytes(range(18)))
put("idx", "ubyte_images", images)
put("idx", "ubyte_images.gz", gzip.compress(images, mtime=0))
put("idx", "labels.gz", gzip.compress(idx(0x08, [4], bytes([1, 2, 3, 9])), mtime=0))
put("idx", "floats", idx(0x0D, [2, 2], struct.pack(">4f", 0.5, 1, -2, 3)))
put("idx", "int32_and_double.gz", gzip.compress(idx(0x0C, [3], struct.pack(">3i", -1, 0, 1))
                                                + idx(0x0E, [1], struct.pack(">d", 2.5)), mtime=0))

generator = {
    "image_classification": {"template": "image-classification", "name": "fmnist", "max_epochs": 3,
                             "optimizer": "sgd", "lr": "0.05"},
    "ddp_launch": {"template": "minimal", "distributed": "launch", "nproc_per_node": 2, "nnodes": 2,
                   "master_addr": "10.0.0.1", "node_rank": 1, "sbatch": True},
    "tpu_spawn": {"template": "language-model", "accelerator": "tpu", "backend": "xla-tpu", "distributed": "spawn",
                  "tpu_chips_per_host": 4, "precision": "bf16-mixed"},
    "gan_gpu": {"template": "gan", "accelerator": "gpu", "backend": "nccl", "distributed": "spawn",
                "nproc_per_node": "2", "precision": "16-mixed", "include_tests": "false"},
    "text": {"template": "text-classification", "seed": 0, "batch_size": 1.0},
    "loggers": {"template": "minimal", "logger": "csv,tensorboard", "profiler": "simple"},
    "loggers_list": {"template": "gan", "logger": ["tensorboard"], "profiler": "pytorch"},
}
for name, options in generator.items():
    put("generator_options", name + ".json", json.dumps(options))

api = {
    "schema": "GET\n/api/schema\n\n",
    "page": "GET\n/\n\n",
    "asset": "HEAD\n/assets/app.js\n\n",
    "validate": "POST\n/api/validate\napplication/json\n" + json.dumps(generator["ddp_launch"]),
    "render": "POST\n/api/render\napplication/json; charset=utf-8\n" + json.dumps(generator["image_classification"]),
    "zip": "POST\n/api/zip\napplication/json\n" + json.dumps({"template": "minimal", "name": "z"}),
    "notebook": "POST\n/api/notebook\napplication/json\n" + json.dumps(generator["tpu_spawn"]),
    "problems": "POST\n/api/render\napplication/json\n" + json.dumps({"template": "nope", "max_epochs": -1}),
}
for name, request in api.items():
    put("ui_api", name, request)
# csv: an options byte (see csv_fuzz.cpp), then the file.
put("csv", "header_target_int", b"\x08" + b'a,b,c\n1,2.5,x\n2,-3e2,"y,z"\n3,,"q""r"\n')
put("csv", "tsv_category_fill", b"\x51" + b"a\tb\r\nred\t1\r\n\tNA\r\nblue\t+2\r\n")
put("csv", "headerless_semicolon", b"\x06" + b'1;2\n"3";4\n\n5;"6\n"\n')
put("csv", "category_target_bom", b"\x28" + b"\xef\xbb\xbfa,b\ncat,1\ndog,2\ncat,3\n")


# token_file: a byte for context (low 4 bits + 1) and stride (bits 4-5), then the file.
def token_file(width, ids):
    fmt = "<%d%s" % (len(ids), "H" if width == 2 else "I")
    header = b"VOLTTOK1" + struct.pack("<IIQQQQQQ", width, 0, len(ids), 300, 1, 2, 3, 0)
    return header + struct.pack(fmt, *ids)


put("token_file", "uint16", b"\x03" + token_file(2, list(range(20))))
put("token_file", "uint32_stride", b"\x21" + token_file(4, [70000 + i for i in range(12)]))


# image: a mode byte (even: RGB, odd: L), then a JPEG or PNG file written by PIL (libjpeg-turbo, libpng).
def image_file(fmt, mode, size, **save):
    from PIL import Image
    w, h = size
    pixels = bytes((x * 37 + y * 11 + c * 90) % 256 for y in range(h) for x in range(w) for c in range(len(mode)))
    if mode == "P":
        img = Image.frombytes("L", size, bytes((x + y) % 4 for y in range(h) for x in range(w))).convert("P")
        img.putpalette([0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255] + [0] * (768 - 12))
    else:
        img = Image.frombytes(mode, size, pixels)
    buf = io.BytesIO()
    img.save(buf, fmt, **save)
    return buf.getvalue()


put("image", "png_rgb", b"\x00" + image_file("PNG", "RGB", (7, 5)))
put("image", "png_gray_as_l", b"\x01" + image_file("PNG", "L", (6, 4)))
put("image", "png_rgba", b"\x00" + image_file("PNG", "RGBA", (3, 3)))
put("image", "png_palette_as_l", b"\x01" + image_file("PNG", "P", (5, 5)))
put("image", "png_interlaced", b"\x00" + image_file("PNG", "RGB", (9, 9), interlace=1))
put("image", "jpeg_rgb", b"\x00" + image_file("JPEG", "RGB", (16, 8), quality=75))
put("image", "jpeg_gray_as_l", b"\x01" + image_file("JPEG", "L", (8, 8), quality=90))
put("image", "jpeg_progressive", b"\x00" + image_file("JPEG", "RGB", (12, 10), quality=60, progressive=True))
print("wrote the corpus under", CORPUS, file=sys.stderr)
