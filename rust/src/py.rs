//! Python bindings: the `tilefuse._native` extension module (compiled only with the `python`
//! feature, which maturin enables).
//!
//! `Expr` wraps an interned core `Expr` (a pointer), so building a Python object is the only
//! allocation an operation adds. Every argument that takes an expression also takes a Python int
//! (or anything with `__index__`, e.g. a numpy or sympy integer); ints outside int64 raise
//! `OverflowError`. Core errors map to Python exceptions (`SymError::ZeroDivision` →
//! `ZeroDivisionError`, `Value` and `UnknownSymbol` → `ValueError`, `Overflow` → `OverflowError`,
//! `CantSplit` → `tilefuse._native.CantSplit`), and every call into the core runs under
//! `catch_unwind`, so a bug in the core surfaces as a `RuntimeError`, never as a panic.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::basic::CompareOp;
use pyo3::create_exception;
use pyo3::exceptions::{
    PyException, PyOverflowError, PyRuntimeError, PyTypeError, PyValueError, PyZeroDivisionError,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFrozenSet, PyInt, PyString, PyTuple};
use rustc_hash::FxHashMap;

use crate::error::{SymError, SymResult};
use crate::expr::{Expr, Node, SymKind};
use crate::interval::Interval;

create_exception!(
    tilefuse._native,
    CantSplit,
    PyException,
    "split_iteration_ranges could not map a node's iteration sizes onto the kernel's range groups."
);

// ------------------------------------------------------------------------------ errors

fn sym_err(e: SymError) -> PyErr {
    match e {
        SymError::ZeroDivision(m) => PyZeroDivisionError::new_err(m),
        SymError::Value(m) | SymError::UnknownSymbol(m) => PyValueError::new_err(m),
        SymError::Overflow(m) => PyOverflowError::new_err(m),
        SymError::CantSplit(m) => CantSplit::new_err(m),
    }
}

fn panic_err(p: Box<dyn std::any::Any + Send>) -> PyErr {
    let msg = if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    };
    PyRuntimeError::new_err(format!(
        "internal error in tilefuse's native symbolic core ({msg}); please report it with the \
         expression that triggered it"
    ))
}

/// Run a core operation: map its error, and turn a (never expected) panic into RuntimeError.
#[inline]
fn run<T>(f: impl FnOnce() -> SymResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(sym_err(e)),
        Err(p) => Err(panic_err(p)),
    }
}

/// Like `run` for infallible core calls.
#[inline]
fn run_ok<T>(f: impl FnOnce() -> T) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(f)).map_err(panic_err)
}

fn int_overflow(obj: &Bound<'_, PyAny>) -> PyErr {
    let shown = obj
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "<int>".into());
    PyOverflowError::new_err(format!(
        "the integer {shown} does not fit in a signed 64-bit integer; index expressions must \
         stay within int64"
    ))
}

// ------------------------------------------------------------------------------ Expr

/// An immutable integer index expression (interned: equal expressions are the same object in the
/// native core, so `==` and `hash` are O(1)). Floor semantics: `a // b` and `a % b` are Python's.
#[pyclass(frozen, name = "Expr", module = "tilefuse._native")]
pub struct PyExpr {
    pub(crate) e: Expr,
}

#[inline]
fn new_obj(py: Python<'_>, e: Expr) -> PyResult<Py<PyAny>> {
    Ok(Bound::new(py, PyExpr { e })?.into_any().unbind())
}

/// The expression an object stands for: an `Expr`, or an int-like (`__index__`) object.
/// `Ok(None)` when the object is neither; `OverflowError` for ints outside int64.
#[inline]
fn as_expr(obj: &Bound<'_, PyAny>) -> PyResult<Option<Expr>> {
    if let Ok(p) = obj.cast::<PyExpr>() {
        let e = p.get().e;
        if e.depth() > crate::expr::MAX_DEPTH {
            return Err(PyValueError::new_err(format!(
                "expression nested {} levels deep; tilefuse accepts at most {} levels (index \
                 expressions are a few levels deep — build it flatter)",
                e.depth(),
                crate::expr::MAX_DEPTH
            )));
        }
        return Ok(Some(e));
    }
    int_like(obj).map(|o| o.map(int_expr))
}

const INT_CACHE_SLOTS: usize = 1024;

thread_local! {
    /// Direct-mapped cache of interned integers: interning takes the global interner lock, and
    /// the same few literals (strides, sizes, divisors) recur in almost every call. Interned
    /// expressions live for the whole process, so a cached one never dangles.
    static INT_CACHE: [std::cell::Cell<Option<(i64, Expr)>>; INT_CACHE_SLOTS] =
        const { [const { std::cell::Cell::new(None) }; INT_CACHE_SLOTS] };
}

/// `Expr::int(v)` through the per-thread cache.
#[inline]
fn int_expr(v: i64) -> Expr {
    let slot = ((v as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) as usize;
    INT_CACHE
        .try_with(|c| match c[slot].get() {
            Some((k, e)) if k == v => e,
            _ => {
                let e = Expr::int(v);
                c[slot].set(Some((v, e)));
                e
            }
        })
        .unwrap_or_else(|_| Expr::int(v))
}

/// An int-like object's value: `Ok(None)` when it is not int-like (no `__index__`, or a float).
#[inline]
fn int_like(obj: &Bound<'_, PyAny>) -> PyResult<Option<i64>> {
    if let Ok(i) = obj.cast::<PyInt>() {
        return match i.extract::<i64>() {
            Ok(v) => Ok(Some(v)),
            Err(_) => Err(int_overflow(obj)),
        };
    }
    if obj.cast::<PyString>().is_ok() || !obj.hasattr("__index__").unwrap_or(false) {
        return Ok(None);
    }
    match obj.extract::<i64>() {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => Err(int_overflow(obj)),
        Err(_) => Ok(None),
    }
}

/// A required expression argument (TypeError naming the argument otherwise).
fn expr_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Expr> {
    match as_expr(obj)? {
        Some(e) => Ok(e),
        None => Err(PyTypeError::new_err(format!(
            "{what}: expected a tilefuse Expr or an int, got {}",
            type_name(obj)
        ))),
    }
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// `Expr` argument of a `#[pyfunction]` (an `Expr` or an int-like object).
pub struct ExprLike(pub Expr);

impl<'a, 'py> FromPyObject<'a, 'py> for ExprLike {
    type Error = PyErr;
    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let obj = obj.to_owned();
        match as_expr(&obj)? {
            Some(e) => Ok(ExprLike(e)),
            None => Err(PyTypeError::new_err(format!(
                "expected a tilefuse Expr or an int, got {}",
                type_name(&obj)
            ))),
        }
    }
}

/// CPython's hash of an int (so that `hash(Integer(v)) == hash(v)`, as `Integer(v) == v`).
fn py_int_hash(v: i64) -> isize {
    const M: i128 = (1i128 << 61) - 1;
    let a = (v as i128).abs() % M;
    let h = if v < 0 { -a } else { a } as i64;
    (if h == -1 { -2 } else { h }) as isize
}

fn kind_str(k: SymKind) -> &'static str {
    match k {
        SymKind::Size => "size",
        SymKind::Precomputed => "precomputed",
        SymKind::Index => "index",
        SymKind::Indirect => "indirect",
        SymKind::Unbacked => "unbacked",
        SymKind::Other => "other",
    }
}

fn parse_kind(s: &str) -> PyResult<SymKind> {
    Ok(match s {
        "size" => SymKind::Size,
        "precomputed" => SymKind::Precomputed,
        "index" => SymKind::Index,
        "indirect" => SymKind::Indirect,
        "unbacked" => SymKind::Unbacked,
        "other" => SymKind::Other,
        _ => {
            return Err(PyValueError::new_err(format!(
                "unknown symbol kind {s:?}: use one of 'size', 'precomputed', 'index', \
                 'indirect', 'unbacked', 'other'"
            )))
        }
    })
}

fn node_kind(e: Expr) -> &'static str {
    match e.node() {
        Node::Int(_) => "Integer",
        Node::Sym(_) => "Symbol",
        Node::Add { .. } => "Add",
        Node::Mul { .. } => "Mul",
        Node::FloorDiv(..) => "FloorDiv",
        Node::CleanDiv(..) => "CleanDiv",
        Node::ModularIndexing(..) => "ModularIndexing",
        Node::Mod(..) => "Mod",
        Node::Min(_) => "Min",
        Node::Max(_) => "Max",
    }
}

/// sympy's kind of a node (see `PyExpr::kind`).
fn py_kind(e: Expr) -> &'static str {
    match e.node() {
        Node::Add { constant: 0, terms } if terms.len() == 1 => "Mul",
        Node::Mul { factors } if factors.len() == 1 => "Pow",
        _ => node_kind(e),
    }
}

/// sympy's arguments of a node (see `PyExpr::args`).
fn py_args(e: Expr) -> SymResult<Vec<Expr>> {
    let factor_args = |t: Expr, out: &mut Vec<Expr>| -> SymResult<()> {
        match t.node() {
            Node::Mul { factors } if factors.len() > 1 => {
                for &(f, k) in factors.iter() {
                    out.push(f.pow(k)?);
                }
            }
            _ => out.push(t),
        }
        Ok(())
    };
    Ok(match e.node() {
        Node::Int(_) | Node::Sym(_) => vec![],
        Node::Add { constant: 0, terms } if terms.len() == 1 => {
            let (t, c) = terms[0];
            let mut v = vec![Expr::int(c)];
            factor_args(t, &mut v)?;
            v
        }
        Node::Add { constant, terms } => {
            let mut v = Vec::with_capacity(terms.len() + 1);
            if *constant != 0 {
                v.push(Expr::int(*constant));
            }
            for &(t, c) in terms.iter() {
                v.push(t.scale(c)?);
            }
            v
        }
        Node::Mul { factors } if factors.len() == 1 => {
            vec![factors[0].0, Expr::int(factors[0].1 as i64)]
        }
        Node::Mul { .. } => {
            let mut v = Vec::new();
            factor_args(e, &mut v)?;
            v
        }
        _ => e.children(),
    })
}

fn end(v: i128, finite: bool) -> Option<i64> {
    finite.then_some(v as i64)
}

/// Bounds of an interval as Python `(lo, hi)` with None for an infinite end.
pub(crate) fn interval_pair(r: Interval) -> (Option<i64>, Option<i64>) {
    (end(r.lo, r.lo_finite()), end(r.hi, r.hi_finite()))
}

type BinFn = fn(&Expr, &Expr) -> SymResult<Expr>;

/// A binary operator: NotImplemented for a non-expression operand, `f(self, other)` (or
/// `f(other, self)` for the reflected form) otherwise.
#[inline]
fn binop(a: Expr, other: &Bound<'_, PyAny>, reflected: bool, f: BinFn) -> PyResult<Py<PyAny>> {
    let py = other.py();
    match as_expr(other)? {
        None => Ok(py.NotImplemented()),
        Some(o) => {
            let r = if reflected {
                run(|| f(&o, &a))?
            } else {
                run(|| f(&a, &o))?
            };
            new_obj(py, r)
        }
    }
}

#[pymethods]
impl PyExpr {
    fn __add__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binop(self.e, other, false, |a, b| a.add(b))
    }
    fn __radd__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binop(self.e, other, true, |a, b| a.add(b))
    }
    fn __sub__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binop(self.e, other, false, |a, b| a.sub(b))
    }
    fn __rsub__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binop(self.e, other, true, |a, b| a.sub(b))
    }
    fn __mul__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binop(self.e, other, false, |a, b| a.mul(b))
    }
    fn __rmul__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binop(self.e, other, true, |a, b| a.mul(b))
    }
    fn __floordiv__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binop(self.e, other, false, |a, b| a.floordiv(b))
    }
    fn __rfloordiv__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binop(self.e, other, true, |a, b| a.floordiv(b))
    }
    fn __mod__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binop(self.e, other, false, |a, b| a.floor_mod(b))
    }
    fn __rmod__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binop(self.e, other, true, |a, b| a.floor_mod(b))
    }

    fn __truediv__(&self, _other: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(PyTypeError::new_err(
            "index expressions are integers: use // (FloorDiv), CleanDiv (exact) or CeilDiv, \
             not true division /",
        ))
    }
    fn __rtruediv__(&self, other: &Bound<'_, PyAny>) -> PyResult<()> {
        self.__truediv__(other)
    }

    fn __pow__(
        &self,
        exponent: &Bound<'_, PyAny>,
        modulo: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let py = exponent.py();
        if !modulo.is_none() {
            return Ok(py.NotImplemented());
        }
        let n = match int_like(exponent)? {
            Some(n) => n,
            None => return Ok(py.NotImplemented()),
        };
        if n < 0 || n > u32::MAX as i64 {
            return Err(PyValueError::new_err(format!(
                "index expressions only take non-negative integer powers, got exponent {n}"
            )));
        }
        let a = self.e;
        new_obj(py, run(|| a.pow(n as u32))?)
    }

    fn __neg__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let a = self.e;
        new_obj(py, run(|| a.neg())?)
    }
    fn __pos__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __richcmp__(&self, other: &Bound<'_, PyAny>, op: CompareOp) -> PyResult<Py<PyAny>> {
        let py = other.py();
        let eq = if let Ok(p) = other.cast::<PyExpr>() {
            p.get().e == self.e
        } else {
            match int_like(other) {
                Ok(Some(v)) => self.e.as_int() == Some(v),
                Ok(None) => return Ok(py.NotImplemented()),
                Err(_) => false, // an int beyond int64 equals no expression
            }
        };
        let r = match op {
            CompareOp::Eq => eq,
            CompareOp::Ne => !eq,
            _ => return Ok(py.NotImplemented()),
        };
        Ok(pyo3::types::PyBool::new(py, r)
            .to_owned()
            .into_any()
            .unbind())
    }

    fn __hash__(&self) -> isize {
        match self.e.as_int() {
            Some(v) => py_int_hash(v),
            None => {
                let h = self.e.structural_hash() as i64 as isize;
                if h == -1 {
                    -2
                } else {
                    h
                }
            }
        }
    }

    fn __repr__(&self) -> String {
        crate::print::sympy_str(self.e)
    }
    fn __str__(&self) -> String {
        crate::print::sympy_str(self.e)
    }

    fn __int__(&self) -> PyResult<i64> {
        self.e.as_int().ok_or_else(|| {
            PyTypeError::new_err(format!(
                "cannot convert the symbolic expression {} to int; evaluate() it at a point first",
                crate::print::sympy_str(self.e)
            ))
        })
    }
    fn __index__(&self) -> PyResult<i64> {
        self.__int__()
    }
    /// As sympy: an integer is true when non-zero; a symbolic expression is always true.
    fn __bool__(&self) -> bool {
        self.e.as_int() != Some(0)
    }

    fn __copy__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }
    fn __deepcopy__<'py>(slf: Bound<'py, Self>, _memo: &Bound<'py, PyAny>) -> Bound<'py, Self> {
        slf
    }
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (Py<PyAny>,))> {
        let f = PyModule::import(py, "tilefuse._native")?.getattr("_from_tree")?;
        Ok((f, (to_tree(py, self.e)?,)))
    }

    /// sympy's view of the node: "Integer", "Symbol", "Add", "Mul" (a product, or an integer
    /// coefficient times a term), "Pow" (one factor with an exponent > 1), "FloorDiv",
    /// "CleanDiv", "ModularIndexing", "Mod", "Min" or "Max".
    #[getter]
    fn kind(&self) -> &'static str {
        py_kind(self.e)
    }

    /// sympy-like arguments, each strictly smaller than the node (so tree walks terminate):
    /// Add → (constant?, term, ...), Mul → (coefficient?, factor, ...), Pow → (base, exponent),
    /// functions → their operands, atoms → ().
    #[getter]
    fn args<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let a = self.e;
        let items = run(|| py_args(a))?;
        let objs: PyResult<Vec<Py<PyAny>>> = items.into_iter().map(|e| new_obj(py, e)).collect();
        PyTuple::new(py, objs?)
    }

    /// The constructor of this node kind, so that `e.func(*e.args) == e` for every non-atom.
    #[getter]
    fn func<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let name = match self.e.node() {
            Node::Sym(_) => "sym",
            _ => py_kind(self.e),
        };
        PyModule::import(py, "tilefuse._native")?.getattr(name)
    }

    /// Add: the integer constant term (0 when absent). Integer: its value. Otherwise 0.
    #[getter]
    fn constant(&self) -> i64 {
        match self.e.node() {
            Node::Add { constant, .. } => *constant,
            Node::Int(v) => *v,
            _ => 0,
        }
    }

    /// `((term, coeff), ...)` with `self == constant + Σ coeff*term` (a non-sum is one term with
    /// coefficient 1; an integer has no terms).
    #[getter]
    fn terms<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let pairs: Vec<(Expr, i64)> = match self.e.node() {
            Node::Int(_) => vec![],
            Node::Add { terms, .. } => terms.to_vec(),
            _ => vec![(self.e, 1)],
        };
        let objs: PyResult<Vec<(Py<PyAny>, i64)>> = pairs
            .into_iter()
            .map(|(t, c)| Ok((new_obj(py, t)?, c)))
            .collect();
        PyTuple::new(py, objs?)
    }

    /// `((factor, exponent), ...)` of a product term (a non-product is one factor with exponent
    /// 1; an integer or a sum has no factors).
    #[getter]
    fn factors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let pairs: Vec<(Expr, u32)> = match self.e.node() {
            Node::Int(_) | Node::Add { .. } => vec![],
            Node::Mul { factors } => factors.to_vec(),
            _ => vec![(self.e, 1)],
        };
        let objs: PyResult<Vec<(Py<PyAny>, u32)>> = pairs
            .into_iter()
            .map(|(t, c)| Ok((new_obj(py, t)?, c)))
            .collect();
        PyTuple::new(py, objs?)
    }

    /// True for an integer literal (unlike sympy's `is_integer`, which is True for every
    /// integer-valued expression: every tilefuse Expr is integer-valued).
    #[getter]
    fn is_integer(&self) -> bool {
        self.e.as_int().is_some()
    }
    /// Alias of `is_integer` (sympy's `is_number`: no free symbols).
    #[getter]
    fn is_number(&self) -> bool {
        self.e.as_int().is_some()
    }
    #[getter]
    fn is_symbol(&self) -> bool {
        self.e.is_symbol()
    }
    /// Symbol name, or None for a non-symbol.
    #[getter]
    fn name(&self) -> Option<&'static str> {
        self.e.as_symbol().map(|s| &*s.name)
    }
    /// Integer value, or None for a non-integer.
    #[getter]
    fn int_value(&self) -> Option<i64> {
        self.e.as_int()
    }
    /// Symbol kind ("size", "precomputed", "index", "indirect", "unbacked", "other"), or None.
    #[getter]
    fn symbol_kind(&self) -> Option<&'static str> {
        self.e.as_symbol().map(|s| kind_str(s.kind))
    }
    /// Provably ≥ 0 from the symbols' assumptions alone.
    #[getter]
    fn is_nonnegative(&self) -> bool {
        self.e.is_nonneg()
    }
    /// Provably ≥ 1 from the symbols' assumptions alone.
    #[getter]
    fn is_positive(&self) -> bool {
        self.e.is_positive()
    }
    /// `(lo, hi)` the symbols' assumptions allow (None = unbounded on that side).
    #[getter]
    fn assumed_range(&self) -> (Option<i64>, Option<i64>) {
        interval_pair(self.e.range())
    }

    /// Free symbols as a frozenset of symbol Exprs.
    #[getter]
    fn free_symbols<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyFrozenSet>> {
        let a = self.e;
        let syms = run_ok(|| a.free_symbols())?;
        let objs: PyResult<Vec<Py<PyAny>>> = syms.into_iter().map(|s| new_obj(py, s)).collect();
        PyFrozenSet::new(py, objs?)
    }

    /// Free symbols as a tuple in the deterministic structural order (`x2` before `x10`).
    fn sorted_free_symbols<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let a = self.e;
        let syms = run_ok(|| a.free_symbols())?;
        let objs: PyResult<Vec<Py<PyAny>>> = syms.into_iter().map(|s| new_obj(py, s)).collect();
        PyTuple::new(py, objs?)
    }

    /// Does `sub` (an Expr or an int) occur in this expression as a node?
    fn has(&self, sub: ExprLike) -> PyResult<bool> {
        let a = self.e;
        run_ok(|| a.has(&sub.0))
    }

    /// Value at an integer point. `mapping`: {symbol Expr or symbol name: int}.
    /// Errors: a missing symbol → ValueError naming it; division by zero → ZeroDivisionError;
    /// an int64 overflow anywhere → OverflowError.
    fn evaluate(&self, mapping: &Bound<'_, PyAny>) -> PyResult<i64> {
        let mut by_expr: FxHashMap<Expr, i64> = FxHashMap::default();
        let mut by_name: FxHashMap<String, i64> = FxHashMap::default();
        for_each_item(mapping, |k, v| {
            let val = match int_like(&v)? {
                Some(x) => x,
                None => match v.cast::<PyExpr>().ok().and_then(|p| p.get().e.as_int()) {
                    Some(x) => x,
                    None => {
                        return Err(PyTypeError::new_err(format!(
                            "evaluate(): the value of {} must be an int, got {}",
                            k.repr()?,
                            v.repr()?
                        )))
                    }
                },
            };
            if let Ok(s) = k.cast::<PyString>() {
                by_name.insert(s.to_str()?.to_owned(), val);
            } else if let Ok(p) = k.cast::<PyExpr>() {
                by_expr.insert(p.get().e, val);
            } else {
                return Err(PyTypeError::new_err(format!(
                    "evaluate(): mapping keys must be symbols (Expr) or symbol names (str), got {}",
                    type_name(&k)
                )));
            }
            Ok(())
        })?;
        let a = self.e;
        run(|| {
            a.evaluate(&|s: &Expr| {
                by_expr.get(s).copied().or_else(|| {
                    if by_name.is_empty() {
                        None
                    } else {
                        s.as_symbol().and_then(|i| by_name.get(&*i.name).copied())
                    }
                })
            })
        })
    }

    /// Simultaneous substitution. `mapping`: {Expr or symbol name: Expr or int}; the
    /// construction rules re-apply on the way up. A name matches every free symbol of that name.
    fn subs(&self, py: Python<'_>, mapping: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let mut map: FxHashMap<Expr, Expr> = FxHashMap::default();
        let mut syms: Option<Vec<Expr>> = None;
        let a = self.e;
        for_each_item(mapping, |k, v| {
            let val = expr_arg(&v, "subs() value")?;
            if let Ok(s) = k.cast::<PyString>() {
                let name = s.to_str()?;
                let fs = match &syms {
                    Some(f) => f,
                    None => syms.insert(run_ok(|| a.free_symbols())?),
                };
                for f in fs.iter() {
                    if f.as_symbol().is_some_and(|i| &*i.name == name) {
                        map.insert(*f, val);
                    }
                }
            } else {
                map.insert(expr_arg(&k, "subs() key")?, val);
            }
            Ok(())
        })?;
        new_obj(py, run(|| a.subs(&map))?)
    }
}

/// Iterate a dict (fast path) or any mapping with `.items()`.
fn for_each_item<'py>(
    mapping: &Bound<'py, PyAny>,
    mut f: impl FnMut(Bound<'py, PyAny>, Bound<'py, PyAny>) -> PyResult<()>,
) -> PyResult<()> {
    if let Ok(d) = mapping.cast::<PyDict>() {
        for (k, v) in d.iter() {
            f(k, v)?;
        }
        return Ok(());
    }
    let items = mapping.call_method0("items").map_err(|_| {
        PyTypeError::new_err(format!(
            "expected a mapping (dict), got {}",
            type_name(mapping)
        ))
    })?;
    for item in items.try_iter()? {
        let (k, v): (Bound<'py, PyAny>, Bound<'py, PyAny>) = item?.extract()?;
        f(k, v)?;
    }
    Ok(())
}

// ------------------------------------------------------------------------------ pickling

fn to_tree(py: Python<'_>, e: Expr) -> PyResult<Py<PyAny>> {
    Ok(match e.node() {
        Node::Int(v) => v.into_pyobject(py)?.into_any().unbind(),
        Node::Sym(s) => {
            let (lo, hi) = interval_pair(s.range);
            ("Symbol", &*s.name, kind_str(s.kind), lo, hi)
                .into_pyobject(py)?
                .into_any()
                .unbind()
        }
        Node::Add { constant, terms } => {
            let ts: PyResult<Vec<(Py<PyAny>, i64)>> = terms
                .iter()
                .map(|&(t, c)| Ok((to_tree(py, t)?, c)))
                .collect();
            ("Add", *constant, PyTuple::new(py, ts?)?)
                .into_pyobject(py)?
                .into_any()
                .unbind()
        }
        Node::Mul { factors } => {
            let fs: PyResult<Vec<(Py<PyAny>, u32)>> = factors
                .iter()
                .map(|&(t, c)| Ok((to_tree(py, t)?, c)))
                .collect();
            ("Mul", PyTuple::new(py, fs?)?)
                .into_pyobject(py)?
                .into_any()
                .unbind()
        }
        _ => {
            let mut items: Vec<Py<PyAny>> =
                vec![node_kind(e).into_pyobject(py)?.into_any().unbind()];
            for c in e.children() {
                items.push(to_tree(py, c)?);
            }
            PyTuple::new(py, items)?.into_any().unbind()
        }
    })
}

fn from_tree(obj: &Bound<'_, PyAny>) -> PyResult<Expr> {
    if let Some(v) = int_like(obj)? {
        return Ok(int_expr(v));
    }
    let bad = || PyValueError::new_err("malformed tilefuse Expr pickle");
    let t = obj.cast::<PyTuple>().map_err(|_| bad())?;
    let tag: String = t.get_item(0)?.extract()?;
    let sub = |i: usize| -> PyResult<Expr> { from_tree(&t.get_item(i)?) };
    match tag.as_str() {
        "Symbol" => {
            let (_, name, kind, lo, hi): (String, String, String, Option<i64>, Option<i64>) =
                t.extract()?;
            let k = parse_kind(&kind)?;
            run(|| Expr::symbol_with(&name, Some(k), lo, hi))
        }
        "Add" => {
            let constant: i64 = t.get_item(1)?.extract()?;
            let mut items = Vec::new();
            for p in t.get_item(2)?.try_iter()? {
                let (x, c): (Bound<'_, PyAny>, i64) = p?.extract()?;
                items.push((from_tree(&x)?, c));
            }
            run(|| Expr::linear_combination(constant, &items))
        }
        "Mul" => {
            let mut acc = Expr::one();
            for p in t.get_item(1)?.try_iter()? {
                let (x, k): (Bound<'_, PyAny>, u32) = p?.extract()?;
                let f = from_tree(&x)?;
                acc = run(|| acc.mul(&f.pow(k)?))?;
            }
            Ok(acc)
        }
        "FloorDiv" => {
            let (a, b) = (sub(1)?, sub(2)?);
            run(|| a.floordiv(&b))
        }
        "CleanDiv" => {
            let (a, b) = (sub(1)?, sub(2)?);
            run(|| a.clean_div(&b))
        }
        "Mod" => {
            let (a, b) = (sub(1)?, sub(2)?);
            run(|| a.floor_mod(&b))
        }
        "ModularIndexing" => {
            let (a, b, c) = (sub(1)?, sub(2)?, sub(3)?);
            run(|| a.modular_indexing(&b, &c))
        }
        "Min" | "Max" => {
            let args: PyResult<Vec<Expr>> = (1..t.len()).map(sub).collect();
            let args = args?;
            if tag == "Min" {
                run(|| Expr::min_of(&args))
            } else {
                run(|| Expr::max_of(&args))
            }
        }
        _ => Err(bad()),
    }
}

#[pyfunction]
fn _from_tree(py: Python<'_>, tree: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    new_obj(py, from_tree(tree)?)
}

// ------------------------------------------------------------------------------ constructors

/// A symbol. Kind from the name prefix (x/y/z/r/i/q/d index variables ≥ 0, s/ks/ps sizes ≥ 1,
/// tmp indirect ≥ 0, u unbacked ≥ 0, others unknown) unless `kind` is given; for an unknown-prefix
/// name, positive=True makes it size-like and nonnegative=True index-like. `positive`/`nonnegative`
/// /`lower`/`upper` narrow the range (False: ≤ 0 / ≤ -1). An empty range or a bad name →
/// ValueError.
#[pyfunction]
#[pyo3(signature = (name, *, nonnegative=None, positive=None, lower=None, upper=None, kind=None))]
fn sym(
    py: Python<'_>,
    name: &str,
    nonnegative: Option<bool>,
    positive: Option<bool>,
    lower: Option<i64>,
    upper: Option<i64>,
    kind: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let mut k = match kind {
        Some(s) => Some(parse_kind(s)?),
        None => None,
    };
    if k.is_none() && SymKind::from_name(name) == SymKind::Other {
        if positive == Some(true) {
            k = Some(SymKind::Size);
        } else if nonnegative == Some(true) {
            k = Some(SymKind::Index);
        }
    }
    let raise_lo = |l: Option<i64>, v: i64| Some(l.map_or(v, |l| l.max(v)));
    let cut_hi = |h: Option<i64>, v: i64| Some(h.map_or(v, |h| h.min(v)));
    let (mut lo, mut hi) = (lower, upper);
    match positive {
        Some(true) => lo = raise_lo(lo, 1),
        Some(false) => hi = cut_hi(hi, 0),
        None => {}
    }
    match nonnegative {
        Some(true) => lo = raise_lo(lo, 0),
        Some(false) => hi = cut_hi(hi, -1),
        None => {}
    }
    new_obj(py, run(|| Expr::symbol_with(name, k, lo, hi))?)
}

/// The integer literal `value` as an Expr (OverflowError outside int64).
#[pyfunction]
#[pyo3(name = "Integer")]
fn integer(py: Python<'_>, value: ExprLike) -> PyResult<Py<PyAny>> {
    match value.0.as_int() {
        Some(_) => new_obj(py, value.0),
        None => Err(PyTypeError::new_err("Integer() takes an int")),
    }
}

/// `base // divisor` (Python floor division) with Inductor's FloorDiv rules.
#[pyfunction]
#[pyo3(name = "FloorDiv")]
fn floor_div(py: Python<'_>, base: ExprLike, divisor: ExprLike) -> PyResult<Py<PyAny>> {
    new_obj(py, run(|| base.0.floordiv(&divisor.0))?)
}

/// `(base // divisor) % modulus` with Inductor's ModularIndexing rules.
#[pyfunction]
#[pyo3(name = "ModularIndexing")]
fn modular_indexing(
    py: Python<'_>,
    base: ExprLike,
    divisor: ExprLike,
    modulus: ExprLike,
) -> PyResult<Py<PyAny>> {
    new_obj(py, run(|| base.0.modular_indexing(&divisor.0, &modulus.0))?)
}

/// Exact division: the caller promises `divisor` divides `base` (evaluates as floor division).
#[pyfunction]
#[pyo3(name = "CleanDiv")]
fn clean_div(py: Python<'_>, base: ExprLike, divisor: ExprLike) -> PyResult<Py<PyAny>> {
    new_obj(py, run(|| base.0.clean_div(&divisor.0))?)
}

/// Ceiling division `-((-base) // divisor)`.
#[pyfunction]
#[pyo3(name = "CeilDiv")]
fn ceil_div(py: Python<'_>, base: ExprLike, divisor: ExprLike) -> PyResult<Py<PyAny>> {
    new_obj(py, run(|| base.0.ceil_div(&divisor.0))?)
}

/// Python's `p % q` (floor modulus: the result has the sign of q).
#[pyfunction]
#[pyo3(name = "Mod")]
fn floor_mod(py: Python<'_>, p: ExprLike, q: ExprLike) -> PyResult<Py<PyAny>> {
    new_obj(py, run(|| p.0.floor_mod(&q.0))?)
}

fn collect_args(args: &Bound<'_, PyTuple>, what: &str) -> PyResult<Vec<Expr>> {
    let mut v = Vec::with_capacity(args.len());
    for a in args.iter() {
        v.push(expr_arg(&a, what)?);
    }
    Ok(v)
}

/// Minimum of one or more expressions (ValueError when empty).
#[pyfunction]
#[pyo3(name = "Min", signature = (*args))]
fn min_(py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
    let v = collect_args(args, "Min()")?;
    new_obj(py, run(|| Expr::min_of(&v))?)
}

/// Maximum of one or more expressions (ValueError when empty).
#[pyfunction]
#[pyo3(name = "Max", signature = (*args))]
fn max_(py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
    let v = collect_args(args, "Max()")?;
    new_obj(py, run(|| Expr::max_of(&v))?)
}

/// Sum of the arguments (0 when empty).
#[pyfunction]
#[pyo3(name = "Add", signature = (*args))]
fn add_(py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
    let v = collect_args(args, "Add()")?;
    new_obj(py, run(|| Expr::sum(&v))?)
}

/// Product of the arguments (1 when empty), expanded over sums.
#[pyfunction]
#[pyo3(name = "Mul", signature = (*args))]
fn mul_(py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
    let v = collect_args(args, "Mul()")?;
    new_obj(py, run(|| Expr::product(&v))?)
}

/// `base ** exponent` for a non-negative integer exponent (ValueError otherwise).
#[pyfunction]
#[pyo3(name = "Pow")]
fn pow_(py: Python<'_>, base: ExprLike, exponent: ExprLike) -> PyResult<Py<PyAny>> {
    match exponent.0.as_int() {
        Some(n) if (0..=u32::MAX as i64).contains(&n) => new_obj(py, run(|| base.0.pow(n as u32))?),
        _ => Err(PyValueError::new_err(format!(
            "Pow: the exponent must be a non-negative integer, got {}",
            crate::print::sympy_str(exponent.0)
        ))),
    }
}

/// Python source for `expr` (floor `//` and `%`, `min`/`max` builtins): Inductor's `pexpr`.
#[pyfunction]
fn pexpr(expr: ExprLike) -> PyResult<String> {
    run_ok(|| crate::print::pexpr(expr.0))
}

/// Triton source for `expr` with index dtype "tl.int32" or "tl.int64" (default). Plain `//`/`%`
/// only where the operands are provably non-negative (divisor positive); otherwise a
/// floor-correct `tl.where` form. ValueError for an unknown dtype or an int32-overflowing literal.
#[pyfunction]
#[pyo3(signature = (expr, index_dtype="tl.int64"))]
fn texpr(expr: ExprLike, index_dtype: &str) -> PyResult<String> {
    run(|| crate::print::texpr(expr.0, index_dtype))
}

/// Number of distinct expressions interned so far in this process.
#[pyfunction]
fn interned_count() -> usize {
    crate::expr::interned_count()
}

// ------------------------------------------------------------------------------ simplify

/// Variable ranges from Python: None, a mapping {symbol: length} or an iterable of
/// (symbol, length) pairs. Lengths are Exprs or ints; the symbol ranges over `0..length`.
fn ranges_arg(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(Expr, Expr)>> {
    let mut out: Vec<(Expr, Expr)> = Vec::new();
    let Some(obj) = obj else { return Ok(out) };
    if obj.is_none() {
        return Ok(out);
    }
    let mut push = |k: Bound<'_, PyAny>, v: Bound<'_, PyAny>| -> PyResult<()> {
        let key = match k.cast::<PyExpr>() {
            Ok(p) if p.get().e.is_symbol() => p.get().e,
            _ => {
                return Err(PyTypeError::new_err(format!(
                    "ranges: keys must be symbols (Expr from sym()), got {}",
                    k.repr()?
                )))
            }
        };
        out.push((key, expr_arg(&v, "ranges: length")?));
        Ok(())
    };
    if obj.cast::<PyDict>().is_ok() || obj.hasattr("items")? {
        for_each_item(obj, &mut push)?;
    } else {
        for item in obj.try_iter()? {
            let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
            push(k, v)?;
        }
    }
    Ok(out)
}

fn exprs(v: Vec<ExprLike>) -> Vec<Expr> {
    v.into_iter().map(|e| e.0).collect()
}

fn wrap_all(v: Vec<Expr>) -> Vec<PyExpr> {
    v.into_iter().map(|e| PyExpr { e }).collect()
}

fn wrap_nested(v: Vec<Vec<Expr>>) -> Vec<Vec<PyExpr>> {
    v.into_iter().map(wrap_all).collect()
}

fn nested(v: Vec<Vec<ExprLike>>) -> Vec<Vec<Expr>> {
    v.into_iter().map(exprs).collect()
}

/// `(lo, hi)` bounds of `expr` when each symbol of `ranges` lies in `0..length` and every other
/// symbol in its assumed range; None for an infinite end. Inductor's `bound_sympy`.
#[pyfunction]
#[pyo3(signature = (expr, ranges=None))]
fn bound(
    expr: ExprLike,
    ranges: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Option<i64>, Option<i64>)> {
    let r = ranges_arg(ranges)?;
    Ok(interval_pair(run_ok(|| {
        crate::simplify::bound(expr.0, &r)
    })?))
}

/// Inductor's `simplify_with_ranges`: `expr` simplified knowing each symbol of `ranges` lies in
/// `0..length`. Equal to `expr` at every point of that domain.
#[pyfunction]
#[pyo3(signature = (expr, ranges=None))]
fn simplify_with_ranges(
    py: Python<'_>,
    expr: ExprLike,
    ranges: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let r = ranges_arg(ranges)?;
    new_obj(
        py,
        run(|| crate::simplify::simplify_with_ranges(expr.0, &r))?,
    )
}

/// True only when `a == b` is proven for every point of the domain (False = not proven).
#[pyfunction]
#[pyo3(signature = (a, b, ranges=None))]
fn statically_known_equals(
    a: ExprLike,
    b: ExprLike,
    ranges: Option<&Bound<'_, PyAny>>,
) -> PyResult<bool> {
    let r = ranges_arg(ranges)?;
    run_ok(|| crate::simplify::statically_known_equals(a.0, b.0, &r))
}

/// True only when `a <= b` is proven for every point of the domain (False = not proven).
#[pyfunction]
#[pyo3(signature = (a, b, ranges=None))]
fn statically_known_leq(
    a: ExprLike,
    b: ExprLike,
    ranges: Option<&Bound<'_, PyAny>>,
) -> PyResult<bool> {
    let r = ranges_arg(ranges)?;
    run_ok(|| crate::simplify::statically_known_leq(a.0, b.0, &r))
}

/// True only when `a < b` is proven for every point of the domain (False = not proven).
#[pyfunction]
#[pyo3(signature = (a, b, ranges=None))]
fn statically_known_lt(
    a: ExprLike,
    b: ExprLike,
    ranges: Option<&Bound<'_, PyAny>>,
) -> PyResult<bool> {
    let r = ranges_arg(ranges)?;
    run_ok(|| crate::simplify::statically_known_lt(a.0, b.0, &r))
}

/// True only when `a` is provably a multiple of `b` for every value of the symbols.
#[pyfunction]
fn statically_known_multiple_of(a: ExprLike, b: ExprLike) -> PyResult<bool> {
    run_ok(|| crate::simplify::statically_known_multiple_of(a.0, b.0))
}

/// Inductor's `join_dimensions`: merge adjacent div/mod digits of the same base.
#[pyfunction]
fn join_dimensions(py: Python<'_>, expr: ExprLike) -> PyResult<Py<PyAny>> {
    new_obj(py, run(|| crate::simplify::join_dimensions(expr.0))?)
}

/// Inductor's `expand_floor_div`: `(numerator, denominator)`, or None where Inductor returns
/// False.
#[pyfunction]
fn expand_floor_div(expr: ExprLike) -> PyResult<Option<(PyExpr, PyExpr)>> {
    let r = run_ok(|| crate::simplify::expand_floor_div(expr.0))?;
    Ok(r.map(|(n, d)| (PyExpr { e: n }, PyExpr { e: d })))
}

/// Inductor's `combine_modular_indexing_pairs` (sizevars form, top level only).
#[pyfunction]
fn combine_modular_indexing_pairs(py: Python<'_>, expr: ExprLike) -> PyResult<Py<PyAny>> {
    new_obj(
        py,
        run(|| crate::simplify::combine_modular_indexing_pairs(expr.0))?,
    )
}

/// Stride of each variable of `vars` in `expr` (finite difference at 0): a list of Exprs.
#[pyfunction]
fn stride_vars(expr: ExprLike, vars: Vec<ExprLike>) -> PyResult<Vec<PyExpr>> {
    let v = exprs(vars);
    Ok(wrap_all(run(|| crate::simplify::stride_vars(expr.0, &v))?))
}

/// `expr` with every variable of `vars` set to 0 (Inductor's `offset_var`).
#[pyfunction]
fn offset_var(py: Python<'_>, expr: ExprLike, vars: Vec<ExprLike>) -> PyResult<Py<PyAny>> {
    let v = exprs(vars);
    new_obj(py, run(|| crate::simplify::offset_var(expr.0, &v))?)
}

/// Result of `simplify_loops`; unpacks as Inductor's `(new_sizes, reindex, prune)`.
#[pyclass(frozen, name = "LoopSimplification", module = "tilefuse._native")]
pub struct PyLoopSimplification {
    inner: crate::simplify::LoopSimplification,
}

#[pymethods]
impl PyLoopSimplification {
    /// Sizes of the merged loop nest, outermost first.
    #[getter]
    fn new_sizes(&self) -> Vec<PyExpr> {
        wrap_all(self.inner.new_sizes.clone())
    }
    /// For each old variable, its slot in the new nest, or None when removed / merged away.
    #[getter]
    fn old_to_new(&self) -> Vec<Option<usize>> {
        self.inner.old_to_new.clone()
    }
    /// For each new variable, the old dimensions merged into it, innermost first.
    #[getter]
    fn groups(&self) -> Vec<Vec<usize>> {
        self.inner.groups.clone()
    }
    /// The old sizes.
    #[getter]
    fn old_sizes(&self) -> Vec<PyExpr> {
        wrap_all(self.inner.old_sizes.clone())
    }
    /// Inductor's `reindex`: one expression per old variable in terms of `new_vars`.
    fn reindex(&self, new_vars: Vec<ExprLike>) -> PyResult<Vec<PyExpr>> {
        let v = exprs(new_vars);
        Ok(wrap_all(run(|| self.inner.reindex(&v))?))
    }
    /// Each old variable as an exact expression (div/mod digits) of `new_vars`.
    fn old_index_exprs(&self, new_vars: Vec<ExprLike>) -> PyResult<Vec<PyExpr>> {
        let v = exprs(new_vars);
        Ok(wrap_all(run(|| self.inner.old_index_exprs(&v))?))
    }
    /// Inductor's `prune`: the entries of `old` (one per old variable) whose slot survives.
    fn prune<'py>(&self, old: Vec<Bound<'py, PyAny>>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        run_ok(|| self.inner.prune(&old))
    }
    fn __iter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let sizes = slf.get().new_sizes().into_pyobject(py)?.into_any();
        let t = PyTuple::new(py, [sizes, slf.getattr("reindex")?, slf.getattr("prune")?])?;
        Ok(t.try_iter()?.into_any())
    }
    fn __repr__(&self) -> String {
        let o2n: Vec<String> = self
            .inner
            .old_to_new
            .iter()
            .map(|s| s.map_or_else(|| "None".to_string(), |k| k.to_string()))
            .collect();
        format!(
            "LoopSimplification(new_sizes={}, old_to_new=[{}], groups={:?})",
            list_str(&self.inner.new_sizes),
            o2n.join(", "),
            self.inner.groups
        )
    }
}

fn list_str(v: &[Expr]) -> String {
    let parts: Vec<String> = v.iter().map(|e| crate::print::sympy_str(*e)).collect();
    format!("[{}]", parts.join(", "))
}

fn nested_str(v: &[Vec<Expr>]) -> String {
    let parts: Vec<String> = v.iter().map(|g| list_str(g)).collect();
    format!("[{}]", parts.join(", "))
}

/// Inductor's `_simplify_loops`: merge and drop loop dimensions keeping every formula's
/// addresses. `vars`, `sizes`: one per dimension, outermost first. With `prevent_reordering`
/// only adjacent dimensions merge, in order.
#[pyfunction]
#[pyo3(signature = (vars, sizes, formulas, prevent_reordering=false))]
fn simplify_loops(
    vars: Vec<ExprLike>,
    sizes: Vec<ExprLike>,
    formulas: Vec<ExprLike>,
    prevent_reordering: bool,
) -> PyResult<PyLoopSimplification> {
    let (v, s, f) = (exprs(vars), exprs(sizes), exprs(formulas));
    let inner = run(|| crate::simplify::simplify_loops(&v, &s, &f, prevent_reordering))?;
    Ok(PyLoopSimplification { inner })
}

// ------------------------------------------------------------------------------ split

/// Result of `split_iteration_ranges`; unpacks as `(new_ranges, getters)`.
#[pyclass(frozen, name = "SplitResult", module = "tilefuse._native")]
pub struct PySplitResult {
    inner: crate::split::SplitResult,
}

#[pymethods]
impl PySplitResult {
    /// Per kernel group, the sizes of the node's new loops, outermost first (flattened in group
    /// order they are the new variables v0, v1, ...).
    #[getter]
    fn new_ranges(&self) -> Vec<Vec<PyExpr>> {
        wrap_nested(self.inner.new_ranges.clone())
    }
    /// Per node length group, each node variable as an expression of the symbols v0, v1, ...
    #[getter]
    fn getters(&self) -> Vec<Vec<PyExpr>> {
        wrap_nested(self.inner.getters.clone())
    }
    /// Number of new variables.
    #[getter]
    fn num_vars(&self) -> usize {
        self.inner.num_vars()
    }
    /// The getters applied to `flat_vars` (one per new range, in group order), e.g. the
    /// range-tree symbols `set_ranges(new_ranges)` returned.
    fn apply(&self, flat_vars: Vec<ExprLike>) -> PyResult<Vec<Vec<PyExpr>>> {
        let v = exprs(flat_vars);
        Ok(wrap_nested(run(|| self.inner.apply(&v))?))
    }
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let t = (self.new_ranges(), self.getters()).into_pyobject(py)?;
        Ok(t.try_iter()?.into_any())
    }
    fn __repr__(&self) -> String {
        format!(
            "SplitResult(new_ranges={}, getters={})",
            nested_str(&self.inner.new_ranges),
            nested_str(&self.inner.getters)
        )
    }
}

/// Inductor's `SIMDKernel._split_iteration_ranges`: re-split a node's `lengths` (one list per
/// length group) onto the kernel's `groups`. CantSplit when impossible.
#[pyfunction]
fn split_iteration_ranges(
    groups: Vec<ExprLike>,
    lengths: Vec<Vec<ExprLike>>,
) -> PyResult<PySplitResult> {
    let (g, l) = (exprs(groups), nested(lengths));
    Ok(PySplitResult {
        inner: run(|| crate::split::split_iteration_ranges(&g, &l))?,
    })
}

/// Inductor's `prepare_split_iteration_lengths`.
#[pyfunction]
#[pyo3(signature = (groups, lengths, reduction_numel=None))]
fn prepare_split_iteration_lengths(
    groups: Vec<ExprLike>,
    lengths: Vec<Vec<ExprLike>>,
    reduction_numel: Option<ExprLike>,
) -> PyResult<Vec<Vec<PyExpr>>> {
    let (g, l) = (exprs(groups), nested(lengths));
    let r = reduction_numel.map_or_else(Expr::one, |e| e.0);
    Ok(wrap_nested(run_ok(|| {
        crate::split::prepare_split_iteration_lengths(&g, &l, &r)
    })?))
}

/// Inductor's `SIMDKernel.is_compatible`: can a node with `lengths` run in a kernel tiled as
/// `groups`?
#[pyfunction]
#[pyo3(signature = (groups, lengths, reduction_numel=None))]
fn is_compatible(
    groups: Vec<ExprLike>,
    lengths: Vec<Vec<ExprLike>>,
    reduction_numel: Option<ExprLike>,
) -> PyResult<bool> {
    let (g, l) = (exprs(groups), nested(lengths));
    run_ok(|| crate::split::is_compatible(&g, &l, reduction_numel.map(|e| e.0)))
}

// ------------------------------------------------------------------------------ range trees

use crate::tree::{Prefix, RangeTrees, RootId, TreeOptions};

fn known_one(e: Expr) -> bool {
    crate::simplify::statically_known_equals(e, Expr::one(), &[])
}

fn parse_prefix(s: &str) -> PyResult<Prefix> {
    let p = s.strip_suffix("index").unwrap_or(s);
    let p = match p {
        "r0" => "r0_",
        "r1" => "r1_",
        other => other,
    };
    Prefix::parse(p).ok_or_else(|| {
        PyValueError::new_err(format!(
            "unknown range-tree prefix {s:?}: use 'z', 'y', 'x', 'r0_' or 'r1_' (or the root \
             name, e.g. 'xindex')"
        ))
    })
}

/// The range trees of one kernel (Inductor's `IterationRangesRoot`/`IterationRangesEntry` and the
/// kernel operations on them). Roots are named by prefix ("z", "y", "x", "r0_", "r1_"; the root
/// name "xindex" also works); entries by their index symbol (`x0`, `r0_1`, ...).
#[pyclass(name = "RangeTrees", module = "tilefuse._native")]
pub struct PyRangeTrees {
    inner: RangeTrees,
    numels: Vec<(Prefix, Expr)>,
    opts: TreeOptions,
}

impl PyRangeTrees {
    fn root_id(&self, prefix: &str) -> PyResult<RootId> {
        let p = parse_prefix(prefix)?;
        self.inner.root_by_prefix(p).ok_or_else(|| {
            PyValueError::new_err(format!("this kernel has no '{}' range tree", p.as_str()))
        })
    }
    fn symbols(&self, ids: &[crate::tree::EntryId]) -> Vec<PyExpr> {
        ids.iter()
            .map(|id| PyExpr {
                e: self.inner.entry(*id).symbol,
            })
            .collect()
    }
}

#[pymethods]
impl PyRangeTrees {
    /// `numels`: {prefix: numel} (or (prefix, numel) pairs) — Inductor's
    /// `construct_range_trees`; the flags are its kernel properties.
    #[new]
    #[pyo3(signature = (numels=None, *, inside_reduction=false, is_reduction=false, no_x_dim=false, persistent_reduction=false))]
    fn new(
        numels: Option<&Bound<'_, PyAny>>,
        inside_reduction: bool,
        is_reduction: bool,
        no_x_dim: bool,
        persistent_reduction: bool,
    ) -> PyResult<Self> {
        let mut pairs: Vec<(Prefix, Expr)> = Vec::new();
        let mut push = |k: Bound<'_, PyAny>, v: Bound<'_, PyAny>| -> PyResult<()> {
            let name: String = k.extract()?;
            pairs.push((parse_prefix(&name)?, expr_arg(&v, "RangeTrees: numel")?));
            Ok(())
        };
        match numels {
            None => {}
            Some(n) if n.is_none() => {}
            Some(n) if n.cast::<PyDict>().is_ok() => for_each_item(n, &mut push)?,
            Some(n) => {
                for item in n.try_iter()? {
                    let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
                    push(k, v)?;
                }
            }
        }
        let opts = TreeOptions {
            inside_reduction,
            is_reduction,
            no_x_dim,
            persistent_reduction,
        };
        let inner = run(|| RangeTrees::new(&pairs, opts))?;
        Ok(PyRangeTrees {
            inner,
            numels: pairs,
            opts,
        })
    }

    /// Add a root (before any entry exists; the trees are rebuilt with the same flags). Returns
    /// its prefix, which names the root in the other methods. ValueError for a repeated prefix
    /// or once entries exist.
    fn add_root(&mut self, prefix: &str, numel: ExprLike) -> PyResult<&'static str> {
        let p = parse_prefix(prefix)?;
        if !self.inner.entries().is_empty() {
            return Err(PyValueError::new_err(
                "add_root: roots can only be added before any entry is created",
            ));
        }
        let mut pairs = self.numels.clone();
        pairs.push((p, numel.0));
        let opts = self.opts;
        self.inner = run(|| RangeTrees::new(&pairs, opts))?;
        self.numels = pairs;
        Ok(p.as_str())
    }

    /// Roots for a tiling (Inductor's `create_tiling`): pointwise numels take the last of
    /// z, y, x; reduction numels r0_, r1_.
    #[staticmethod]
    fn from_tiling(pointwise: Vec<ExprLike>, reduction: Vec<ExprLike>) -> PyResult<Self> {
        let (p, r) = (exprs(pointwise), exprs(reduction));
        let inner = run(|| RangeTrees::from_tiling(&p, &r))?;
        let numels = inner.roots().iter().map(|x| (x.prefix, x.numel)).collect();
        let opts = TreeOptions {
            inside_reduction: inner.inside_reduction(),
            is_reduction: inner
                .roots()
                .iter()
                .any(|x| x.is_reduction() && !known_one(x.numel)),
            no_x_dim: false,
            persistent_reduction: false,
        };
        Ok(PyRangeTrees {
            inner,
            numels,
            opts,
        })
    }

    /// Prefixes of the roots, in z, y, x, r0_, r1_ order.
    #[getter]
    fn prefixes(&self) -> Vec<&'static str> {
        self.inner
            .roots()
            .iter()
            .map(|r| r.prefix.as_str())
            .collect()
    }

    /// A root's fields as a dict: name, prefix, numel, index, is_loop, tensor_dim, grid_dim,
    /// has_zdim, is_reduction, index_sym, entries (its entry symbols in creation order).
    fn root<'py>(&self, py: Python<'py>, prefix: &str) -> PyResult<Bound<'py, PyDict>> {
        let r = self.inner.root(self.root_id(prefix)?);
        let d = PyDict::new(py);
        d.set_item("name", &r.name)?;
        d.set_item("prefix", r.prefix.as_str())?;
        d.set_item("numel", PyExpr { e: r.numel })?;
        d.set_item("index", r.index)?;
        d.set_item("is_loop", r.is_loop)?;
        d.set_item("tensor_dim", r.tensor_dim)?;
        d.set_item("grid_dim", r.grid_dim)?;
        d.set_item("has_zdim", r.has_zdim)?;
        d.set_item("is_reduction", r.is_reduction())?;
        d.set_item("index_sym", PyExpr { e: r.index_sym })?;
        d.set_item("entries", self.symbols(r.entries()))?;
        Ok(d)
    }

    /// An entry's fields as a dict (name, symbol, prefix, divisor, length, expr,
    /// precomputed_args), or None when `symbol` is not an entry of this kernel.
    fn entry<'py>(
        &self,
        py: Python<'py>,
        symbol: ExprLike,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(id) = self.inner.entry_for_symbol(&symbol.0) else {
            return Ok(None);
        };
        let e = self.inner.entry(id);
        let d = PyDict::new(py);
        d.set_item("name", &e.name)?;
        d.set_item("symbol", PyExpr { e: e.symbol })?;
        d.set_item("prefix", e.prefix.as_str())?;
        d.set_item("divisor", PyExpr { e: e.divisor })?;
        d.set_item("length", PyExpr { e: e.length })?;
        d.set_item("expr", PyExpr { e: e.expr })?;
        d.set_item("is_reduction", e.is_reduction())?;
        d.set_item("precomputed_args", wrap_all(e.precomputed_args()))?;
        Ok(Some(d))
    }

    /// Every entry symbol created so far, in creation order.
    #[getter]
    fn entries(&self) -> Vec<PyExpr> {
        self.inner
            .entries()
            .iter()
            .map(|e| PyExpr { e: e.symbol })
            .collect()
    }

    /// Next value of the shared iteration-variable counter.
    #[getter]
    fn iter_vars_count(&self) -> usize {
        self.inner.iter_vars_count()
    }

    /// Whether code is generated inside the reduction loop (settable).
    #[getter]
    fn get_inside_reduction(&self) -> bool {
        self.inner.inside_reduction()
    }
    #[setter]
    fn set_inside_reduction(&mut self, inside: bool) {
        self.inner.set_inside_reduction(inside)
    }

    /// Prefixes of the roots active now (reduction roots only inside the reduction).
    fn active_roots(&self) -> Vec<&'static str> {
        self.inner
            .active_roots()
            .iter()
            .map(|r| self.inner.root(*r).prefix.as_str())
            .collect()
    }

    /// {entry symbol: length} for every entry, root by root (Inductor's `var_ranges()`).
    fn var_ranges<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (s, n) in self.inner.var_ranges() {
            d.set_item(PyExpr { e: s }, PyExpr { e: n })?;
        }
        Ok(d)
    }

    /// Give a size symbol a hint (orders entries in `vars_and_sizes`).
    fn set_size_hint(&mut self, symbol: ExprLike, value: i64) {
        self.inner.set_size_hint(symbol.0, value)
    }

    /// `expr` evaluated at the size hints (fallback 8192 per symbol).
    fn size_hint(&self, expr: ExprLike) -> PyResult<i64> {
        run_ok(|| self.inner.size_hint(&expr.0))
    }

    /// Replace an entry's expression (the memo key is unchanged).
    fn set_entry_expr(&mut self, symbol: ExprLike, expr: ExprLike) -> PyResult<()> {
        let id = self.inner.entry_for_symbol(&symbol.0).ok_or_else(|| {
            PyValueError::new_err(format!(
                "{} is not an entry symbol of this kernel",
                crate::print::sympy_str(symbol.0)
            ))
        })?;
        run_ok(|| self.inner.set_entry_expr(id, expr.0))
    }

    /// The entry symbol of digit `(root // divisor) % length`, created if needed
    /// (Inductor's `IterationRangesRoot.lookup`).
    fn lookup(&mut self, prefix: &str, divisor: ExprLike, length: ExprLike) -> PyResult<PyExpr> {
        let root = self.root_id(prefix)?;
        let id = run(|| self.inner.lookup(root, divisor.0, length.0))?;
        Ok(PyExpr {
            e: self.inner.entry(id).symbol,
        })
    }

    /// Mixed-radix digit symbols of a root for `lengths`, outermost first (Inductor's
    /// `construct_entries` / `construct`).
    fn construct_entries(&mut self, prefix: &str, lengths: Vec<ExprLike>) -> PyResult<Vec<PyExpr>> {
        let root = self.root_id(prefix)?;
        let l = exprs(lengths);
        let ids = run(|| self.inner.construct_entries(root, &l))?;
        Ok(self.symbols(&ids))
    }

    /// Same as `construct_entries` (Inductor's `construct`).
    fn construct(&mut self, prefix: &str, lengths: Vec<ExprLike>) -> PyResult<Vec<PyExpr>> {
        self.construct_entries(prefix, lengths)
    }

    /// `(vars, sizes)` of the digit chain of a root that `index` uses (Inductor's
    /// `vars_and_sizes`); creates filler entries.
    fn vars_and_sizes(
        &mut self,
        prefix: &str,
        index: ExprLike,
    ) -> PyResult<(Vec<PyExpr>, Vec<PyExpr>)> {
        let root = self.root_id(prefix)?;
        let (v, s) = run(|| self.inner.vars_and_sizes(root, &index.0))?;
        Ok((wrap_all(v), wrap_all(s)))
    }

    /// Inductor's `set_ranges`: `construct(lengths[i])` on every root i.
    fn set_ranges(&mut self, lengths: Vec<Vec<ExprLike>>) -> PyResult<Vec<Vec<PyExpr>>> {
        let l = nested(lengths);
        Ok(wrap_nested(run(|| self.inner.set_ranges(&l))?))
    }

    /// Inductor's `map_kernel_groups_to_node_sizes` (CantSplit when the node does not fit).
    fn map_kernel_groups_to_node_sizes(
        &mut self,
        groups: Vec<ExprLike>,
        lengths: Vec<Vec<ExprLike>>,
    ) -> PyResult<Vec<Vec<PyExpr>>> {
        let (g, l) = (exprs(groups), nested(lengths));
        Ok(wrap_nested(run(|| {
            self.inner.map_kernel_groups_to_node_sizes(&g, &l)
        })?))
    }

    /// Inductor's `split_and_set_ranges` (groups = the roots' numels).
    fn split_and_set_ranges(&mut self, lengths: Vec<Vec<ExprLike>>) -> PyResult<Vec<Vec<PyExpr>>> {
        let l = nested(lengths);
        Ok(wrap_nested(run(|| self.inner.split_and_set_ranges(&l))?))
    }

    /// Inductor's `combine_contiguous_dims` for `index` on a root.
    fn combine_contiguous_dims(
        &mut self,
        py: Python<'_>,
        index: ExprLike,
        prefix: &str,
    ) -> PyResult<Py<PyAny>> {
        let root = self.root_id(prefix)?;
        new_obj(
            py,
            run(|| self.inner.combine_contiguous_dims(index.0, root))?,
        )
    }

    /// Inductor's kernel-level `combine_modular_indexing_pairs`.
    fn combine_modular_indexing_pairs(
        &mut self,
        py: Python<'_>,
        index: ExprLike,
    ) -> PyResult<Py<PyAny>> {
        new_obj(
            py,
            run(|| self.inner.combine_modular_indexing_pairs(index.0))?,
        )
    }

    /// `index` with every entry symbol replaced by its expression.
    fn substitute_entries(&self, py: Python<'_>, index: ExprLike) -> PyResult<Py<PyAny>> {
        new_obj(py, run(|| self.inner.substitute_entries(&index.0))?)
    }

    /// Inductor's `is_broadcasted`.
    fn is_broadcasted(&self, index: ExprLike) -> PyResult<bool> {
        run(|| self.inner.is_broadcasted(&index.0))
    }

    /// Inductor's `is_indirect_indexing`: a `tmp*` symbol is free in `index`.
    #[staticmethod]
    fn is_indirect_indexing(index: ExprLike) -> PyResult<bool> {
        run_ok(|| RangeTrees::is_indirect_indexing(&index.0))
    }

    fn __repr__(&self) -> String {
        let roots: Vec<String> = self
            .inner
            .roots()
            .iter()
            .map(|r| {
                format!(
                    "{}: {}",
                    r.prefix.as_str(),
                    crate::print::sympy_str(r.numel)
                )
            })
            .collect();
        format!(
            "RangeTrees({{{}}}, entries={})",
            roots.join(", "),
            self.inner.entries().len()
        )
    }
}

// ------------------------------------------------------------------------------ module

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PyExpr>()?;
    m.add("CantSplit", py.get_type::<CantSplit>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(sym, m)?)?;
    m.add_function(wrap_pyfunction!(integer, m)?)?;
    m.add_function(wrap_pyfunction!(floor_div, m)?)?;
    m.add_function(wrap_pyfunction!(modular_indexing, m)?)?;
    m.add_function(wrap_pyfunction!(clean_div, m)?)?;
    m.add_function(wrap_pyfunction!(ceil_div, m)?)?;
    m.add_function(wrap_pyfunction!(floor_mod, m)?)?;
    m.add_function(wrap_pyfunction!(min_, m)?)?;
    m.add_function(wrap_pyfunction!(max_, m)?)?;
    m.add_function(wrap_pyfunction!(add_, m)?)?;
    m.add_function(wrap_pyfunction!(mul_, m)?)?;
    m.add_function(wrap_pyfunction!(pow_, m)?)?;
    m.add_function(wrap_pyfunction!(pexpr, m)?)?;
    m.add_function(wrap_pyfunction!(texpr, m)?)?;
    m.add_function(wrap_pyfunction!(interned_count, m)?)?;
    m.add_function(wrap_pyfunction!(_from_tree, m)?)?;
    m.add_class::<PyLoopSimplification>()?;
    m.add_class::<PySplitResult>()?;
    m.add_class::<PyRangeTrees>()?;
    for f in [
        wrap_pyfunction!(bound, m)?,
        wrap_pyfunction!(simplify_with_ranges, m)?,
        wrap_pyfunction!(statically_known_equals, m)?,
        wrap_pyfunction!(statically_known_leq, m)?,
        wrap_pyfunction!(statically_known_lt, m)?,
        wrap_pyfunction!(statically_known_multiple_of, m)?,
        wrap_pyfunction!(join_dimensions, m)?,
        wrap_pyfunction!(expand_floor_div, m)?,
        wrap_pyfunction!(combine_modular_indexing_pairs, m)?,
        wrap_pyfunction!(stride_vars, m)?,
        wrap_pyfunction!(offset_var, m)?,
        wrap_pyfunction!(simplify_loops, m)?,
        wrap_pyfunction!(split_iteration_ranges, m)?,
        wrap_pyfunction!(prepare_split_iteration_lengths, m)?,
        wrap_pyfunction!(is_compatible, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
