"""PyTorch's side of benches/gpu: reads the workload spec the Rust harness prints
(`gpu --spec`, JSON lines) and prints one JSON line per workload with the seconds per
iteration, eager and (on CUDA) replayed from a CUDA graph, timed like the Rust side: warm-up,
N calls sized to about a quarter of a second, the device synchronised, median of the repeats.

    python torch_bench.py SPEC.jsonl > torch.jsonl

Runs on CUDA when torch.cuda.is_available(), else eagerly on the CPU (the graph cells are
then null and the _meta line says why). float32 throughout with TF32 off, so matmul and
conv compare with dygraph's float32 kernels rather than tensor-core TF32 ones.
"""
import json
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class MnistNet(nn.Module):
    """The seed's network, as benches/compare/mnist_torch.py builds it."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5)
        self.conv2 = nn.Conv2d(20, 50, 5)
        self.fc = nn.Linear(800, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, 2)
        return F.softmax(self.fc(x.flatten(1)), dim=-1)


class Bench:
    def __init__(self, settings, device):
        self.repeats = max(1, int(settings["repeats"]))
        self.target_s = float(settings["target_s"])
        self.warm_s = float(settings.get("warm_s", 0.0))
        self.max_iters = int(settings["max_iters"])
        self.host_calls = int(settings["host_calls"])
        self.smoke = bool(settings["smoke"])
        self.cuda = device.type == "cuda"

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def warm_up(self, fn):
        """Calls fn once (set-up, autotuning), then for warm_s seconds more, as the Rust side
        does: a GPU's clock drops while it idles and ramps up again under load."""
        fn()
        self.sync()
        t = time.perf_counter()
        while time.perf_counter() - t < self.warm_s:
            fn()
            self.sync()

    def per_call(self, fn):
        """Seconds per call of fn, device work included."""
        self.warm_up(fn)
        n = 1
        if not self.smoke:
            t = time.perf_counter()
            fn()
            self.sync()
            n = max(1, min(self.max_iters, int(self.target_s / (time.perf_counter() - t))))
        samples = []
        for _ in range(self.repeats):
            t = time.perf_counter()
            for _ in range(n):
                fn()
            self.sync()
            samples.append((time.perf_counter() - t) / n)
        return statistics.median(samples)

    def host_per_op(self, fn, ops):
        """The calling thread's CPU seconds per op; fn issues `ops` ops."""
        self.warm_up(fn)
        samples = []
        for _ in range(self.repeats):
            t = time.thread_time()
            for _ in range(self.host_calls):
                fn()
            samples.append((time.thread_time() - t) / (self.host_calls * ops))
            self.sync()
        return statistics.median(samples)

    def graphed(self, fn, before_capture=None):
        """fn captured once into a CUDA graph; returns the replay function."""
        # Warm-up on a side stream before capture, as torch.cuda.graphs' documentation asks
        # (cuBLAS/cuDNN workspaces and the allocator's state are set up outside the capture).
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        if before_capture:
            before_capture()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = fn()

        def replay():
            g.replay()
            return out  # held by the closure: the graph's outputs live in its memory pool

        return replay


def op_of(w, device):
    """The workload's call on fresh random inputs, and how many ops one call issues."""
    k = w["kind"]
    randn = lambda *shape: torch.randn(*shape, device=device)
    if k == "matmul":
        a, b = randn(w["m"], w["k"]), randn(w["k"], w["n"])
        return (lambda: torch.mm(a, b)), None
    if k == "matmul_f16":
        a, b = randn(w["n"], w["n"]).half(), randn(w["n"], w["n"]).half()
        return (lambda: torch.mm(a, b)), None
    if k == "conv2d":
        x, wt, b = randn(*w["x"]), randn(*w["w"]), randn(w["w"][0])
        return (lambda: F.conv2d(x, wt, b, padding=w["pad"])), None
    if k == "copy":
        x = randn(w["n"])
        return (lambda: x.clone()), None
    if k == "add":
        a, b = randn(w["n"]), randn(w["n"])
        return (lambda: a + b), None
    if k == "softmax":
        x = randn(w["rows"], w["cols"])
        return (lambda: torch.softmax(x, -1)), None
    if k == "layer_norm":
        x, wt, b = randn(w["rows"], w["cols"]), randn(w["cols"]), randn(w["cols"])
        return (lambda: F.layer_norm(x, (w["cols"],), wt, b, 1e-5)), None
    if k in ("host_add", "host_matmul"):
        if k == "host_add":
            x, y, step = randn(w["n"]), randn(w["n"]), torch.add
        else:
            x, y, step = randn(w["n"], w["n"]) * 0.25, randn(w["n"], w["n"]) * 0.25, torch.mm

        def chain():
            t = x
            for _ in range(w["chain"]):
                t = step(t, y)
            return t

        return chain, w["chain"]
    raise ValueError(f"unknown workload kind {k!r}")


def mnist_step(w, device, graph):
    """One Adam step of MnistNet on a synthetic batch (images in [-1, 1], labels 0..9), and
    what to run before capturing it."""
    torch.manual_seed(0)
    batch = w["batch"]
    x = torch.rand(batch, 1, 28, 28, device=device) * 2 - 1
    y = torch.randint(0, 10, (batch,), device=device)
    model = MnistNet().to(device)
    # capturable keeps Adam's step count on the device, which a CUDA graph requires.
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=graph)

    def step():
        # The graph's gradients are None when it is captured, so backward writes them afresh
        # at every replay (torch.cuda.graphs' whole-network recipe); eagerly they are reset.
        if not graph:
            opt.zero_grad(set_to_none=True)
        loss = F.nll_loss(torch.log(model(x)), y)
        loss.backward()
        opt.step()
        return loss

    return step, lambda: opt.zero_grad(set_to_none=True)


def main():
    lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    settings = next(l for l in lines if l["id"] == "_settings")
    work = [l for l in lines if not l["id"].startswith("_")]
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    if cuda:
        where = f"cuda ({torch.cuda.get_device_name(0)}, TF32 off, cudnn.benchmark on)"
        graphs_note = note = ""
    else:
        where = f"cpu ({torch.get_num_threads()} threads)"
        graphs_note = ("this PyTorch build has no CUDA" if torch.version.cuda is None
                       else f"torch.cuda.is_available() is False (built for CUDA {torch.version.cuda}, "
                            "no usable CUDA device)")
        note = "on the CPU an op computes inside the call, so its host-cost rows include the arithmetic"
    print(json.dumps({"id": "_meta", "torch": torch.__version__, "device": where, "graphs": cuda,
                      "graphs_note": graphs_note, "note": note}), flush=True)
    b = Bench(settings, device)
    for w in work:
        out = {"id": w["id"]}
        for mode in ("eager", "graph"):
            if mode == "graph" and not cuda:
                continue
            try:
                prepare = None
                if w["kind"] == "mnist_train":
                    (fn, prepare), ops = mnist_step(w, device, graph=mode == "graph"), None
                else:
                    fn, ops = op_of(w, device)
                if mode == "graph":
                    fn = b.graphed(fn, prepare)
                out[f"{mode}_s"] = b.per_call(fn) if ops is None else b.host_per_op(fn, ops)
            except Exception as e:  # a failed cell, reported in the table
                out[f"{mode}_error"] = f"{type(e).__name__}: {e}".replace("\n", " ")[:300]
            if cuda:
                torch.cuda.empty_cache()
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
