"""The models of dygraph's examples/lstm_mnist.rs and examples/vit_mnist.rs in PyTorch, with
the same batch, optimizer and one-cycle schedule (peak 3e-3 / 7e-3, PyTorch's OneCycleLR
with Paddle's defaults: div 25, final 1e-4, 30% warm-up, cosine), timed like the examples:
training steps only, the first 10 as warm-up."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

import mnist_common as common


class LstmNet(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.lstm = nn.LSTM(28, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, 10)

    def forward(self, x):
        out, _ = self.lstm(x.reshape(-1, 28, 28))
        return self.fc(out[:, -1])


class Vit(nn.Module):
    def __init__(self, width=64, depth=2, heads=4, mlp=128):
        super().__init__()
        self.stem = nn.Conv2d(1, width // 2, 3, stride=2, padding=1)
        self.stem_norm = nn.BatchNorm2d(width // 2)
        self.patch_embed = nn.Conv2d(width // 2, width, 3, stride=2, padding=1)
        self.cls_token = nn.Parameter(torch.randn(1, 1, width) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, 50, width) * 0.02)
        layer = nn.TransformerEncoderLayer(width, heads, mlp, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        x = self.patch_embed(F.relu(self.stem_norm(self.stem(x))))
        x = x.flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1) + self.pos_embed
        return self.head(self.norm(self.encoder(x))[:, 0])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["lstm", "vit"], required=True)
    p.add_argument("--steps", type=int, default=200)
    args = p.parse_args()
    torch.manual_seed(0)
    x_train, y_train = common.load("train")
    x_test, y_test = common.load("t10k")
    model, batch, peak = (LstmNet(), 64, 3e-3) if args.model == "lstm" else (Vit(), 32, 7e-3)
    opt = torch.optim.Adam(model.parameters(), lr=peak)
    total = 60000 // batch
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, peak, total_steps=total, pct_start=0.3, div_factor=25.0,
                                                final_div_factor=peak / 25.0 / 1e-4)

    def train_step(xb, yb):
        loss = F.cross_entropy(model(torch.from_numpy(xb)), torch.from_numpy(yb).flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()

    seconds = common.timed_steps(args.steps, train_step, x_train, y_train, batch=batch)
    model.eval()
    with torch.no_grad():
        acc = (model(torch.from_numpy(x_test)).argmax(1).numpy() == y_test).mean()
    where = f"CPU, {torch.get_num_threads()} threads"
    common.report(f"PyTorch {torch.__version__} {args.model} ({where})", args.steps, batch, seconds, acc)


main()
