"""The seed's MNIST network trained with PyTorch DistributedDataParallel (gloo, CPU), launched
by mpirun like dygraph's examples/mnist_dp: the global batch of 64 split over the ranks, timed
over training steps after 10 warm-up steps. Rank 0 prints images/s over all ranks."""
import argparse
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

import mnist_common as common
from mnist_torch import Net


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--threads", type=int, default=0, help="torch threads per rank (0: PyTorch's default)")
    args = p.parse_args()
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    world = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(Net())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x_train, y_train = common.load("train")
    per = 64 // world
    order = np.random.default_rng(0).permutation(len(y_train))
    warmup = 10
    for step in range(args.steps + warmup):
        if step == warmup:
            dist.barrier()
            start = time.perf_counter()
        idx = order[step * 64 + rank * per : step * 64 + (rank + 1) * per]
        probs = model(torch.from_numpy(x_train[idx]))
        loss = F.nll_loss(torch.log(probs), torch.from_numpy(y_train[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.barrier()
    seconds = time.perf_counter() - start
    if rank == 0:
        print(
            f"PyTorch {torch.__version__} DDP (gloo, {world} ranks, {torch.get_num_threads()} threads each): "
            f"{args.steps} steps of global batch 64 in {seconds:.2f} s = {args.steps * 64 / seconds:.0f} images/s"
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
