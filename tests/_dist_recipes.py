"""One rank of the distributed training recipes that ``tests/test_distributed.py`` checks.

Run as a script, one process per rank (``tests/test_distributed.py`` starts them, as
``torch.distributed.run`` would): ``python tests/_dist_recipes.py --rank R --world-size W
--init-file PATH --out DIR [--device cpu|cuda] [--only NAME,...]``. The process group is gloo on
the CPU (Triton kernels through its interpreter) and NCCL on CUDA (one GPU per rank), rendezvous
through a file (``file://``: no port to pick or race for).

Each recipe trains a small user-defined model (Dynamo inlines user modules; a model made only of
``torch.nn`` containers is not traced) for a few SGD steps twice from the same seed and the same
data: eagerly, then compiled with tilefuse, under the same parallel wrapper; it records the largest
parameter difference after the last step, tilefuse's counters (graphs compiled, graphs run eagerly
after a failed compile, fallback kernels), the number of graphs AOTAutograd traced, and, per
generated module (``config.debug_dir``), the collectives and waits its wrapper calls in call order.
``fallback_on_error`` is off: a tilefuse compile error raises instead of running eagerly.

Recipes:

* ``ddp``: ``torch.compile(DistributedDataParallel(model))`` with Dynamo's DDP optimizer, which
  splits the graph at DDP's bucket boundaries (one compiled graph per bucket, so each bucket's
  all-reduce starts while the backward of the earlier layers still runs). The bucket cap is 4 KiB
  so the two-block model has two buckets; Dynamo takes the first bucket's cap from
  ``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES`` (1 MiB) and refuses a bucket cap below it, so
  that constant is lowered to the same 4 KiB while the graph is compiled.
* ``fsdp_blocks``: FSDP2 as torchtitan applies it: each block compiled (``module.compile``,
  ``fullgraph=True``), then ``fully_shard`` on each block and on the root. FSDP's hooks run
  eagerly around the compiled blocks (Dynamo skips them: ``skip_fsdp_hooks``).
* ``fsdp_whole``: ``fully_shard`` on the blocks and the root, then the whole model compiled.
* ``tp_blocks``: tensor parallelism: ``parallelize_module`` with the Megatron MLP plan (the up
  projection ``ColwiseParallel``, the down projection ``RowwiseParallel``) on a 1-D DeviceMesh,
  each block compiled; the compiled graphs hold DTensor's collectives (the row-wise output's
  all-reduce in the forward, the column-wise input gradient's all-reduce in the backward).
* ``tp_sequence_parallel``: torchtitan's plan for a transformer block: the norms
  ``SequenceParallel`` (the residual stream holds each rank's slice of the sequence), attention's
  and the MLP's inputs all-gathered (``PrepareModuleInput``), q/k/v and the up projection
  column-wise, the output projections row-wise into sequence shards (a reduce-scatter); each
  block compiled. The first block's input hook and the head's plan run outside the compiled
  blocks.
* ``funcol``: ``torch.distributed._functional_collectives`` called inside one compiled function
  (``fullgraph=True``): all_gather_tensor, reduce_scatter_tensor, all_reduce, all_to_all_single and
  an explicit wait_tensor between trainable layers, forward and backward (their backward formulas
  are collectives too).

Output: ``DIR/rank{R}.json``, ``{recipe: record}``, written after each recipe. A recipe that
raises is recorded with its traceback and the process exits with status 1 at once (the other
ranks would wait in a collective that never comes)."""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
import time
import traceback
from datetime import timedelta
from unittest import mock

DIM, HIDDEN, N_BLOCKS, OUT, BATCH, STEPS, LR = 16, 32, 2, 4, 4, 3, 0.1
SEQ, HEAD_DIM = 8, 4  # the transformer's sequence length and head width (DIM // HEAD_DIM heads)
DDP_BUCKET_BYTES = 4096
# a collective or wait call in a generated wrapper, e.g.
# `buf3 = _c2(buf2, 'sum', '0')  # _c10d_functional.all_reduce.default`: result, first tensor argument, op
# a Triton kernel's launch or an extern (aten) call other than a collective
_COMPUTE_CALL = re.compile(r"_launcher\(|# aten\.")
_COLLECTIVE_CALL = re.compile(r"^\s*(\w+) = \w+\((?:reinterpret_tensor\()?(\w+).*# _c10d_functional\.(\w+)\.")


def _modules():
    """The model classes (built here: torch is imported by ``main`` after the environment is set)."""
    import torch
    import torch.nn.functional as F

    class MLPBlock(torch.nn.Module):
        """x + down(gelu(up(norm(x)))): a transformer block's MLP half, (batch, DIM) -> (batch, DIM)."""

        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(DIM)
            self.up = torch.nn.Linear(DIM, HIDDEN)
            self.down = torch.nn.Linear(HIDDEN, DIM)

        def forward(self, x):
            return x + self.down(F.gelu(self.up(self.norm(x))))

    class Stack(torch.nn.Module):
        """N_BLOCKS blocks and a linear head: (batch, DIM) -> (batch, OUT)."""

        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList(MLPBlock() for _ in range(N_BLOCKS))
            self.head = torch.nn.Linear(DIM, OUT)

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    class Collectives(torch.nn.Module):
        """Functional collectives between two trainable layers, (BATCH, DIM) -> (BATCH, OUT) on each
        of ``world`` ranks."""

        def __init__(self, world: int):
            super().__init__()
            self.world = world
            self.inp = torch.nn.Linear(DIM, DIM)
            self.out = torch.nn.Linear(DIM, OUT)

        def forward(self, x):
            import torch.distributed as dist
            import torch.distributed._functional_collectives as fc

            group = dist.group.WORLD
            h = torch.relu(self.inp(x))
            gathered = fc.all_gather_tensor(h, 0, group)  # (world * BATCH, DIM)
            scattered = fc.reduce_scatter_tensor(gathered * 2 + 1, "sum", 0, group)  # (BATCH, DIM)
            summed = fc.all_reduce(scattered.sin(), "sum", group)
            swapped = fc.wait_tensor(fc.all_to_all_single(summed.cos(), None, None, group))
            return self.out(swapped + h)

    class Attention(torch.nn.Module):
        """Causal self-attention, (batch, seq, DIM) -> (batch, seq, DIM); the head count follows
        the q/k/v width, so a column-sharded projection runs this rank's heads."""

        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (torch.nn.Linear(DIM, DIM, bias=False) for _ in range(4))

        def forward(self, h):
            b, t, _ = h.shape
            q, k, v = (p(h).view(b, t, -1, HEAD_DIM).transpose(1, 2) for p in (self.q, self.k, self.v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o(a.transpose(1, 2).reshape(b, t, -1))

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up = torch.nn.Linear(DIM, HIDDEN)
            self.down = torch.nn.Linear(HIDDEN, DIM)

        def forward(self, h):
            return self.down(F.gelu(self.up(h)))

    class TransformerBlock(torch.nn.Module):
        """Pre-norm attention and MLP with residuals, (batch, seq, DIM) -> (batch, seq, DIM)."""

        def __init__(self):
            super().__init__()
            self.attn_norm, self.attn = torch.nn.LayerNorm(DIM), Attention()
            self.mlp_norm, self.mlp = torch.nn.LayerNorm(DIM), MLP()

        def forward(self, x):
            x = x + self.attn(self.attn_norm(x))
            return x + self.mlp(self.mlp_norm(x))

    class Transformer(torch.nn.Module):
        """N_BLOCKS transformer blocks, a final norm and a linear head: (batch, seq, DIM) -> (batch, seq, OUT)."""

        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList(TransformerBlock() for _ in range(N_BLOCKS))
            self.norm = torch.nn.LayerNorm(DIM)
            self.head = torch.nn.Linear(DIM, OUT)

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return self.head(self.norm(x))

    return MLPBlock, Stack, Collectives, Transformer


class Ctx:
    """What every recipe needs: rank, world size, device, the output folder, the compile backend."""

    def __init__(self, rank: int, world: int, device: str, out: str, backend: str = "tilefuse"):
        self.rank, self.world, self.device, self.out, self.backend = rank, world, device, out, backend
        self.MLPBlock, self.Stack, self.Collectives, self.Transformer = _modules()
        self.extra: dict = {}  # what a recipe adds to its record

    def batches(self, per_rank: bool, shape: tuple = (BATCH, DIM)) -> list:
        """STEPS input batches of ``shape``, this rank's own (``per_rank``: data parallelism) or
        the same on every rank (tensor parallelism replicates the input)."""
        import torch

        g = torch.Generator().manual_seed(1000 + (self.rank if per_rank else 0))
        return [torch.randn(*shape, generator=g).to(self.device) for _ in range(STEPS)]

    def fresh(self, cls=None, *args):
        """A new model of ``cls`` (default ``Stack``), seeded identically on every rank and call."""
        import torch

        torch.manual_seed(0)
        return (cls or self.Stack)(*args).to(self.device)


def train(model, batches: list) -> None:
    """STEPS SGD steps of mean-square loss on ``batches``."""
    import torch

    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for x in batches:
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad()


def train_both(build, batches: list) -> tuple:
    """``(eager, compiled)``: ``build(False)`` and ``build(True)`` (the model without and with its
    compiled parts), each trained on ``batches``."""
    eager = build(False)
    train(eager, batches)
    model = build(True)
    train(model, batches)
    return eager, model


def local_params(model) -> list:
    """The model's parameters as plain tensors: a DTensor's local shard (FSDP2, tensor parallelism)."""
    return [p.to_local() if hasattr(p, "to_local") else p for p in model.parameters()]


def compare(eager_model, compiled_model) -> float:
    """The largest |compiled - eager| over the parameters; AssertionError when any differ beyond
    float32 round-off."""
    import torch

    worst = 0.0
    names = [n for n, _ in eager_model.named_parameters()]
    for name, e, c in zip(names, local_params(eager_model), local_params(compiled_model)):
        torch.testing.assert_close(c.detach(), e.detach(), rtol=1e-4, atol=1e-5, msg=lambda m: f"parameter {name}: {m}")
        worst = max(worst, (c.detach() - e.detach()).abs().max().item())
    return worst


def recipe_ddp(ctx: Ctx):
    import torch
    import torch.distributed as dist
    from torch._dynamo.backends.distributed import DDPOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP

    data = ctx.batches(per_rank=True)
    cap_mb = DDP_BUCKET_BYTES / 2**20
    ids = [ctx.rank] if ctx.device == "cuda" else None
    eager = DDP(ctx.fresh(), bucket_cap_mb=cap_mb, device_ids=ids)
    train(eager, data)
    model = DDP(ctx.fresh(), bucket_cap_mb=cap_mb, device_ids=ids)
    compiled = torch.compile(model, backend=ctx.backend)
    split = DDPOptimizer.compile_fn
    with (
        mock.patch.object(dist, "_DEFAULT_FIRST_BUCKET_BYTES", DDP_BUCKET_BYTES),
        mock.patch.object(DDPOptimizer, "compile_fn", autospec=True, side_effect=split) as spy,
    ):
        train(compiled, data)
    # the DDP optimizer keeps the buckets of its last split on itself ("for testing/debugging")
    ctx.extra["ddp_buckets"] = [len(call.args[0].buckets) for call in spy.call_args_list]
    return eager, model


def recipe_fsdp_blocks(ctx: Ctx):
    from torch.distributed.fsdp import fully_shard

    data = ctx.batches(per_rank=True)

    def build(compile_blocks: bool):
        model = ctx.fresh()
        for block in model.blocks:
            if compile_blocks:
                block.compile(backend=ctx.backend, fullgraph=True)
            fully_shard(block)
        fully_shard(model)
        return model

    return train_both(build, data)


def recipe_fsdp_whole(ctx: Ctx):
    import torch
    from torch.distributed.fsdp import fully_shard

    data = ctx.batches(per_rank=True)

    def build():
        model = ctx.fresh()
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        return model

    eager = build()
    train(eager, data)
    model = build()
    train(torch.compile(model, backend=ctx.backend), data)
    return eager, model


def recipe_tp_blocks(ctx: Ctx):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    data = ctx.batches(per_rank=False)
    mesh = init_device_mesh(ctx.device, (ctx.world,))

    def build(compile_blocks: bool):
        model = ctx.fresh()
        for block in model.blocks:
            parallelize_module(block, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
            if compile_blocks:
                block.compile(backend=ctx.backend, fullgraph=True)
        return model

    return train_both(build, data)


def recipe_tp_sequence_parallel(ctx: Ctx):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    data = ctx.batches(per_rank=False, shape=(2, SEQ, DIM))
    mesh = init_device_mesh(ctx.device, (ctx.world,))
    gather = {"input_layouts": (Shard(1),), "desired_input_layouts": (Replicate(),)}
    block_plan = {
        "attn_norm": SequenceParallel(),
        "attn": PrepareModuleInput(**gather),
        "attn.q": ColwiseParallel(),
        "attn.k": ColwiseParallel(),
        "attn.v": ColwiseParallel(),
        "attn.o": RowwiseParallel(output_layouts=Shard(1)),
        "mlp_norm": SequenceParallel(),
        "mlp": PrepareModuleInput(**gather),
        "mlp.up": ColwiseParallel(),
        "mlp.down": RowwiseParallel(output_layouts=Shard(1)),
    }

    def build(compile_blocks: bool):
        model = ctx.fresh(ctx.Transformer)
        # the residual stream between blocks is this rank's slice of the sequence (a local tensor)
        first = PrepareModuleInput(
            input_layouts=(Replicate(),), desired_input_layouts=(Shard(1),), use_local_output=True
        )
        head = ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())
        parallelize_module(model, mesh, {"blocks.0": first, "norm": SequenceParallel(), "head": head})
        for block in model.blocks:
            parallelize_module(block, mesh, block_plan)
            if compile_blocks:
                block.compile(backend=ctx.backend, fullgraph=True)
        return model

    return train_both(build, data)


def recipe_funcol(ctx: Ctx):
    import torch

    data = ctx.batches(per_rank=True)
    eager = ctx.fresh(ctx.Collectives, ctx.world)
    train(eager, data)
    model = ctx.fresh(ctx.Collectives, ctx.world)
    train(torch.compile(model, backend=ctx.backend, fullgraph=True), data)
    return eager, model


RECIPES = {
    "ddp": recipe_ddp,
    "fsdp_blocks": recipe_fsdp_blocks,
    "fsdp_whole": recipe_fsdp_whole,
    "tp_blocks": recipe_tp_blocks,
    "tp_sequence_parallel": recipe_tp_sequence_parallel,
    "funcol": recipe_funcol,
}


def wrapper_collectives(folder: str) -> list:
    """Per module tilefuse generated into ``folder`` (``config.debug_dir``), sorted by graph name:
    ``{"graph": name, "calls": [[result, argument, op], ...], "sequence": [...]}``: ``calls``, the
    collective and wait calls of its wrapper in call order (``result``: the buffer the call
    returns, ``argument``: its first tensor argument's buffer, ``op``: the ``_c10d_functional``
    op's name, e.g. ``all_reduce``, ``wait_tensor``); ``sequence``, every call in order, a
    collective or wait by its op's name, any other kernel or extern call as ``"compute"``."""
    graphs = []
    for path in sorted(glob.glob(os.path.join(folder, "*.py"))):
        calls, sequence, in_call = [], [], False
        with open(path) as f:
            for line in f:
                in_call = in_call or line.startswith("def call(")
                m = _COLLECTIVE_CALL.match(line)
                if m:
                    calls.append(list(m.groups()))
                    sequence.append(m.group(3))
                elif in_call and _COMPUTE_CALL.search(line):
                    sequence.append("compute")
        graphs.append({"graph": os.path.basename(path).rsplit("_", 1)[0], "calls": calls, "sequence": sequence})
    return graphs


def run_recipe(ctx: Ctx, name: str) -> dict:
    """Run recipe ``name`` with fresh Dynamo state and counters; its record (see the module doc)."""
    import torch
    from tilefuse import config, metrics

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    metrics.reset()
    ctx.extra = {}
    folder = os.path.join(ctx.out, f"{name}_rank{ctx.rank}")
    t0 = time.perf_counter()
    with config.patch(fallback_on_error=False, debug_dir=folder):
        eager, compiled = RECIPES[name](ctx)
    seconds = time.perf_counter() - t0
    counters = torch._dynamo.utils.counters
    return {
        "max_param_diff": compare(eager, compiled),
        "graphs": metrics.generated_graph_count,
        "eager_graphs": metrics.eager_graph_count,
        "fallback_kernels": metrics.fallback_kernel_count,
        "aot_graphs": counters["aot_autograd"]["total"],
        "graph_breaks": {msg.splitlines()[0][:200]: n for msg, n in counters["graph_break"].items()},
        "wrappers": wrapper_collectives(folder),
        "seconds": round(seconds, 2),
        **ctx.extra,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world-size", type=int, required=True)
    ap.add_argument("--init-file", required=True, help="rendezvous file (absent or empty at start)")
    ap.add_argument("--out", required=True, help="folder for rank{R}.json and the generated modules")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--only", default="", help="NAME[,NAME]: these recipes only (default: all)")
    ap.add_argument(
        "--backend",
        default="tilefuse",
        help="torch.compile backend (another one: to compare; tilefuse's counters stay 0)",
    )
    ap.add_argument("--timeout", type=float, default=120, help="seconds a collective may wait for the others")
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(RECIPES)
    unknown = sorted(set(names) - set(RECIPES))
    if unknown:
        ap.error(f"--only: unknown recipe(s) {unknown}; choose from {sorted(RECIPES)}")
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch
    import torch.distributed as dist

    if args.device == "cuda":
        torch.cuda.set_device(args.rank)
    dist.init_process_group(
        "nccl" if args.device == "cuda" else "gloo",
        init_method=f"file://{os.path.abspath(args.init_file)}",
        rank=args.rank,
        world_size=args.world_size,
        timeout=timedelta(seconds=args.timeout),
    )
    ctx = Ctx(args.rank, args.world_size, args.device, args.out, args.backend)
    results: dict = {}
    out_path = os.path.join(args.out, f"rank{args.rank}.json")
    status = 0
    for name in names:
        try:
            results[name] = run_recipe(ctx, name)
        except Exception:  # noqa: BLE001 - recorded for the parent, which reports it
            results[name] = {"error": traceback.format_exc()}
            status = 1
        with open(out_path, "w") as f:
            json.dump(results, f, indent=1)
        if status:
            print(f"rank {args.rank}: recipe {name} failed:\n{results[name]['error']}", file=sys.stderr, flush=True)
            os._exit(status)  # the other ranks may wait in a collective: the parent stops them
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main())
