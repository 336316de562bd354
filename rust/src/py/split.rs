//! Iteration-range splitting: `split_iteration_ranges` and its `SplitResult`.

use pyo3::prelude::*;

use super::convert::{exprs, nested, wrap_nested, ExprLike};
use super::expr::PyExpr;
use super::run;
use crate::expr::Expr;

fn list_str(v: &[Expr]) -> String {
    let parts: Vec<String> = v.iter().map(|e| crate::print::sympy_str(*e)).collect();
    format!("[{}]", parts.join(", "))
}

fn nested_str(v: &[Vec<Expr>]) -> String {
    let parts: Vec<String> = v.iter().map(|g| list_str(g)).collect();
    format!("[{}]", parts.join(", "))
}

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

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySplitResult>()?;
    m.add_function(wrap_pyfunction!(split_iteration_ranges, m)?)
}
