"""Lightning 2.2.5's StochasticWeightAveraging on a tiny deterministic problem, for swa_test.cpp.

Usage: PYTHONPATH=<oracle path> /usr/bin/python3 swa_lightning.py BATCH_NORM(0|1)
Prints every parameter of the SWA average, then every floating-point buffer of the fitted model
(the batch-norm statistics of the final pass), one float.hex per line. The data and the initial weights are closed formulas that the C++ side computes with the
same LibTorch operations, so both sides start from the same bits.
"""
import sys
import tempfile

import compat  # noqa: F401  (the oracle's torch 1.13 fix, before lightning)
import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import StochasticWeightAveraging


def data():
    x = torch.sin(torch.arange(40 * 4, dtype=torch.float32).reshape(40, 4) * 0.37)
    y = x.sum(1, keepdim=True) * 0.5 + torch.cos(torch.arange(40, dtype=torch.float32)).reshape(40, 1) * 0.1
    return x, y


class Net(pl.LightningModule):
    def __init__(self, batch_norm):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 3)
        self.bn = torch.nn.BatchNorm1d(3) if batch_norm else None
        self.fc2 = torch.nn.Linear(3, 1)
        with torch.no_grad():
            for i, p in enumerate(self.parameters()):
                p.copy_(torch.cos(torch.arange(p.numel(), dtype=torch.float32) + i).reshape(p.shape) * 0.4)

    def training_step(self, batch, batch_idx):
        x, y = batch
        h = self.fc1(x)
        if self.bn is not None:
            h = self.bn(h)
        return torch.nn.functional.mse_loss(self.fc2(torch.tanh(h)), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main():
    batch_norm = sys.argv[1] == "1"
    torch.set_num_threads(1)
    x, y = data()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=4, shuffle=False)
    model = Net(batch_norm)
    trainer = pl.Trainer(max_epochs=4, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         default_root_dir=tempfile.mkdtemp(),
                         callbacks=[StochasticWeightAveraging(swa_lrs=0.05, swa_epoch_start=2, annealing_epochs=1)])
    swa = next(cb for cb in trainer.callbacks if isinstance(cb, StochasticWeightAveraging))
    trainer.fit(model, loader)
    # The average itself: with batch norm, Lightning 2.2.5 ends its extra epoch with one more
    # optimizer step on the last training batch's gradients (it skips zero_grad with backward, not
    # the step), which moves the model's parameters off the average (docs/training-extras.md).
    for p in swa._average_model.parameters():
        for v in p.detach().reshape(-1).tolist():
            print(float.hex(v))
    for b in model.buffers():
        if b.is_floating_point():
            for v in b.detach().reshape(-1).tolist():
                print(float.hex(v))


if __name__ == "__main__":
    main()
