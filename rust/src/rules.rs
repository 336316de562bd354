//! Construction rules of FloorDiv, ModularIndexing, CleanDiv, CeilDiv, Mod, Min and Max.
//!
//! These follow the modern semantics of `torch.utils._sympy.functions` (FD‑0…FD‑7, MI‑1…MI‑5,
//! CE‑1), with two deliberate, sound differences:
//! * a term split off a division's base (FD‑6, MI‑4) is only split when the *surviving* base is
//!   provably non-negative from its symbols' assumptions. Floor semantics would allow more, but a
//!   non-negative surviving base is what lets the Triton printer emit plain truncating `//` and `%`
//!   (the upstream bug class behind Triton issue 619);
//! * the exact-term split also works for a positive *monomial* divisor (`(x + s1*y) // s1 →
//!   y + x // s1`), as Inductor's earlier FloorDiv did (ID‑5); sound for a positive divisor.
//!
//! Each rule is a function `rule_*` returning `Ok(Some(result))` when it fires; the public
//! constructors try them in order. Rules re-enter the constructors on their results, so the output
//! is always in canonical form.

use crate::error::{overflow, SymError, SymResult};
use crate::expr::{floor_div, gcd, intern, Expr, Monomial, Node};

// ------------------------------------------------------------------------------ helpers

/// If `d` divides monomial `t`, the quotient monomial.
fn mono_div(t: &[(Expr, u32)], d: &[(Expr, u32)]) -> Option<Monomial> {
    let mut out: Monomial = Vec::with_capacity(t.len());
    let mut j = 0;
    for &(f, e) in t {
        if j < d.len() && d[j].0 == f {
            if d[j].1 > e {
                return None;
            }
            if e > d[j].1 {
                out.push((f, e - d[j].1));
            }
            j += 1;
        } else {
            if j < d.len() && d[j].0 < f {
                return None; // a divisor factor missing from t
            }
            out.push((f, e));
        }
    }
    if j < d.len() {
        return None;
    }
    Some(out)
}

/// The single-term view `coeff · monomial` of `e`, if it is one (integers: empty monomial).
fn as_single_term(e: Expr) -> Option<(i64, Monomial)> {
    let (c, terms) = e.polynomial();
    match (c, terms.len()) {
        (c, 0) => Some((c, vec![])),
        (0, 1) => Some((terms[0].1, terms[0].0.clone())),
        _ => None,
    }
}

/// Integer content (gcd of all coefficients and the constant) and the product of the factors that
/// occur in every term (with the minimal exponent), restricted to provably positive factors.
fn content(e: Expr) -> (i64, Monomial) {
    let (c, terms) = e.polynomial();
    let mut g = c;
    for (_, k) in &terms {
        g = gcd(g, *k);
    }
    let mut common: Monomial = if c != 0 || terms.is_empty() {
        vec![]
    } else {
        terms[0]
            .0
            .iter()
            .copied()
            .filter(|(f, _)| f.is_positive())
            .collect()
    };
    for (m, _) in terms.iter().skip(1) {
        common = common
            .into_iter()
            .filter_map(|(f, e)| {
                m.iter()
                    .find(|(g2, _)| *g2 == f)
                    .map(|(_, e2)| (f, e.min(*e2)))
            })
            .collect();
        if common.is_empty() {
            break;
        }
    }
    (g, common)
}

/// Divide every term of `e` by `coeff · mono` (the caller guarantees exactness).
fn exact_divide(e: Expr, coeff: i64, mono: &[(Expr, u32)]) -> SymResult<Expr> {
    let (c, terms) = e.polynomial();
    let mut out: Vec<(Expr, i64)> = Vec::with_capacity(terms.len());
    let cq = if c != 0 {
        debug_assert!(mono.is_empty());
        c / coeff
    } else {
        0
    };
    for (m, k) in terms {
        let q = mono_div(&m, mono)
            .ok_or_else(|| SymError::Value("internal: inexact division".into()))?;
        out.push((Expr::from_monomial(&q), k / coeff));
    }
    Expr::build_sum(cq, out)
}

/// `g = gcd(a, b)` as (positive integer, positive monomial) — Inductor's `simple_floordiv_gcd`.
fn common_divisor(a: Expr, b: Expr) -> (i64, Monomial) {
    let (ga, ma) = content(a);
    let (gb, mb) = content(b);
    let g = gcd(ga, gb).max(1);
    let m: Monomial = ma
        .into_iter()
        .filter_map(|(f, e)| {
            mb.iter()
                .find(|(f2, _)| *f2 == f)
                .map(|(_, e2)| (f, e.min(*e2)))
        })
        .collect();
    (g, m)
}

/// Split `a` into (terms divisible by `coeff·mono` — as their quotients —, the rest).
fn split_divisible(a: Expr, coeff: i64, mono: &[(Expr, u32)]) -> SymResult<Option<(Expr, Expr)>> {
    let (c, terms) = a.polynomial();
    let mut quot: Vec<(Expr, i64)> = Vec::new();
    let mut rest: Vec<(Expr, i64)> = Vec::new();
    let mut quot_c = 0i64;
    let mut rest_c = c;
    if mono.is_empty() && c != 0 && c % coeff == 0 {
        quot_c = c / coeff;
        rest_c = 0;
    }
    for (m, k) in terms {
        if k % coeff == 0 {
            if let Some(q) = mono_div(&m, mono) {
                quot.push((Expr::from_monomial(&q), k / coeff));
                continue;
            }
        }
        rest.push((Expr::from_monomial(&m), k));
    }
    if quot.is_empty() && quot_c == 0 {
        return Ok(None);
    }
    Ok(Some((
        Expr::build_sum(quot_c, quot)?,
        Expr::build_sum(rest_c, rest)?,
    )))
}

fn check_divisor(b: Expr, what: &str) -> SymResult<()> {
    if b.as_int() == Some(0) {
        return Err(SymError::ZeroDivision(format!(
            "{what}: division by zero (the divisor is 0); index divisors must be non-zero"
        )));
    }
    Ok(())
}

// ------------------------------------------------------------------------------ FloorDiv

/// FD‑5: `(x // y) // b → x // (y·b)`. Precondition: y and b provably positive (floor division
/// composes only for positive divisors).
pub fn rule_nested_floordiv(a: Expr, b: Expr) -> SymResult<Option<Expr>> {
    if let Node::FloorDiv(x, y) | Node::CleanDiv(x, y) = a.node() {
        if y.is_positive() && b.is_positive() {
            return Ok(Some(floordiv(*x, y.mul(&b)?)?));
        }
    }
    Ok(None)
}

/// Range rule: `a // b → 0` when `0 ≤ a < b` follows from the symbols' assumptions.
pub fn rule_floordiv_small_base(a: Expr, b: Expr) -> SymResult<Option<Expr>> {
    let (ra, rb) = (a.range(), b.range());
    if ra.lo >= 0 && rb.lo >= 1 && ra.hi < rb.lo {
        return Ok(Some(Expr::zero()));
    }
    Ok(None)
}

/// FD‑6 (and the 2022 ID‑5 for monomial divisors): `(r + Σ q_i·b) // b → r // b + Σ q_i`.
/// Preconditions: b is a single positive term `c·m` (c > 0, every factor of m positive), at least
/// one term of a is divisible by b, and the surviving base r is provably non-negative.
pub fn rule_split_exact_terms(a: Expr, b: Expr) -> SymResult<Option<Expr>> {
    if !matches!(a.node(), Node::Add { .. }) || !b.is_positive() {
        return Ok(None);
    }
    let Some((coeff, mono)) = as_single_term(b) else {
        return Ok(None);
    };
    if coeff <= 0 {
        return Ok(None);
    }
    let Some((quot, rest)) = split_divisible(a, coeff, &mono)? else {
        return Ok(None);
    };
    if !rest.is_nonneg() {
        return Ok(None);
    }
    Ok(Some(floordiv(rest, b)?.add(&quot)?))
}

/// FD‑7: `(g·a') // (g·b') → a' // b'` for the common divisor g of both (integer content times
/// the positive factors common to every term). Precondition: g > 1 or symbolic; g is positive.
pub fn rule_floordiv_gcd(a: Expr, b: Expr) -> SymResult<Option<Expr>> {
    let (g, m) = common_divisor(a, b);
    if g == 1 && m.is_empty() {
        return Ok(None);
    }
    let a2 = exact_divide(a, g, &m)?;
    let b2 = exact_divide(b, g, &m)?;
    Ok(Some(floordiv(a2, b2)?))
}

/// `a // b` (Python floor division) with Inductor's modern FloorDiv rules:
/// FD‑0 zero divisor → ZeroDivision error; FD‑1 `0 // b = 0`; FD‑2 `a // 1 = a`, `a // -1 = -a`;
/// FD‑4 integers fold; a negative integer divisor is moved to the base (`a // -d = (-a) // d`);
/// then FD‑5 nested division, the range rule, FD‑6 exact-term split and FD‑7 gcd cancel.
pub fn floordiv(a: Expr, b: Expr) -> SymResult<Expr> {
    check_divisor(b, "FloorDiv")?;
    if a.as_int() == Some(0) {
        return Ok(Expr::zero());
    }
    match b.as_int() {
        Some(1) => return Ok(a),
        Some(-1) => return a.neg(),
        Some(d) if d < 0 => {
            let d2 = d.checked_neg().ok_or_else(|| overflow("FloorDiv"))?;
            return floordiv(a.neg()?, Expr::int(d2));
        }
        _ => {}
    }
    if let (Some(x), Some(y)) = (a.as_int(), b.as_int()) {
        return Ok(Expr::int(floor_div(x, y)?));
    }
    if a == b && b.is_positive() {
        return Ok(Expr::one());
    }
    for rule in [
        rule_nested_floordiv,
        rule_floordiv_small_base,
        rule_split_exact_terms,
        rule_floordiv_gcd,
    ] {
        if let Some(r) = rule(a, b)? {
            return Ok(r);
        }
    }
    Ok(intern(Node::FloorDiv(a, b)))
}

// ------------------------------------------------------------------------------ ModularIndexing

fn check_mi_args(b: Expr, c: Expr) -> SymResult<()> {
    check_divisor(b, "ModularIndexing")?;
    if let Some(m) = c.as_int() {
        if m <= 0 {
            return Err(SymError::Value(format!(
                "ModularIndexing(a, b, c) needs a positive modulus c, got {m}"
            )));
        }
    }
    if let Some(d) = b.as_int() {
        if d < 0 {
            return Err(SymError::Value(format!(
                "ModularIndexing(a, b, c) needs a positive divisor b, got {d}; use FloorDiv and \
                 Mod for negative divisors"
            )));
        }
    }
    Ok(())
}

/// MI‑5: `ModularIndexing(x // y, b, c) → ModularIndexing(x, y·b, c)`. Precondition: y, b > 0.
pub fn rule_mi_of_floordiv(a: Expr, b: Expr, c: Expr) -> SymResult<Option<Expr>> {
    if let Node::FloorDiv(x, y) | Node::CleanDiv(x, y) = a.node() {
        if y.is_positive() && b.is_positive() {
            return Ok(Some(modular_indexing(*x, y.mul(&b)?, c)?));
        }
    }
    Ok(None)
}

/// Nested pair: `ModularIndexing(ModularIndexing(x, 1, L), b, c) → ModularIndexing(x, b, c)`
/// when L is a multiple of b·c (integers; sound for every integer x: `x % L` differs from x by a
/// multiple of b·c). Inductor's `combine_modular_indexing_pairs`, generalized to any b.
pub fn rule_mi_of_mi(a: Expr, b: Expr, c: Expr) -> SymResult<Option<Expr>> {
    if let Node::ModularIndexing(x, one, l) = a.node() {
        if let (Some(1), Some(l), Some(bv), Some(cv)) =
            (one.as_int(), l.as_int(), b.as_int(), c.as_int())
        {
            if let Some(p) = bv.checked_mul(cv) {
                if p > 0 && l % p == 0 {
                    return Ok(Some(modular_indexing(*x, b, c)?));
                }
            }
        }
    }
    Ok(None)
}

/// MI‑3: `ModularIndexing(g·a', g·b', c) → ModularIndexing(a', b', c)` for the positive common
/// divisor g. Precondition: b ≠ 1.
pub fn rule_mi_gcd(a: Expr, b: Expr, c: Expr) -> SymResult<Option<Expr>> {
    if b.as_int() == Some(1) {
        return Ok(None);
    }
    let (g, m) = common_divisor(a, b);
    if g == 1 && m.is_empty() {
        return Ok(None);
    }
    Ok(Some(modular_indexing(
        exact_divide(a, g, &m)?,
        exact_divide(b, g, &m)?,
        c,
    )?))
}

/// MI‑4: drop the terms of a that are multiples of b·c (they change `a // b` by multiples of c).
/// Preconditions: b·c is a single positive term; at least one term is dropped; the surviving
/// base is provably non-negative (generalizes Inductor's "no syntactically negative term" guard).
pub fn rule_mi_drop_multiples(a: Expr, b: Expr, c: Expr) -> SymResult<Option<Expr>> {
    if !matches!(a.node(), Node::Add { .. }) {
        return Ok(None);
    }
    let p = b.mul(&c)?;
    if !p.is_positive() {
        return Ok(None);
    }
    let Some((coeff, mono)) = as_single_term(p) else {
        return Ok(None);
    };
    if coeff <= 0 {
        return Ok(None);
    }
    let Some((_, rest)) = split_divisible(a, coeff, &mono)? else {
        return Ok(None);
    };
    if !rest.is_nonneg() {
        return Ok(None);
    }
    Ok(Some(modular_indexing(rest, b, c)?))
}

/// Range rule: when `0 ≤ a // b < c` follows from assumptions, the modulus is a no-op:
/// `ModularIndexing(a, b, c) → a // b`.
pub fn rule_mi_no_wrap(a: Expr, b: Expr, c: Expr) -> SymResult<Option<Expr>> {
    let q = a.range().floordiv(&b.range());
    if b.is_positive() && q.lo >= 0 && q.hi < c.range().lo {
        return Ok(Some(floordiv(a, b)?));
    }
    Ok(None)
}

/// `(a // b) % c` with Inductor's ModularIndexing rules: MI‑1 `a = 0` or `c = 1` → 0; MI‑2
/// integers fold; MI‑5 nested FloorDiv; nested ModularIndexing pair; MI‑3 gcd; MI‑4 drop multiples
/// of b·c; the no-wrap range rule. Errors: b = 0 → ZeroDivision; integer c ≤ 0 or integer b < 0
/// → Value.
pub fn modular_indexing(a: Expr, b: Expr, c: Expr) -> SymResult<Expr> {
    check_mi_args(b, c)?;
    if a.as_int() == Some(0) || c.as_int() == Some(1) {
        return Ok(Expr::zero());
    }
    if let (Some(x), Some(y), Some(z)) = (a.as_int(), b.as_int(), c.as_int()) {
        return Ok(Expr::int(crate::expr::floor_mod(floor_div(x, y)?, z)?));
    }
    for rule in [
        rule_mi_of_floordiv,
        rule_mi_of_mi,
        rule_mi_gcd,
        rule_mi_drop_multiples,
        rule_mi_no_wrap,
    ] {
        if let Some(r) = rule(a, b, c)? {
            return Ok(r);
        }
    }
    Ok(intern(Node::ModularIndexing(a, b, c)))
}

// ------------------------------------------------------------------------------ others

/// Exact division `a / b` where the caller promises b divides a (CD‑1). When b divides every term
/// of a the quotient is returned; when another FloorDiv rule fires its (floor) result is returned,
/// as upstream's CleanDiv loses its marker; otherwise a `CleanDiv` node (printed `(a//b)`).
pub fn clean_div(a: Expr, b: Expr) -> SymResult<Expr> {
    check_divisor(b, "CleanDiv")?;
    if let Some((coeff, mono)) = as_single_term(b) {
        if coeff > 0 && b.is_positive() {
            if let Some((q, rest)) = split_divisible(a, coeff, &mono)? {
                if rest.as_int() == Some(0) {
                    return Ok(q);
                }
            }
        }
    }
    let r = floordiv(a, b)?;
    if let Node::FloorDiv(x, y) = r.node() {
        if *x == a && *y == b {
            return Ok(intern(Node::CleanDiv(a, b)));
        }
    }
    Ok(r)
}

/// Ceiling division (CE‑1): exact quotient when b divides a, else `(a + b - 1) // b` for a
/// provably positive b, else `-((-a) // b)`.
pub fn ceil_div(a: Expr, b: Expr) -> SymResult<Expr> {
    check_divisor(b, "CeilDiv")?;
    if let (Some(x), Some(y)) = (a.as_int(), b.as_int()) {
        let nx = x.checked_neg().ok_or_else(|| overflow("CeilDiv"))?;
        return Ok(Expr::int(
            floor_div(nx, y)?
                .checked_neg()
                .ok_or_else(|| overflow("CeilDiv"))?,
        ));
    }
    if let Some((coeff, mono)) = as_single_term(b) {
        if coeff > 0 && b.is_positive() {
            if let Some((q, rest)) = split_divisible(a, coeff, &mono)? {
                if rest.as_int() == Some(0) {
                    return Ok(q);
                }
            }
        }
    }
    if b.is_positive() {
        return floordiv(a.add(&b)?.add_int(-1)?, b);
    }
    floordiv(a.neg()?, b)?.neg()
}

/// Python's `a % b` (result has the sign of b). With b provably positive this is exactly
/// `ModularIndexing(a, 1, b)`; otherwise a `Mod` node. b = 0 → ZeroDivision.
pub fn floor_mod(a: Expr, b: Expr) -> SymResult<Expr> {
    check_divisor(b, "Mod")?;
    if let (Some(x), Some(y)) = (a.as_int(), b.as_int()) {
        return Ok(Expr::int(crate::expr::floor_mod(x, y)?));
    }
    if a.as_int() == Some(0) || matches!(b.as_int(), Some(1) | Some(-1)) || a == b {
        return Ok(Expr::zero());
    }
    if b.is_positive() {
        return modular_indexing(a, Expr::one(), b);
    }
    Ok(intern(Node::Mod(a, b)))
}

/// Min / Max of one or more expressions: nested Min/Max flatten, integers fold, duplicates and
/// arguments that provably never win (by the assumption ranges) drop out. Empty → Value error.
pub fn min_max(args: &[Expr], is_max: bool) -> SymResult<Expr> {
    if args.is_empty() {
        return Err(SymError::Value(format!(
            "{}() needs at least one argument",
            if is_max { "Max" } else { "Min" }
        )));
    }
    let mut flat: Vec<Expr> = Vec::with_capacity(args.len());
    let mut best_int: Option<i64> = None;
    for &a in args {
        let inner: Vec<Expr> = match (a.node(), is_max) {
            (Node::Max(xs), true) | (Node::Min(xs), false) => xs.to_vec(),
            _ => vec![a],
        };
        for x in inner {
            if let Some(v) = x.as_int() {
                best_int = Some(match best_int {
                    None => v,
                    Some(b) => {
                        if is_max {
                            b.max(v)
                        } else {
                            b.min(v)
                        }
                    }
                });
            } else if !flat.contains(&x) {
                flat.push(x);
            }
        }
    }
    if let Some(v) = best_int {
        flat.push(Expr::int(v));
    }
    // drop arguments dominated by another one (x ≤ y for Max; x ≥ y for Min)
    let mut keep: Vec<Expr> = Vec::with_capacity(flat.len());
    'outer: for (i, &x) in flat.iter().enumerate() {
        for (j, &y) in flat.iter().enumerate() {
            if i == j {
                continue;
            }
            // does y provably win over x (y ≥ x for Max, y ≤ x for Min)?
            let d = if is_max { y.sub(&x)? } else { x.sub(&y)? };
            if d.range().lo >= 0 {
                // if they are provably equal keep exactly one of them (the first)
                let equal = d.range().hi <= 0;
                if !equal || j < i {
                    continue 'outer;
                }
            }
        }
        keep.push(x);
    }
    if keep.len() == 1 {
        return Ok(keep[0]);
    }
    keep.sort();
    let b = keep.into_boxed_slice();
    Ok(intern(if is_max { Node::Max(b) } else { Node::Min(b) }))
}
