"""The kernel report's HTML page: one self-contained file (inline CSS, the roofline as inline SVG).

Sections, top to bottom: the run (workload, device, versions, measured peaks); *Where the time
goes*: every kernel launch site and extern call of every graph, ranked by total time; the
roofline plot (achieved FLOP/s against arithmetic intensity, under the measured bandwidth and
compute roofs); then per graph its kernels (fused ops, bytes, time, bandwidth and FLOP/s against
the peaks), its extern calls, and the fusions the scheduler refused with their rules and reasons.
A graph's kernels and calls share one numbering (``#``, their place in its call order), which the
ranking and the refused fusions use too.

Every table row carries its numbers as ``data-*`` attributes (``data-seconds``: per call,
``data-total``, ``data-bytes``, ``data-flops``, ``data-calls``), in SI units, for programs that
read the page.
"""

from __future__ import annotations

import html
import io
import re
from typing import Any

from .collect import GraphRecord, ItemRecord, RefusalRecord
from .peaks import Peaks

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto; max-width: 1400px;
       padding: 0 16px; color: #1d2330; }
h1 { margin-bottom: 4px; } h2 { margin-top: 32px; border-bottom: 1px solid #ccd; padding-bottom: 4px; }
h3 { margin-top: 20px; }
p.meta, p.note { color: #556; margin: 4px 0; }
table { border-collapse: collapse; font-size: 13px; margin-top: 6px; width: 100%; }
th, td { border: 1px solid #dde; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #eef1f7; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.extern td { background: #fbf7ee; }
code { font-size: 12px; }
.ops code { display: inline-block; margin: 1px 4px 1px 0; padding: 0 3px; background: #eef3ee; border-radius: 3px; }
.bar { display: inline-block; height: 9px; background: #4a78c2; vertical-align: middle; margin-right: 6px; }
figure { margin: 8px 0; } figure svg { max-width: 100%; height: auto; }
.rule { font-weight: 600; }
td.name code { word-break: break-all; } .buf { color: #778; font-size: 11px; }
#ranking td:nth-child(5) { max-width: 380px; }
"""


def _esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _si(x: float | None, unit: str) -> str:
    """``x`` with an SI prefix (``12.3 GB/s``); an em dash for None."""
    if x is None:
        return "—"
    for div, p in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g} {p}{unit}"
    return f"{x:.3g} {unit}"


def _bytes(n: int | None) -> str:
    if n is None:
        return "—"
    for div, p in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= div:
            return f"{n / div:.3g} {p}"
    return f"{n} B"


def _time(s: float) -> str:
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def _ran(r: Row) -> str:
    """An item's time per call, or "not run" for one that never ran (a backward graph compiled
    with its forward, never called)."""
    return _time(r.seconds) if r.calls else "not run"


def _pct(x: float | None, peak: float) -> str:
    return "—" if x is None or not peak else f"{100 * x / peak:.1f}%"


class Row:
    """One item's derived numbers: seconds per call, calls, total seconds, bandwidth (bytes/s),
    FLOP/s, arithmetic intensity (FLOP/byte); ``index``: the item's number in its graph (its
    place in the graph's call order, the ``#`` of the graph's tables)."""

    def __init__(self, item: ItemRecord, index: int = 0):
        self.item = item
        self.index = index
        self.seconds, self.calls, self.steady = item.seconds()
        self.total = self.seconds * self.calls
        ok = self.seconds > 0
        self.bandwidth = item.bytes / self.seconds if ok and item.bytes is not None else None
        self.flops_s = item.flops / self.seconds if ok and item.flops is not None else None
        self.intensity = item.flops / item.bytes if item.flops and item.bytes else None

    def attrs(self) -> str:
        it = self.item
        vals = {
            "kind": it.kind,
            "name": it.name,
            "graph": it.graph,
            "buf": it.buf,
            "seconds": f"{self.seconds:.6e}",
            "total": f"{self.total:.6e}",
            "calls": self.calls,
            "bytes": "" if it.bytes is None else it.bytes,
            "flops": "" if it.flops is None else f"{it.flops:.6e}",
        }
        return " ".join(f'data-{k}="{_esc(v)}"' for k, v in vals.items())


def _short(op: str) -> str:
    """``aten.add.Tensor`` -> ``add``: the op's name without namespace and overload."""
    parts = op.split(".")
    return parts[1] if len(parts) == 3 and parts[0] in ("aten", "prims") else op


def _ops(origins: list[str], limit: int = 12) -> str:
    """The fused FX nodes' ops as ``<code>`` chips, one per op with its count (``add ×3``; the full
    op and the node names in the tooltip), in first-seen order."""
    by_op: dict[str, list[str]] = {}
    for o in origins:
        node, _, op = o.partition(": ")
        by_op.setdefault(op or node, []).append(node)
    chips = []
    for op, nodes in list(by_op.items())[:limit]:
        count = f" ×{len(nodes)}" if len(nodes) > 1 else ""
        chips.append(f'<code title="{_esc(op)}: {_esc(", ".join(nodes))}">{_esc(_short(op))}{count}</code>')
    if len(by_op) > limit:
        chips.append(f"+{len(by_op) - limit} more")
    return f'<span class="ops">{" ".join(chips)}</span>'


_HEAD = (
    "<thead><tr><th>rank</th><th>kernel / call</th><th>kind</th><th>graph</th>"
    "<th>fused ops</th><th>calls</th><th>time per call</th><th>total</th><th>share</th>"
    "<th>bandwidth (% of peak)</th><th>FLOP/s (% of peak)</th></tr></thead>"
)


def _category(it: ItemRecord) -> str:
    return "Triton kernels" if it.kind == "kernel" else _short(it.name)


def _ranking(rows: list[Row], peaks: Peaks | None, shown: int = 25) -> str:
    """The time by category (Triton kernels, then each extern op), and every item ranked by
    total time: the first ``shown`` in ``table#ranking``, the rest in a folded table after it."""
    total = sum(r.total for r in rows) or 1.0
    top = max((r.total for r in rows), default=0.0) or 1.0
    bw = peaks.bandwidth if peaks else 0.0
    fl = peaks.top_flops if peaks else 0.0
    cats: dict[str, list[float]] = {}
    for r in rows:
        c = cats.setdefault(_category(r.item), [0.0, 0])
        c[0] += r.total
        c[1] += 1
    by_cat = ", ".join(
        f"<b>{_esc(k)}</b> {100 * v[0] / total:.1f}% ({v[1]})"
        for k, v in sorted(cats.items(), key=lambda kv: -kv[1][0])
    )
    out = [f'<p class="note" id="categories">By kind: {by_cat}.</p>', f'<table id="ranking">{_HEAD}<tbody>']
    for i, r in enumerate(sorted(rows, key=lambda r: -r.total), 1):
        if i == shown + 1:
            out.append(
                f"</tbody></table><details><summary>{len(rows) - shown} more</summary>"
                f'<table id="ranking-more">{_HEAD}<tbody>'
            )
        it = r.item
        cls = ' class="extern"' if it.kind == "extern" else ""
        bar = f'<span class="bar" style="width:{max(1, round(80 * r.total / top))}px"></span>'
        first = "" if r.steady else ' <span title="one call only: includes first-call costs">*</span>'
        ops = _ops(it.origins, 8) if it.kind == "kernel" else ""
        out.append(
            f"<tr{cls} {r.attrs()}><td class=num>{i}</td><td class=name><code>{_esc(it.name)}</code>"
            f'<br><span class="buf">{_esc(it.buf)}</span></td>'
            f"<td>{_esc(it.kind)}</td><td>{_esc(it.graph)} #{r.index}</td><td>{ops}</td>"
            f"<td class=num>{r.calls}</td><td class=num>{_time(r.seconds)}{first}</td>"
            f"<td class=num>{_time(r.total)}</td><td class=num>{bar}{100 * r.total / total:.1f}%</td>"
            f"<td class=num>{_si(r.bandwidth, 'B/s')} ({_pct(r.bandwidth, bw)})</td>"
            f"<td class=num>{_si(r.flops_s, 'FLOP/s')} ({_pct(r.flops_s, fl)})</td></tr>"
        )
    out.append("</tbody></table>" + ("</details>" if len(rows) > shown else ""))
    return "\n".join(out)


def roofline_svg(rows: list[Row], peaks: Peaks | None) -> str | None:
    """The roofline plot as an inline ``<svg>`` element: one point per item with both FLOPs and
    bytes (x: FLOP/byte, y: achieved FLOP/s, area by total time; circles for Triton kernels,
    squares for extern calls; the ten slowest labelled with their rank) under the bandwidth roof
    ``peak bandwidth · x`` and the compute roof(s). None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    pts = [r for r in rows if r.intensity and r.flops_s]
    fig, ax = plt.subplots(figsize=(9, 5.2), dpi=100)
    xs = [r.intensity for r in pts] or [1.0]
    ridge = peaks.top_flops / peaks.bandwidth if peaks and peaks.bandwidth and peaks.top_flops else 10.0
    lo, hi = min(xs + [ridge / 100]) / 3, max(xs + [ridge * 10]) * 3
    if peaks and peaks.bandwidth:
        import numpy as np

        x = np.geomspace(lo, hi, 200)
        for k, (name, roof) in enumerate(sorted(peaks.flops.items(), key=lambda kv: -kv[1])):
            y = np.minimum(peaks.bandwidth * x, roof)
            ax.plot(x, y, color="#333" if k == 0 else "#999", lw=1.6 if k == 0 else 1.0, ls="-" if k == 0 else "--")
            ax.annotate(f"{_si(roof, 'FLOP/s')} ({name} mm)", (hi, roof), ha="right", va="bottom", fontsize=8)
        ax.annotate(
            f"{_si(peaks.bandwidth, 'B/s')} (copy)",
            (lo * 1.3, peaks.bandwidth * lo * 1.3),
            xytext=(2, 6),
            textcoords="offset points",
            va="bottom",
            fontsize=8,
        )
    total = max((r.total for r in pts), default=1.0) or 1.0
    for kind, marker, color in (("kernel", "o", "#4a78c2"), ("extern", "s", "#d08a2c")):
        sel = [r for r in pts if r.item.kind == kind]
        if sel:
            ax.scatter(
                [r.intensity for r in sel],
                [r.flops_s for r in sel],
                s=[30 + 400 * r.total / total for r in sel],
                marker=marker,
                c=color,
                alpha=0.7,
                edgecolors="k",
                linewidths=0.5,
                label="Triton kernel" if kind == "kernel" else "extern call",
            )
    # the ten slowest points labelled with their rank in the ranking table
    rank = {id(r): i for i, r in enumerate(sorted(rows, key=lambda r: -r.total), 1)}
    for r in sorted(pts, key=lambda r: -r.total)[:10]:
        ax.annotate(
            str(rank[id(r)]),
            (r.intensity, r.flops_s),
            xytext=(4, 3),
            textcoords="offset points",
            fontsize=8,
            weight="bold",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP / byte moved)")
    ax.set_ylabel("achieved FLOP/s")
    ax.grid(True, which="major", alpha=0.3)
    if pts:
        leg = ax.legend(loc="lower right", fontsize=8)
        for h in leg.legend_handles:  # one marker size in the legend, whatever the points' areas
            h.set_sizes([40])
    fig.tight_layout()
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format="svg")
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg") :]


def _kernel_table(g: GraphRecord, rows: dict[int, Row], peaks: Peaks | None) -> str:
    bw = peaks.bandwidth if peaks else 0.0
    fl = peaks.top_flops if peaks else 0.0
    out = [
        '<table class="kernels"><thead><tr><th>#</th><th>kernel</th><th>fused ops (aten)</th><th>buffers</th>'
        "<th>space</th><th>bytes</th><th>time per call</th><th>calls</th><th>bandwidth</th><th>% of peak</th>"
        "<th>FLOP</th><th>FLOP/s</th><th>% of peak</th></tr></thead><tbody>"
    ]
    for i, it in enumerate(g.items):
        if it.kind != "kernel":
            continue
        r = rows[id(it)]
        out.append(
            f"<tr {r.attrs()}><td class=num>{i}</td><td><code>{_esc(it.name)}</code></td><td>{_ops(it.origins)}</td>"
            f"<td><code>{_esc(', '.join(it.nodes))}</code></td><td class=num>{_esc(it.space)}</td>"
            f"<td class=num>{_bytes(it.bytes)}</td><td class=num>{_ran(r)}</td><td class=num>{r.calls}</td>"
            f"<td class=num>{_si(r.bandwidth, 'B/s')}</td><td class=num>{_pct(r.bandwidth, bw)}</td>"
            f"<td class=num>{_si(it.flops, '')}</td><td class=num>{_si(r.flops_s, 'FLOP/s')}</td>"
            f"<td class=num>{_pct(r.flops_s, fl)}</td></tr>"
        )
    out.append("</tbody></table>")
    return "\n".join(out)


def _extern_table(g: GraphRecord, rows: dict[int, Row], peaks: Peaks | None) -> str:
    ext = [(i, it) for i, it in enumerate(g.items) if it.kind == "extern"]
    if not ext:
        return '<p class="note">No extern or fallback calls: every value is computed by tilefuse\'s kernels.</p>'
    bw = peaks.bandwidth if peaks else 0.0
    fl = peaks.top_flops if peaks else 0.0
    out = [
        '<table class="externs"><thead><tr><th>#</th><th>call</th><th>buffer</th><th>bytes</th>'
        "<th>time per call</th><th>calls</th><th>bandwidth</th><th>% of peak</th><th>FLOP</th><th>FLOP/s</th>"
        "<th>% of peak</th></tr></thead><tbody>"
    ]
    for i, it in ext:
        r = rows[id(it)]
        out.append(
            f'<tr class="extern" {r.attrs()}><td class=num>{i}</td><td><code>{_esc(it.name)}</code></td>'
            f"<td><code>{_esc(it.buf)}</code></td><td class=num>{_bytes(it.bytes)}</td>"
            f"<td class=num>{_ran(r)}</td><td class=num>{r.calls}</td>"
            f"<td class=num>{_si(r.bandwidth, 'B/s')}</td><td class=num>{_pct(r.bandwidth, bw)}</td>"
            f"<td class=num>{_si(it.flops, '')}</td><td class=num>{_si(r.flops_s, 'FLOP/s')}</td>"
            f"<td class=num>{_pct(r.flops_s, fl)}</td></tr>"
        )
    out.append("</tbody></table>")
    return "\n".join(out)


# rules every candidate kernel before a node's producer tends to meet: an extern call, or a write
# of something the node reads, in between (listed folded, after the others)
_ROUTINE = ("written_in_between", "extern_call")


def _item_ref(g: GraphRecord, i: int | None) -> str:
    """Item ``i`` of the graph as the page numbers it: ``#i <name>`` (a kernel with its node
    count); an em dash for None."""
    if i is None:
        return "—"
    it = g.items[i]
    if it.kind != "kernel":
        return f"#{i} <code>{_esc(it.name)}</code> ({_esc(it.buf)})"
    n = len(it.nodes)
    return f"#{i} <code>{_esc(it.name)}</code> ({n} node{'s' if n != 1 else ''})"


def _refused_by(g: GraphRecord, r: RefusalRecord) -> str:
    """The kernel or call that refused a node, by its number on the page, with what it held
    then (the fusion log's description without the schedule position, which numbers nothing on
    the page)."""
    then = re.sub(r"^(kernel|extern) #\d+ ", "", r.target)
    if r.by is None:
        return _esc(then)
    it = g.items[r.by]
    return f"#{r.by} <code>{_esc(it.name)}</code> ({'' if it.kind != 'kernel' else 'then '}{_esc(then)})"


def _refusal_rows(g: GraphRecord, groups: list) -> list[str]:
    out = []
    for (node, rule), hits in groups:
        first = hits[0]
        by = "; ".join(_refused_by(g, h) for h in hits[:2]) + (f"; and {len(hits) - 2} more" if len(hits) > 2 else "")
        reason = first.reason + (f" (and {len(hits) - 1} more like it)" if len(hits) > 1 else "")
        nums = " ".join(str(h.by) for h in hits if h.by is not None)
        ended = "" if first.ended is None else str(first.ended)
        out.append(
            f'<tr data-rule="{_esc(rule)}" data-node="{_esc(node)}" data-count="{len(hits)}" '
            f'data-by="{nums}" data-ended="{ended}">'
            f"<td><code>{_esc(node)}</code></td><td>{_ops(first.origins, 4)}</td><td>{by}</td>"
            f"<td class=rule>{_esc(rule)}</td><td>{_esc(reason)}</td><td>{_item_ref(g, first.ended)}</td></tr>"
        )
    return out


def _refusal_table(g: GraphRecord, limit: int = 300) -> str:
    """The graph's refused fusions, one row per (node, rule) (the kernels that refused it, by
    their numbers in the graph's tables, and the first reason): the rules that judged a kernel's
    contents first, then, folded, the routine ones (``_ROUTINE``)."""
    if not g.refusals:
        return '<p class="note">No fusion was refused in this graph.</p>'
    grouped: dict[tuple, list] = {}
    counts: dict[str, int] = {}
    for r in g.refusals:
        grouped.setdefault((r.node, r.rule), []).append(r)
        counts[r.rule] = counts.get(r.rule, 0) + 1
    summary = ", ".join(f"{_esc(k)} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
    head = (
        "<thead><tr><th>node</th><th>its ops</th><th>refused by</th><th>rule</th><th>reason</th>"
        "<th>ended in</th></tr></thead><tbody>"
    )
    main = [kv for kv in grouped.items() if kv[0][1] not in _ROUTINE]
    routine = [kv for kv in grouped.items() if kv[0][1] in _ROUTINE]
    out = [
        f'<p class="note">{len(g.refusals)} refusals by rule: {summary}. A node refused by one kernel may '
        "still have joined another (last column). Rules: <code>tilefuse/scheduler/fusion.py</code>.</p>"
    ]
    if main:
        out += [f'<table class="refusals">{head}', *_refusal_rows(g, main[:limit]), "</tbody></table>"]
    else:
        out.append('<p class="note">Every refusal was a routine one (below).</p>')
    if routine:
        out += [
            f"<details><summary>{len(routine)} routine refusals ({', '.join(_ROUTINE)}): an extern call, or a "
            "write of a value the node reads, between the node and an earlier kernel</summary>",
            f'<table class="refusals-routine">{head}',
            *_refusal_rows(g, routine[:limit]),
            "</tbody></table></details>",
        ]
    if max(len(main), len(routine)) > limit:
        out.append(f'<p class="note">Only the first {limit} rows of each table are shown.</p>')
    return "\n".join(out)


# why a graph handed to tilefuse runs eagerly, for the page and the console
EAGER_WHY = (
    "a CPU graph without Triton's interpreter: set TRITON_INTERPRET=1 before torch is imported; "
    "or a graph tilefuse failed to compile or run: its warning says why"
)


def render(graphs: list[GraphRecord], peaks: Peaks | None, meta: dict[str, str], eager_graphs: int = 0) -> str:
    """The whole page. ``meta``: lines of the run's description (workload, device, versions,
    date), shown under the title in order. ``eager_graphs``: graphs handed to tilefuse that ran
    eagerly (no kernels to show), said under the title."""
    rows = {id(it): Row(it, i) for g in graphs for i, it in enumerate(g.items)}
    ran = [r for r in rows.values() if r.calls]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>tilefuse kernel report</title>',
        f"<style>{_CSS}</style></head><body>",
        "<h1>tilefuse kernel report</h1>",
    ]
    for k, v in meta.items():
        parts.append(f'<p class="meta"><b>{_esc(k)}:</b> {_esc(v)}</p>')
    if eager_graphs:
        parts.append(
            f'<p class="meta" id="eager" data-count="{eager_graphs}"><b>Not in this report:</b> {eager_graphs} '
            f"graph(s) tilefuse was given ran eagerly, as PyTorch's own ops ({_esc(EAGER_WHY)}).</p>"
        )
    if peaks:
        fl = ", ".join(f"{_si(v, 'FLOP/s')} ({k})" for k, v in peaks.flops.items())
        parts.append(
            f'<p class="meta" id="peaks" data-bandwidth="{peaks.bandwidth:.6e}" data-flops="{peaks.top_flops:.6e}">'
            f"<b>Measured peaks:</b> {_si(peaks.bandwidth, 'B/s')}, {fl} — {_esc(peaks.how)}</p>"
        )
    else:
        parts.append('<p class="meta" id="peaks"><b>Measured peaks:</b> not measured (--no-peaks).</p>')
    total = sum(r.total for r in ran)
    n_k = sum(1 for r in ran if r.item.kind == "kernel")
    parts += [
        '<h2 id="time">Where the time goes</h2>',
        f'<p class="note">{len(graphs)} graph(s), {n_k} kernel launch site(s) and {len(ran) - n_k} extern call(s) '
        f"ran, {_time(total)} in all over the run (time per call: the median of the calls after the first; "
        "* marks an item that ran once, whose time includes first-call costs). Bytes: each tensor argument "
        "read or written once; kernel FLOPs: compute ops per element × elements.</p>",
        _ranking(ran, peaks),
        '<h2 id="roofline">Roofline</h2>',
    ]
    svg = roofline_svg(ran, peaks)
    if svg is None:
        parts.append('<p class="note">The roofline plot needs matplotlib (<code>pip install matplotlib</code>).</p>')
    else:
        parts.append(
            f'<figure id="roofline-figure">{svg}<figcaption class="note">Each point is a kernel or extern call with '
            "known FLOPs: x its FLOPs per byte moved, y its FLOP/s, area its share of the time; numbers are ranks "
            "in the table above. Points under the slanted roof are bound by memory bandwidth, under the flat "
            "one by arithmetic.</figcaption></figure>"
        )
    for g in graphs:
        parts += [
            f'<h2 class="graph" id="graph-{_esc(g.name)}">Graph {_esc(g.name)} ({_esc(g.device)})</h2>',
            "<h3>Kernels</h3>",
            _kernel_table(g, rows, peaks),
            "<h3>Extern and fallback calls</h3>",
            _extern_table(g, rows, peaks),
            "<h3>Refused fusions</h3>",
            _refusal_table(g),
        ]
    if not graphs:
        why = (
            "the graphs it was given ran eagerly (above)"
            if eager_graphs
            else 'was the workload compiled with <code>backend="tilefuse"</code>, and did it call the compiled code?'
        )
        parts.append(f'<p class="note" id="no-graphs">tilefuse compiled no graph while the report collected: {why}</p>')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
