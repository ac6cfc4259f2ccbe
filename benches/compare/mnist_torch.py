"""The seed's MNIST network, batch and optimizer in PyTorch (CPU, or CUDA with --device cuda),
timed like dygraph's examples/mnist: training steps only, first 10 steps as warm-up."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

import mnist_common as common


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5)
        self.conv2 = nn.Conv2d(20, 50, 5)
        self.fc = nn.Linear(800, 10)
        nn.init.normal_(self.fc.weight, 0.0, (2.0 / (800**2 * 10)) ** 0.5)
        nn.init.zeros_(self.fc.bias)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, 2)
        return F.softmax(self.fc(x.flatten(1)), dim=-1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    args = p.parse_args()
    device = torch.device(args.device)
    torch.manual_seed(0)
    x_train, y_train = common.load("train")
    x_test, y_test = common.load("t10k")
    model = Net().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def train_step(xb, yb):
        probs = model(torch.from_numpy(xb).to(device))
        loss = F.nll_loss(torch.log(probs), torch.from_numpy(yb).to(device).flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()

    # The clock stops once the GPU has finished, not when the last step was launched.
    finish = torch.cuda.synchronize if device.type == "cuda" else None
    seconds = common.timed_steps(args.steps, train_step, x_train, y_train, finish=finish)
    with torch.no_grad():
        acc = (model(torch.from_numpy(x_test).to(device)).argmax(1).cpu().numpy() == y_test).mean()
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    common.report(f"PyTorch {torch.__version__} ({where})", args.steps, 64, seconds, acc)


if __name__ == "__main__":
    main()
