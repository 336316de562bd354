//! Conversions between Python objects and core values: expression arguments (an `Expr` or any
//! int-like object), the per-thread cache of interned integers, mappings, ranges and symbol kinds.

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyString};

use super::expr::PyExpr;
use crate::expr::{Expr, SymKind};
use crate::interval::Interval;

pub(super) fn int_overflow(obj: &Bound<'_, PyAny>) -> PyErr {
    let shown = obj
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "<int>".into());
    PyOverflowError::new_err(format!(
        "the integer {shown} does not fit in a signed 64-bit integer; index expressions must \
         stay within int64"
    ))
}

#[inline]
pub(super) fn new_obj(py: Python<'_>, e: Expr) -> PyResult<Py<PyAny>> {
    Ok(Bound::new(py, PyExpr { e })?.into_any().unbind())
}

/// The expression an object stands for: an `Expr`, or an int-like (`__index__`) object.
/// `Ok(None)` when the object is neither; `OverflowError` for ints outside int64.
#[inline]
pub(super) fn as_expr(obj: &Bound<'_, PyAny>) -> PyResult<Option<Expr>> {
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
pub(super) fn int_expr(v: i64) -> Expr {
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
pub(super) fn int_like(obj: &Bound<'_, PyAny>) -> PyResult<Option<i64>> {
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
pub(super) fn expr_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Expr> {
    match as_expr(obj)? {
        Some(e) => Ok(e),
        None => Err(PyTypeError::new_err(format!(
            "{what}: expected a tilefuse Expr or an int, got {}",
            type_name(obj)
        ))),
    }
}

pub(super) fn type_name(obj: &Bound<'_, PyAny>) -> String {
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

pub(super) fn kind_str(k: SymKind) -> &'static str {
    match k {
        SymKind::Size => "size",
        SymKind::Precomputed => "precomputed",
        SymKind::Index => "index",
        SymKind::Indirect => "indirect",
        SymKind::Unbacked => "unbacked",
        SymKind::Other => "other",
    }
}

pub(super) fn parse_kind(s: &str) -> PyResult<SymKind> {
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

fn end(v: i128, finite: bool) -> Option<i64> {
    finite.then_some(v as i64)
}

/// Bounds of an interval as Python `(lo, hi)` with None for an infinite end.
pub(super) fn interval_pair(r: Interval) -> (Option<i64>, Option<i64>) {
    (end(r.lo, r.lo_finite()), end(r.hi, r.hi_finite()))
}

/// Iterate a dict (fast path) or any mapping with `.items()`.
pub(super) fn for_each_item<'py>(
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

pub(super) fn exprs(v: Vec<ExprLike>) -> Vec<Expr> {
    v.into_iter().map(|e| e.0).collect()
}

pub(super) fn wrap_all(v: Vec<Expr>) -> Vec<PyExpr> {
    v.into_iter().map(|e| PyExpr { e }).collect()
}

pub(super) fn wrap_nested(v: Vec<Vec<Expr>>) -> Vec<Vec<PyExpr>> {
    v.into_iter().map(wrap_all).collect()
}

pub(super) fn nested(v: Vec<Vec<ExprLike>>) -> Vec<Vec<Expr>> {
    v.into_iter().map(exprs).collect()
}
