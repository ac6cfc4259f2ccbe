"""The seed's MNIST network, batch and optimizer in PaddlePaddle dygraph (CPU), timed like
dygraph's examples/mnist: training steps only, first 10 steps as warm-up."""
import argparse

import paddle
import paddle.nn as nn
import paddle.nn.functional as F

import mnist_common as common


class Net(nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2D(1, 20, 5)
        self.conv2 = nn.Conv2D(20, 50, 5)
        scale = (2.0 / (800**2 * 10)) ** 0.5
        self.fc = nn.Linear(800, 10, weight_attr=paddle.ParamAttr(initializer=nn.initializer.Normal(0.0, scale)))

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, 2)
        return F.softmax(self.fc(paddle.flatten(x, 1)), axis=-1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    args = p.parse_args()
    paddle.set_device("cpu")
    paddle.seed(0)
    x_train, y_train = common.load("train")
    x_test, y_test = common.load("t10k")
    model = Net()
    opt = paddle.optimizer.Adam(learning_rate=1e-3, parameters=model.parameters())

    def train_step(xb, yb):
        probs = model(paddle.to_tensor(xb))
        loss = F.cross_entropy(probs, paddle.to_tensor(yb), use_softmax=False)
        loss.backward()
        opt.step()
        opt.clear_grad()

    seconds = common.timed_steps(args.steps, train_step, x_train, y_train)
    model.eval()
    with paddle.no_grad():
        acc = (model(paddle.to_tensor(x_test)).argmax(1).numpy() == y_test).mean()
    common.report(f"PaddlePaddle {paddle.__version__} (CPU)", args.steps, 64, seconds, acc)


main()
