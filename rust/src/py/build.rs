//! Expression constructors (`sym`, `Integer`, `FloorDiv`, `ModularIndexing`, `CleanDiv`,
//! `CeilDiv`, `Mod`, `Min`, `Max`, `Add`, `Mul`, `Pow`) and the Python and Triton printers.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::convert::{expr_arg, new_obj, parse_kind, ExprLike};
use super::{run, run_ok};
use crate::expr::{Expr, SymKind};

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

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for f in [
        wrap_pyfunction!(sym, m)?,
        wrap_pyfunction!(integer, m)?,
        wrap_pyfunction!(floor_div, m)?,
        wrap_pyfunction!(modular_indexing, m)?,
        wrap_pyfunction!(clean_div, m)?,
        wrap_pyfunction!(ceil_div, m)?,
        wrap_pyfunction!(floor_mod, m)?,
        wrap_pyfunction!(min_, m)?,
        wrap_pyfunction!(max_, m)?,
        wrap_pyfunction!(add_, m)?,
        wrap_pyfunction!(mul_, m)?,
        wrap_pyfunction!(pow_, m)?,
        wrap_pyfunction!(pexpr, m)?,
        wrap_pyfunction!(texpr, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
