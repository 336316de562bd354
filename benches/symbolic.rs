//! Criterion benchmarks of the native symbolic core, mirroring the rows of
//! `reference/sympy_baseline.md` so the numbers compare directly with sympy/Inductor:
//!
//! * `construction` — C1–C14: FloorDiv / ModularIndexing expressions. `warm_build` rebuilds the
//!   whole expression from interned symbols (every node is an interner hit, like sympy's warm
//!   cache); `fresh_build` builds it from brand-new, uniquely named symbols each iteration (every
//!   node is new, like the baseline's *fresh* column; the symbols are created untimed);
//!   `warm_op` times only the outer FloorDiv/ModularIndexing call on pre-built arguments (C1–C11).
//! * `split` — P1–P8: `split_iteration_ranges` alone, and `full` = range trees + MAP
//!   (`map_kernel_groups_to_node_sizes`, i.e. split + construct + getters).
//! * `range_tree` — R1–R4: a fresh root and `construct_entries`.
//! * `cse` — a realistic 200-op Triton codegen stream with repeats, through the structural
//!   [`CseTable`] (key from op/args; text rendered only on a miss, to write the line) and through
//!   the text-keyed [`TextCseTable`] (text rendered for every op, as Inductor does).
//!
//! Fresh-symbol benchmarks intern new expressions on every iteration (the interner never frees),
//! so they run with a very short measurement time to bound memory. Run
//! `cargo bench --bench symbolic -- --quick` for a fast pass.

use std::cell::Cell;
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use tilefuse::cse::{CseArg, CseKey, CseTable, CseVarId, DtypeTag, Name, TextCseTable};
use tilefuse::expr::Expr;
use tilefuse::print::texpr;
use tilefuse::split::split_iteration_ranges;
use tilefuse::tree::{Prefix, RangeTrees, RootId, TreeOptions};

// ============================================================================ construction

#[derive(Clone, Copy)]
struct Syms {
    x0: Expr,
    x1: Expr,
    x2: Expr,
    s0: Expr,
    s1: Expr,
    s2: Expr,
}

impl Syms {
    fn named(suffix: &str) -> Syms {
        let s = |n: &str| Expr::symbol(&format!("{n}{suffix}")).unwrap();
        Syms {
            x0: s("x0"),
            x1: s("x1"),
            x2: s("x2"),
            s0: s("s0"),
            s1: s("s1"),
            s2: s("s2"),
        }
    }
}

thread_local! {
    static FRESH: Cell<u64> = const { Cell::new(0) };
}

/// Symbols never seen before (`x0_f17`, `s1_f17`, …).
fn fresh_syms() -> Syms {
    let n = FRESH.with(|c| {
        let v = c.get();
        c.set(v + 1);
        v
    });
    Syms::named(&format!("_f{n}"))
}

fn i(v: i64) -> Expr {
    Expr::int(v)
}
fn lin(c: i64, t: &[(Expr, i64)]) -> Expr {
    Expr::linear_combination(c, t).unwrap()
}
fn fd(a: Expr, b: Expr) -> Expr {
    a.floordiv(&b).unwrap()
}
fn mi(a: Expr, b: Expr, c: Expr) -> Expr {
    a.modular_indexing(&b, &c).unwrap()
}
fn mul(a: Expr, b: Expr) -> Expr {
    a.mul(&b).unwrap()
}

type Build = fn(&Syms) -> Expr;
/// Pre-built arguments of the outer call, and the call itself.
type OpArgs = fn(&Syms) -> Vec<Expr>;
type Op = fn(&[Expr]) -> Expr;

fn op_fd(a: &[Expr]) -> Expr {
    fd(a[0], a[1])
}
fn op_mi(a: &[Expr]) -> Expr {
    mi(a[0], a[1], a[2])
}

#[allow(clippy::type_complexity)]
fn construction_cases() -> Vec<(&'static str, Build, Option<(OpArgs, Op)>)> {
    vec![
        (
            "C1",
            |s| fd(lin(0, &[(s.x0, 1), (s.x1, 128)]), i(16)),
            Some((|s| vec![lin(0, &[(s.x0, 1), (s.x1, 128)]), i(16)], op_fd)),
        ),
        (
            "C2",
            |s| mi(lin(0, &[(s.x0, 1), (s.x1, 4096)]), i(64), i(64)),
            Some((
                |s| vec![lin(0, &[(s.x0, 1), (s.x1, 4096)]), i(64), i(64)],
                op_mi,
            )),
        ),
        (
            "C3",
            |s| fd(mi(s.x0, i(1), i(4096)), i(64)),
            Some((|s| vec![mi(s.x0, i(1), i(4096)), i(64)], op_fd)),
        ),
        (
            "C4",
            |s| mi(fd(lin(0, &[(s.x0, 1), (s.x1, 64)]), i(8)), i(1), i(16)),
            Some((
                |s| vec![fd(lin(0, &[(s.x0, 1), (s.x1, 64)]), i(8)), i(1), i(16)],
                op_mi,
            )),
        ),
        (
            "C5",
            |s| mi(mi(s.x0, i(1), i(4096)), i(1), i(64)),
            Some((|s| vec![mi(s.x0, i(1), i(4096)), i(1), i(64)], op_mi)),
        ),
        (
            "C6",
            |s| fd(lin(0, &[(s.x1, 128), (s.x0, 16)]), i(16)),
            Some((|s| vec![lin(0, &[(s.x1, 128), (s.x0, 16)]), i(16)], op_fd)),
        ),
        (
            "C7",
            |s| mi(lin(0, &[(s.x1, 128), (s.x0, 1)]), i(1), i(64)),
            Some((
                |s| vec![lin(0, &[(s.x1, 128), (s.x0, 1)]), i(1), i(64)],
                op_mi,
            )),
        ),
        (
            "C8",
            |s| fd(s.x0, i(1)),
            Some((|s| vec![s.x0, i(1)], op_fd)),
        ),
        (
            "C9",
            |s| mi(lin(0, &[(s.x0, 1), (s.x1, 64), (s.x2, 4096)]), i(64), i(64)),
            Some((
                |s| vec![lin(0, &[(s.x0, 1), (s.x1, 64), (s.x2, 4096)]), i(64), i(64)],
                op_mi,
            )),
        ),
        (
            "C10",
            |s| fd(lin(0, &[(s.x0, 1), (mul(s.s0, s.x1), 1)]), s.s0),
            Some((
                |s| vec![lin(0, &[(s.x0, 1), (mul(s.s0, s.x1), 1)]), s.s0],
                op_fd,
            )),
        ),
        (
            "C11",
            |s| {
                mi(
                    lin(0, &[(s.x0, 1), (mul(mul(s.s0, s.s1), s.x1), 1)]),
                    s.s0,
                    s.s1,
                )
            },
            Some((
                |s| {
                    vec![
                        lin(0, &[(s.x0, 1), (mul(mul(s.s0, s.s1), s.x1), 1)]),
                        s.s0,
                        s.s1,
                    ]
                },
                op_mi,
            )),
        ),
        (
            "C12",
            |s| {
                lin(
                    0,
                    &[
                        (s.x0, 1),
                        (mi(s.x1, i(1), i(128)), 64),
                        (fd(s.x1, i(128)), 8192),
                    ],
                )
            },
            None,
        ),
        (
            "C13",
            |s| {
                lin(
                    0,
                    &[
                        (mi(s.x0, i(1), i(48)), 1),
                        (mi(s.x0, i(1536), i(64)), 48),
                        (mi(s.x0, i(48), i(32)), 3072),
                        (fd(s.x0, i(98304)), 98304),
                    ],
                )
            },
            None,
        ),
        (
            "C14",
            |s| {
                let a = mul(s.s2, mi(s.x1, i(1), s.s1));
                let b = mul(mul(s.s1, s.s2), fd(s.x1, s.s1));
                Expr::sum(&[s.x0, a, b]).unwrap()
            },
            None,
        ),
    ]
}

fn construction(c: &mut Criterion) {
    let warm = Syms::named("");
    {
        let mut g = c.benchmark_group("construction");
        g.warm_up_time(Duration::from_millis(100))
            .measurement_time(Duration::from_millis(300))
            .sample_size(10);
        for (id, build, op) in construction_cases() {
            g.bench_function(format!("{id}/warm_build"), |b| {
                b.iter(|| build(black_box(&warm)))
            });
            if let Some((args, call)) = op {
                let pre = args(&warm);
                g.bench_function(format!("{id}/warm_op"), |b| {
                    b.iter(|| call(black_box(&pre)))
                });
            }
        }
        g.finish();
    }
    // every iteration interns new nodes: keep the run short to bound memory
    let mut g = c.benchmark_group("construction");
    g.warm_up_time(Duration::from_millis(5))
        .measurement_time(Duration::from_millis(15))
        .sample_size(10);
    for (id, build, _) in construction_cases() {
        g.bench_function(format!("{id}/fresh_build"), |b| {
            b.iter_batched(fresh_syms, |s| build(black_box(&s)), BatchSize::SmallInput)
        });
    }
    g.finish();
}

// ============================================================================ split / MAP

#[allow(clippy::type_complexity)]
fn split_cases() -> Vec<(&'static str, Vec<Expr>, Vec<Vec<Expr>>)> {
    let ints = |v: &[i64]| v.iter().map(|x| i(*x)).collect::<Vec<Expr>>();
    let s = Syms::named("");
    vec![
        ("P1", ints(&[4096, 1]), vec![ints(&[64, 64]), vec![]]),
        (
            "P2",
            ints(&[8192 * 8192, 1]),
            vec![ints(&[8192, 8192]), vec![]],
        ),
        ("P3", ints(&[1024, 32]), vec![ints(&[32, 32, 32])]),
        ("P4", ints(&[32, 1024, 1]), vec![ints(&[1024, 32]), vec![]]),
        ("P5", ints(&[4, 8, 16, 1]), vec![ints(&[512]), vec![]]),
        ("P6", ints(&[1024, 512]), vec![ints(&[1024]), ints(&[512])]),
        (
            "P7",
            vec![mul(s.s0, s.s1), i(1)],
            vec![vec![s.s0, s.s1], vec![]],
        ),
        (
            "P8",
            vec![s.s0, mul(s.s1, s.s2)],
            vec![vec![s.s0, s.s1, s.s2]],
        ),
    ]
}

fn split(c: &mut Criterion) {
    let mut g = c.benchmark_group("split");
    g.warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_millis(300))
        .sample_size(10);
    for (id, groups, lengths) in split_cases() {
        g.bench_function(format!("{id}/split"), |b| {
            b.iter(|| split_iteration_ranges(black_box(&groups), black_box(&lengths)).unwrap())
        });
        g.bench_function(format!("{id}/full"), |b| {
            b.iter(|| {
                let n = groups.len();
                let mut trees =
                    RangeTrees::from_tiling(&groups[..n - 1], &groups[n - 1..]).unwrap();
                trees
                    .map_kernel_groups_to_node_sizes(black_box(&groups), black_box(&lengths))
                    .unwrap()
            })
        });
    }
    g.finish();
}

// ============================================================================ range trees

fn range_tree(c: &mut Criterion) {
    let s = Syms::named("");
    let ints = |v: &[i64]| v.iter().map(|x| i(*x)).collect::<Vec<Expr>>();
    let cases: Vec<(&str, Expr, Vec<Expr>)> = vec![
        ("R1", i(4096), ints(&[64, 64])),
        ("R2", i(32768), ints(&[32, 32, 32])),
        ("R3", i(98304), ints(&[32, 48, 64])),
        ("R4", mul(s.s0, s.s1), vec![s.s0, s.s1]),
    ];
    let mut g = c.benchmark_group("range_tree");
    g.warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_millis(300))
        .sample_size(10);
    for (id, numel, lengths) in cases {
        g.bench_function(format!("{id}/construct_entries"), |b| {
            b.iter(|| {
                let mut trees =
                    RangeTrees::new(&[(Prefix::X, numel)], TreeOptions::default()).unwrap();
                trees
                    .construct_entries(RootId(0), black_box(&lengths))
                    .unwrap()
            })
        });
    }
    g.finish();
}

// ============================================================================ CSE

/// One op of a Triton codegen stream; operands refer to earlier stream positions.
#[derive(Clone)]
enum StreamOp {
    Load { buf: usize, index: Expr },
    Binary { op: usize, a: usize, b: usize },
    Constant { value: i64 },
    IndexExpr { index: Expr },
    Where { cond: usize, a: usize, b: usize },
}

const BINOPS: [&str; 4] = ["+", "*", "-", "maximum"];

struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// A deterministic 200-op stream: loads of a few buffers at a few index expressions, arithmetic,
/// constants, index expressions and selects, with about a third of the ops repeating an earlier
/// op verbatim (the pattern CSE exists for).
fn cse_stream() -> Vec<StreamOp> {
    let x = |n: &str| Expr::symbol(n).unwrap();
    let (x0, x1, r) = (x("x0"), x("x1"), x("r0_2"));
    let indices: Vec<Expr> = vec![
        lin(0, &[(x0, 1), (x1, 64)]),
        lin(0, &[(x0, 1), (r, 4096)]),
        lin(0, &[(x1, 1), (x0, 64)]),
        r,
        x0,
        lin(0, &[(r, 1), (x1, 512)]),
        lin(7, &[(x0, 2), (x1, 128)]),
        mi(x0, i(1), i(48)).add(&x1.scale(48).unwrap()).unwrap(),
        fd(x0, i(8)).add(&r.scale(16).unwrap()).unwrap(),
        lin(0, &[(x0, 1), (x1, 64), (r, 4096)]),
    ];
    let mut rng = Lcg(42);
    let mut out: Vec<StreamOp> = Vec::with_capacity(200);
    while out.len() < 200 {
        let n = out.len();
        let k = rng.below(100);
        let op = if n > 4 && k < 33 {
            out[rng.below(n)].clone()
        } else if n < 3 || k < 55 {
            StreamOp::Load {
                buf: rng.below(6),
                index: indices[rng.below(indices.len())],
            }
        } else if k < 80 {
            StreamOp::Binary {
                op: rng.below(BINOPS.len()),
                a: n - 1 - rng.below(n.min(8)),
                b: n - 1 - rng.below(n.min(8)),
            }
        } else if k < 88 {
            StreamOp::Constant {
                value: [0, 1, -1, 2][rng.below(4)],
            }
        } else if k < 94 {
            StreamOp::IndexExpr {
                index: indices[rng.below(indices.len())],
            }
        } else {
            StreamOp::Where {
                cond: n - 1 - rng.below(n.min(8)),
                a: n - 1 - rng.below(n.min(8)),
                b: n - 1,
            }
        };
        out.push(op);
    }
    out
}

/// The Triton text of an op; operands are named through `vars` (stream position → variable) and
/// `var_names` (variable id → name).
fn render(
    op: &StreamOp,
    vars: &[CseVarId],
    var_names: &[Option<String>],
    bufs: &[String],
) -> String {
    let nm = |pos: usize| var_names[vars[pos].0 as usize].as_deref().unwrap_or("?");
    match op {
        StreamOp::Load { buf, index } => {
            format!(
                "tl.load({} + ({}), xmask, eviction_policy='evict_last')",
                bufs[*buf],
                texpr(*index, "tl.int32").unwrap()
            )
        }
        StreamOp::Binary { op, a, b } => {
            if *op == 3 {
                format!("triton_helpers.maximum({}, {})", nm(*a), nm(*b))
            } else {
                format!("{} {} {}", nm(*a), BINOPS[*op], nm(*b))
            }
        }
        StreamOp::Constant { value } => format!("tl.full([1], {value}, tl.float32)"),
        StreamOp::IndexExpr { index } => texpr(*index, "tl.int32").unwrap(),
        StreamOp::Where { cond, a, b } => {
            format!("tl.where({}, {}, {})", nm(*cond), nm(*a), nm(*b))
        }
    }
}

/// Remember a variable's name (as the Python side holds its CSE variable objects).
fn note_name<K: Eq + std::hash::Hash + Clone>(
    table: &CseTable<K>,
    var_names: &mut Vec<Option<String>>,
    v: CseVarId,
) {
    let k = v.0 as usize;
    if var_names.len() <= k {
        var_names.resize(k + 1, None);
    }
    if var_names[k].is_none() {
        var_names[k] = Some(table.var_name(v));
    }
}

struct OpNames {
    load: Name,
    bin: [Name; 4],
    constant: Name,
    index_expr: Name,
    where_: Name,
    bufs: Vec<Name>,
}

/// The structural key of an op (no text).
fn structural_key(op: &StreamOp, vars: &[CseVarId], n: &OpNames) -> CseKey {
    match op {
        StreamOp::Load { buf, index } => CseKey::new(
            n.load,
            DtypeTag::FLOAT32,
            &[CseArg::Name(n.bufs[*buf]), CseArg::Expr(*index)],
        ),
        StreamOp::Binary { op, a, b } => CseKey::new(
            n.bin[*op],
            DtypeTag::FLOAT32,
            &[CseArg::Var(vars[*a]), CseArg::Var(vars[*b])],
        ),
        StreamOp::Constant { value } => {
            CseKey::new(n.constant, DtypeTag::FLOAT32, &[CseArg::Int(*value)])
        }
        StreamOp::IndexExpr { index } => {
            CseKey::new(n.index_expr, DtypeTag::INT32, &[CseArg::Expr(*index)])
        }
        StreamOp::Where { cond, a, b } => CseKey::new(
            n.where_,
            DtypeTag::FLOAT32,
            &[
                CseArg::Var(vars[*cond]),
                CseArg::Var(vars[*a]),
                CseArg::Var(vars[*b]),
            ],
        ),
    }
}

/// Structural pipeline: key → lookup; on a miss render the line (as codegen must, to write it).
fn run_structural(
    table: &mut CseTable,
    stream: &[StreamOp],
    n: &OpNames,
    bufs: &[String],
) -> usize {
    let mut vars: Vec<CseVarId> = Vec::with_capacity(stream.len());
    let mut var_names: Vec<Option<String>> = Vec::with_capacity(stream.len());
    let mut lines = 0;
    for op in stream {
        let (v, new) = table.get_or_insert(structural_key(op, &vars, n));
        if new {
            lines += render(op, &vars, &var_names, bufs).len();
        }
        note_name(table, &mut var_names, v);
        vars.push(v);
    }
    lines
}

/// Text pipeline (Inductor's): render every op, then look the text up.
fn run_text(table: &mut TextCseTable, stream: &[StreamOp], bufs: &[String]) -> usize {
    let mut vars: Vec<CseVarId> = Vec::with_capacity(stream.len());
    let mut var_names: Vec<Option<String>> = Vec::with_capacity(stream.len());
    let mut lines = 0;
    for op in stream {
        let text = render(op, &vars, &var_names, bufs);
        let len = text.len();
        let (v, new) = table.get_or_insert(text);
        if new {
            lines += len;
        }
        note_name(table, &mut var_names, v);
        vars.push(v);
    }
    lines
}

fn cse(c: &mut Criterion) {
    let stream = cse_stream();
    let bufs: Vec<String> = (0..6).map(|k| format!("in_ptr{k}")).collect();
    let names = OpNames {
        load: Name::intern("load"),
        bin: [
            Name::intern("add"),
            Name::intern("mul"),
            Name::intern("sub"),
            Name::intern("maximum"),
        ],
        constant: Name::intern("constant"),
        index_expr: Name::intern("index_expr"),
        where_: Name::intern("where"),
        bufs: bufs.iter().map(|b| Name::intern(b)).collect(),
    };
    // sanity: both pipelines write the same lines
    assert_eq!(
        run_structural(&mut CseTable::new(), &stream, &names, &bufs),
        run_text(&mut TextCseTable::new(), &stream, &bufs)
    );

    let mut g = c.benchmark_group("cse");
    g.warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_millis(400))
        .sample_size(10);
    g.bench_function("stream200/structural", |b| {
        b.iter(|| run_structural(&mut CseTable::new(), black_box(&stream), &names, &bufs))
    });
    g.bench_function("stream200/text", |b| {
        b.iter(|| run_text(&mut TextCseTable::new(), black_box(&stream), &bufs))
    });
    // steady state: every op hits (the table was filled by an earlier pass)
    let mut filled = CseTable::new();
    run_structural(&mut filled, &stream, &names, &bufs);
    let mut filled_text = TextCseTable::new();
    run_text(&mut filled_text, &stream, &bufs);
    g.bench_function("stream200_hits/structural", |b| {
        b.iter(|| run_structural(&mut filled, black_box(&stream), &names, &bufs))
    });
    g.bench_function("stream200_hits/text", |b| {
        b.iter(|| run_text(&mut filled_text, black_box(&stream), &bufs))
    });
    g.finish();
}

// ============================================================================ simplify (lead)

type SimplifyCase = (&'static str, Build, fn(&Syms) -> Vec<(Expr, Expr)>);

/// S1–S10 of the baseline: `simplify_with_ranges` on an expression built from fresh symbols
/// (built untimed), i.e. the baseline's *fresh* column — no memo can hit.
fn simplify_cases() -> Vec<SimplifyCase> {
    vec![
        (
            "S1",
            |s| mi(lin(0, &[(s.x0, 1), (s.x1, 64)]), i(64), i(64)),
            |s| vec![(s.x0, i(64)), (s.x1, i(64))],
        ),
        (
            "S2",
            |s| fd(lin(0, &[(s.x0, 1), (s.x1, 128)]), i(16)),
            |s| vec![(s.x0, i(16)), (s.x1, i(8))],
        ),
        (
            "S3",
            |s| mi(lin(0, &[(s.x0, 1), (s.x1, 4096)]), i(64), i(64)),
            |s| vec![(s.x0, i(4096)), (s.x1, i(32))],
        ),
        (
            "S4",
            |s| {
                lin(
                    0,
                    &[(mi(s.x0, i(1), i(64)), 1), (mi(s.x0, i(64), i(64)), 64)],
                )
            },
            |s| vec![(s.x0, i(8192))],
        ),
        ("S5", |s| mi(s.x0, i(1), i(64)), |s| vec![(s.x0, i(128))]),
        (
            "S6",
            |s| {
                lin(
                    0,
                    &[
                        (s.x0, 1),
                        (mi(s.x1, i(1), i(128)), 64),
                        (fd(s.x1, i(128)), 8192),
                    ],
                )
            },
            |s| vec![(s.x0, i(64)), (s.x1, i(16384))],
        ),
        (
            "S7",
            |s| lin(0, &[(s.x0, 1), (s.x1, 64), (s.x2, 4096)]),
            |s| vec![(s.x0, i(64)), (s.x1, i(64)), (s.x2, i(32))],
        ),
        (
            "S8",
            |s| {
                lin(
                    0,
                    &[
                        (mi(s.x0, i(1), i(48)), 1),
                        (mi(s.x0, i(1536), i(64)), 48),
                        (mi(s.x0, i(48), i(32)), 3072),
                    ],
                )
            },
            |s| vec![(s.x0, i(98304))],
        ),
        (
            "S9",
            |s| fd(s.x0.add(&s.s0.mul(&s.x1).unwrap()).unwrap(), s.s0),
            |s| vec![(s.x0, s.s0), (s.x1, s.s1)],
        ),
        (
            "S10",
            |s| mi(s.x0.add(&s.s0.mul(&s.x1).unwrap()).unwrap(), s.s0, s.s1),
            |s| vec![(s.x0, s.s0), (s.x1, s.s1)],
        ),
    ]
}

fn simplify_benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("simplify_with_ranges");
    g.warm_up_time(Duration::from_millis(50))
        .measurement_time(Duration::from_millis(30))
        .sample_size(10);
    for (id, build, ranges) in simplify_cases() {
        g.bench_function(format!("{id}/fresh"), |b| {
            b.iter_batched(
                || {
                    let s = fresh_syms();
                    (build(&s), ranges(&s))
                },
                |(e, r)| {
                    tilefuse::simplify::simplify_with_ranges(black_box(e), black_box(&r)).unwrap()
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
    let mut g = c.benchmark_group("simplify_loops");
    g.warm_up_time(Duration::from_millis(50))
        .measurement_time(Duration::from_millis(30))
        .sample_size(10);
    g.bench_function("M5/fresh", |b| {
        b.iter_batched(
            fresh_syms,
            |s| {
                let f = lin(0, &[(s.x0, 4096), (s.x1, 64), (s.x2, 1)]);
                tilefuse::simplify::simplify_loops(
                    &[s.x0, s.x1, s.x2],
                    &[i(8), i(64), i(64)],
                    &[f],
                    false,
                )
                .unwrap()
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(
    benches,
    construction,
    split,
    range_tree,
    cse,
    simplify_benches
);
criterion_main!(benches);
