//! Iteration-range splitting: mapping a node's loop sizes onto a kernel's tiling groups.
//!
//! A fused kernel iterates over one flat range per tiling group (`z`, `y`, `x`, `r0_`, …). Every
//! node fused into it has its own loop sizes, grouped as (pointwise sizes, reduction sizes). Before
//! the node can be generated its sizes must be re-expressed as digits of the kernel's groups: a
//! node size may fill part of a group, or straddle the boundary between two consecutive groups.
//! This module follows Inductor's `SIMDKernel._split_iteration_ranges`,
//! `prepare_split_iteration_lengths` and `is_compatible`, with two deliberate differences from
//! Inductor:
//!
//! * a size that is left over once every group is exhausted is an error (`CantSplit`) instead of
//!   being silently dropped;
//! * the final "every group fully consumed" check is a `CantSplit` error, not an assertion, so
//!   `is_compatible` answers `false` for a node that covers fewer elements than the kernel.
//!
//! It also includes one later upstream extension: in a `z, y, x` pointwise tiling (groups
//! `[z, y, x, 1]`) a single node size may span three groups (needed to fuse a batched-matmul-shaped
//! kernel with a flat pointwise node; baseline row P5). Everywhere else a size spans at most two
//! groups, as in Inductor.
//!
//! Symbolic sizes are handled through `statically_known_*` queries: a size is only split or
//! placed when the needed relation (greater-than, divisibility, equality with 1) is provable.

use rustc_hash::FxHashMap;

use crate::error::{SymError, SymResult};
use crate::expr::Expr;
use crate::simplify as sv;

fn known_eq(a: Expr, b: Expr) -> bool {
    sv::statically_known_equals(a, b, &[])
}
fn known_one(e: Expr) -> bool {
    known_eq(e, Expr::one())
}
fn known_gt(a: Expr, b: Expr) -> bool {
    sv::statically_known_lt(b, a, &[])
}
fn known_multiple_of(a: Expr, b: Expr) -> bool {
    sv::statically_known_multiple_of(a, b)
}

/// How one node variable is recovered from the flat new variables of a split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Getter {
    /// The node dimension has size 1: its variable is constantly 0 (no new variable consumed).
    Zero,
    /// The node variable is flat new variable `k` (`v{k}`).
    Var(usize),
    /// The node dimension spans consecutive groups: its variable is the mixed-radix number with
    /// digits `v{vars[0]}, v{vars[1]}, …` (outermost first) and radices `sizes` for the digits
    /// after the first: `(…(v{vars[0]}·sizes[0] + v{vars[1]})·sizes[1] + …)`. For two groups this
    /// is `inner_size·v_outer + v_inner`. `sizes.len() == vars.len() - 1`.
    Combined {
        /// Radices of the digits after the first (inner sizes).
        sizes: Vec<Expr>,
        /// Flat variable indices of the digits, outermost first.
        vars: Vec<usize>,
    },
}

impl Getter {
    /// The node variable as an expression of the given flat variables.
    /// Error: `Value` when an index is out of range of `flat_vars`.
    pub fn apply(&self, flat_vars: &[Expr]) -> SymResult<Expr> {
        let get = |k: usize| {
            flat_vars.get(k).copied().ok_or_else(|| {
                SymError::Value(format!(
                    "split getter needs flat variable {k} but only {} were given",
                    flat_vars.len()
                ))
            })
        };
        match self {
            Getter::Zero => Ok(Expr::zero()),
            Getter::Var(k) => get(*k),
            Getter::Combined { sizes, vars } => {
                let mut acc = get(vars[0])?;
                for (s, k) in sizes.iter().zip(&vars[1..]) {
                    acc = s.mul(&acc)?.add(&get(*k)?)?;
                }
                Ok(acc)
            }
        }
    }
}

/// The result of [`split_iteration_ranges`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitResult {
    /// For each kernel group, the sizes of the loops the node's dimensions become, outermost first.
    /// Flattening these lists in group order numbers the new variables `v0, v1, …`.
    pub new_ranges: Vec<Vec<Expr>>,
    /// For each node length group, one expression per node dimension giving that dimension's
    /// variable in terms of the flat new-variable symbols `v0, v1, …` (`Expr::symbol("v{k}")`).
    pub getters: Vec<Vec<Expr>>,
    /// The same getters as data (no symbols): apply them to the range-tree symbols directly.
    pub getter_specs: Vec<Vec<Getter>>,
}

impl SplitResult {
    /// Total number of flat new variables (`Σ_g len(new_ranges[g])`).
    pub fn num_vars(&self) -> usize {
        self.new_ranges.iter().map(|r| r.len()).sum()
    }

    /// Apply the getters to `flat_vars` (one per new range, in group order), e.g. the range-tree
    /// symbols that `set_ranges(new_ranges)` returned. This is what
    /// `map_kernel_groups_to_node_sizes` does with the getters.
    pub fn apply(&self, flat_vars: &[Expr]) -> SymResult<Vec<Vec<Expr>>> {
        self.getter_specs
            .iter()
            .map(|g| g.iter().map(|x| x.apply(flat_vars)).collect())
            .collect()
    }
}

/// The flat new-variable symbol `v{k}` used by [`SplitResult::getters`].
pub fn split_var(k: usize) -> SymResult<Expr> {
    static FIRST: std::sync::OnceLock<Vec<Expr>> = std::sync::OnceLock::new();
    const CACHED: usize = 64;
    let first = FIRST.get_or_init(|| {
        (0..CACHED)
            .filter_map(|j| Expr::symbol(&format!("v{j}")).ok())
            .collect()
    });
    match first.get(k) {
        Some(v) => Ok(*v),
        None => Expr::symbol(&format!("v{k}")),
    }
}

fn fmt_list(v: &[Expr]) -> String {
    let parts: Vec<String> = v.iter().map(|e| e.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

/// Re-split a node's loop sizes onto a kernel's tiling groups (Inductor's
/// `SIMDKernel._split_iteration_ranges`).
///
/// `groups` are the kernel's per-group element counts (e.g. `[xnumel, r0_numel]`), `lengths` the
/// node's sizes per length group (e.g. `[pointwise sizes, reduction sizes]`). Node sizes are
/// consumed in order, filling groups in order:
/// * a size that is statically 1 gets the getter `0` and consumes nothing;
/// * groups whose remaining count is statically 1 are skipped;
/// * a size statically larger than the current group's remaining count `r` (and not in the last
///   group) straddles two groups: it must be a multiple of `r`; it becomes an outer digit of size
///   `r` in this group and an inner digit of size `size // r` in the next one, with getter
///   `(size // r)·v_outer + v_inner`;
/// * only when the kernel has exactly four groups whose last (reduction) group is statically 1
///   — a `z, y, x` pointwise tiling, upstream's later "bmm then pointwise" extension — a size
///   statically larger than the remaining counts `r1·r2` of the current and next group spans
///   three groups (it must be a multiple of `r1·r2`; digits `r1`, `r2`, `size // (r1·r2)`); in
///   every other tiling a size spans at most two consecutive groups, as in Inductor;
/// * otherwise the size becomes the next digit of the current group, which must be statically
///   divisible by it.
///
/// Special case (as Inductor): when every length group is empty, the result is one empty range per
/// group and one empty getter list per length group, with no coverage check.
///
/// Errors (`SymError::CantSplit`, message naming the size and the remaining groups):
/// * a group's remaining count is not statically a multiple of the size placed in it (this
///   includes a symbolic size whose relation to the remaining count is unknown);
/// * a size larger than the remaining count is not a multiple of it;
/// * a size is left over after every group is exhausted (Inductor silently drops it);
/// * some group is not fully consumed at the end (Inductor asserts).
///
/// Other errors (`Overflow`) come from building the expressions.
pub fn split_iteration_ranges(groups: &[Expr], lengths: &[Vec<Expr>]) -> SymResult<SplitResult> {
    let n = groups.len();
    for s in groups.iter().chain(lengths.iter().flatten()) {
        if s.range().hi < 0 {
            return Err(SymError::Value(format!(
                "split_iteration_ranges: size {s} is negative; sizes must be non-negative"
            )));
        }
    }
    if lengths.iter().all(|l| l.is_empty()) {
        return Ok(SplitResult {
            new_ranges: vec![Vec::new(); n],
            getters: vec![Vec::new(); lengths.len()],
            getter_specs: vec![Vec::new(); lengths.len()],
        });
    }
    let mut remaining: Vec<Expr> = groups.to_vec();
    let mut new_ranges: Vec<Vec<Expr>> = vec![Vec::new(); n];
    let mut var_count = 0usize;

    let mut add_range = |remaining: &mut Vec<Expr>, g: usize, size: Expr| -> SymResult<usize> {
        if !known_multiple_of(remaining[g], size) {
            return Err(SymError::CantSplit(format!(
                "cannot split: the remaining size {} of kernel group {g} is not statically a \
                 multiple of the node size {size} (remaining groups {}, kernel groups {})",
                remaining[g],
                fmt_list(remaining),
                fmt_list(groups)
            )));
        }
        remaining[g] = remaining[g].floordiv(&size)?;
        new_ranges[g].push(size);
        var_count += 1;
        Ok(var_count - 1)
    };

    let mut specs: Vec<Vec<Getter>> = Vec::with_capacity(lengths.len());
    let mut cur = 0usize;
    for (gi, length_group) in lengths.iter().enumerate() {
        let mut group_specs = Vec::with_capacity(length_group.len());
        for (di, &size) in length_group.iter().enumerate() {
            if known_one(size) {
                group_specs.push(Getter::Zero);
                continue;
            }
            while cur < n && known_one(remaining[cur]) {
                cur += 1;
            }
            // upstream's bmm-then-pointwise case: groups (z, y, x, 1) let one size span three
            let zyx_tiling = n == 4 && known_one(remaining[3]);
            let two = if zyx_tiling && cur + 2 < n {
                Some(remaining[cur].mul(&remaining[cur + 1])?)
            } else {
                None
            };
            if let Some(outer2) = two.filter(|o| zyx_tiling && known_gt(size, *o)) {
                if !known_multiple_of(size, outer2) {
                    return Err(SymError::CantSplit(format!(
                        "cannot split: node size {size} (dimension {di} of length group {gi}) is \
                         larger than the remaining size {outer2} of kernel groups {cur} and {} but \
                         not a multiple of it (remaining groups {}, kernel groups {})",
                        cur + 1,
                        fmt_list(&remaining),
                        fmt_list(groups)
                    )));
                }
                let (s1, s2) = (remaining[cur], remaining[cur + 1]);
                let s3 = size.floordiv(&outer2)?;
                let a = add_range(&mut remaining, cur, s1)?;
                let b = add_range(&mut remaining, cur + 1, s2)?;
                let c = add_range(&mut remaining, cur + 2, s3)?;
                group_specs.push(Getter::Combined {
                    sizes: vec![s2, s3],
                    vars: vec![a, b, c],
                });
            } else if cur + 1 < n && known_gt(size, remaining[cur]) {
                let outer_size = remaining[cur];
                if !known_multiple_of(size, outer_size) {
                    return Err(SymError::CantSplit(format!(
                        "cannot split: node size {size} (dimension {di} of length group {gi}) is \
                         larger than the remaining size {outer_size} of kernel group {cur} but not \
                         a multiple of it (remaining groups {}, kernel groups {})",
                        fmt_list(&remaining),
                        fmt_list(groups)
                    )));
                }
                let inner_size = size.floordiv(&outer_size)?;
                let outer = add_range(&mut remaining, cur, outer_size)?;
                let inner = add_range(&mut remaining, cur + 1, inner_size)?;
                group_specs.push(Getter::Combined {
                    sizes: vec![inner_size],
                    vars: vec![outer, inner],
                });
            } else if cur < n {
                group_specs.push(Getter::Var(add_range(&mut remaining, cur, size)?));
            } else {
                return Err(SymError::CantSplit(format!(
                    "cannot split: node size {size} (dimension {di} of length group {gi}) is left \
                     over after every kernel group is exhausted (remaining groups {}, kernel \
                     groups {}, node lengths {:?})",
                    fmt_list(&remaining),
                    fmt_list(groups),
                    lengths
                )));
            }
        }
        specs.push(group_specs);
    }
    if let Some(g) = remaining.iter().position(|r| !known_one(*r)) {
        return Err(SymError::CantSplit(format!(
            "cannot split: the node's sizes {lengths:?} do not cover kernel group {g} (remaining \
             groups {} after placing every size, kernel groups {}); the node iterates over fewer \
             elements than the kernel",
            fmt_list(&remaining),
            fmt_list(groups)
        )));
    }
    let vars: Vec<Expr> = (0..var_count).map(split_var).collect::<SymResult<_>>()?;
    let getters: Vec<Vec<Expr>> = specs
        .iter()
        .map(|g| g.iter().map(|x| x.apply(&vars)).collect())
        .collect::<SymResult<_>>()?;
    Ok(SplitResult {
        new_ranges,
        getters,
        getter_specs: specs,
    })
}

fn product(items: &[Expr]) -> Option<Expr> {
    Expr::product(items).ok()
}

/// Fill in the reduction size of a node that runs outside the reduction loop (Inductor's
/// `prepare_split_iteration_lengths`).
///
/// When the node has no reduction sizes (`lengths[1]` empty), `reduction_numel` is statically
/// not 1, and `Π groups == Π lengths[0] · reduction_numel` statically, returns
/// `[lengths[0], [reduction_numel]]`; otherwise returns `lengths` unchanged. Fewer than two length
/// groups, or a product that overflows i64, also leave `lengths` unchanged; length groups after
/// the second are kept as they are. Never fails.
pub fn prepare_split_iteration_lengths(
    groups: &[Expr],
    lengths: &[Vec<Expr>],
    reduction_numel: &Expr,
) -> Vec<Vec<Expr>> {
    if lengths.len() >= 2 && lengths[1].is_empty() && !known_one(*reduction_numel) {
        if let (Some(pg), Some(pl)) = (product(groups), product(&lengths[0])) {
            if let Ok(rhs) = pl.mul(reduction_numel) {
                if known_eq(pg, rhs) {
                    let mut out = vec![lengths[0].clone(), vec![*reduction_numel]];
                    out.extend(lengths[2..].iter().cloned());
                    return out;
                }
            }
        }
    }
    lengths.to_vec()
}

/// Whether a node with `lengths` can be generated inside a kernel tiled as `groups` (Inductor's
/// `SIMDKernel.is_compatible`): [`prepare_split_iteration_lengths`] followed by
/// [`split_iteration_ranges`] succeeding. `reduction_numel` defaults to 1. Unlike Inductor, a node
/// covering fewer elements than the kernel answers `false` instead of raising an assertion, and any
/// other error (overflow) also answers `false`.
pub fn is_compatible(
    groups: &[Expr],
    lengths: &[Vec<Expr>],
    reduction_numel: Option<Expr>,
) -> bool {
    let r = reduction_numel.unwrap_or_else(Expr::one);
    let prepared = prepare_split_iteration_lengths(groups, lengths, &r);
    split_iteration_ranges(groups, &prepared).is_ok()
}

/// Substitute `v{k} ↦ flat_vars[k]` in getter expressions (a helper for callers that hold only the
/// expression form of the getters). Prefer [`SplitResult::apply`], which needs no substitution.
pub fn substitute_split_vars(
    getters: &[Vec<Expr>],
    flat_vars: &[Expr],
) -> SymResult<Vec<Vec<Expr>>> {
    let mut map: FxHashMap<Expr, Expr> = FxHashMap::default();
    for (k, v) in flat_vars.iter().enumerate() {
        map.insert(split_var(k)?, *v);
    }
    getters
        .iter()
        .map(|g| g.iter().map(|e| e.subs(&map)).collect())
        .collect()
}
