//! Range-aware simplification and static queries: value bounds, `simplify_with_ranges`,
//! `statically_known_*`, strides and offsets of an index in its loop variables.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::convert::{expr_arg, exprs, for_each_item, interval_pair, new_obj, wrap_all, ExprLike};
use super::expr::PyExpr;
use super::{run, run_ok};
use crate::expr::Expr;

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

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for f in [
        wrap_pyfunction!(bound, m)?,
        wrap_pyfunction!(simplify_with_ranges, m)?,
        wrap_pyfunction!(statically_known_equals, m)?,
        wrap_pyfunction!(statically_known_leq, m)?,
        wrap_pyfunction!(statically_known_lt, m)?,
        wrap_pyfunction!(statically_known_multiple_of, m)?,
        wrap_pyfunction!(stride_vars, m)?,
        wrap_pyfunction!(offset_var, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
