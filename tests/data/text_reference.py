#!/usr/bin/python3
"""Reference outputs for Volt's tabular and text tests, from Debian's python3-pandas and
python3-sentencepiece. Run with /usr/bin/python3; prints JSON on stdout.

  text_reference.py csv FILE SPEC      SPEC is JSON {"sep": ",", "header": true, "features": [names],
                                       "target": name or null, "types": {name: "float"|"int"|"category"},
                                       "fill": number or null}; prints {"columns": [...], "features":
                                       [[float32 as double, ...], ...], "target": [...], "categories":
                                       {name: [values]}} as pandas.read_csv reads the file
  text_reference.py spm MODEL FILE     prints [[ids of line 1], [ids of line 2], ...] (each line without its
                                       line break) as sentencepiece.SentencePieceProcessor encodes them, and
                                       the decode of each id list: {"ids": [...], "decoded": [...],
                                       "vocab_size": n, "bos": id, "eos": id, "pad": id, "unk": id}
  text_reference.py spm-corpus MODEL CORPUS OUT
                                       encodes CORPUS line by line, each line with its line break, as
                                       Volt's write_token_file does, and writes the ids to OUT as raw
                                       little-endian uint16 (uint32 above 65536 ids); prints {"tokens": n}
"""
import json
import sys


def csv(path, spec):
    import numpy as np
    import pandas as pd

    header = 0 if spec.get("header", True) else None
    df = pd.read_csv(path, sep=spec.get("sep", ","), header=header, dtype=str, keep_default_na=True)
    df.columns = [str(c) for c in df.columns]
    types = spec.get("types", {})
    fill = spec.get("fill")
    target = spec.get("target")
    features = spec.get("features") or [c for c in df.columns if c != target]
    categories = {}

    def column(name, default_type):
        kind = types.get(name, default_type)
        if kind == "category":
            cat = df[name].astype("category")
            categories[name] = [str(v) for v in cat.cat.categories]
            codes = cat.cat.codes.astype("int64")
            if fill is not None:
                codes = codes.where(codes >= 0, int(fill))
            elif (codes < 0).any():
                raise SystemExit("missing category in " + name)
            return codes.to_numpy()
        # A second read with the column's dtype: pandas' own number parser.
        parsed = pd.read_csv(path, sep=spec.get("sep", ","), header=header, usecols=[df.columns.get_loc(name)],
                             dtype={df.columns.get_loc(name) if header is None else name: "float64"})
        values = parsed.iloc[:, 0]
        if fill is not None:
            values = values.fillna(fill)
        if kind == "int":
            return values.astype("int64").to_numpy()
        return values.to_numpy()

    out = {"columns": list(df.columns), "categories": categories}
    out["features"] = np.stack([column(c, "float").astype(np.float32) for c in features], axis=1).astype(
        np.float64).tolist()
    if target is not None:
        t = column(target, spec.get("target_type", "int"))
        out["target"] = t.astype(np.float32).astype(np.float64).tolist() if t.dtype.kind == "f" else t.tolist()
    print(json.dumps(out))


def spm(model, path):
    import sentencepiece as spm_module

    sp = spm_module.SentencePieceProcessor(model_file=model)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    ids = [sp.encode(line) for line in lines]
    print(json.dumps({
        "ids": ids,
        "decoded": [sp.decode(i) for i in ids],
        "vocab_size": sp.get_piece_size(),
        "bos": sp.bos_id(), "eos": sp.eos_id(), "pad": sp.pad_id(), "unk": sp.unk_id(),
    }))


def corpus_lines(text):
    """The lines of text, each with its '\\n' (str.splitlines would also split at \\r, \\x0b, \\x1c, ...)."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def spm_corpus(model, corpus, out):
    import numpy as np
    import sentencepiece as spm_module

    sp = spm_module.SentencePieceProcessor(model_file=model)
    with open(corpus, encoding="utf-8", newline="") as f:
        text = f.read()
    ids = []
    for line in corpus_lines(text):
        ids.extend(sp.encode(line))
    dtype = np.uint16 if sp.get_piece_size() <= 65536 else np.uint32
    np.asarray(ids, dtype=dtype).tofile(out)
    print(json.dumps({"tokens": len(ids)}))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "csv":
        csv(sys.argv[2], json.loads(sys.argv[3]))
    elif len(sys.argv) == 4 and sys.argv[1] == "spm":
        spm(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "spm-corpus":
        spm_corpus(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
