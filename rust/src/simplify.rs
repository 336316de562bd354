//! Range-aware simplification, value bounds, static queries, stride extraction and loop merging.
//!
//! This is the Rust counterpart of the parts of Inductor's `SizeVarAllocator` that the SIMD/Triton
//! code generator calls:
//!
//! * [`bound`]: the value interval of an expression when some index variables are known to range
//!   over `0..length`;
//! * [`statically_known_equals`], [`statically_known_leq`], [`statically_known_lt`],
//!   [`statically_known_multiple_of`]: sound static queries (a `true` answer is a proof; `false`
//!   means "not proven");
//! * [`simplify_with_ranges`]: SR‑0…SR‑4 plus [`join_dimensions`] (JD‑1, JD‑2), iterated to a
//!   fixed point;
//! * [`expand_floor_div`], [`combine_modular_indexing_pairs`], [`stride_vars`], [`offset_var`];
//! * [`simplify_loops`]: Inductor's `_simplify_loops` (SL‑0…SL‑4), with the optional
//!   `index_prevent_reordering` contiguous formula.
//!
//! The decision procedure behind every static query: build the canonical difference of the two
//! sides (sums are expanded polynomials, so identical polynomials cancel to the integer 0), bound
//! it with interval arithmetic under the variable ranges and, when that is not conclusive and the
//! difference has a shape where it can help, first replace symbols that the difference is monotone
//! in by the end of their range that minimizes it (`x < s0` for `x ∈ [0, s0)` becomes
//! `s0 - (s0 - 1) - 1 ≥ 0`). Every step only relaxes the claim, so a `true` answer is sound.
//!
//! Floor semantics throughout; errors are `SymError` values, never panics.

use std::borrow::Cow;
use std::sync::OnceLock;

use rustc_hash::FxHashMap;

use crate::error::{SymError, SymResult};
use crate::expr::{gcd, Expr, Node, SymKind};
use crate::interval::{Interval, POS_INF};

/// Variable ranges: `(index symbol, its length)` pairs. The symbol ranges over `0..length`
/// (`0 ≤ v ≤ length - 1`); a symbolic length bounds it by its own upper bound (usually +∞), and the
/// static queries also use `v ≤ length - 1` symbolically.
pub type VarRanges = [(Expr, Expr)];

/// Upper limit of SR‑0…SR‑3 rounds; each round strictly rewrites, this only guards pathologies.
const MAX_ROUNDS: usize = 64;

/// The integers 0 and 1, interned once (interning takes the global lock).
fn zero() -> Expr {
    static Z: OnceLock<Expr> = OnceLock::new();
    *Z.get_or_init(Expr::zero)
}
fn one() -> Expr {
    static O: OnceLock<Expr> = OnceLock::new();
    *O.get_or_init(Expr::one)
}

// =============================================================================== bounds

#[inline]
fn range_len(s: Expr, ranges: &VarRanges) -> Option<Expr> {
    ranges.iter().find(|(v, _)| *v == s).map(|(_, n)| *n)
}

/// Interval of a range variable with length `len`: `[0, max(0, hi(len) - 1)] ∩ own range`
/// (Inductor's `ValueRanges(0, max(0, n - 1))`; the own range is kept when it is tighter).
fn var_interval(own: Interval, len: Expr) -> Interval {
    let hl = len.range().hi;
    let hi = if hl >= POS_INF {
        POS_INF
    } else {
        (hl - 1).max(0)
    };
    let r = Interval { lo: 0, hi };
    let both = own.intersect(&r);
    if both.lo > both.hi {
        r
    } else {
        both
    }
}

/// Value interval of `e` when each symbol of `ranges` lies in `[0, hi(length) - 1]` (intersected
/// with its own assumption range) and every other symbol in its assumption range.
///
/// Recursive interval arithmetic (`interval.rs`) over the expression tree: sums and products by
/// their terms, `FloorDiv`/`CleanDiv` by floor division of intervals, `ModularIndexing(a, b, c)`
/// as `(a // b) % c`, `Mod`, `Min`, `Max` elementwise. Sound: every value the expression takes at
/// a point of the domain lies in the result (possibly with infinite ends). Inductor's
/// `bound_sympy` with the kernel's `var_to_range`. Never fails.
pub fn bound(e: Expr, ranges: &VarRanges) -> Interval {
    if ranges.is_empty() {
        return e.range();
    }
    match e.node() {
        Node::Int(v) => Interval::point(*v),
        Node::Sym(_) => match range_len(e, ranges) {
            Some(n) => var_interval(e.range(), n),
            None => e.range(),
        },
        Node::Add { constant, terms } => {
            let mut r = Interval::point(*constant);
            for &(t, c) in terms.iter() {
                r = r.add(&bound(t, ranges).scale(c));
            }
            r
        }
        Node::Mul { factors } => {
            let mut r = Interval::point(1);
            for &(f, k) in factors.iter() {
                r = r.mul(&bound(f, ranges).pow(k));
            }
            r
        }
        Node::FloorDiv(a, b) | Node::CleanDiv(a, b) => {
            bound(*a, ranges).floordiv(&bound(*b, ranges))
        }
        Node::ModularIndexing(a, b, c) => bound(*a, ranges)
            .floordiv(&bound(*b, ranges))
            .floormod(&bound(*c, ranges)),
        Node::Mod(a, b) => bound(*a, ranges).floormod(&bound(*b, ranges)),
        Node::Min(args) => args
            .iter()
            .skip(1)
            .fold(bound(args[0], ranges), |r, a| r.min(&bound(*a, ranges))),
        Node::Max(args) => args
            .iter()
            .skip(1)
            .fold(bound(args[0], ranges), |r, a| r.max(&bound(*a, ranges))),
    }
}

// =============================================================================== static queries

/// Sign of a quantity: +1 (≥ 0), -1 (≤ 0), 0 (unknown).
fn sign_of(iv: Interval) -> i8 {
    if iv.lo >= 0 {
        1
    } else if iv.hi <= 0 {
        -1
    } else {
        0
    }
}

/// Is the interval bound of `e` exact enough that the symbolic path cannot add anything?
/// (An integer, or a symbol whose bound is a plain number range.)
fn interval_exact(e: Expr, ranges: &VarRanges) -> bool {
    match e.node() {
        Node::Int(_) => true,
        Node::Sym(_) => range_len(e, ranges).is_none_or(|n| n.as_int().is_some()),
        _ => false,
    }
}

/// Could monotone substitution prove more than the interval bound of `e`? Only when `e` has a
/// non-linear monomial (cancellation like `s0*s1 - s0`) or a range variable of symbolic length.
fn worth_substituting(e: Expr, ranges: &VarRanges) -> bool {
    let sym_len = |s: Expr| range_len(s, ranges).is_some_and(|n| n.as_int().is_none());
    match e.node() {
        Node::Add { terms, .. } => terms.iter().any(|&(t, _)| match t.node() {
            Node::Mul { .. } => true,
            Node::Sym(_) => sym_len(t),
            _ => false,
        }),
        Node::Mul { .. } => true,
        Node::Sym(_) => sym_len(e),
        _ => false,
    }
}

/// Direction in which `e` (a polynomial in atoms) varies with symbol `s`: +1 non-decreasing,
/// -1 non-increasing, `None` if unknown or if `s` occurs inside a non-symbol atom.
fn monotone_direction(e: Expr, s: Expr, ranges: &VarRanges) -> Option<i8> {
    let (_, terms) = match e.node() {
        Node::Add { constant, terms } => (*constant, &terms[..]),
        _ => return None,
    };
    let s_nonneg = bound(s, ranges).lo >= 0;
    let mut dir: i8 = 0;
    for &(t, c) in terms {
        let fs = factors_of(&t);
        let mut k_s = 0u32;
        let mut rest_sign: i8 = if c > 0 { 1 } else { -1 };
        for &(f, k) in fs.iter() {
            if f == s {
                k_s = k;
                continue;
            }
            if !f.is_symbol() && f.has(&s) {
                return None;
            }
            let fsg = if k.is_multiple_of(2) {
                1
            } else {
                sign_of(bound(f, ranges))
            };
            rest_sign *= fsg;
        }
        if k_s == 0 {
            continue;
        }
        if k_s.is_multiple_of(2) && !s_nonneg {
            return None;
        }
        if rest_sign == 0 || (dir != 0 && dir != rest_sign) {
            return None;
        }
        dir = rest_sign;
    }
    (dir != 0).then_some(dir)
}

/// Symbols that occur directly as terms or monomial factors of `e`.
fn direct_symbols(e: Expr) -> Vec<Expr> {
    let mut out: Vec<Expr> = Vec::new();
    if let Node::Add { terms, .. } = e.node() {
        for &(t, _) in terms.iter() {
            match t.node() {
                Node::Sym(_) if !out.contains(&t) => out.push(t),
                Node::Mul { factors } => {
                    for &(f, _) in factors.iter() {
                        if f.is_symbol() && !out.contains(&f) {
                            out.push(f)
                        }
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// Replace symbols in which `e` is monotone by the end of their range that minimizes `e`:
/// first the range variables (whose upper end may be symbolic, `length - 1`), then the other
/// symbols (numeric ends only). The result is ≤ `e` at every point of the domain.
fn monotone_lower(e: Expr, ranges: &VarRanges) -> SymResult<Expr> {
    let mut cur = e;
    let mut done: Vec<Expr> = Vec::new();
    for phase in 0..2 {
        let mut progress = true;
        while progress {
            progress = false;
            if cur.as_int().is_some() {
                return Ok(cur);
            }
            // a lone coefficient-1 term (not a sum): its interval bound is as good as it gets
            if !matches!(cur.node(), Node::Add { .. }) {
                return Ok(cur);
            }
            for s in direct_symbols(cur) {
                if done.contains(&s) {
                    continue;
                }
                let len = range_len(s, ranges);
                if (phase == 0) != len.is_some() {
                    continue;
                }
                let Some(dir) = monotone_direction(cur, s, ranges) else {
                    continue;
                };
                let b = bound(s, ranges);
                let value = if dir > 0 {
                    if !b.lo_finite() {
                        continue;
                    }
                    Expr::int(b.lo as i64)
                } else {
                    match len {
                        Some(n) if n.as_int().is_none() => {
                            if n.has(&s) {
                                continue;
                            }
                            n.add_int(-1)?
                        }
                        _ => {
                            if !b.hi_finite() {
                                continue;
                            }
                            Expr::int(b.hi as i64)
                        }
                    }
                };
                let mut m: FxHashMap<Expr, Expr> = FxHashMap::default();
                m.insert(s, value);
                cur = cur.subs(&m)?;
                done.push(s);
                progress = true;
                break;
            }
        }
    }
    Ok(cur)
}

/// Is `e ≥ 0` at every point of the domain? Interval bound first, then monotone substitution.
fn known_nonneg(e: Expr, ranges: &VarRanges) -> bool {
    if let Some(v) = e.as_int() {
        return v >= 0;
    }
    if bound(e, ranges).lo >= 0 {
        return true;
    }
    if !worth_substituting(e, ranges) {
        return false;
    }
    match monotone_lower(e, ranges) {
        Ok(l) => bound(l, ranges).lo >= 0,
        Err(_) => false,
    }
}

/// `a < b` (strict) or `a ≤ b` proven.
fn known_cmp(a: Expr, b: Expr, strict: bool, ranges: &VarRanges) -> bool {
    if a == b {
        return !strict;
    }
    if range_len(a, ranges) == Some(b) {
        // v < length (common with symbolic lengths: x0 < s0 for x0 ∈ 0..s0)
        return true;
    }
    let (ba, bb) = (bound(a, ranges), bound(b, ranges));
    if ba.hi_finite() || bb.lo_finite() {
        let ok = if strict {
            ba.hi < bb.lo
        } else {
            ba.hi <= bb.lo
        };
        if ok {
            return true;
        }
    }
    if interval_exact(a, ranges) && interval_exact(b, ranges) {
        return false;
    }
    let diff = match b
        .sub(&a)
        .and_then(|d| if strict { d.add_int(-1) } else { Ok(d) })
    {
        Ok(d) => d,
        Err(_) => return false,
    };
    known_nonneg(diff, ranges)
}

/// Is `a == b` at every point of the domain? True iff `a` and `b` are the same canonical
/// expression, or their expanded difference `a - b` is the integer 0, or its [`bound`] under
/// `ranges` is `[0, 0]`. Sound (never true when some point of the domain disagrees); incomplete.
/// Inductor's `statically_known_equals`. Overflow while forming the difference → `false`.
pub fn statically_known_equals(a: Expr, b: Expr, ranges: &VarRanges) -> bool {
    if a == b {
        return true;
    }
    let Ok(d) = a.sub(&b) else { return false };
    if let Some(v) = d.as_int() {
        return v == 0;
    }
    let r = bound(d, ranges);
    r.lo == 0 && r.hi == 0
}

/// Is `a ≤ b` at every point of the domain (symbols of `ranges` in `0..length`, other symbols in
/// their assumption ranges)? Decided by the interval bounds of both sides, then of the expanded
/// difference `b - a`, then by monotone substitution (a range variable `v` of symbolic length `n`
/// may be replaced by `n - 1`). Sound, incomplete. Inductor's `statically_known_leq`.
pub fn statically_known_leq(a: Expr, b: Expr, ranges: &VarRanges) -> bool {
    known_cmp(a, b, false, ranges)
}

/// Is `a < b` at every point of the domain? As [`statically_known_leq`] with `b - a - 1 ≥ 0`.
/// Inductor's `statically_known_lt` (and `statically_known_gt(a, b)` is `lt(b, a)`).
pub fn statically_known_lt(a: Expr, b: Expr, ranges: &VarRanges) -> bool {
    known_cmp(a, b, true, ranges)
}

/// Does the monomial `d` divide the monomial `t` (factor-wise exponents)?
fn mono_divides(t: &[(Expr, u32)], d: &[(Expr, u32)]) -> bool {
    d.iter()
        .all(|(f, e)| t.iter().any(|(g, k)| g == f && k >= e))
}

/// Factors `(factor, exponent)` of a monomial, borrowed from the interned node when possible.
type Factors = Cow<'static, [(Expr, u32)]>;
/// Terms `(term, coefficient)` of a sum, borrowed from the interned node when possible.
type Terms = Cow<'static, [(Expr, i64)]>;

/// The factors of a term (a non-integer, non-sum expression) as a slice.
fn factors_of(t: &Expr) -> Factors {
    match t.node() {
        Node::Mul { factors } => Cow::Borrowed(&factors[..]),
        _ => Cow::Owned(vec![(*t, 1)]),
    }
}

/// Is `constant + Σ coeff·term` divisible by the single term `c·mono` (structurally)?
fn parts_multiple_of(constant: i64, terms: &[(Expr, i64)], c: i64, mono: &[(Expr, u32)]) -> bool {
    if c == 0 {
        return false;
    }
    if constant != 0 && (!mono.is_empty() || constant.checked_rem(c) != Some(0)) {
        return false;
    }
    terms.iter().all(|(t, k)| {
        k.checked_rem(c) == Some(0) && (mono.is_empty() || mono_divides(&factors_of(t), mono))
    })
}

/// `(coefficient, monomial factors)` if `e` is a single term `c·m` (integers: empty monomial).
fn single_term(e: Expr) -> Option<(i64, Factors)> {
    match e.node() {
        Node::Int(v) => Some((*v, Cow::Owned(vec![]))),
        Node::Add { constant: 0, terms } if terms.len() == 1 => {
            Some((terms[0].1, factors_of(&terms[0].0)))
        }
        Node::Add { .. } => None,
        _ => Some((1, factors_of(&e))),
    }
}

fn linear_parts(e: &Expr) -> (i64, Terms) {
    match e.node() {
        Node::Int(v) => (*v, Cow::Owned(vec![])),
        Node::Add { constant, terms } => (*constant, Cow::Borrowed(&terms[..])),
        _ => (0, Cow::Owned(vec![(*e, 1)])),
    }
}

/// Is `a` a multiple of `b` for every value of the symbols? Structural: integers by `%`;
/// `a = 0`, `b = ±1` or `a = b` trivially; for a single-term `b = c·m`, every term of `a` (and its
/// constant) must be divisible by `c` and by the monomial `m` (`64*s0` is a multiple of `16`,
/// `s0*s1` of `s1`, `s0` not of `16`); for a multi-term `b`, `a` must be an integer multiple
/// `k·b`. Sound: it exhibits an integer polynomial quotient. `b = 0` → `false`.
/// Inductor's `statically_known_multiple_of`.
pub fn statically_known_multiple_of(a: Expr, b: Expr) -> bool {
    if let Some(y) = b.as_int() {
        if y == 0 {
            return false;
        }
        if y == 1 || y == -1 {
            return true;
        }
    }
    if let (Some(x), Some(y)) = (a.as_int(), b.as_int()) {
        return x.checked_rem(y) == Some(0);
    }
    if a.as_int() == Some(0) || a == b {
        return true;
    }
    if let Some((c, mono)) = single_term(b) {
        let (ac, at) = linear_parts(&a);
        return parts_multiple_of(ac, &at, c, &mono);
    }
    // multi-term divisor: a == k·b for an integer k read off b's first term
    let (_, bt) = linear_parts(&b);
    let (_, at) = linear_parts(&a);
    let Some(&(t0, c0)) = bt.first() else {
        return false;
    };
    let Some(&(_, ka)) = at.iter().find(|(t, _)| *t == t0) else {
        return false;
    };
    if ka.checked_rem(c0) != Some(0) {
        return false;
    }
    let k = ka / c0;
    matches!(b.scale(k), Ok(kb) if kb == a)
}

// =============================================================================== join_dimensions

/// One top-level term `coeff · rest · f` of a sum, where `f` is a ModularIndexing or FloorDiv
/// factor (exponent 1) and `rest` the remaining monomial (1 if none).
#[derive(Clone, Copy)]
struct DivTerm {
    idx: usize,
    coeff: i64,
    rest: Expr,
    f: Expr,
}

fn div_terms(terms: &[(Expr, i64)]) -> SymResult<Vec<DivTerm>> {
    let mut out = Vec::new();
    for (idx, &(t, coeff)) in terms.iter().enumerate() {
        match t.node() {
            Node::ModularIndexing(..) | Node::FloorDiv(..) => out.push(DivTerm {
                idx,
                coeff,
                rest: one(),
                f: t,
            }),
            Node::Mul { factors } => {
                for (j, &(f, k)) in factors.iter().enumerate() {
                    if k == 1 && matches!(f.node(), Node::ModularIndexing(..) | Node::FloorDiv(..))
                    {
                        let rest: Vec<(Expr, u32)> = factors
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| *i != j)
                            .map(|(_, x)| *x)
                            .collect();
                        out.push(DivTerm {
                            idx,
                            coeff,
                            rest: Expr::from_monomial(&rest),
                            f,
                        });
                    }
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Scale `(coeff, rest)` times `m` when `m` is a single term; `None` otherwise or on overflow.
fn scale_by(coeff: i64, rest: Expr, m: Expr) -> SymResult<Option<(i64, Expr)>> {
    if let Some(v) = m.as_int() {
        return Ok(coeff.checked_mul(v).map(|c| (c, rest)));
    }
    match m.node() {
        Node::Add { constant: 0, terms } if terms.len() == 1 => {
            let (t, k) = terms[0];
            let Some(c) = coeff.checked_mul(k) else {
                return Ok(None);
            };
            Ok(Some((c, rest.mul(&t)?)))
        }
        Node::Add { .. } => Ok(None),
        _ => Ok(Some((coeff, rest.mul(&m)?))),
    }
}

/// Replace terms `i1`, `i2` of the sum by `coeff·rest·new`, then join again.
fn replace_pair(
    e: Expr,
    i1: usize,
    i2: usize,
    coeff: i64,
    rest: Expr,
    new: Expr,
) -> SymResult<Expr> {
    let Node::Add { constant, terms } = e.node() else {
        return Ok(e);
    };
    let mut items: Vec<(Expr, i64)> = Vec::with_capacity(terms.len());
    for (i, &tc) in terms.iter().enumerate() {
        if i != i1 && i != i2 {
            items.push(tc);
        }
    }
    let scaled = if rest == one() { new } else { rest.mul(&new)? };
    items.push((scaled, coeff));
    join_dimensions(Expr::linear_combination(*constant, &items)?)
}

/// Join adjacent ModularIndexing/FloorDiv "digits" of the same base in a top-level sum (Inductor's
/// `join_dimensions`), to a fixed point:
///
/// * JD‑1: `a·MI(b, d, m1) + a·m1·MI(b, d·m1, m2) → a·MI(b, d, m1·m2)`;
/// * JD‑2: `a·MI(b, d, m1) + a·m1·FloorDiv(b, d·m1) → a·FloorDiv(b, d)`.
///
/// `a` is any non-zero single-term scale (integer coefficient times a monomial, e.g. `s2` in
/// `s2*MI(x1, 1, s1) + s1*s2*FloorDiv(x1, s1) → s2*x1`); `m1` must be a single term, and `m1`,
/// `m2` provably positive (from their symbols' assumptions). All JD‑1
/// pairs are tried before JD‑2, as upstream. Sound for positive `d`, `m1`, `m2` in floor semantics:
/// with `q = b // d`, `q % m1 + m1·((q // m1) % m2) = q % (m1·m2)` and `q % m1 + m1·(q // m1) = q`.
/// Anything that is not a sum containing a ModularIndexing term is returned unchanged. Errors only
/// from the constructors (overflow).
pub fn join_dimensions(e: Expr) -> SymResult<Expr> {
    let Node::Add { terms, .. } = e.node() else {
        return Ok(e);
    };
    let has_mi = terms.iter().any(|(t, _)| match t.node() {
        Node::ModularIndexing(..) => true,
        Node::Mul { factors } => factors
            .iter()
            .any(|(f, _)| matches!(f.node(), Node::ModularIndexing(..))),
        _ => false,
    });
    if !has_mi {
        return Ok(e);
    }
    let dts = div_terms(terms)?;
    // JD-1
    for t1 in &dts {
        let Node::ModularIndexing(b, d, m1) = t1.f.node() else {
            continue;
        };
        if !m1.is_positive() {
            continue;
        }
        let Some((c2, r2)) = scale_by(t1.coeff, t1.rest, *m1)? else {
            continue;
        };
        let Ok(d2) = d.mul(m1) else { continue };
        for t2 in &dts {
            if t2.idx == t1.idx {
                continue;
            }
            let Node::ModularIndexing(b2, dd, m2) = t2.f.node() else {
                continue;
            };
            if b2 == b && *dd == d2 && t2.coeff == c2 && t2.rest == r2 && m2.is_positive() {
                let Ok(m12) = m1.mul(m2) else { continue };
                let new = b.modular_indexing(d, &m12)?;
                return replace_pair(e, t1.idx, t2.idx, t1.coeff, t1.rest, new);
            }
        }
    }
    // JD-2
    for t1 in &dts {
        let Node::ModularIndexing(b, d, m1) = t1.f.node() else {
            continue;
        };
        if !m1.is_positive() {
            continue;
        }
        let Some((c2, r2)) = scale_by(t1.coeff, t1.rest, *m1)? else {
            continue;
        };
        let Ok(d2) = d.mul(m1) else { continue };
        for t2 in &dts {
            if t2.idx == t1.idx {
                continue;
            }
            let Node::FloorDiv(b2, dd) = t2.f.node() else {
                continue;
            };
            if b2 == b && *dd == d2 && t2.coeff == c2 && t2.rest == r2 {
                let new = b.floordiv(d)?;
                return replace_pair(e, t1.idx, t2.idx, t1.coeff, t1.rest, new);
            }
        }
    }
    Ok(e)
}

// =============================================================================== simplify_with_ranges

/// SR‑1 (Inductor's `remove_zero_terms`): if `base ≥ 0` is known, drop every range variable `v`
/// with `base = v + rest` (coefficient exactly 1, `rest` free of `v`), `d | rest` structurally and
/// `v < d` known. Sound: `⌊(v + k·d)/d⌋ = k` for `0 ≤ v < d`.
///
/// Generalized for an integer `d` (beyond Inductor's rule, which needs `d | rest`): with `g` the
/// gcd of `d` and of `rest`'s integer coefficients and constant, drop `v` when `v < g` is known.
/// Sound: `rest = g·k` and `d = g·m` for integers `k`, `m`, so `(v + rest)/d = (k + v/g)/m` with
/// `0 ≤ v/g < 1`, and `⌊y/m⌋` is constant on `[k, k+1)` (its steps fall on integers). This is
/// what splits a split reduction's rows across a batch boundary: `⌊(i1 + 8192·r0)/8388608⌋` with
/// `i1 < 8192` is `⌊r0/1024⌋`.
fn remove_zero_terms(base: Expr, d: Expr, ranges: &VarRanges) -> SymResult<Expr> {
    if ranges.is_empty() || !known_nonneg(base, ranges) {
        return Ok(base);
    }
    let Some((dc, dm)) = single_term(d) else {
        return Ok(base);
    };
    let mut cur = base;
    loop {
        match cur.node() {
            Node::Sym(_) => {
                if range_len(cur, ranges).is_some() && dc != 0 && known_cmp(cur, d, true, ranges) {
                    return Ok(zero());
                }
                return Ok(cur);
            }
            Node::Add { constant, terms } => {
                let mut found = None;
                for (i, &(v, k)) in terms.iter().enumerate() {
                    if k != 1 || !v.is_symbol() || range_len(v, ranges).is_none() {
                        continue;
                    }
                    let others_free = terms
                        .iter()
                        .enumerate()
                        .all(|(j, (t, _))| j == i || !t.has(&v));
                    if !others_free {
                        continue;
                    }
                    let rest_ok = *constant == 0
                        || (dm.is_empty() && dc != 0 && constant.checked_rem(dc) == Some(0));
                    let terms_ok = terms.iter().enumerate().all(|(j, (t, kk))| {
                        j == i
                            || (dc != 0
                                && kk.checked_rem(dc) == Some(0)
                                && (dm.is_empty() || mono_divides(&factors_of(t), &dm)))
                    });
                    if rest_ok && terms_ok && known_cmp(v, d, true, ranges) {
                        found = Some(i);
                        break;
                    }
                    if dm.is_empty() && dc > 1 {
                        // the gcd generalization (see above): g = gcd(d, rest's coefficients)
                        let mut g = gcd(dc, *constant);
                        for (j, &(_, kk)) in terms.iter().enumerate() {
                            if j != i {
                                g = gcd(g, kk);
                            }
                        }
                        let g = g.abs();
                        if g > 1 && g < dc && known_cmp(v, Expr::int(g), true, ranges) {
                            found = Some(i);
                            break;
                        }
                    }
                }
                let Some(i) = found else { return Ok(cur) };
                let rest: Vec<(Expr, i64)> = terms
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .map(|(_, x)| *x)
                    .collect();
                cur = Expr::build_sum(*constant, rest)?;
            }
            _ => return Ok(cur),
        }
    }
}

/// FloorDiv under ranges: SR‑3 (SR‑1 on the base), then `0 ≤ base < d → 0`.
fn visit_floordiv(orig: Expr, a: Expr, d: Expr, ranges: &VarRanges) -> SymResult<Expr> {
    let base = remove_zero_terms(a, d, ranges)?;
    if known_nonneg(base, ranges) && known_cmp(base, d, true, ranges) {
        return Ok(zero());
    }
    if let Node::FloorDiv(oa, od) = orig.node() {
        if *oa == base && *od == d {
            return Ok(orig);
        }
    }
    base.floordiv(&d)
}

/// ModularIndexing under ranges: SR‑1 on the base, then SR‑2 `0 ≤ base < m·d → base // d`.
fn visit_mi(orig: Expr, a: Expr, d: Expr, m: Expr, ranges: &VarRanges) -> SymResult<Expr> {
    let base = remove_zero_terms(a, d, ranges)?;
    if bound(d, ranges).lo >= 1 && bound(m, ranges).lo >= 1 && known_nonneg(base, ranges) {
        let md_int = d
            .as_int()
            .zip(m.as_int())
            .and_then(|(x, y)| x.checked_mul(y));
        let fits = match md_int {
            // integer m·d and an exactly-bounded base: the interval decides (no interning)
            Some(v) if interval_exact(base, ranges) => bound(base, ranges).hi < v as i128,
            _ => d.mul(&m).is_ok_and(|md| known_cmp(base, md, true, ranges)),
        };
        if fits {
            return base.floordiv(&d);
        }
    }
    if let Node::ModularIndexing(oa, od, om) = orig.node() {
        if *oa == base && *od == d && *om == m {
            return Ok(orig);
        }
    }
    base.modular_indexing(&d, &m)
}

/// One bottom-up pass of the range rules over every FloorDiv and ModularIndexing node.
fn sr_pass(e: Expr, ranges: &VarRanges) -> SymResult<Expr> {
    match e.node() {
        Node::Int(_) | Node::Sym(_) => Ok(e),
        Node::Add { constant, terms } => {
            let mut out: Option<Vec<(Expr, i64)>> = None;
            for (i, &(t, c)) in terms.iter().enumerate() {
                let n = sr_pass(t, ranges)?;
                if n != t && out.is_none() {
                    let mut v = Vec::with_capacity(terms.len());
                    v.extend_from_slice(&terms[..i]);
                    out = Some(v);
                }
                if let Some(v) = out.as_mut() {
                    v.push((n, c));
                }
            }
            match out {
                None => Ok(e),
                Some(v) => Expr::linear_combination(*constant, &v),
            }
        }
        Node::Mul { factors } => {
            let mut out: Option<Vec<(Expr, u32)>> = None;
            for (i, &(f, k)) in factors.iter().enumerate() {
                let n = sr_pass(f, ranges)?;
                if n != f && out.is_none() {
                    let mut v = Vec::with_capacity(factors.len());
                    v.extend_from_slice(&factors[..i]);
                    out = Some(v);
                }
                if let Some(v) = out.as_mut() {
                    v.push((n, k));
                }
            }
            match out {
                None => Ok(e),
                Some(v) => {
                    let mut acc = one();
                    for (f, k) in v {
                        acc = acc.mul(&f.pow(k)?)?;
                    }
                    Ok(acc)
                }
            }
        }
        Node::FloorDiv(a, b) => {
            let (a2, b2) = (sr_pass(*a, ranges)?, sr_pass(*b, ranges)?);
            visit_floordiv(e, a2, b2, ranges)
        }
        Node::ModularIndexing(a, b, c) => {
            let (a2, b2, c2) = (
                sr_pass(*a, ranges)?,
                sr_pass(*b, ranges)?,
                sr_pass(*c, ranges)?,
            );
            visit_mi(e, a2, b2, c2, ranges)
        }
        Node::CleanDiv(..) | Node::Mod(..) | Node::Min(_) | Node::Max(_) => {
            let mut changed = false;
            let r = e.rebuild(&mut |c| {
                let n = sr_pass(c, ranges)?;
                changed |= n != c;
                Ok(n)
            })?;
            Ok(if changed { r } else { e })
        }
    }
}

/// Simplify `e` knowing that each symbol of `ranges` lies in `0..length` (Inductor's
/// `simplify_with_ranges`), to a fixed point:
///
/// * SR‑0: [`join_dimensions`] on the top-level sum (the expression is canonical already);
/// * SR‑1 `remove_zero_terms` on the base of every FloorDiv and ModularIndexing: drop a range
///   variable `v` (coefficient 1) when the rest is a multiple of the divisor `d` and `v < d`, or
///   (integer `d`, tilefuse's generalization) when `v` is below the gcd of `d` and the rest's
///   coefficients;
/// * SR‑2: `ModularIndexing(base, d, m) → base // d` when `0 ≤ base < m·d` (so
///   `ModularIndexing(a, 1, m) → a` when `0 ≤ a < m`);
/// * SR‑3: `FloorDiv(base, d)` with SR‑1 applied to its base, and `→ 0` when `0 ≤ base < d`;
/// * SR‑4: repeat until a round changes nothing (stops at the first unchanged round).
///
/// Static facts come from [`bound`] and the monotone-substitution prover of the
/// `statically_known_*` queries, so symbolic lengths work (`FloorDiv(x0 + s0*x1, s0)` with
/// `x0 ∈ 0..s0` → `x1`). Preconditions: divisors and moduli positive (as everywhere in indexing).
/// The result equals `e` at every point of the domain. Errors: overflow or division by zero from
/// the constructors.
pub fn simplify_with_ranges(e: Expr, ranges: &VarRanges) -> SymResult<Expr> {
    for (v, len) in ranges {
        if len.range().hi < 1 {
            return Err(SymError::Value(format!(
                "simplify_with_ranges: {v} has length {len}, an empty range; every length must be \
                 at least 1"
            )));
        }
    }
    let mut cur = e;
    for _ in 0..MAX_ROUNDS {
        let joined = join_dimensions(cur)?;
        let next = sr_pass(joined, ranges)?;
        if next == joined {
            return Ok(next);
        }
        cur = next;
    }
    Ok(cur)
}

// =============================================================================== expand_floor_div

/// Rewrite a sum `Σ c_i·v_i + FloorDiv(v, D)` as one division `(Σ c_i·D·v_i + v) // D`, returning
/// `(numerator, D)` (Inductor's `expand_floor_div`; `None` where it returns `False`).
///
/// Preconditions, exactly as upstream: `e` is a sum of at least two terms without a constant; each
/// term is either `c·v` (integer `c ≠ 1`, symbol `v`) or `FloorDiv(v, D)` with coefficient 1,
/// symbol `v` and integer `D`; exactly one FloorDiv term; every symbol provably ≥ 0. Any other
/// shape (a bare symbol with coefficient 1, a constant, a product like `2*s1*x1`, two FloorDivs,
/// a scaled FloorDiv) gives `None`, as does overflow. Sound: `Σ c·v + ⌊v/D⌋ = ⌊(Σ c·D·v + v)/D⌋`.
pub fn expand_floor_div(e: Expr) -> Option<(Expr, Expr)> {
    let Node::Add { constant, terms } = e.node() else {
        return None;
    };
    if *constant != 0 || terms.len() < 2 {
        return None;
    }
    let mut fd: Option<(Expr, Expr, i64)> = None;
    for &(t, c) in terms.iter() {
        match t.node() {
            Node::Sym(_) => {
                if c == 1 || !t.is_nonneg() {
                    return None;
                }
            }
            Node::FloorDiv(v, d) | Node::CleanDiv(v, d) => {
                if c != 1 || fd.is_some() || !v.is_symbol() || !v.is_nonneg() {
                    return None;
                }
                let dv = d.as_int()?;
                fd = Some((*v, *d, dv));
            }
            _ => return None,
        }
    }
    let (v_fd, d, dv) = fd?;
    let mut items: Vec<(Expr, i64)> = Vec::with_capacity(terms.len());
    items.push((v_fd, 1));
    for &(t, c) in terms.iter() {
        if t.is_symbol() {
            items.push((t, c.checked_mul(dv)?));
        }
    }
    let n = Expr::linear_combination(0, &items).ok()?;
    Some((n, d))
}

// =============================================================================== combine_modular_indexing_pairs

/// Inductor's `combine_modular_indexing_pairs` (top level only):
/// `ModularIndexing(ModularIndexing(x, 1, a), 1, b) → ModularIndexing(x, 1, b)` when both
/// divisors are the integer 1, `a` and `b` are positive integers with `a % b == 0` and `x` is a
/// symbol that is provably ≥ 0. Anything else is returned unchanged. (The constructor already
/// folds such pairs, so this mostly returns its input.) Errors only from the constructor.
pub fn combine_modular_indexing_pairs(e: Expr) -> SymResult<Expr> {
    let Node::ModularIndexing(inner, d1, m1) = e.node() else {
        return Ok(e);
    };
    let (Some(1), Some(b)) = (d1.as_int(), m1.as_int()) else {
        return Ok(e);
    };
    let Node::ModularIndexing(x, d2, m2) = inner.node() else {
        return Ok(e);
    };
    let (Some(1), Some(a)) = (d2.as_int(), m2.as_int()) else {
        return Ok(e);
    };
    if b <= 0 || a <= 0 || !x.is_symbol() || !x.is_nonneg() || a % b != 0 {
        return Ok(e);
    }
    x.modular_indexing(&one(), m1)
}

// =============================================================================== strides

fn zero_map(vars: &[Expr]) -> FxHashMap<Expr, Expr> {
    let mut m: FxHashMap<Expr, Expr> = FxHashMap::default();
    for v in vars {
        if v.is_symbol() {
            m.insert(*v, zero());
        }
    }
    m
}

/// The stride of each variable of `vars` in `e`: `e(v = 1, other vars = 0) − e(all vars = 0)`
/// (finite differences at 0, Inductor's `stride_vars` with the support equal to `vars`). Shape:
/// one stride per entry of `vars`; a non-symbol entry (e.g. the integer 0) gets stride 0. Exact
/// for affine indices; for others it is the first difference at the origin (upstream behaviour:
/// `10*MI(x+1, 1, 2)` has stride −10). Errors only from the constructors.
pub fn stride_vars(e: Expr, vars: &[Expr]) -> SymResult<Vec<Expr>> {
    let mut map = zero_map(vars);
    let f0 = e.subs(&map)?;
    let mut out = Vec::with_capacity(vars.len());
    for v in vars {
        if !v.is_symbol() || !e.has(v) {
            out.push(zero());
            continue;
        }
        map.insert(*v, one());
        let f1 = e.subs(&map)?;
        map.insert(*v, zero());
        out.push(f1.sub(&f0)?);
    }
    Ok(out)
}

/// `e` with every variable of `vars` set to 0 (Inductor's `offset_var`). Errors only from the
/// constructors.
pub fn offset_var(e: Expr, vars: &[Expr]) -> SymResult<Expr> {
    e.subs(&zero_map(vars))
}

// =============================================================================== simplify_loops

/// Result of [`simplify_loops`]: the merged loop nest and how old loop variables map onto it.
///
/// Old dimension `i` either survives as new dimension `old_to_new[i] = Some(k)` (it is the
/// innermost member of `groups[k]`), or is gone (`None`: it had size 1, or it was merged into an
/// inner dimension). `groups[k]` lists the old dimensions merged into new dimension `k`, innermost
/// first; `new_sizes[k]` is the product of their `old_sizes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopSimplification {
    /// Sizes of the new loop nest, outermost first.
    pub new_sizes: Vec<Expr>,
    /// For each old variable: `Some(index of the new variable in its slot)`, or `None` when the
    /// slot was removed (size 1 or merged away).
    pub old_to_new: Vec<Option<usize>>,
    /// For each new variable: the old variables merged into it, innermost first.
    pub groups: Vec<Vec<usize>>,
    /// The old sizes (after simplification).
    pub old_sizes: Vec<Expr>,
}

impl LoopSimplification {
    fn check_len(&self, new_vars: &[Expr]) -> SymResult<()> {
        if new_vars.len() != self.new_sizes.len() {
            return Err(SymError::Value(format!(
                "simplify_loops: got {} new variables but the simplified nest has {} dimensions; \
                 pass one variable per entry of new_sizes",
                new_vars.len(),
                self.new_sizes.len()
            )));
        }
        Ok(())
    }

    /// Inductor's `reindex`: one entry per old variable, the new variable of its slot for
    /// surviving slots (in order) and 0 for removed slots (size 1 or merged away). For formulas
    /// that passed the merge test this substitution gives the same addresses; it is not each old
    /// variable's value (use [`old_index_exprs`](Self::old_index_exprs) for that).
    /// Error: `new_vars.len() != new_sizes.len()` → `Value`.
    pub fn reindex(&self, new_vars: &[Expr]) -> SymResult<Vec<Expr>> {
        self.check_len(new_vars)?;
        Ok(self
            .old_to_new
            .iter()
            .map(|s| s.map_or_else(zero, |k| new_vars[k]))
            .collect())
    }

    /// Each old variable as an exact expression of the new ones: for a new variable `v` holding
    /// the merged old dimensions `i0 (innermost), i1, …, ik` with sizes `n0…nk`, old `i_j` is
    /// `ModularIndexing(v, n0·…·n(j-1), nj)` for `j < k` and `FloorDiv(v, n0·…·n(k-1))` for the
    /// outermost; an unmerged dimension is `v` itself; removed size-1 dimensions are 0. Valid for
    /// `v ∈ [0, new_size)`. Error: `new_vars.len() != new_sizes.len()` → `Value`.
    pub fn old_index_exprs(&self, new_vars: &[Expr]) -> SymResult<Vec<Expr>> {
        self.check_len(new_vars)?;
        let mut out = vec![zero(); self.old_to_new.len()];
        for (k, members) in self.groups.iter().enumerate() {
            let v = new_vars[k];
            if members.len() == 1 {
                out[members[0]] = v;
                continue;
            }
            let mut div = one();
            for (j, &o) in members.iter().enumerate() {
                let size = self.old_sizes[o];
                out[o] = if j + 1 == members.len() {
                    v.floordiv(&div)?
                } else {
                    v.modular_indexing(&div, &size)?
                };
                div = div.mul(&size)?;
            }
        }
        Ok(out)
    }

    /// Inductor's `prune`: keep the entries of `old` (one per old variable) whose slot survives.
    /// Entries past the number of old variables are ignored.
    pub fn prune<T: Clone>(&self, old: &[T]) -> Vec<T> {
        old.iter()
            .zip(self.old_to_new.iter())
            .filter(|(_, s)| s.is_some())
            .map(|(x, _)| x.clone())
            .collect()
    }
}

/// Row-major contiguous strides of `sizes` (last stride 1). `FlexibleLayout.contiguous_strides`.
fn contiguous_strides(sizes: &[Expr]) -> SymResult<Vec<Expr>> {
    let mut out = vec![one(); sizes.len()];
    for i in (0..sizes.len().saturating_sub(1)).rev() {
        out[i] = sizes[i + 1].mul(&out[i + 1])?;
    }
    Ok(out)
}

fn merge_tester(n: u8) -> SymResult<Expr> {
    Expr::symbol_with(
        &format!("tilefuse_merge_tester{n}"),
        Some(SymKind::Index),
        None,
        None,
    )
}

/// Merge and drop loop dimensions while keeping every formula's set of addresses (Inductor's
/// `_simplify_loops`):
///
/// * SL‑0: `strides[k] = stride_vars(formulas[k], vars)`, once, from the original formulas;
/// * SL‑1: dimensions of size 1 are removed;
/// * SL‑2: dimension `j` merges into `i` iff for every formula `stride[i]·size[i] == stride[j]`
///   (canonical equality) and the substitution test `f[v_i := m1·size_i, v_j := m2] ==
///   f[v_i := 0, v_j := m1 + m2]` holds with fresh symbols `m1`, `m2`; in addition (a soundness
///   guard that upstream lacks, implied by the above for affine formulas) the reindexed formula
///   must be exact: `f[v_i := m1 + size_i·m2, v_j := 0] == f[v_i := m1, v_j := m2]` for
///   `m1 ∈ [0, size_i)`, `m2 ∈ [0, size_j)` (canonically or by `simplify_with_ranges`), so
///   non-affine formulas such as `x1*ModularIndexing(6*x2, 1, 4)` never merge wrongly;
/// * SL‑3: pairs `(i, j)` scanned over reversed × reversed indices until nothing changes; a merge
///   sets `size[i] ← size[i]·size[j]` and removes slot `j` (the inner dimension keeps its slot);
/// * SL‑4: the result offers `reindex`, `old_index_exprs` and `prune`.
///
/// With `prevent_reordering`, the formula `Σ vars[i]·contiguous_stride[i]` is added
/// (`index_prevent_reordering`), so only adjacent dimensions merge, in declared order, and the
/// visiting order of every formula's addresses is preserved. Shapes: `vars` and `sizes` have one
/// entry per dimension (outermost first). A failed merge test (overflow, a divisor that becomes 0
/// under substitution) means "no merge". Errors: length mismatch → `Value`; overflow while forming
/// the contiguous formula or a merged size → `Overflow`.
pub fn simplify_loops(
    vars: &[Expr],
    sizes: &[Expr],
    formulas: &[Expr],
    prevent_reordering: bool,
) -> SymResult<LoopSimplification> {
    let n = vars.len();
    if sizes.len() != n {
        return Err(SymError::Value(format!(
            "simplify_loops: {} variables but {} sizes; pass one size per loop variable",
            n,
            sizes.len()
        )));
    }
    let mut fs: Vec<Expr> = formulas.to_vec();
    if prevent_reordering {
        let cs = contiguous_strides(sizes)?;
        let items: Vec<(Expr, i64)> = vars
            .iter()
            .zip(cs.iter())
            .map(|(v, c)| v.mul(c).map(|p| (p, 1)))
            .collect::<SymResult<_>>()?;
        fs.push(Expr::linear_combination(0, &items)?);
    }
    // a formula whose strides cannot be formed (e.g. a divisor that becomes 0) blocks merges of
    // the variables it uses, as upstream's `zoo` strides never compare equal
    let strides: Vec<Option<Vec<Expr>>> = fs.iter().map(|f| stride_vars(*f, vars).ok()).collect();
    let mut cur: Vec<Option<Expr>> = sizes
        .iter()
        .map(|s| (s.as_int() != Some(1)).then_some(*s))
        .collect();
    let mut members: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
    let (m1, m2) = (merge_tester(1)?, merge_tester(2)?);
    let m12 = m1.add(&m2)?;

    // any error while testing (overflow, a divisor that becomes 0) means "do not merge"
    let can_merge = |a: usize, b: usize, size_a: Expr, size_b: Expr| -> SymResult<bool> {
        for (k, f) in fs.iter().enumerate() {
            let (va, vb) = (vars[a], vars[b]);
            let Some(st) = &strides[k] else {
                if f.has(&va) || f.has(&vb) {
                    return Ok(false);
                }
                continue;
            };
            if st[a].mul(&size_a)? != st[b] {
                return Ok(false);
            }
            if !f.has(&va) && !f.has(&vb) {
                continue;
            }
            let mut s1: FxHashMap<Expr, Expr> = FxHashMap::default();
            s1.insert(va, m1.mul(&size_a)?);
            s1.insert(vb, m2);
            let mut s2: FxHashMap<Expr, Expr> = FxHashMap::default();
            s2.insert(va, zero());
            s2.insert(vb, m12);
            if f.subs(&s1)? != f.subs(&s2)? {
                return Ok(false);
            }
            // soundness guard (not upstream): the reindexed formula must equal the original one,
            // f[v_a := m1 + size_a·m2, v_b := 0] == f[v_a := m1, v_b := m2] for m1 ∈ [0, size_a),
            // m2 ∈ [0, size_b). Implied by the tests above for affine formulas.
            let mut s3: FxHashMap<Expr, Expr> = FxHashMap::default();
            s3.insert(va, m1.add(&m2.mul(&size_a)?)?);
            s3.insert(vb, zero());
            let mut s4: FxHashMap<Expr, Expr> = FxHashMap::default();
            s4.insert(va, m1);
            s4.insert(vb, m2);
            let (lhs, rhs) = (f.subs(&s3)?, f.subs(&s4)?);
            if lhs != rhs {
                let mut ranges: Vec<(Expr, Expr)> = vec![(m1, size_a), (m2, size_b)];
                ranges.extend(
                    vars.iter()
                        .zip(sizes.iter())
                        .filter(|(v, _)| **v != va && **v != vb)
                        .map(|(v, s)| (*v, *s)),
                );
                let d = simplify_with_ranges(lhs.sub(&rhs)?, &ranges)?;
                if !statically_known_equals(d, zero(), &ranges) {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    };

    let mut changed = true;
    while changed {
        changed = false;
        for i in (0..n).rev() {
            for j in (0..n).rev() {
                if i == j {
                    continue;
                }
                let (Some(si), Some(sj)) = (cur[i], cur[j]) else {
                    continue;
                };
                if can_merge(i, j, si, sj).unwrap_or(false) {
                    changed = true;
                    cur[i] = Some(si.mul(&sj)?);
                    cur[j] = None;
                    let moved = std::mem::take(&mut members[j]);
                    members[i].extend(moved);
                }
            }
        }
    }

    let mut new_sizes = Vec::new();
    let mut old_to_new = vec![None; n];
    let mut groups = Vec::new();
    for i in 0..n {
        if let Some(s) = cur[i] {
            old_to_new[i] = Some(new_sizes.len());
            new_sizes.push(s);
            groups.push(std::mem::take(&mut members[i]));
        }
    }
    Ok(LoopSimplification {
        new_sizes,
        old_to_new,
        groups,
        old_sizes: sizes.to_vec(),
    })
}
