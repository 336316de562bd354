//! The `Expr` class: arithmetic operators, comparison and hashing, sympy-style accessors
//! (`kind`, `args`, `func`, `terms`, `factors`, ...), evaluation and substitution.

use pyo3::basic::CompareOp;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyFrozenSet, PyString, PyTuple};
use rustc_hash::FxHashMap;

use super::convert::{
    as_expr, expr_arg, for_each_item, int_like, interval_pair, kind_str, new_obj, type_name,
    ExprLike,
};
use super::pickle::to_tree;
use super::{run, run_ok};
use crate::error::SymResult;
use crate::expr::{Expr, Node};

/// An immutable integer index expression (interned: equal expressions are the same object in the
/// native core, so `==` and `hash` are O(1)). Floor semantics: `a // b` and `a % b` are Python's.
#[pyclass(frozen, name = "Expr", module = "tilefuse._native")]
pub struct PyExpr {
    pub(crate) e: Expr,
}

/// CPython's hash of an int (so that `hash(Integer(v)) == hash(v)`, as `Integer(v) == v`).
fn py_int_hash(v: i64) -> isize {
    const M: i128 = (1i128 << 61) - 1;
    let a = (v as i128).abs() % M;
    let h = if v < 0 { -a } else { a } as i64;
    (if h == -1 { -2 } else { h }) as isize
}

pub(super) fn node_kind(e: Expr) -> &'static str {
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
