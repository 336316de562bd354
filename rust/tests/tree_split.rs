//! Iteration-range splitting (`split_iteration_ranges`, `prepare_split_iteration_lengths`,
//! `is_compatible`) and range trees (`lookup`, `construct_entries`, `vars_and_sizes`,
//! `map_kernel_groups_to_node_sizes`, `combine_contiguous_dims`, `combine_modular_indexing_pairs`):
//! worked examples of Inductor's behaviour, the split rows P1–P8 and range-tree rows R1–R4 of the
//! sympy baseline, and property tests (a split enumerates the node's iteration space in order,
//! entries are mixed-radix digits of their root, the index rewrites preserve values).

use proptest::prelude::*;
use rustc_hash::FxHashMap;
use tilefuse::expr::Expr;
use tilefuse::split::{
    is_compatible, prepare_split_iteration_lengths, split_iteration_ranges, split_var, Getter,
};
use tilefuse::tree::{Prefix, RangeTrees, RootId, TreeOptions};
use tilefuse::SymError;

fn s(n: &str) -> Expr {
    Expr::symbol(n).unwrap()
}
fn i(v: i64) -> Expr {
    Expr::int(v)
}
fn ints(v: &[i64]) -> Vec<Expr> {
    v.iter().map(|x| i(*x)).collect()
}
fn nested(v: &[&[i64]]) -> Vec<Vec<Expr>> {
    v.iter().map(|g| ints(g)).collect()
}
fn mul(a: Expr, b: Expr) -> Expr {
    a.mul(&b).unwrap()
}
fn show<T: std::fmt::Debug>(x: &T) -> String {
    format!("{x:?}")
}

// ============================================================================ SPLIT worked examples

fn split_ok(groups: &[i64], lengths: &[&[i64]]) -> (String, String) {
    let r = split_iteration_ranges(&ints(groups), &nested(lengths)).unwrap();
    (show(&r.new_ranges), show(&r.getters))
}

fn split_err(groups: &[i64], lengths: &[&[i64]]) -> String {
    match split_iteration_ranges(&ints(groups), &nested(lengths)) {
        Err(SymError::CantSplit(m)) => m,
        other => panic!("expected CantSplit for {groups:?} {lengths:?}, got {other:?}"),
    }
}

#[test]
fn split_worked_examples_table() {
    assert_eq!(
        split_ok(&[6, 4], &[&[24], &[]]),
        ("[[6], [4]]".into(), "[[4*v0 + v1], []]".into())
    );
    assert_eq!(
        split_ok(&[6, 4], &[&[2, 3, 4], &[]]),
        ("[[2, 3], [4]]".into(), "[[v0, v1, v2], []]".into())
    );
    assert_eq!(
        split_ok(&[6, 4], &[&[12, 2], &[]]),
        ("[[6], [2, 2]]".into(), "[[2*v0 + v1, v2], []]".into())
    );
    assert_eq!(
        split_ok(&[8, 16], &[&[2, 64], &[]]),
        ("[[2, 4], [16]]".into(), "[[v0, 16*v1 + v2], []]".into())
    );
    assert_eq!(
        split_ok(&[128, 1], &[&[8], &[16]]),
        ("[[8, 16], []]".into(), "[[v0], [v1]]".into())
    );
    assert_eq!(
        split_ok(&[4, 1], &[&[4, 1, 1], &[]]),
        ("[[4], []]".into(), "[[v0, 0, 0], []]".into())
    );
    // three groups only in a z, y, x tiling (groups [z, y, x, 1]), upstream's later extension
    assert_eq!(
        split_ok(&[2, 3, 4, 1], &[&[24], &[]]),
        (
            "[[2], [3], [4], []]".into(),
            "[[12*v0 + 4*v1 + v2], []]".into()
        )
    );
    assert!(split_err(&[2, 3, 4, 2], &[&[48], &[]]).contains("size 24"));
    assert!(split_err(&[2, 3, 4, 1], &[&[27], &[]]).contains("size 27"));
    // CantSplit rows
    let m = split_err(&[6, 4], &[&[4, 6], &[]]);
    assert!(m.contains("size 6"), "{m}");
    let m = split_err(&[2, 3, 4], &[&[24], &[]]);
    assert!(m.contains("12"), "{m}");
    // Inductor asserts here (remaining [1, 4]); the core raises CantSplit
    let m = split_err(&[6, 4], &[&[6], &[]]);
    assert!(m.contains("[1, 4]"), "{m}");
    // Inductor silently drops the reduction size 5; the core raises CantSplit naming it
    let m = split_err(&[6, 1], &[&[2, 3], &[5]]);
    assert!(m.contains("size 5") && m.contains("[1, 1]"), "{m}");
}

#[test]
fn split_special_cases() {
    // every length group empty: nothing to split, no coverage check (as Inductor)
    let r = split_iteration_ranges(&ints(&[6, 4]), &nested(&[&[], &[]])).unwrap();
    assert_eq!(r.new_ranges, vec![Vec::<Expr>::new(), vec![]]);
    assert_eq!(r.getters, vec![Vec::<Expr>::new(), vec![]]);
    // getter specs agree with the expressions
    let r = split_iteration_ranges(&ints(&[6, 4]), &nested(&[&[12, 1, 2], &[]])).unwrap();
    assert_eq!(
        r.getter_specs[0],
        vec![
            Getter::Combined {
                sizes: vec![i(2)],
                vars: vec![0, 1]
            },
            Getter::Zero,
            Getter::Var(2)
        ]
    );
    let vars: Vec<Expr> = (0..r.num_vars()).map(|k| split_var(k).unwrap()).collect();
    assert_eq!(r.apply(&vars).unwrap(), r.getters);
    // symbolic: an unknown relation to the remaining size is CantSplit
    let (s0, s1) = (s("s0"), s("s1"));
    assert!(matches!(
        split_iteration_ranges(&[s0, s1], &[vec![mul(s0, s1)]]),
        Err(SymError::CantSplit(_))
    ));
    // symbolic: a provable split
    let r = split_iteration_ranges(&[mul(s0, s1), i(1)], &[vec![s0, s1], vec![]]).unwrap();
    assert_eq!(r.new_ranges, vec![vec![s0, s1], vec![]]);
    // zero and overflow never panic
    assert!(split_iteration_ranges(&ints(&[6]), &nested(&[&[0]])).is_err());
    assert!(split_iteration_ranges(&ints(&[i64::MAX, 3]), &nested(&[&[i64::MAX], &[3]])).is_ok());
}

#[test]
fn prepare_and_is_compatible() {
    let g = ints(&[64, 8]);
    // node outside the reduction loop: its reduction numel is filled in
    assert_eq!(
        prepare_split_iteration_lengths(&g, &nested(&[&[64], &[]]), &i(8)),
        nested(&[&[64], &[8]])
    );
    // reduction numel 1, or products that do not match: unchanged
    assert_eq!(
        prepare_split_iteration_lengths(&g, &nested(&[&[64], &[]]), &i(1)),
        nested(&[&[64], &[]])
    );
    assert_eq!(
        prepare_split_iteration_lengths(&g, &nested(&[&[32], &[]]), &i(8)),
        nested(&[&[32], &[]])
    );
    assert_eq!(
        prepare_split_iteration_lengths(&g, &nested(&[&[8], &[8]]), &i(8)),
        nested(&[&[8], &[8]])
    );
    assert_eq!(
        prepare_split_iteration_lengths(&g, &nested(&[&[512]]), &i(8)),
        nested(&[&[512]])
    );
    assert!(is_compatible(&g, &nested(&[&[64], &[]]), Some(i(8))));
    // Inductor asserts here; the core answers "not compatible"
    assert!(!is_compatible(&g, &nested(&[&[64], &[]]), None));
    assert!(is_compatible(&g, &nested(&[&[512], &[]]), None));
    assert!(is_compatible(&g, &nested(&[&[8, 8], &[8]]), None));
    assert!(!is_compatible(&g, &nested(&[&[8, 8], &[4]]), None));
    assert!(!is_compatible(
        &ints(&[6, 4]),
        &nested(&[&[4, 6], &[]]),
        None
    ));
    // symbolic
    let (s0, s1) = (s("s0"), s("s1"));
    assert!(is_compatible(&[s0, s1], &[vec![s0], vec![]], Some(s1)));
    assert!(!is_compatible(&[s0, s1], &[vec![s1], vec![]], Some(s0)));
}

// ============================================================================ baseline P1–P8

/// (id, groups, lengths, split new_ranges, split node vars, full-path node vars)
type BaselineCase = (
    &'static str,
    Vec<Expr>,
    Vec<Vec<Expr>>,
    &'static str,
    &'static str,
    &'static str,
);

fn baseline_cases() -> Vec<BaselineCase> {
    let (s0, s1, s2) = (s("s0"), s("s1"), s("s2"));
    vec![
        (
            "P1",
            ints(&[4096, 1]),
            nested(&[&[64, 64], &[]]),
            "[[64, 64], []]",
            "[[v0, v1], []]",
            "[[x1, x0], []]",
        ),
        (
            "P2",
            ints(&[8192 * 8192, 1]),
            nested(&[&[8192, 8192], &[]]),
            "[[8192, 8192], []]",
            "[[v0, v1], []]",
            "[[x1, x0], []]",
        ),
        (
            "P3",
            ints(&[1024, 32]),
            nested(&[&[32, 32, 32]]),
            "[[32, 32], [32]]",
            "[[v0, v1, v2]]",
            "[[x1, x0, r0_2]]",
        ),
        (
            "P4",
            ints(&[32, 1024, 1]),
            nested(&[&[1024, 32], &[]]),
            "[[32], [32, 32], []]",
            "[[32*v0 + v1, v2], []]",
            "[[x2 + 32*y0, x1], []]",
        ),
        (
            "P5",
            ints(&[4, 8, 16, 1]),
            nested(&[&[512], &[]]),
            "[[4], [8], [16], []]",
            "[[128*v0 + 16*v1 + v2], []]",
            "[[x2 + 16*y1 + 128*z0], []]",
        ),
        (
            "P6",
            ints(&[1024, 512]),
            nested(&[&[1024], &[512]]),
            "[[1024], [512]]",
            "[[v0], [v1]]",
            "[[x0], [r0_1]]",
        ),
        (
            "P7",
            vec![mul(s0, s1), i(1)],
            vec![vec![s0, s1], vec![]],
            "[[s0, s1], []]",
            "[[v0, v1], []]",
            "[[x1, x0], []]",
        ),
        (
            "P8",
            vec![s0, mul(s1, s2)],
            vec![vec![s0, s1, s2]],
            "[[s0], [s1, s2]]",
            "[[v0, v1, v2]]",
            "[[x0, r0_2, r0_1]]",
        ),
    ]
}

#[test]
fn baseline_p1_p8_split() {
    for (id, groups, lengths, ranges, vars, _) in baseline_cases() {
        let r = split_iteration_ranges(&groups, &lengths).unwrap();
        assert_eq!(show(&r.new_ranges), ranges, "{id}");
        assert_eq!(show(&r.getters), vars, "{id}");
    }
}

fn baseline_trees(groups: &[Expr]) -> RangeTrees {
    let n = groups.len();
    RangeTrees::from_tiling(&groups[..n - 1], &groups[n - 1..]).unwrap()
}

#[test]
fn baseline_p1_p8_full_path() {
    for (id, groups, lengths, _, _, full) in baseline_cases() {
        let mut trees = baseline_trees(&groups);
        let vars = trees
            .map_kernel_groups_to_node_sizes(&groups, &lengths)
            .unwrap();
        assert_eq!(show(&vars), full, "{id}");
    }
}

#[test]
fn map_errors_and_split_and_set_ranges() {
    let mut trees = RangeTrees::from_tiling(&ints(&[6]), &ints(&[4])).unwrap();
    assert!(matches!(
        trees.map_kernel_groups_to_node_sizes(&ints(&[6, 4]), &nested(&[&[4, 6], &[]])),
        Err(SymError::CantSplit(_))
    ));
    // the group count must match the roots
    assert!(matches!(
        trees.map_kernel_groups_to_node_sizes(&ints(&[24]), &nested(&[&[4, 6]])),
        Err(SymError::Value(_))
    ));
    // outside the reduction the reduction group counts as 1
    let mut trees = RangeTrees::from_tiling(&ints(&[16]), &ints(&[8])).unwrap();
    assert!(trees.inside_reduction());
    trees.set_inside_reduction(false);
    assert_eq!(
        show(
            &trees
                .split_and_set_ranges(&nested(&[&[4, 4], &[]]))
                .unwrap()
        ),
        "[[x1, x0], []]"
    );
    trees.set_inside_reduction(true);
    assert_eq!(
        show(&trees.split_and_set_ranges(&nested(&[&[16], &[8]])).unwrap()),
        "[[x2], [r0_3]]"
    );
}

// ============================================================================ range trees

#[test]
fn baseline_r1_r4_construct_entries() {
    let (s0, s1) = (s("s0"), s("s1"));
    let cases: Vec<(Expr, Vec<Expr>, &str)> = vec![
        (
            i(4096),
            ints(&[64, 64]),
            "[(xindex//64), ModularIndexing(xindex, 1, 64)]",
        ),
        (
            i(32768),
            ints(&[32, 32, 32]),
            "[(xindex//1024), ModularIndexing(xindex, 32, 32), ModularIndexing(xindex, 1, 32)]",
        ),
        (
            i(98304),
            ints(&[32, 48, 64]),
            "[(xindex//3072), ModularIndexing(xindex, 64, 48), ModularIndexing(xindex, 1, 64)]",
        ),
        (
            mul(s0, s1),
            vec![s0, s1],
            "[(xindex//s1), ModularIndexing(xindex, 1, s1)]",
        ),
    ];
    for (numel, lengths, want) in cases {
        let mut trees = RangeTrees::new(&[(Prefix::X, numel)], TreeOptions::default()).unwrap();
        let ids = trees.construct_entries(RootId(0), &lengths).unwrap();
        let exprs: Vec<Expr> = ids.iter().map(|id| trees.entry(*id).expr).collect();
        assert_eq!(show(&exprs), want);
    }
}

#[test]
fn lookup_naming_memo_and_layout() {
    let mut trees = RangeTrees::from_tiling(&ints(&[16]), &ints(&[8])).unwrap();
    let (x, r) = (
        trees.root_by_prefix(Prefix::X).unwrap(),
        trees.root_by_prefix(Prefix::R0).unwrap(),
    );
    assert_eq!(trees.root(x).name, "xindex");
    assert_eq!(trees.root(r).name, "r0_index");
    assert_eq!(
        show(&trees.construct(x, &ints(&[4, 4])).unwrap()),
        "[x1, x0]"
    );
    assert_eq!(show(&trees.construct(r, &ints(&[8])).unwrap()), "[r0_2]");
    // memoized per expression: the same digit is the same entry
    let a = trees.lookup(x, i(4), i(4)).unwrap();
    assert_eq!(trees.entry(a).name, "x1");
    assert_eq!(trees.entry(a).expr, s("xindex").floordiv(&i(4)).unwrap());
    let full = trees.lookup(x, i(1), i(16)).unwrap();
    assert_eq!(trees.entry(full).name, "x3");
    assert_eq!(trees.entry(full).expr, s("xindex"));
    assert_eq!(trees.lookup(x, i(1), i(16)).unwrap(), full);
    assert_eq!(trees.iter_vars_count(), 4);
    assert_eq!(
        trees
            .entry_for_symbol(&s("r0_2"))
            .map(|id| trees.entry(id).root),
        Some(r)
    );
    assert_eq!(trees.entry_for_symbol(&s("x9")), None);
    assert_eq!(
        show(&trees.var_ranges()),
        "[(x0, 4), (x1, 4), (x3, 16), (r0_2, 8)]"
    );
    // layout (construct_range_trees): grid x→0; tensor dims z,y,x then r0_ inside a reduction
    let rt = trees.root(r);
    assert_eq!(
        (rt.index, rt.grid_dim, rt.tensor_dim, rt.is_loop),
        (1, None, Some(1), true)
    );
    let xt = trees.root(x);
    assert_eq!(
        (xt.index, xt.grid_dim, xt.tensor_dim, xt.is_loop),
        (0, Some(0), Some(0), false)
    );
    // pointwise kernel with z, y, x
    let t3 = RangeTrees::new(
        &[(Prefix::X, i(4)), (Prefix::Z, i(2)), (Prefix::Y, i(3))],
        TreeOptions::default(),
    )
    .unwrap();
    let dims: Vec<_> = t3
        .roots()
        .iter()
        .map(|r| (r.prefix, r.index, r.tensor_dim, r.grid_dim, r.has_zdim))
        .collect();
    assert_eq!(
        dims,
        vec![
            (Prefix::Z, 2, Some(0), Some(2), true),
            (Prefix::Y, 1, Some(1), Some(1), true),
            (Prefix::X, 0, Some(2), Some(0), true)
        ]
    );
    // persistent reduction without x dim
    let t = RangeTrees::new(
        &[(Prefix::X, i(4)), (Prefix::R0, i(8))],
        TreeOptions {
            inside_reduction: true,
            is_reduction: true,
            no_x_dim: true,
            persistent_reduction: true,
        },
    )
    .unwrap();
    assert_eq!(t.roots()[0].tensor_dim, None);
    assert_eq!(
        (t.roots()[1].tensor_dim, t.roots()[1].is_loop),
        (Some(0), false)
    );
    assert!(RangeTrees::new(
        &[(Prefix::X, i(4)), (Prefix::X, i(8))],
        TreeOptions::default()
    )
    .is_err());
    assert!(RangeTrees::from_tiling(&ints(&[1, 2, 3, 4]), &[]).is_err());
    assert!(trees.lookup(RootId(7), i(1), i(2)).is_err());
    assert!(trees.lookup(x, i(0), i(2)).is_err());
}

#[test]
fn precomputed_args_and_broadcast() {
    let (s0, s1, s2) = (s("s0"), s("s1"), s("s2"));
    let numel = mul(mul(s0, s1), s2);
    let mut trees = RangeTrees::new(&[(Prefix::X, numel)], TreeOptions::default()).unwrap();
    let x = RootId(0);
    let ids = trees.construct_entries(x, &[s0, s1, s2]).unwrap();
    let args: Vec<Vec<Expr>> = ids
        .iter()
        .map(|id| trees.entry(*id).precomputed_args())
        .collect();
    assert_eq!(args, vec![vec![mul(s1, s2)], vec![], vec![]]);
    let e = trees.lookup(x, i(1), mul(s1, s2)).unwrap();
    assert_eq!(trees.entry(e).precomputed_args(), vec![mul(s1, s2)]);
    // broadcast: only some digits of the root are used
    let syms: Vec<Expr> = ids.iter().map(|id| trees.entry(*id).symbol).collect();
    assert!(trees.is_broadcasted(&syms[0]).unwrap());
    let all = Expr::sum(&syms).unwrap();
    assert!(!trees.is_broadcasted(&all).unwrap());
    assert!(!trees
        .is_broadcasted(&syms[0].add(&s("tmp0")).unwrap())
        .unwrap());
    assert!(RangeTrees::is_indirect_indexing(&s("tmp3")));
}

#[test]
fn vars_and_sizes_examples() {
    let mut trees = RangeTrees::new(&[(Prefix::X, i(256))], TreeOptions::default()).unwrap();
    let x = RootId(0);
    let v = trees.construct(x, &ints(&[4, 8, 8])).unwrap(); // x2, x1, x0
    assert_eq!(show(&v), "[x2, x1, x0]");
    // only the outer digit used: a filler covers the inner 64
    let (vars, sizes) = trees.vars_and_sizes(x, &v[0]).unwrap();
    assert_eq!(
        (show(&vars), show(&sizes)),
        ("[x2, x3]".into(), "[4, 64]".into())
    );
    // only the middle digit: fillers below and above
    let (vars, sizes) = trees.vars_and_sizes(x, &v[1].scale(3).unwrap()).unwrap();
    assert_eq!(
        (show(&vars), show(&sizes)),
        ("[x2, x1, x0]".into(), "[4, 8, 8]".into())
    );
    // symbolic
    let (s0, s1) = (s("s0"), s("s1"));
    let mut trees = RangeTrees::new(&[(Prefix::X, mul(s0, s1))], TreeOptions::default()).unwrap();
    let v = trees.construct(x, &[s0, s1]).unwrap();
    let (vars, sizes) = trees.vars_and_sizes(x, &v[0]).unwrap();
    assert_eq!((vars, sizes), (v.clone(), vec![s0, s1]));
}

#[test]
fn combine_contiguous_dims_examples() {
    // numel 64: 8*x1 + x0 with x1 = xindex//8, x0 = xindex % 8 merges into one entry = xindex
    let mut trees = RangeTrees::new(&[(Prefix::X, i(64))], TreeOptions::default()).unwrap();
    let x = RootId(0);
    let v = trees.construct(x, &ints(&[8, 8])).unwrap();
    let idx = Expr::linear_combination(0, &[(v[0], 8), (v[1], 1)]).unwrap();
    let out = trees.combine_contiguous_dims(idx, x).unwrap();
    assert_eq!(show(&out), "x2");
    assert_eq!(
        trees.entry(trees.entry_for_symbol(&out).unwrap()).expr,
        s("xindex")
    );
    // a transposed access does not merge
    let idx = Expr::linear_combination(0, &[(v[0], 1), (v[1], 8)]).unwrap();
    assert_eq!(trees.combine_contiguous_dims(idx, x).unwrap(), idx);
    // partial merge: x2 stays, x1/x0 merge into a 64-digit
    let mut trees = RangeTrees::new(&[(Prefix::X, i(256))], TreeOptions::default()).unwrap();
    let v = trees.construct(x, &ints(&[4, 8, 8])).unwrap();
    let idx = Expr::linear_combination(0, &[(v[0], 1000), (v[1], 8), (v[2], 1)]).unwrap();
    let out = trees.combine_contiguous_dims(idx, x).unwrap();
    assert_eq!(show(&out), "1000*x2 + x3");
    assert_eq!(
        show(&trees.entry(trees.entry_for_symbol(&s("x3")).unwrap()).expr),
        "ModularIndexing(xindex, 1, 64)"
    );
    // through expand_floor_div: 128*x1 + x0//2 = (256*x1 + x0)//2 → merged
    let mut trees = RangeTrees::new(&[(Prefix::X, i(1024))], TreeOptions::default()).unwrap();
    let v = trees.construct(x, &ints(&[4, 256])).unwrap();
    let idx =
        Expr::linear_combination(0, &[(v[0], 128), (v[1].floordiv(&i(2)).unwrap(), 1)]).unwrap();
    let out = trees.combine_contiguous_dims(idx, x).unwrap();
    assert_eq!(show(&out), "(x2//2)");
    // symbolic sizes
    let (s0, s1) = (s("s0"), s("s1"));
    let mut trees = RangeTrees::new(&[(Prefix::X, mul(s0, s1))], TreeOptions::default()).unwrap();
    let v = trees.construct(x, &[s0, s1]).unwrap();
    let idx = mul(s1, v[0]).add(&v[1]).unwrap();
    let out = trees.combine_contiguous_dims(idx, x).unwrap();
    assert_eq!(
        trees.entry(trees.entry_for_symbol(&out).unwrap()).expr,
        s("xindex")
    );
    // integers and symbols are returned unchanged
    assert_eq!(trees.combine_contiguous_dims(i(5), x).unwrap(), i(5));
}

#[test]
fn combine_contiguous_dims_merges_full_chains() {
    for lengths in [
        vec![2, 3],
        vec![4, 4, 4],
        vec![2, 1, 3],
        vec![3, 5, 2, 2],
        vec![7, 1, 1, 2],
    ] {
        let numel: i64 = lengths.iter().product();
        let mut trees = RangeTrees::new(&[(Prefix::X, i(numel))], TreeOptions::default()).unwrap();
        let x = RootId(0);
        let v = trees.construct(x, &ints(&lengths)).unwrap();
        let items: Vec<(Expr, i64)> = (0..v.len())
            .map(|k| (v[k], lengths[k + 1..].iter().product::<i64>()))
            .collect();
        let idx = Expr::linear_combination(0, &items).unwrap();
        let out = trees.combine_contiguous_dims(idx, x).unwrap();
        let id = trees
            .entry_for_symbol(&out)
            .unwrap_or_else(|| panic!("{lengths:?}: {idx:?} -> {out:?}"));
        assert_eq!(trees.entry(id).expr, s("xindex"), "{lengths:?}");
        // with a common factor the merged digit keeps it
        let out = trees
            .combine_contiguous_dims(idx.scale(3).unwrap(), x)
            .unwrap();
        assert_eq!(out, trees.entry(id).symbol.scale(3).unwrap(), "{lengths:?}");
    }
}

#[test]
fn combine_modular_indexing_pairs_examples() {
    let mut trees = RangeTrees::new(&[(Prefix::X, i(64))], TreeOptions::default()).unwrap();
    let x = RootId(0);
    let v = trees.construct(x, &ints(&[4, 16])).unwrap(); // x1 = xindex//16, x0 = xindex % 16
    let one = i(1);
    // MI(x0, 1, 4) with x0 = MI(xindex, 1, 16): the pair folds onto the full-range entry x2
    let out = trees
        .combine_modular_indexing_pairs(v[1].modular_indexing(&one, &i(4)).unwrap())
        .unwrap();
    assert_eq!(show(&out), "ModularIndexing(x2, 1, 4)");
    assert_eq!(
        trees.entry(trees.entry_for_symbol(&s("x2")).unwrap()).expr,
        s("xindex")
    );
    // an FD entry collapses into one MI over x2
    let out = trees
        .combine_modular_indexing_pairs(v[0].modular_indexing(&one, &i(2)).unwrap())
        .unwrap();
    assert_eq!(show(&out), "ModularIndexing(x2, 16, 2)");
    // not an MI of a tree symbol: unchanged
    let e = v[0].add(&v[1]).unwrap();
    assert_eq!(trees.combine_modular_indexing_pairs(e).unwrap(), e);
    let e = s("s0").modular_indexing(&one, &i(4)).unwrap();
    assert_eq!(trees.combine_modular_indexing_pairs(e).unwrap(), e);
}

// ============================================================================ property tests

/// A tiny deterministic generator for test-case shapes (proptest supplies the seed).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn prime_factors(mut n: i64) -> Vec<i64> {
    let mut out = vec![];
    let mut p = 2;
    while n > 1 {
        while n % p == 0 {
            out.push(p);
            n /= p;
        }
        p += 1;
    }
    out
}

/// Random node lengths for `groups`: a random factorization of the total with 1s sprinkled in,
/// cut into one or two length groups, and (sometimes) perturbed so that no split may exist.
fn node_lengths(groups: &[i64], seed: u64) -> Vec<Vec<i64>> {
    let mut rng = Rng(seed | 1);
    let total: i64 = groups.iter().product();
    let mut f = prime_factors(total);
    for k in (1..f.len()).rev() {
        f.swap(k, rng.below(k as u64 + 1) as usize);
    }
    let mut sizes: Vec<i64> = vec![];
    let mut cur = 1;
    for p in f {
        cur *= p;
        if rng.below(2) == 0 {
            sizes.push(cur);
            cur = 1;
        }
    }
    if cur > 1 || sizes.is_empty() {
        sizes.push(cur);
    }
    for _ in 0..rng.below(3) {
        let at = rng.below(sizes.len() as u64 + 1) as usize;
        sizes.insert(at, 1);
    }
    match rng.below(6) {
        0 => {
            let k = rng.below(sizes.len() as u64) as usize;
            sizes[k] *= 2 + rng.below(2) as i64;
        }
        1 if sizes.len() > 1 => {
            sizes.remove(rng.below(sizes.len() as u64) as usize);
        }
        2 => {
            let k = rng.below(sizes.len() as u64) as usize;
            sizes[k] = 1 + rng.below(6) as i64;
        }
        _ => {}
    }
    let cut = rng.below(sizes.len() as u64 + 1) as usize;
    let two = rng.below(4) != 0;
    if two {
        vec![sizes[..cut].to_vec(), sizes[cut..].to_vec()]
    } else {
        vec![sizes]
    }
}

#[derive(Debug, PartialEq)]
enum RefGetter {
    Zero,
    Var(usize),
    Comb(i64, usize, usize),
    Comb3(i64, i64, usize, usize, usize),
}

/// Integer emulation of Inductor's algorithm, with the two differences (no silent drop, no assertion).
type RefSplit = (Vec<Vec<i64>>, Vec<Vec<RefGetter>>);

fn reference_split(groups: &[i64], lengths: &[Vec<i64>]) -> Option<RefSplit> {
    let n = groups.len();
    if lengths.iter().all(|l| l.is_empty()) {
        return Some((vec![vec![]; n], lengths.iter().map(|_| vec![]).collect()));
    }
    let mut rem = groups.to_vec();
    let mut ranges = vec![vec![]; n];
    let mut count = 0;
    let mut add = |rem: &mut Vec<i64>, g: usize, e: i64| -> Option<usize> {
        if rem[g] % e != 0 {
            return None;
        }
        rem[g] /= e;
        ranges[g].push(e);
        count += 1;
        Some(count - 1)
    };
    let mut cur = 0;
    let mut out = vec![];
    for lg in lengths {
        let mut gs = vec![];
        for &size in lg {
            if size == 1 {
                gs.push(RefGetter::Zero);
                continue;
            }
            while cur < n && rem[cur] == 1 {
                cur += 1;
            }
            let zyx = n == 4 && rem[3] == 1;
            if zyx && cur + 2 < n && size > rem[cur] * rem[cur + 1] {
                let o = rem[cur] * rem[cur + 1];
                if size % o != 0 {
                    return None;
                }
                let (s1, s2, s3) = (rem[cur], rem[cur + 1], size / o);
                let a = add(&mut rem, cur, s1)?;
                let b = add(&mut rem, cur + 1, s2)?;
                let c = add(&mut rem, cur + 2, s3)?;
                gs.push(RefGetter::Comb3(s2, s3, a, b, c));
            } else if cur + 1 < n && size > rem[cur] {
                if size % rem[cur] != 0 {
                    return None;
                }
                let (s1, s2) = (rem[cur], size / rem[cur]);
                let a = add(&mut rem, cur, s1)?;
                let b = add(&mut rem, cur + 1, s2)?;
                gs.push(RefGetter::Comb(s2, a, b));
            } else if cur < n {
                gs.push(RefGetter::Var(add(&mut rem, cur, size)?));
            } else {
                return None;
            }
        }
        out.push(gs);
    }
    if rem.iter().any(|r| *r != 1) {
        return None;
    }
    Some((ranges, out))
}

fn as_ints(v: &[Vec<Expr>]) -> Vec<Vec<i64>> {
    v.iter()
        .map(|g| g.iter().map(|e| e.as_int().unwrap()).collect())
        .collect()
}

/// Evaluate `index` (over entry and root symbols of `trees`) at every root value in `[0, numel)`.
fn eval_over_root(trees: &RangeTrees, root: RootId, index: &Expr, numel: i64) -> Vec<i64> {
    let flat = trees.substitute_entries(index).unwrap();
    let sym = trees.root(root).index_sym;
    (0..numel)
        .map(|r| {
            flat.evaluate(&|s| if *s == sym { Some(r) } else { None })
                .unwrap()
        })
        .collect()
}

fn chain_lengths() -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(1i64..=4, 1..=4)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    /// SPLIT: Ok/CantSplit exactly as the algorithm says; on success invariants (i)–(iii) by
    /// brute-force enumeration of the new iteration space.
    #[test]
    fn prop_split_invariants(groups in prop::collection::vec(1i64..=6, 1..=4), zyx in any::<bool>(), seed in any::<u64>()) {
        let mut groups = groups;
        if groups.len() == 4 {
            // keep the enumeration small: at most 3·3·3·3 elements
            for g in groups.iter_mut() {
                *g = 1 + (*g - 1) % 3;
            }
            if zyx {
                groups[3] = 1;
            }
        }
        let lengths = node_lengths(&groups, seed);
        let ge = ints(&groups);
        let le: Vec<Vec<Expr>> = lengths.iter().map(|g| ints(g)).collect();
        let got = split_iteration_ranges(&ge, &le);
        let want = reference_split(&groups, &lengths);
        match (&got, &want) {
            (Err(SymError::CantSplit(_)), None) => {}
            (Ok(res), Some((ranges, ref_getters))) => {
                let new_ranges = as_ints(&res.new_ranges);
                prop_assert_eq!(&new_ranges, ranges);
                let specs: Vec<Vec<RefGetter>> = res.getter_specs.iter().map(|g| g.iter().map(|x| match x {
                    Getter::Zero => RefGetter::Zero,
                    Getter::Var(k) => RefGetter::Var(*k),
                    Getter::Combined { sizes, vars } if vars.len() == 2 => RefGetter::Comb(sizes[0].as_int().unwrap(), vars[0], vars[1]),
                    Getter::Combined { sizes, vars } => RefGetter::Comb3(sizes[0].as_int().unwrap(), sizes[1].as_int().unwrap(), vars[0], vars[1], vars[2]),
                }).collect()).collect();
                prop_assert_eq!(&specs, ref_getters);
                // (i) each group's new ranges multiply to the group
                for (g, r) in groups.iter().zip(&new_ranges) {
                    prop_assert_eq!(*g, r.iter().product::<i64>());
                }
                // enumerate the flat new vars row-major across groups (in group order)
                let flat: Vec<i64> = new_ranges.iter().flatten().copied().collect();
                let vars: Vec<Expr> = (0..flat.len()).map(|k| split_var(k).unwrap()).collect();
                let node_sizes: Vec<i64> = lengths.iter().flatten().copied().collect();
                let getters: Vec<Expr> = res.getters.iter().flatten().copied().collect();
                prop_assert_eq!(getters.len(), node_sizes.len());
                let count: i64 = flat.iter().product();
                let mut w = vec![0i64; flat.len()];
                for pos in 0..count {
                    let mut rest = pos;
                    for k in (0..flat.len()).rev() {
                        w[k] = rest % flat[k];
                        rest /= flat[k];
                    }
                    let val = |s: &Expr| vars.iter().position(|v| v == s).map(|k| w[k]);
                    let mut lin = 0i64;
                    for (g, sz) in getters.iter().zip(&node_sizes) {
                        let x = g.evaluate(&val).unwrap();
                        // (ii) each getter ranges over [0, s)
                        prop_assert!(0 <= x && x < *sz, "getter {:?} = {} not in [0, {})", g, x, sz);
                        lin = lin * sz + x;
                    }
                    // (iii) order preserved (and with (ii), a bijection)
                    prop_assert_eq!(lin, pos);
                }
            }
            _ => prop_assert!(false, "split {:?} {:?}: got {:?}, reference {:?}", groups, lengths, got, want),
        }
    }

    /// RT-construct: the mixed-radix identity and digit ranges for every root value.
    #[test]
    fn prop_construct_mixed_radix(lengths in chain_lengths()) {
        let numel: i64 = lengths.iter().product();
        let mut trees = RangeTrees::new(&[(Prefix::X, i(numel))], TreeOptions::default()).unwrap();
        let ids = trees.construct_entries(RootId(0), &ints(&lengths)).unwrap();
        let root = s("xindex");
        for r in 0..numel {
            let mut acc = 0i64;
            for (k, id) in ids.iter().enumerate() {
                let d = trees.entry(*id).expr.evaluate(&|x| (*x == root).then_some(r)).unwrap();
                prop_assert!(0 <= d && d < lengths[k]);
                acc = acc * lengths[k] + d;
            }
            prop_assert_eq!(acc, r);
        }
    }

    /// RT-vars_and_sizes: Π sizes == numel, and each var's divisor is the product of the sizes
    /// inside it, for any subset of a chain's digits used in an index.
    #[test]
    fn prop_vars_and_sizes(lengths in chain_lengths(), mask in any::<u8>(), coeffs in prop::collection::vec(1i64..=5, 4)) {
        let numel: i64 = lengths.iter().product();
        let mut trees = RangeTrees::new(&[(Prefix::X, i(numel))], TreeOptions::default()).unwrap();
        let syms = trees.construct(RootId(0), &ints(&lengths)).unwrap();
        let items: Vec<(Expr, i64)> = syms.iter().enumerate().filter(|(k, _)| mask >> k & 1 == 1).map(|(k, v)| (*v, coeffs[k])).collect();
        let index = Expr::linear_combination(0, &items).unwrap();
        let (vars, sizes) = trees.vars_and_sizes(RootId(0), &index).unwrap();
        let sizes_i: Vec<i64> = sizes.iter().map(|e| e.as_int().unwrap()).collect();
        prop_assert_eq!(sizes_i.iter().product::<i64>(), numel);
        for (k, v) in vars.iter().enumerate() {
            let e = trees.entry(trees.entry_for_symbol(v).unwrap());
            prop_assert_eq!(e.divisor.as_int().unwrap(), sizes_i[k + 1..].iter().product::<i64>());
            prop_assert_eq!(e.length.as_int().unwrap(), sizes_i[k]);
        }
        for (v, _) in &items {
            prop_assert!(vars.contains(v));
        }
    }

    /// CCD: value-preserving for every root value, for random and contiguous strides, with and
    /// without an expandable FloorDiv term.
    #[test]
    fn prop_ccd_value_preserving(
        lengths in chain_lengths(),
        mask in any::<u8>(),
        coeffs in prop::collection::vec(0i64..=6, 4),
        mode in 0u8..4,
        den in 1i64..=4,
    ) {
        let numel: i64 = lengths.iter().product();
        let mut trees = RangeTrees::new(&[(Prefix::X, i(numel))], TreeOptions::default()).unwrap();
        let x = RootId(0);
        let syms = trees.construct(x, &ints(&lengths)).unwrap();
        let n = syms.len();
        let mut items: Vec<(Expr, i64)> = vec![];
        for k in 0..n {
            if mask >> k & 1 == 0 { continue; }
            let c = match mode {
                // contiguous (row-major) strides times a common factor
                0 | 1 => lengths[k + 1..].iter().product::<i64>() * (1 + coeffs[0] % 2),
                _ => coeffs[k],
            };
            items.push((syms[k], c));
        }
        if mode == 1 && n > 0 {
            // an expand_floor_div shape: Σ c·v (c ≠ 1) + v // D
            items.retain(|(v, c)| *c != 1 && *v != syms[n - 1]);
            items.push((syms[n - 1].floordiv(&i(den)).unwrap(), 1));
        }
        let index = Expr::linear_combination(0, &items).unwrap();
        let before = eval_over_root(&trees, x, &index, numel);
        let out = trees.combine_contiguous_dims(index, x).unwrap();
        prop_assert_eq!(eval_over_root(&trees, x, &out, numel), before, "{:?} -> {:?}", index, out);
    }

    /// CMPK: value-preserving for every root value.
    #[test]
    fn prop_cmpk_value_preserving(lengths in chain_lengths(), k in 0usize..4, d in 1i64..=4, m in 1i64..=6) {
        let numel: i64 = lengths.iter().product();
        let mut trees = RangeTrees::new(&[(Prefix::X, i(numel))], TreeOptions::default()).unwrap();
        let x = RootId(0);
        let syms = trees.construct(x, &ints(&lengths)).unwrap();
        let v = syms[k % syms.len()];
        let index = v.modular_indexing(&i(d), &i(m)).unwrap();
        let before = eval_over_root(&trees, x, &index, numel);
        let out = trees.combine_modular_indexing_pairs(index).unwrap();
        prop_assert_eq!(eval_over_root(&trees, x, &out, numel), before, "{:?} -> {:?}", index, out);
    }

    /// MAP: the node variables it returns, evaluated through the range-tree entries, enumerate the
    /// node's iteration space in row-major order as the kernel's flat index runs.
    #[test]
    fn prop_map_full_path(groups in prop::collection::vec(1i64..=6, 2..=3), seed in any::<u64>()) {
        let total: i64 = groups.iter().product();
        let lengths = node_lengths(&groups, seed);
        let ge = ints(&groups);
        let le: Vec<Vec<Expr>> = lengths.iter().map(|g| ints(g)).collect();
        let mut trees = RangeTrees::from_tiling(&ge[..ge.len() - 1], &ge[ge.len() - 1..]).unwrap();
        let Ok(vars) = trees.map_kernel_groups_to_node_sizes(&ge, &le) else {
            prop_assert!(reference_split(&groups, &lengths).is_none());
            return Ok(());
        };
        let flat_vars: Vec<Expr> = vars.iter().flatten().map(|v| trees.substitute_entries(v).unwrap()).collect();
        let node_sizes: Vec<i64> = lengths.iter().flatten().copied().collect();
        let roots: Vec<Expr> = trees.roots().iter().map(|r| r.index_sym).collect();
        let mut rv = vec![0i64; groups.len()];
        for pos in 0..total {
            let mut rest = pos;
            for g in (0..groups.len()).rev() {
                rv[g] = rest % groups[g];
                rest /= groups[g];
            }
            let val = |s: &Expr| roots.iter().position(|r| r == s).map(|g| rv[g]);
            let mut lin = 0i64;
            for (e, sz) in flat_vars.iter().zip(&node_sizes) {
                let v = e.evaluate(&val).unwrap();
                prop_assert!(0 <= v && v < *sz);
                lin = lin * sz + v;
            }
            prop_assert_eq!(lin, pos);
        }
    }
}

#[test]
fn substitute_split_vars_matches_apply() {
    let r = split_iteration_ranges(&ints(&[32, 1024, 1]), &nested(&[&[1024, 32], &[]])).unwrap();
    let targets = vec![s("y0"), s("x2"), s("x1")];
    let a = r.apply(&targets).unwrap();
    let b = tilefuse::split::substitute_split_vars(&r.getters, &targets).unwrap();
    assert_eq!(a, b);
    assert_eq!(show(&a), "[[x2 + 32*y0, x1], []]");
    let mut m: FxHashMap<Expr, i64> = FxHashMap::default();
    m.insert(s("y0"), 3);
    m.insert(s("x2"), 5);
    assert_eq!(a[0][0].evaluate_map(&m).unwrap(), 101);
}
