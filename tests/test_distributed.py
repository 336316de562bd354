"""Distributed training recipes compiled by tilefuse: DDP with Dynamo's DDP optimizer, FSDP2 with
per-block and whole-model compile, tensor parallelism on DTensor with compiled blocks, and
functional collectives inside a compiled graph (``tests/_dist_recipes.py`` describes each).

Two ranks run every recipe once per test module (one process group: the processes' start, torch's
import and the rendezvous are paid once), as ``torch.distributed.run`` would start them: gloo on
the CPU with Triton's interpreter (``TRITON_INTERPRET=1``, the default here), NCCL on two GPUs with
``TRITON_INTERPRET=0`` (marked ``multigpu``; skipped with fewer than two GPUs). Each recipe's
parameters after a few optimizer steps equal eager's (checked in the ranks, the largest difference
reported here), and tilefuse compiled every graph AOTAutograd traced (forward and backward), none
of them falling back to eager."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import torch

from _tf_testutil import DEVICE

WORLD = 2
RECIPES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_dist_recipes.py")
# every recipe's compiles and steps under the interpreter take well under a minute on two loaded
# cores; a hang (a rank waiting in a collective for a rank that died) is cut here
TIMEOUT_S = 420

pytestmark = (
    [
        pytest.mark.gpu,
        pytest.mark.multigpu,
        pytest.mark.skipif(torch.cuda.device_count() < WORLD, reason=f"needs {WORLD} CUDA GPUs"),
    ]
    if DEVICE == "cuda"
    else []
)


def _tail(path: str, n: int = 4000) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return "(no log)"


def run_ranks(out: str, world: int = WORLD, only: str = "", timeout: float = TIMEOUT_S) -> dict:
    """Start ``world`` ranks of ``_dist_recipes.py`` (OMP_NUM_THREADS=1 each, as torchrun sets),
    wait for them (all killed at ``timeout`` seconds, or 15 s after one exits with an error) and
    return ``{rank: {recipe: record}}``. AssertionError with each rank's exit status, its failed
    recipe's traceback and its log's tail when any rank did not finish cleanly."""
    env = dict(os.environ, OMP_NUM_THREADS="1", TRITON_INTERPRET="1" if DEVICE == "cpu" else "0")
    procs, logs = [], []
    for rank in range(world):
        log = os.path.join(out, f"rank{rank}.log")
        logs.append(log)
        cmd = [sys.executable, RECIPES, "--rank", str(rank), "--world-size", str(world)]
        cmd += ["--init-file", os.path.join(out, "rendezvous"), "--out", out, "--device", DEVICE]
        if only:
            cmd += ["--only", only]
        with open(log, "w") as f:
            procs.append(subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env))
    deadline = time.monotonic() + timeout
    failed_at = None
    timed_out = False
    try:
        while any(p.poll() is None for p in procs):
            now = time.monotonic()
            if failed_at is None and any(p.returncode not in (None, 0) for p in procs):
                failed_at = now
            timed_out = now > deadline
            if timed_out or (failed_at is not None and now > failed_at + 15):
                break
            time.sleep(0.2)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    results, problems = {}, []
    for rank, (p, log) in enumerate(zip(procs, logs)):
        path = os.path.join(out, f"rank{rank}.json")
        results[rank] = {}
        if os.path.exists(path):
            with open(path) as f:
                results[rank] = json.load(f)
        errors = {k: v["error"] for k, v in results[rank].items() if "error" in v}
        if p.returncode != 0 or errors:
            status = p.returncode
            if p.returncode == -9:
                status = f"killed ({f'still running after {timeout:.0f} s' if timed_out else 'another rank failed'})"
            detail = "\n".join(f"recipe {k}:\n{e}" for k, e in errors.items()) or _tail(log)
            problems.append(f"rank {rank}: exit status {status}\n{detail}")
    assert not problems, "\n\n".join(problems)
    return results


@pytest.fixture(scope="module")
def recipes(tmp_path_factory) -> dict:
    """Every recipe's record per rank, ``{rank: {recipe: record}}`` (one run for the module)."""
    return run_ranks(str(tmp_path_factory.mktemp("dist")))


def _check_compiled(records: dict, name: str) -> list:
    """Checks common to every recipe, on each rank's record of recipe ``name``: parameters equal
    to eager's (checked in the rank: here its largest difference), tilefuse compiled every graph
    AOTAutograd traced (a forward, or an inference graph where nothing needs a gradient) and the
    backward of every forward, none ran eagerly. Returns the records."""
    recs = [records[r][name] for r in range(WORLD)]
    for rank, rec in enumerate(recs):
        kinds = [w["graph"].split("_")[0] for w in rec["wrappers"]]
        # the rank compared every parameter with assert_close; its largest difference, as a bound
        assert rec["max_param_diff"] <= 1e-3, (rank, rec)
        assert rec["aot_graphs"] >= 1 and kinds.count("forward") >= 1, (rank, rec)
        assert rec["graphs"] == len(kinds), (rank, rec)
        assert kinds.count("forward") + kinds.count("inference") == rec["aot_graphs"], (rank, rec)
        assert kinds.count("backward") == kinds.count("forward"), (rank, rec)
        assert rec["eager_graphs"] == 0, (rank, rec)
    return recs


def _ops(wrapper: dict) -> list:
    return [op for _, _, op in wrapper["calls"]]


def _waited(wrapper: dict) -> None:
    """Every collective of a generated wrapper is waited on exactly once, after it is issued (a
    wait on a tensor no collective returned, as an explicit ``wait_tensor`` on one already waited
    on, is allowed: it returns at once)."""
    issued, waited = {}, set()
    for i, (result, arg, op) in enumerate(wrapper["calls"]):
        if op != "wait_tensor":
            issued[result] = i
        elif arg in issued:
            assert arg not in waited, ("waited twice", arg, wrapper)
            waited.add(arg)
    assert waited == set(issued), ("collectives never waited on", set(issued) - waited, wrapper)


def test_ddp_optimizer_compiles_one_graph_per_bucket(recipes):
    for rec in _check_compiled(recipes, "ddp"):
        # one split of the whole model, into several buckets, each its own forward and backward
        assert len(rec["ddp_buckets"]) == 1 and rec["ddp_buckets"][0] >= 2, rec
        assert rec["aot_graphs"] == rec["ddp_buckets"][0], rec
        # DDP's all-reduces run in its gradient hooks, outside the compiled graphs
        assert all(not w["calls"] for w in rec["wrappers"]), rec["wrappers"]


def test_fsdp2_per_block_compile(recipes):
    for rec in _check_compiled(recipes, "fsdp_blocks"):
        assert rec["graph_breaks"] == {}, rec  # fullgraph=True per block


def test_fsdp2_whole_model_compile(recipes):
    _check_compiled(recipes, "fsdp_whole")


def test_tensor_parallel_compiled_blocks(recipes):
    for rec in _check_compiled(recipes, "tp_blocks"):
        fw = [w for w in rec["wrappers"] if w["graph"].startswith("forward")]
        bw = [w for w in rec["wrappers"] if w["graph"].startswith("backward")]
        assert fw and bw, rec["wrappers"]
        # RowwiseParallel's output is summed across ranks in the forward, ColwiseParallel's input
        # gradient in the backward: DTensor's collectives are inside tilefuse's graphs
        for w in fw + bw:
            assert "all_reduce" in _ops(w), w
            _waited(w)
        # the backward's weight and bias gradients do not need the input gradient's all-reduce:
        # they run between it and its wait (scheduler.comms.order_for_overlap)
        for w in bw:
            seq = w["sequence"]
            i = seq.index("all_reduce")
            assert "compute" in seq[i + 1 : seq.index("wait_tensor", i)], seq


def test_tensor_parallel_with_sequence_parallel(recipes):
    for rec in _check_compiled(recipes, "tp_sequence_parallel"):
        for w in rec["wrappers"]:
            if w["graph"].startswith("inference"):
                continue  # the first block's input hook: a slice, no collective
            # Shard(1) -> Replicate before attention and the MLP, row-wise outputs back to Shard(1)
            assert {"all_gather_into_tensor", "reduce_scatter_tensor"} <= set(_ops(w)), w
            _waited(w)


def test_functional_collectives_forward_and_backward(recipes):
    collectives = {"all_gather_into_tensor", "reduce_scatter_tensor", "all_reduce", "all_to_all_single"}
    for rec in _check_compiled(recipes, "funcol"):
        wrappers = {w["graph"].split("_")[0]: w for w in rec["wrappers"]}
        assert sorted(wrappers) == ["backward", "forward"], rec["wrappers"]
        for kind, w in wrappers.items():
            # the backward of each collective is a collective (all-gather <-> reduce-scatter, ...)
            assert collectives <= set(_ops(w)), (kind, w)
            _waited(w)
