"""Peer for bench_gpu's training table: the 784-256-10 MLP recipe of examples/multi_device_train
(Glorot-uniform weights, zero biases, SGD lr 0.1 momentum 0.9, batch 256, one pass over a fresh
permutation per epoch) in PyTorch on one GPU, the data resident on the GPU as locus keeps it.
Then the 784-4096-4096-10 MLP of bench_gpu's mixed-precision table (batch 1024, AdamW 1e-3) in
float32 and under torch.autocast(bfloat16) and autocast(float16) with a GradScaler, PyTorch's
mixed precision on the same recipe.
Usage: mlp_torch_gpu.py [epochs]. Reads the gzipped IDX files from LOCUS_FASHION_MNIST_DIR or
/usr/share/datasets/fashion-mnist. Prints each epoch's seconds (training only, synchronised) and the
median, in the lines scripts/gpu-check.sh reads."""
import gzip, os, statistics, sys, time

import numpy as np
import torch


def idx(name, offset):
    d = os.environ.get("LOCUS_FASHION_MNIST_DIR") or "/usr/share/datasets/fashion-mnist"
    with gzip.open(os.path.join(d, name)) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
dev = torch.device("cuda")
torch.manual_seed(0)
X = torch.from_numpy(idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32) / 255).to(dev)
Y = torch.from_numpy(idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64)).to(dev)
model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).to(dev)
for m in model:
    if isinstance(m, torch.nn.Linear):
        torch.nn.init.xavier_uniform_(m.weight)
        torch.nn.init.zeros_(m.bias)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
lossf = torch.nn.CrossEntropyLoss()
batch = 256
steps = len(X) // batch
times = []
for ep in range(epochs):
    perm = torch.randperm(len(X), device=dev)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for s in range(steps):
        i = perm[s * batch:(s + 1) * batch]
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(X[i]), Y[i])
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
    print(f"epoch {ep + 1}: {times[-1]:.3f} s ({steps * batch / times[-1]:.0f} examples/sec)", flush=True)
with torch.no_grad():
    acc = (model(X).argmax(1) == Y).float().mean().item()
med = statistics.median(times)
print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}: median epoch {med:.3f} s, "
      f"{steps * batch / med:.0f} examples/sec, train accuracy {acc:.3f}")


def wide_epochs(dtype):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(784, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096),
                              torch.nn.ReLU(), torch.nn.Linear(4096, 10)).to(dev)
    adam = torch.optim.AdamW(net.parameters(), lr=1e-3)
    scaler = torch.cuda.amp.GradScaler(enabled=dtype == torch.float16)
    b = 1024
    n = len(X) // b
    secs = []
    for _ in range(epochs):
        perm = torch.randperm(len(X), device=dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for s in range(n):
            i = perm[s * b:(s + 1) * b]
            adam.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
                out = lossf(net(X[i]), Y[i])
            scaler.scale(out).backward()
            scaler.step(adam)
            scaler.update()
        torch.cuda.synchronize()
        secs.append(time.perf_counter() - t0)
    return statistics.median(secs), n * b


for name, dtype in (("float32", None), ("autocast bfloat16", torch.bfloat16), ("autocast float16", torch.float16)):
    sec, n = wide_epochs(dtype)
    print(f"torch wide MLP 784-4096-4096-10 {name}: median epoch {sec:.3f} s, {n / sec:.0f} examples/sec")
