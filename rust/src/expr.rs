//! `Expr`: interned, canonical, immutable integer index expressions.
//!
//! Semantics are floor semantics everywhere (Python's `//` and `%`):
//! `FloorDiv(a, b) = a // b`, `ModularIndexing(a, b, c) = (a // b) % c`, `Mod(a, b) = a % b`.
//!
//! Canonical form (so that equal expressions are the same object):
//! * sums are expanded polynomials: `Add { constant, terms }` holds `constant + Σ coeff·term`, with
//!   every term a non-integer, non-sum expression, terms sorted by the structural order, no zero
//!   coefficient, and never a lone term with coefficient 1 and constant 0;
//! * products are `Mul { factors }`: factors are atoms or function nodes (never integers, sums or
//!   products) with exponents ≥ 1, sorted; integer coefficients live in the enclosing `Add`;
//! * products of sums are always expanded, so two polynomials are equal iff they are identical.
//!
//! Every node is hash-consed in a global interner: an `Expr` is a `&'static` pointer, equality and
//! hashing are O(1). Each node also caches a structural hash (deterministic across processes) and
//! the value interval its symbols' assumptions allow, which the division rules use for their
//! non-negativity preconditions.
//!
//! The smart constructors (`floordiv`, `modular_indexing`, ...) apply the rewriting rules of
//! Inductor's modern `torch.utils._sympy.functions`, each in its own function in
//! `rules.rs` with its precondition.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Mutex;

use rustc_hash::{FxHashMap, FxHasher};

use crate::error::{overflow, SymError, SymResult};
use crate::interval::Interval;

/// The role a symbol plays, as Inductor's `SymT` prefixes say.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SymKind {
    /// Size symbol (`s0`, `ks0`): a positive integer.
    Size,
    /// Precomputed size expression hoisted to the host (`ps0`): positive.
    Precomputed,
    /// Index / iteration variable (`x0`, `y1`, `r0_0`, `i0`, `q0`, `z0`, `d0`): non-negative.
    Index,
    /// Indirect index (`tmp3`), a value loaded from memory and wrapped: non-negative.
    Indirect,
    /// Unbacked size (`u0`): non-negative.
    Unbacked,
    /// Anything else: an integer with no sign known unless assumptions say so.
    Other,
}

impl SymKind {
    /// Kind implied by a symbol name's prefix, as Inductor names its symbols.
    pub fn from_name(name: &str) -> SymKind {
        let alpha: String = name
            .chars()
            .take_while(|c| c.is_ascii_alphabetic())
            .collect();
        match alpha.as_str() {
            "s" | "ks" => SymKind::Size,
            "ps" => SymKind::Precomputed,
            "x" | "y" | "z" | "r" | "i" | "q" | "d" | "v" | "p" | "h" | "index" | "rindex"
            | "xindex" | "yindex" | "zindex" => SymKind::Index,
            "tmp" => SymKind::Indirect,
            "u" => SymKind::Unbacked,
            _ => SymKind::Other,
        }
    }
    fn default_range(self) -> Interval {
        match self {
            SymKind::Size | SymKind::Precomputed => Interval::POSITIVE,
            SymKind::Index | SymKind::Indirect | SymKind::Unbacked => Interval::NONNEG,
            SymKind::Other => Interval::UNKNOWN,
        }
    }
}

/// A symbol: its name, kind and the integer range its assumptions give.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SymbolInfo {
    pub name: Box<str>,
    pub kind: SymKind,
    /// The values the symbol may take (from its kind, narrowed by explicit assumptions).
    pub range: Interval,
}

/// One node of an expression. Children are interned `Expr`s, so comparing two nodes is shallow.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    Int(i64),
    Sym(SymbolInfo),
    /// `constant + Σ coeff·term`
    Add {
        constant: i64,
        terms: Box<[(Expr, i64)]>,
    },
    /// `Π factor^exp`
    Mul {
        factors: Box<[(Expr, u32)]>,
    },
    FloorDiv(Expr, Expr),
    /// Exact division (the caller promises the divisor divides the dividend); evaluates as floor.
    CleanDiv(Expr, Expr),
    ModularIndexing(Expr, Expr, Expr),
    /// Python (floor) modulus, kept only where the divisor's sign is unknown.
    Mod(Expr, Expr),
    Min(Box<[Expr]>),
    Max(Box<[Expr]>),
}

/// Interned payload of an `Expr`.
pub struct ExprData {
    pub node: Node,
    hash: u64,
    range: Interval,
    depth: u32,
}

impl PartialEq for ExprData {
    fn eq(&self, o: &Self) -> bool {
        self.hash == o.hash && self.node == o.node
    }
}
impl Eq for ExprData {}
impl Hash for ExprData {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash)
    }
}

/// Deepest nesting the Python bindings accept: deeper expressions could exhaust the native stack in
/// the recursive algorithms. Index expressions are a few levels deep in practice.
pub const MAX_DEPTH: u32 = 1000;

/// An interned integer expression. Copy, O(1) equality and hashing.
#[derive(Clone, Copy)]
pub struct Expr(&'static ExprData);

impl PartialEq for Expr {
    fn eq(&self, o: &Self) -> bool {
        std::ptr::eq(self.0, o.0)
    }
}
impl Eq for Expr {}
impl Hash for Expr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.hash)
    }
}
impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", crate::print::sympy_str(*self))
    }
}
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", crate::print::sympy_str(*self))
    }
}

type Interner = HashSet<&'static ExprData, BuildHasherDefault<FxHasher>>;
static INTERNER: Mutex<Option<Interner>> = Mutex::new(None);

fn structural_hash(node: &Node) -> u64 {
    let mut h = FxHasher::default();
    match node {
        Node::Int(v) => {
            0u8.hash(&mut h);
            v.hash(&mut h)
        }
        Node::Sym(s) => {
            1u8.hash(&mut h);
            s.hash(&mut h)
        }
        Node::Add { constant, terms } => {
            2u8.hash(&mut h);
            constant.hash(&mut h);
            for (t, c) in terms.iter() {
                h.write_u64(t.0.hash);
                c.hash(&mut h);
            }
        }
        Node::Mul { factors } => {
            3u8.hash(&mut h);
            for (t, e) in factors.iter() {
                h.write_u64(t.0.hash);
                e.hash(&mut h);
            }
        }
        Node::FloorDiv(a, b) => {
            4u8.hash(&mut h);
            h.write_u64(a.0.hash);
            h.write_u64(b.0.hash);
        }
        Node::CleanDiv(a, b) => {
            5u8.hash(&mut h);
            h.write_u64(a.0.hash);
            h.write_u64(b.0.hash);
        }
        Node::ModularIndexing(a, b, c) => {
            6u8.hash(&mut h);
            h.write_u64(a.0.hash);
            h.write_u64(b.0.hash);
            h.write_u64(c.0.hash);
        }
        Node::Mod(a, b) => {
            7u8.hash(&mut h);
            h.write_u64(a.0.hash);
            h.write_u64(b.0.hash);
        }
        Node::Min(args) => {
            8u8.hash(&mut h);
            for a in args.iter() {
                h.write_u64(a.0.hash);
            }
        }
        Node::Max(args) => {
            9u8.hash(&mut h);
            for a in args.iter() {
                h.write_u64(a.0.hash);
            }
        }
    }
    h.finish()
}

/// Value interval of a node from its children's intervals (symbols: their assumptions).
fn node_range(node: &Node) -> Interval {
    match node {
        Node::Int(v) => Interval::point(*v),
        Node::Sym(s) => s.range,
        Node::Add { constant, terms } => {
            let mut r = Interval::point(*constant);
            for (t, c) in terms.iter() {
                r = r.add(&t.range().scale(*c));
            }
            r
        }
        Node::Mul { factors } => {
            let mut r = Interval::point(1);
            for (f, e) in factors.iter() {
                r = r.mul(&f.range().pow(*e));
            }
            r
        }
        Node::FloorDiv(a, b) | Node::CleanDiv(a, b) => a.range().floordiv(&b.range()),
        Node::ModularIndexing(a, b, c) => a.range().floordiv(&b.range()).floormod(&c.range()),
        Node::Mod(a, b) => a.range().floormod(&b.range()),
        Node::Min(args) => args
            .iter()
            .skip(1)
            .fold(args[0].range(), |r, a| r.min(&a.range())),
        Node::Max(args) => args
            .iter()
            .skip(1)
            .fold(args[0].range(), |r, a| r.max(&a.range())),
    }
}

fn node_children(node: &Node) -> Box<dyn Iterator<Item = Expr> + '_> {
    match node {
        Node::Int(_) | Node::Sym(_) => Box::new(std::iter::empty()),
        Node::Add { terms, .. } => Box::new(terms.iter().map(|t| t.0)),
        Node::Mul { factors } => Box::new(factors.iter().map(|t| t.0)),
        Node::FloorDiv(a, b) | Node::CleanDiv(a, b) | Node::Mod(a, b) => {
            Box::new([*a, *b].into_iter())
        }
        Node::ModularIndexing(a, b, c) => Box::new([*a, *b, *c].into_iter()),
        Node::Min(a) | Node::Max(a) => Box::new(a.iter().copied()),
    }
}

/// Intern a node: return the unique `Expr` for it. The node must already be canonical.
pub(crate) fn intern(node: Node) -> Expr {
    let hash = structural_hash(&node);
    let probe = ExprData {
        node,
        hash,
        range: Interval::UNKNOWN,
        depth: 0,
    };
    let mut guard = INTERNER.lock().unwrap_or_else(|e| e.into_inner());
    let set = guard.get_or_insert_with(Interner::default);
    if let Some(found) = set.get(&probe) {
        return Expr(found);
    }
    let range = node_range(&probe.node);
    let depth = node_children(&probe.node)
        .map(|c| c.0.depth)
        .max()
        .map_or(0, |d| d.saturating_add(1));
    let data: &'static ExprData = Box::leak(Box::new(ExprData {
        node: probe.node,
        hash,
        range,
        depth,
    }));
    set.insert(data);
    Expr(data)
}

/// Number of distinct expressions interned so far (for tests and memory accounting).
pub fn interned_count() -> usize {
    INTERNER
        .lock()
        .map(|g| g.as_ref().map_or(0, |s| s.len()))
        .unwrap_or(0)
}

fn kind_rank(n: &Node) -> u8 {
    match n {
        Node::Int(_) => 0,
        Node::Sym(_) => 1,
        Node::Mul { .. } => 2,
        Node::Add { .. } => 3,
        Node::FloorDiv(..) => 4,
        Node::CleanDiv(..) => 5,
        Node::ModularIndexing(..) => 6,
        Node::Mod(..) => 7,
        Node::Min(_) => 8,
        Node::Max(_) => 9,
    }
}

/// Compare names so that `x2 < x10` (alphabetic prefix, then the number).
fn natural_cmp(a: &str, b: &str) -> Ordering {
    let split = |s: &str| -> (usize, Option<u128>) {
        let idx = s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        (idx, s[idx..].parse::<u128>().ok())
    };
    let (ia, na) = split(a);
    let (ib, nb) = split(b);
    a[..ia].cmp(&b[..ib]).then(na.cmp(&nb)).then(a.cmp(b))
}

fn cmp_slices(a: &[Expr], b: &[Expr]) -> Ordering {
    for (x, y) in a.iter().zip(b.iter()) {
        let o = x.cmp(y);
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

impl Ord for Expr {
    /// Deterministic structural total order (independent of interning order and of the process).
    fn cmp(&self, o: &Self) -> Ordering {
        if self == o {
            return Ordering::Equal;
        }
        let (na, nb) = (self.node(), o.node());
        let r = kind_rank(na).cmp(&kind_rank(nb));
        if r != Ordering::Equal {
            return r;
        }
        match (na, nb) {
            (Node::Int(a), Node::Int(b)) => a.cmp(b),
            (Node::Sym(a), Node::Sym(b)) => natural_cmp(&a.name, &b.name)
                .then(a.kind.cmp(&b.kind))
                .then(a.range.lo.cmp(&b.range.lo))
                .then(a.range.hi.cmp(&b.range.hi)),
            (Node::Mul { factors: a }, Node::Mul { factors: b }) => {
                // compare by factors from the highest (last) downwards, like a graded order
                for ((fa, ea), (fb, eb)) in a.iter().rev().zip(b.iter().rev()) {
                    let o = fa.cmp(fb).then(ea.cmp(eb));
                    if o != Ordering::Equal {
                        return o;
                    }
                }
                a.len().cmp(&b.len())
            }
            (
                Node::Add {
                    constant: ca,
                    terms: ta,
                },
                Node::Add {
                    constant: cb,
                    terms: tb,
                },
            ) => {
                for ((xa, ka), (xb, kb)) in ta.iter().zip(tb.iter()) {
                    let o = xa.cmp(xb).then(ka.cmp(kb));
                    if o != Ordering::Equal {
                        return o;
                    }
                }
                ta.len().cmp(&tb.len()).then(ca.cmp(cb))
            }
            (Node::FloorDiv(a1, b1), Node::FloorDiv(a2, b2))
            | (Node::CleanDiv(a1, b1), Node::CleanDiv(a2, b2))
            | (Node::Mod(a1, b1), Node::Mod(a2, b2)) => a1.cmp(a2).then(b1.cmp(b2)),
            (Node::ModularIndexing(a1, b1, c1), Node::ModularIndexing(a2, b2, c2)) => {
                a1.cmp(a2).then(b1.cmp(b2)).then(c1.cmp(c2))
            }
            (Node::Min(a), Node::Min(b)) | (Node::Max(a), Node::Max(b)) => cmp_slices(a, b),
            _ => unreachable!("kind ranks are equal"),
        }
    }
}
impl PartialOrd for Expr {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// A monomial: sorted factors with exponents (empty = the constant 1).
pub(crate) type Monomial = Vec<(Expr, u32)>;

fn mono_mul(a: &[(Expr, u32)], b: &[(Expr, u32)]) -> SymResult<Monomial> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            Ordering::Less => {
                out.push(a[i]);
                i += 1
            }
            Ordering::Greater => {
                out.push(b[j]);
                j += 1
            }
            Ordering::Equal => {
                let e = a[i]
                    .1
                    .checked_add(b[j].1)
                    .ok_or_else(|| overflow("exponent"))?;
                out.push((a[i].0, e));
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    Ok(out)
}

impl Expr {
    // ----------------------------------------------------------------- accessors
    #[inline]
    pub fn node(&self) -> &'static Node {
        &self.0.node
    }
    /// Stable structural hash (deterministic across processes).
    #[inline]
    pub fn structural_hash(&self) -> u64 {
        self.0.hash
    }
    /// Process-unique identity of the interned node.
    #[inline]
    pub fn id(&self) -> usize {
        self.0 as *const ExprData as usize
    }
    /// The interval of values this expression may take given only its symbols' assumptions.
    #[inline]
    pub fn range(&self) -> Interval {
        self.0.range
    }
    /// Nesting depth (atoms are 0). Recursive algorithms (printing, evaluation, simplification)
    /// recurse this deep; the Python bindings refuse expressions deeper than `MAX_DEPTH`.
    #[inline]
    pub fn depth(&self) -> u32 {
        self.0.depth
    }
    /// Provably ≥ 0 from the symbols' assumptions.
    #[inline]
    pub fn is_nonneg(&self) -> bool {
        self.0.range.lo >= 0
    }
    /// Provably ≥ 1 from the symbols' assumptions.
    #[inline]
    pub fn is_positive(&self) -> bool {
        self.0.range.lo >= 1
    }
    #[inline]
    pub fn as_int(&self) -> Option<i64> {
        match self.node() {
            Node::Int(v) => Some(*v),
            _ => None,
        }
    }
    pub fn as_symbol(&self) -> Option<&'static SymbolInfo> {
        match self.node() {
            Node::Sym(s) => Some(s),
            _ => None,
        }
    }
    pub fn is_symbol(&self) -> bool {
        matches!(self.node(), Node::Sym(_))
    }

    // ----------------------------------------------------------------- atoms
    pub fn int(v: i64) -> Expr {
        intern(Node::Int(v))
    }
    pub fn zero() -> Expr {
        Expr::int(0)
    }
    pub fn one() -> Expr {
        Expr::int(1)
    }
    /// A symbol whose kind (and so its sign assumptions) follows Inductor's name prefixes:
    /// `x`/`y`/`z`/`r`/`i`/`q`/`d` index variables and `tmp` indirect indices are non-negative,
    /// `s`/`ks`/`ps` sizes are positive, `u` unbacked sizes non-negative, anything else unknown.
    pub fn symbol(name: &str) -> SymResult<Expr> {
        Expr::symbol_with(name, None, None, None)
    }
    /// A symbol with explicit assumptions. `kind` overrides the prefix rule; `lower`/`upper`
    /// narrow the range (both inclusive). An empty range is a `Value` error.
    pub fn symbol_with(
        name: &str,
        kind: Option<SymKind>,
        lower: Option<i64>,
        upper: Option<i64>,
    ) -> SymResult<Expr> {
        if name.is_empty()
            || !name.chars().next().unwrap().is_ascii_alphabetic()
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(SymError::Value(format!(
                "invalid symbol name {name:?}: use a letter followed by letters, digits or '_' \
                 (e.g. 'x0', 's1', 'r0_0')"
            )));
        }
        let kind = kind.unwrap_or_else(|| SymKind::from_name(name));
        let mut range = kind.default_range();
        if let Some(l) = lower {
            range.lo = range.lo.max(l as i128);
        }
        if let Some(u) = upper {
            range.hi = range.hi.min(u as i128);
        }
        if range.lo > range.hi {
            return Err(SymError::Value(format!(
                "symbol {name}: the assumptions leave no possible value (lower bound {} > upper \
                 bound {})",
                range.lo, range.hi
            )));
        }
        Ok(intern(Node::Sym(SymbolInfo {
            name: name.into(),
            kind,
            range,
        })))
    }

    // ----------------------------------------------------------------- polynomial view
    /// `(constant, [(term, coeff)])` view of any expression.
    pub fn as_linear(&self) -> (i64, Vec<(Expr, i64)>) {
        match self.node() {
            Node::Int(v) => (*v, vec![]),
            Node::Add { constant, terms } => (*constant, terms.to_vec()),
            _ => (0, vec![(*self, 1)]),
        }
    }
    /// The factors of a term (a non-sum, non-integer expression).
    pub(crate) fn as_monomial(&self) -> Monomial {
        match self.node() {
            Node::Int(_) => vec![],
            Node::Mul { factors } => factors.to_vec(),
            _ => vec![(*self, 1)],
        }
    }
    pub(crate) fn from_monomial(m: &[(Expr, u32)]) -> Expr {
        match m {
            [] => Expr::one(),
            [(f, 1)] => *f,
            _ => intern(Node::Mul {
                factors: m.to_vec().into_boxed_slice(),
            }),
        }
    }

    /// Canonical sum `constant + Σ coeff·expr` of arbitrary expressions (flattens nested sums).
    pub fn linear_combination(constant: i64, items: &[(Expr, i64)]) -> SymResult<Expr> {
        let mut acc_c: i64 = constant;
        let mut terms: Vec<(Expr, i64)> = Vec::with_capacity(items.len() + 2);
        for &(e, c) in items {
            if c == 0 {
                continue;
            }
            match e.node() {
                Node::Int(v) => {
                    let p = v.checked_mul(c).ok_or_else(|| overflow("sum"))?;
                    acc_c = acc_c.checked_add(p).ok_or_else(|| overflow("sum"))?;
                }
                Node::Add {
                    constant,
                    terms: ts,
                } => {
                    let p = constant.checked_mul(c).ok_or_else(|| overflow("sum"))?;
                    acc_c = acc_c.checked_add(p).ok_or_else(|| overflow("sum"))?;
                    for &(t, k) in ts.iter() {
                        terms.push((t, k.checked_mul(c).ok_or_else(|| overflow("sum"))?));
                    }
                }
                _ => terms.push((e, c)),
            }
        }
        Self::build_sum(acc_c, terms)
    }

    /// Build the canonical node from a constant and unsorted, possibly repeated, non-sum terms.
    pub(crate) fn build_sum(mut constant: i64, mut terms: Vec<(Expr, i64)>) -> SymResult<Expr> {
        // integer "terms" (e.g. the quotient monomial 1 of an exact division) join the constant
        if terms.iter().any(|(t, _)| t.as_int().is_some()) {
            let mut rest = Vec::with_capacity(terms.len());
            for (t, c) in terms {
                if let Some(v) = t.as_int() {
                    let p = v.checked_mul(c).ok_or_else(|| overflow("sum"))?;
                    constant = constant.checked_add(p).ok_or_else(|| overflow("sum"))?;
                } else {
                    rest.push((t, c));
                }
            }
            terms = rest;
        }
        if terms.len() > 1 {
            terms.sort_by_key(|a| a.0);
            let mut merged: Vec<(Expr, i64)> = Vec::with_capacity(terms.len());
            for (t, c) in terms {
                if let Some(last) = merged.last_mut() {
                    if last.0 == t {
                        last.1 = last.1.checked_add(c).ok_or_else(|| overflow("sum"))?;
                        continue;
                    }
                }
                merged.push((t, c));
            }
            terms = merged;
        }
        terms.retain(|&(_, c)| c != 0);
        Ok(match (constant, terms.len()) {
            (c, 0) => Expr::int(c),
            (0, 1) if terms[0].1 == 1 => terms[0].0,
            _ => intern(Node::Add {
                constant,
                terms: terms.into_boxed_slice(),
            }),
        })
    }

    /// Expanded polynomial form: `(constant, [(monomial, coeff)])`.
    pub(crate) fn polynomial(&self) -> (i64, Vec<(Monomial, i64)>) {
        let (c, terms) = self.as_linear();
        (
            c,
            terms
                .into_iter()
                .map(|(t, k)| (t.as_monomial(), k))
                .collect(),
        )
    }

    pub fn add(&self, o: &Expr) -> SymResult<Expr> {
        if let (Some(a), Some(b)) = (self.as_int(), o.as_int()) {
            return Ok(Expr::int(
                a.checked_add(b).ok_or_else(|| overflow("addition"))?,
            ));
        }
        Expr::linear_combination(0, &[(*self, 1), (*o, 1)])
    }
    pub fn sub(&self, o: &Expr) -> SymResult<Expr> {
        if let (Some(a), Some(b)) = (self.as_int(), o.as_int()) {
            return Ok(Expr::int(
                a.checked_sub(b).ok_or_else(|| overflow("subtraction"))?,
            ));
        }
        Expr::linear_combination(0, &[(*self, 1), (*o, -1)])
    }
    pub fn neg(&self) -> SymResult<Expr> {
        Expr::linear_combination(0, &[(*self, -1)])
    }
    pub fn add_int(&self, v: i64) -> SymResult<Expr> {
        Expr::linear_combination(v, &[(*self, 1)])
    }
    pub fn scale(&self, c: i64) -> SymResult<Expr> {
        Expr::linear_combination(0, &[(*self, c)])
    }
    /// Sum of many expressions.
    pub fn sum(items: &[Expr]) -> SymResult<Expr> {
        let v: Vec<(Expr, i64)> = items.iter().map(|e| (*e, 1)).collect();
        Expr::linear_combination(0, &v)
    }

    /// Product, expanded over sums.
    pub fn mul(&self, o: &Expr) -> SymResult<Expr> {
        if let Some(a) = self.as_int() {
            if let Some(b) = o.as_int() {
                return Ok(Expr::int(
                    a.checked_mul(b).ok_or_else(|| overflow("multiplication"))?,
                ));
            }
            return o.scale(a);
        }
        if let Some(b) = o.as_int() {
            return self.scale(b);
        }
        let (ca, ta) = self.polynomial();
        let (cb, tb) = o.polynomial();
        let mut terms: Vec<(Expr, i64)> = Vec::with_capacity((ta.len() + 1) * (tb.len() + 1));
        let cc = ca
            .checked_mul(cb)
            .ok_or_else(|| overflow("multiplication"))?;
        for (m, k) in &ta {
            if cb != 0 {
                terms.push((
                    Expr::from_monomial(m),
                    k.checked_mul(cb)
                        .ok_or_else(|| overflow("multiplication"))?,
                ));
            }
        }
        for (m, k) in &tb {
            if ca != 0 {
                terms.push((
                    Expr::from_monomial(m),
                    k.checked_mul(ca)
                        .ok_or_else(|| overflow("multiplication"))?,
                ));
            }
        }
        for (ma, ka) in &ta {
            for (mb, kb) in &tb {
                let m = mono_mul(ma, mb)?;
                let k = ka
                    .checked_mul(*kb)
                    .ok_or_else(|| overflow("multiplication"))?;
                terms.push((Expr::from_monomial(&m), k));
            }
        }
        Expr::build_sum(cc, terms)
    }
    /// Product of many expressions.
    pub fn product(items: &[Expr]) -> SymResult<Expr> {
        let mut acc = Expr::one();
        for e in items {
            acc = acc.mul(e)?;
        }
        Ok(acc)
    }
    /// Non-negative integer power.
    pub fn pow(&self, e: u32) -> SymResult<Expr> {
        let mut acc = Expr::one();
        for _ in 0..e {
            acc = acc.mul(self)?;
        }
        Ok(acc)
    }

    // ----------------------------------------------------------------- functions (rules.rs)
    /// `a // b` with Inductor's FloorDiv rules (see `rules::floordiv`).
    pub fn floordiv(&self, b: &Expr) -> SymResult<Expr> {
        crate::rules::floordiv(*self, *b)
    }
    /// `(a // b) % c` with Inductor's ModularIndexing rules (see `rules::modular_indexing`).
    pub fn modular_indexing(&self, b: &Expr, c: &Expr) -> SymResult<Expr> {
        crate::rules::modular_indexing(*self, *b, *c)
    }
    /// Exact division (see `rules::clean_div`).
    pub fn clean_div(&self, b: &Expr) -> SymResult<Expr> {
        crate::rules::clean_div(*self, *b)
    }
    /// Ceiling division (see `rules::ceil_div`).
    pub fn ceil_div(&self, b: &Expr) -> SymResult<Expr> {
        crate::rules::ceil_div(*self, *b)
    }
    /// Python `%` (see `rules::floor_mod`).
    pub fn floor_mod(&self, b: &Expr) -> SymResult<Expr> {
        crate::rules::floor_mod(*self, *b)
    }
    pub fn min_of(args: &[Expr]) -> SymResult<Expr> {
        crate::rules::min_max(args, false)
    }
    pub fn max_of(args: &[Expr]) -> SymResult<Expr> {
        crate::rules::min_max(args, true)
    }

    // ----------------------------------------------------------------- traversal
    /// Direct children (for sums and products the terms/factors, without coefficients).
    pub fn children(&self) -> Vec<Expr> {
        match self.node() {
            Node::Int(_) | Node::Sym(_) => vec![],
            Node::Add { terms, .. } => terms.iter().map(|t| t.0).collect(),
            Node::Mul { factors } => factors.iter().map(|t| t.0).collect(),
            Node::FloorDiv(a, b) | Node::CleanDiv(a, b) | Node::Mod(a, b) => vec![*a, *b],
            Node::ModularIndexing(a, b, c) => vec![*a, *b, *c],
            Node::Min(a) | Node::Max(a) => a.to_vec(),
        }
    }

    /// Free symbols, sorted by the structural order (deterministic).
    pub fn free_symbols(&self) -> Vec<Expr> {
        let mut out: Vec<Expr> = Vec::new();
        let mut seen: rustc_hash::FxHashSet<Expr> = Default::default();
        let mut stack = vec![*self];
        while let Some(e) = stack.pop() {
            if !seen.insert(e) {
                continue;
            }
            if e.is_symbol() {
                out.push(e);
            } else {
                stack.extend(e.children());
            }
        }
        out.sort();
        out
    }

    /// Does `sym` occur in this expression?
    pub fn has(&self, sym: &Expr) -> bool {
        if self == sym {
            return true;
        }
        self.children().iter().any(|c| c.has(sym))
    }

    /// Rebuild this node from new children through the smart constructors (so rules re-fire).
    pub fn rebuild(&self, f: &mut dyn FnMut(Expr) -> SymResult<Expr>) -> SymResult<Expr> {
        Ok(match self.node() {
            Node::Int(_) | Node::Sym(_) => *self,
            Node::Add { constant, terms } => {
                let mut items = Vec::with_capacity(terms.len());
                let mut changed = false;
                for &(t, c) in terms.iter() {
                    let n = f(t)?;
                    changed |= n != t;
                    items.push((n, c));
                }
                if !changed {
                    return Ok(*self);
                }
                Expr::linear_combination(*constant, &items)?
            }
            Node::Mul { factors } => {
                let mut acc = Expr::one();
                for &(t, e) in factors.iter() {
                    acc = acc.mul(&f(t)?.pow(e)?)?;
                }
                acc
            }
            Node::FloorDiv(a, b) => f(*a)?.floordiv(&f(*b)?)?,
            Node::CleanDiv(a, b) => f(*a)?.clean_div(&f(*b)?)?,
            Node::Mod(a, b) => f(*a)?.floor_mod(&f(*b)?)?,
            Node::ModularIndexing(a, b, c) => f(*a)?.modular_indexing(&f(*b)?, &f(*c)?)?,
            Node::Min(args) => {
                let v: SymResult<Vec<Expr>> = args.iter().map(|a| f(*a)).collect();
                Expr::min_of(&v?)?
            }
            Node::Max(args) => {
                let v: SymResult<Vec<Expr>> = args.iter().map(|a| f(*a)).collect();
                Expr::max_of(&v?)?
            }
        })
    }

    /// Substitute expressions for sub-expressions (usually symbols), simultaneously, re-applying
    /// every construction rule on the way up.
    pub fn subs(&self, mapping: &FxHashMap<Expr, Expr>) -> SymResult<Expr> {
        if mapping.is_empty() {
            return Ok(*self);
        }
        let mut memo: FxHashMap<Expr, Expr> = FxHashMap::default();
        self.subs_memo(mapping, &mut memo)
    }

    fn subs_memo(
        &self,
        mapping: &FxHashMap<Expr, Expr>,
        memo: &mut FxHashMap<Expr, Expr>,
    ) -> SymResult<Expr> {
        if let Some(r) = mapping.get(self) {
            return Ok(*r);
        }
        if let Some(r) = memo.get(self) {
            return Ok(*r);
        }
        let r = match self.node() {
            Node::Int(_) | Node::Sym(_) => *self,
            _ => self.rebuild(&mut |c| c.subs_memo(mapping, memo))?,
        };
        memo.insert(*self, r);
        Ok(r)
    }

    /// Evaluate at an integer point. `values` gives each symbol's value; a missing symbol is an
    /// `UnknownSymbol` error, division by zero a `ZeroDivision` error, any overflow an `Overflow`.
    pub fn evaluate(&self, values: &dyn Fn(&Expr) -> Option<i64>) -> SymResult<i64> {
        let mut memo: FxHashMap<Expr, i64> = FxHashMap::default();
        self.eval_memo(values, &mut memo)
    }

    /// Evaluate with a symbol→value map.
    pub fn evaluate_map(&self, values: &FxHashMap<Expr, i64>) -> SymResult<i64> {
        self.evaluate(&|s| values.get(s).copied())
    }

    fn eval_memo(
        &self,
        values: &dyn Fn(&Expr) -> Option<i64>,
        memo: &mut FxHashMap<Expr, i64>,
    ) -> SymResult<i64> {
        if let Some(v) = memo.get(self) {
            return Ok(*v);
        }
        let ov = |w: &str| overflow(w);
        let v = match self.node() {
            Node::Int(v) => *v,
            Node::Sym(s) => values(self).ok_or_else(|| {
                SymError::UnknownSymbol(format!(
                    "cannot evaluate: no value given for symbol '{}'; pass it in the mapping",
                    s.name
                ))
            })?,
            Node::Add { constant, terms } => {
                let mut acc = *constant;
                for (t, c) in terms.iter() {
                    let tv = t.eval_memo(values, memo)?;
                    acc = acc
                        .checked_add(tv.checked_mul(*c).ok_or_else(|| ov("evaluation"))?)
                        .ok_or_else(|| ov("evaluation"))?;
                }
                acc
            }
            Node::Mul { factors } => {
                let mut acc: i64 = 1;
                for (f, e) in factors.iter() {
                    let fv = f.eval_memo(values, memo)?;
                    let p = fv.checked_pow(*e).ok_or_else(|| ov("evaluation"))?;
                    acc = acc.checked_mul(p).ok_or_else(|| ov("evaluation"))?;
                }
                acc
            }
            Node::FloorDiv(a, b) | Node::CleanDiv(a, b) => {
                floor_div(a.eval_memo(values, memo)?, b.eval_memo(values, memo)?)?
            }
            Node::ModularIndexing(a, b, c) => {
                let q = floor_div(a.eval_memo(values, memo)?, b.eval_memo(values, memo)?)?;
                let m = c.eval_memo(values, memo)?;
                if m < 0 {
                    return Err(SymError::Value(format!(
                        "ModularIndexing evaluated with a negative modulus ({m}); its modulus must \
                         be positive"
                    )));
                }
                floor_mod(q, m)?
            }
            Node::Mod(a, b) => floor_mod(a.eval_memo(values, memo)?, b.eval_memo(values, memo)?)?,
            Node::Min(args) => {
                let mut best = i64::MAX;
                for a in args.iter() {
                    best = best.min(a.eval_memo(values, memo)?);
                }
                best
            }
            Node::Max(args) => {
                let mut best = i64::MIN;
                for a in args.iter() {
                    best = best.max(a.eval_memo(values, memo)?);
                }
                best
            }
        };
        memo.insert(*self, v);
        Ok(v)
    }
}

/// Python's `a // b` on i64, with errors instead of panics.
pub fn floor_div(a: i64, b: i64) -> SymResult<i64> {
    if b == 0 {
        return Err(SymError::ZeroDivision(format!(
            "integer division by zero: {a} // 0"
        )));
    }
    let q = a.checked_div(b).ok_or_else(|| overflow("floor division"))?;
    Ok(if (a % b != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    })
}

/// Python's `a % b` on i64 (result has the sign of b), with errors instead of panics.
pub fn floor_mod(a: i64, b: i64) -> SymResult<i64> {
    if b == 0 {
        return Err(SymError::ZeroDivision(format!(
            "integer modulo by zero: {a} % 0"
        )));
    }
    if b == -1 {
        return Ok(0);
    }
    let r = a % b;
    Ok(if r != 0 && ((r < 0) != (b < 0)) {
        r + b
    } else {
        r
    })
}

/// Greatest common divisor (non-negative).
pub fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        let t = a % b;
        a = b;
        b = t;
    }
    a.min(i64::MAX as u64) as i64
}
