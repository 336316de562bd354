//! Pickling of `Expr`: `__reduce__` writes the expression as a tree of tuples and ints, and
//! `_from_tree` rebuilds it through the construction rules.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::convert::{int_expr, int_like, interval_pair, kind_str, new_obj, parse_kind};
use super::expr::node_kind;
use super::run;
use crate::expr::{Expr, Node};

pub(super) fn to_tree(py: Python<'_>, e: Expr) -> PyResult<Py<PyAny>> {
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

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_from_tree, m)?)
}
