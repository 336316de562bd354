"""A small GPT's training step under torch.distributed's recipes: tilefuse vs Inductor vs eager.

Recipes (as ``docs/distributed.md`` describes them, and as torchtitan applies them):

* ``ddp``: ``torch.compile(DistributedDataParallel(model))``: Dynamo's DDP optimizer compiles one
  graph per gradient bucket (``--bucket-mb``), so each bucket's all-reduce starts while the
  backward of the earlier layers still runs.
* ``fsdp``: FSDP2: each transformer block compiled (``module.compile(fullgraph=True)``), then
  ``fully_shard`` on every block and on the root; the embeddings and the head run eagerly.
* ``tp``: tensor parallelism on a 1-D DeviceMesh: attention's q/k/v and the MLP's up projection
  ``ColwiseParallel``, their output projections ``RowwiseParallel`` (heads split across ranks),
  each block compiled; every rank trains on the same batch.

Per (recipe, backend) each rank builds the model from the same seed, wraps it, and runs
``--warmup`` steps (the first one compiles: ``first_step_s``) and ``--steps`` timed steps of
AdamW (for-each; per parameter under TP, whose DTensor and plain parameters one for-each kernel
cannot mix) on random tokens (cross-entropy of next-token prediction), each step synchronized (CUDA) and
the ranks' times reduced to the slowest. ``ms_per_step``: the slowest rank's mean; ``tokens_per_s``:
tokens trained on per step by all ranks together (TP: one batch; DDP/FSDP: one per rank) over it.
``loss``: the last step's loss on rank 0 (the same seeds and data for every backend: compiled
losses should match eager's to a few digits). tilefuse rows add ``graphs`` (graphs tilefuse
compiled or took from its graph cache) and ``eager_graphs`` (graphs that fell back to eager: 0 means everything ran tilefuse's
code).

    torchrun --nproc-per-node 2 benches/distributed.py                      # GPUs (NCCL)
    torchrun --nproc-per-node 2 benches/distributed.py --recipes tp --backends tilefuse,eager
    python benches/distributed.py --cpu-smoke                               # world size 1, gloo, CPU
    torchrun --nproc-per-node 2 benches/distributed.py --cpu-smoke          # two gloo ranks on the CPU

Without ``torchrun`` the script runs as a world of one. ``--cpu-smoke``: a tiny model (2 layers,
width 32, 16 tokens) on the CPU with gloo and Triton's interpreter, 1 warm-up and 2 timed steps:
that the recipes run, not how fast (Inductor compiles C++ there: tens of seconds per recipe).
``--json PATH``: the rows also as JSON (rank 0).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

RECIPES = ("ddp", "fsdp", "tp")
BACKENDS = ("eager", "inductor", "tilefuse")
# --cpu-smoke's model and step counts (a GPT whose every compile runs through the interpreter)
SMOKE = {"layers": 2, "dim": 32, "heads": 4, "seq": 16, "batch": 2, "vocab": 64, "steps": 2, "warmup": 1}


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text}: give a positive number")
    return v


def _choices(text: str, allowed: tuple, flag: str, ap: argparse.ArgumentParser) -> list:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names or [n for n in names if n not in allowed]:
        ap.error(f"{flag} {text!r}: choose one or more of {','.join(allowed)}")
    return names


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    ap.add_argument("--recipes", default=",".join(RECIPES), help=f"some of {','.join(RECIPES)}")
    ap.add_argument("--backends", default=",".join(BACKENDS), help=f"some of {','.join(BACKENDS)}")
    ap.add_argument("--layers", type=_positive, default=4)
    ap.add_argument("--dim", type=_positive, default=768, help="model width (a multiple of --heads)")
    ap.add_argument("--heads", type=_positive, default=12, help="attention heads (TP: a multiple of the world size)")
    ap.add_argument("--seq", type=_positive, default=1024, help="tokens per sequence")
    ap.add_argument("--batch", type=_positive, default=8, help="sequences per rank and step")
    ap.add_argument("--vocab", type=_positive, default=50304)
    ap.add_argument("--steps", type=_positive, default=20, help="timed steps")
    ap.add_argument("--warmup", type=_positive, default=3, help="steps before timing (the first compiles)")
    ap.add_argument("--bucket-mb", type=float, default=25.0, help="DDP's bucket_cap_mb")
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny model, CPU, gloo, Triton's interpreter")
    ap.add_argument("--json", metavar="PATH", help="also write the rows as JSON (rank 0)")
    args = ap.parse_args(argv)
    args.recipes = _choices(args.recipes, RECIPES, "--recipes", ap)
    args.backends = _choices(args.backends, BACKENDS, "--backends", ap)
    if args.cpu_smoke:
        explicit = {a.split("=")[0].lstrip("-").replace("-", "_") for a in (argv or sys.argv[1:]) if a.startswith("--")}
        for k, v in SMOKE.items():
            if k not in explicit:
                setattr(args, k, v)
    if args.dim % args.heads:
        ap.error(f"--dim {args.dim} is not a multiple of --heads {args.heads}")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if "tp" in args.recipes and args.heads % world:
        ap.error(
            f"--heads {args.heads}: tensor parallelism splits heads over {world} ranks; give a multiple of {world}"
        )
    if args.bucket_mb <= 0:
        ap.error(f"--bucket-mb {args.bucket_mb}: give a positive size")
    return args


def gpt_classes():
    """The GPT's module classes (defined once torch is imported: ``main`` sets the environment
    first)."""
    import torch
    import torch.nn.functional as F

    class Attention(torch.nn.Module):
        """Causal self-attention, (batch, seq, dim) -> (batch, seq, dim); the head count follows
        the q/k/v width, so a column-sharded projection runs this rank's heads."""

        def __init__(self, dim: int, heads: int):
            super().__init__()
            self.head_dim = dim // heads
            self.q, self.k, self.v, self.o = (torch.nn.Linear(dim, dim, bias=False) for _ in range(4))

        def forward(self, h):
            b, t, _ = h.shape
            q, k, v = (p(h).view(b, t, -1, self.head_dim).transpose(1, 2) for p in (self.q, self.k, self.v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o(a.transpose(1, 2).reshape(b, t, -1))

    class MLP(torch.nn.Module):
        def __init__(self, dim: int):
            super().__init__()
            self.up = torch.nn.Linear(dim, 4 * dim)
            self.down = torch.nn.Linear(4 * dim, dim)

        def forward(self, h):
            return self.down(F.gelu(self.up(h), approximate="tanh"))

    class Block(torch.nn.Module):
        def __init__(self, dim: int, heads: int):
            super().__init__()
            self.attn_norm, self.attn = torch.nn.LayerNorm(dim), Attention(dim, heads)
            self.mlp_norm, self.mlp = torch.nn.LayerNorm(dim), MLP(dim)

        def forward(self, x):
            x = x + self.attn(self.attn_norm(x))
            return x + self.mlp(self.mlp_norm(x))

    class GPT(torch.nn.Module):
        """Token ids (batch, seq) int64 -> logits (batch, seq, vocab)."""

        def __init__(self, layers: int, dim: int, heads: int, seq: int, vocab: int):
            super().__init__()
            self.tok = torch.nn.Embedding(vocab, dim)
            self.pos = torch.nn.Embedding(seq, dim)
            self.blocks = torch.nn.ModuleList(Block(dim, heads) for _ in range(layers))
            self.norm = torch.nn.LayerNorm(dim)
            self.head = torch.nn.Linear(dim, vocab, bias=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for b in self.blocks:
                x = b(x)
            return self.head(self.norm(x))

    return GPT


def build(recipe: str, backend: str, args: argparse.Namespace, device: str, world: int):
    """The wrapped (and, but for eager, compiled) model for ``recipe``: (callable, parameters)."""
    import torch

    GPT = gpt_classes()
    torch.manual_seed(0)
    model = GPT(args.layers, args.dim, args.heads, args.seq, args.vocab).to(device)
    compiled = backend != "eager"
    if recipe == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        ids = [torch.cuda.current_device()] if device == "cuda" else None
        ddp = DDP(model, bucket_cap_mb=args.bucket_mb, device_ids=ids)
        return (torch.compile(ddp, backend=backend) if compiled else ddp), ddp.parameters()
    if recipe == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for block in model.blocks:
            if compiled:
                block.compile(backend=backend, fullgraph=True)
            fully_shard(block)
        fully_shard(model)
        return model, model.parameters()
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh(device, (world,))
    plan = {f"attn.{p}": ColwiseParallel() for p in "qkv"}
    plan.update({"attn.o": RowwiseParallel(), "mlp.up": ColwiseParallel(), "mlp.down": RowwiseParallel()})
    for block in model.blocks:
        parallelize_module(block, mesh, plan)
        if compiled:
            block.compile(backend=backend, fullgraph=True)
    return model, model.parameters()


def measure(recipe: str, backend: str, args: argparse.Namespace, device: str, rank: int, world: int) -> dict:
    """One (recipe, backend) row (see the module doc); every rank returns it, rank 0's is printed."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    torch._dynamo.reset()
    counts = None
    if backend == "tilefuse":
        from tilefuse import metrics

        metrics.reset()
        counts = metrics
    model, params = build(recipe, backend, args, device, world)
    # TP: the split layers' parameters are DTensors, the rest plain tensors, which one foreach
    # kernel cannot take together
    opt = torch.optim.AdamW(params, lr=1e-3, foreach=recipe != "tp")
    # TP: every rank the same batch (the model is split, not the data); else each rank its own
    g = torch.Generator().manual_seed(1234 + (0 if recipe == "tp" else rank))
    n = args.warmup + args.steps
    tokens = torch.randint(0, args.vocab, (n, args.batch, args.seq + 1), generator=g).to(device)

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    def step(i: int) -> torch.Tensor:
        logits = model(tokens[i, :, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens[i, :, 1:].flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    sync()
    t0 = time.perf_counter()
    step(0)
    sync()
    first = time.perf_counter() - t0
    for i in range(1, args.warmup):
        step(i)
    sync()
    dist.barrier()
    t0 = time.perf_counter()
    for i in range(args.warmup, n):
        loss = step(i)
    sync()
    took = torch.tensor([time.perf_counter() - t0, first], dtype=torch.float64, device=device)
    dist.all_reduce(took, op=dist.ReduceOp.MAX)  # the step ends when the slowest rank's does
    per_step = took[0].item() / args.steps
    tokens_per_step = args.batch * args.seq * (1 if recipe == "tp" else world)
    row = {
        "recipe": recipe,
        "backend": backend,
        "world": world,
        "device": device,
        "first_step_s": round(took[1].item(), 3),
        "ms_per_step": round(per_step * 1e3, 3),
        "tokens_per_s": round(tokens_per_step / per_step, 1),
        "loss": round(loss.item(), 5),
    }
    if counts is not None:
        row["graphs"] = counts.generated_graph_count + counts.graph_cache_hits
        row["eager_graphs"] = counts.eager_graph_count
    return row


def report(rows: list[dict]) -> str:
    """The rows as a text table, plus each compiled backend's speedup over eager per recipe."""
    cols = (
        "recipe",
        "backend",
        "world",
        "first_step_s",
        "ms_per_step",
        "tokens_per_s",
        "loss",
        "graphs",
        "eager_graphs",
    )
    lines = ["  ".join(f"{c:>13}" for c in cols)]
    for r in rows:
        lines.append("  ".join(f"{str(r.get(c, '-')):>13}" for c in cols))
    eager = {r["recipe"]: r["ms_per_step"] for r in rows if r["backend"] == "eager"}
    for r in rows:
        if r["backend"] != "eager" and r["recipe"] in eager and r["ms_per_step"] > 0:
            lines.append(f"{r['recipe']} {r['backend']}: {eager[r['recipe']] / r['ms_per_step']:.2f}x eager")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cpu_smoke:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported
    if "WORLD_SIZE" not in os.environ:  # a plain `python benches/distributed.py`: a world of one
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    use_cuda = torch.cuda.is_available() and not args.cpu_smoke
    if not use_cuda and not args.cpu_smoke:
        print("benches/distributed.py: no CUDA GPU here; add --cpu-smoke (a tiny model on the CPU)", file=sys.stderr)
        return 2
    device = "cuda" if use_cuda else "cpu"
    if use_cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rows = []
    try:
        for recipe in args.recipes:
            for backend in args.backends:
                row = measure(recipe, backend, args, device, rank, world)
                rows.append(row)
                if rank == 0:
                    print(json.dumps(row), flush=True)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        print(report(rows))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    return 0


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    sys.exit(main())
