"""torch.load(weights_only=True) of a checkpoint, on PyTorch 1.13 and 2.x, for the checkpoint tests.

safe_load(path) returns what torch.load(path, weights_only=True) returns. PyTorch 2.x's weights-only
unpickler reads every file torch.save writes. PyTorch 1.13's has no opcode for a float (BINFLOAT, 'G'): it
refuses Lightning's own checkpoints with "Unsupported operand 71", and any dict holding a learning rate. On
1.13 safe_load therefore requires that refusal and nothing else: it walks data.pkl and checks that every
other opcode is one 1.13's weights-only unpickler reads, and every global one it allows, then loads with
weights_only=False. Run as a script, it prints the layout (keys and types) of the file given as JSON.
"""
import json
import pickletools
import sys
import zipfile

import torch

# The opcodes torch 1.13's torch/_weights_only_unpickler.py reads (its load loop), by name.
OPCODES_113 = {
    "GLOBAL", "NEWOBJ", "REDUCE", "BUILD", "APPEND", "APPENDS", "SETITEM", "SETITEMS", "MARK", "TUPLE",
    "TUPLE1", "TUPLE2", "TUPLE3", "NONE", "NEWFALSE", "NEWTRUE", "EMPTY_TUPLE", "EMPTY_LIST", "EMPTY_DICT",
    "EMPTY_SET", "BININT", "BININT1", "BININT2", "BINUNICODE", "SHORT_BINSTRING", "BINPERSID", "BINGET",
    "LONG_BINGET", "BINPUT", "LONG_BINPUT", "LONG1", "PROTO", "STOP",
}


def torch_major():
    return int(torch.__version__.split(".")[0])


def check_pickle_for_113(path):
    from torch._weights_only_unpickler import _get_allowed_globals

    allowed = _get_allowed_globals()
    with zipfile.ZipFile(path) as z:
        name = next(n for n in z.namelist() if n.endswith("/data.pkl"))
        data = z.read(name)
    for op, arg, pos in pickletools.genops(data):
        if op.name == "BINFLOAT":
            continue
        assert op.name in OPCODES_113, f"opcode {op.name} at byte {pos} is not read by torch 1.13's weights-only unpickler"
        if op.name == "GLOBAL":
            full = arg.replace(" ", ".")
            assert full in allowed, f"global {full} at byte {pos} is not allowed by torch 1.13's weights-only unpickler"


def safe_load(path):
    if torch_major() >= 2:
        return torch.load(path, weights_only=True)
    try:
        return torch.load(path, weights_only=True)
    except Exception as e:  # noqa: BLE001 (the refusal is the subject)
        assert "Unsupported operand 71" in str(e), f"torch 1.13 weights_only refused it for another reason: {e}"
    check_pickle_for_113(path)
    return torch.load(path, weights_only=False)


def layout(v, depth=0):
    if torch.is_tensor(v):
        return f"tensor {str(v.dtype).replace('torch.', '')} {list(v.shape)}"
    if isinstance(v, dict):
        if depth >= 4:
            return f"{type(v).__name__} of {len(v)}"
        return {("int " if isinstance(k, int) else "") + str(k): layout(x, depth + 1) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [type(v).__name__] + [layout(x, depth + 1) for x in v]
    return type(v).__name__


if __name__ == "__main__":
    print(json.dumps(layout(safe_load(sys.argv[1])), indent=1))
