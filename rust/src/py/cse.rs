//! Kernel CSE scopes: `CseScope`, the codegen's expression-text → variable-name cache, backed by
//! the core's text-keyed table ([`crate::cse::TextCseTable`]).
//!
//! A scope is a table; `CseScope(parent)` is the parent's `scoped_copy`: lookups fall through to
//! the parent, writes stay in the child (the codegen opens one child per reduction loop). The
//! variable names are the caller's (the codegen numbers its own `tmp<N>`): the table caches, for
//! each key, the index of the name's Python string in a list shared by the scope family, and
//! `get` hands that same string object back, so a hit allocates nothing.

use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

use crate::cse::{CseVarId, TextCseTable};

/// A CSE scope: expression text → variable name, with an optional parent scope that `get`
/// falls through to. The scope is its own `cache` mapping: item access, `in` and `len` see
/// this scope's own entries (a dict of the scope), `get` the scope and its ancestors.
#[pyclass(name = "CseScope", module = "tilefuse._native")]
pub struct PyCseScope {
    table: TextCseTable,
    /// The names `put` cached, by handle (the `CseVarId` the table holds for a key); shared by
    /// the scope family. Appending and reading need no lock besides Python's own.
    names: Py<PyList>,
    parent: Option<Py<PyCseScope>>,
}

impl PyCseScope {
    fn name_of<'py>(&self, py: Python<'py>, v: CseVarId) -> Option<Bound<'py, PyAny>> {
        self.names.bind(py).get_item(v.0 as usize).ok()
    }

    fn put_var(&mut self, key: &str, var: &Bound<'_, PyString>) -> PyResult<()> {
        let names = self.names.bind(var.py());
        let handle = CseVarId(names.len() as u32);
        names.append(var)?;
        self.table.insert(key.to_owned(), handle);
        Ok(())
    }
}

#[pymethods]
impl PyCseScope {
    /// A new root scope, or (with `parent`) a child scope whose `get` falls through to `parent`.
    #[new]
    #[pyo3(signature = (parent=None))]
    fn new(py: Python<'_>, parent: Option<Bound<'_, PyCseScope>>) -> Self {
        match parent {
            None => PyCseScope {
                table: TextCseTable::new(),
                names: PyList::empty(py).unbind(),
                parent: None,
            },
            Some(p) => {
                let (table, names) = {
                    let pb = p.borrow();
                    (pb.table.scoped_copy(), pb.names.clone_ref(py))
                };
                PyCseScope {
                    table,
                    names,
                    parent: Some(p.unbind()),
                }
            }
        }
    }

    /// The variable name cached for `key` in this scope or an enclosing one, else None.
    fn get<'py>(&self, py: Python<'py>, key: &str) -> Option<Bound<'py, PyAny>> {
        let v = self.table.lookup(key)?;
        self.name_of(py, v)
    }

    /// Cache `key` → `var` in this scope (replacing an earlier entry of this scope).
    fn put(&mut self, key: &str, var: &Bound<'_, PyString>) -> PyResult<()> {
        self.put_var(key, var)
    }

    /// The enclosing scope, or None for a root scope.
    #[getter]
    fn parent(&self, py: Python<'_>) -> Option<Py<PyCseScope>> {
        self.parent.as_ref().map(|p| p.clone_ref(py))
    }

    /// The scope itself, as the mapping of its own entries (`cache[key] = var` is `put`).
    #[getter]
    fn cache(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// The variable cached for `key` in this scope itself (KeyError otherwise).
    fn __getitem__<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyAny>> {
        self.table
            .lookup_local(key)
            .and_then(|v| self.name_of(py, v))
            .ok_or_else(|| PyKeyError::new_err(key.to_owned()))
    }

    /// `put(key, var)`.
    fn __setitem__(&mut self, key: &str, var: &Bound<'_, PyString>) -> PyResult<()> {
        self.put_var(key, var)
    }

    /// Whether this scope itself caches `key`.
    fn __contains__(&self, key: &str) -> bool {
        self.table.lookup_local(key).is_some()
    }

    /// Number of keys this scope itself caches.
    fn __len__(&self) -> usize {
        self.table.local_len()
    }

    fn __repr__(&self) -> String {
        format!(
            "CseScope({} entries, {} visible, {})",
            self.table.local_len(),
            self.table.len(),
            if self.parent.is_some() {
                "child"
            } else {
                "root"
            }
        )
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCseScope>()
}
