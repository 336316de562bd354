//! Kernel CSE scopes: `CseScope`, the codegen's expression-text → variable-name cache, backed by
//! the core's text-keyed table ([`crate::cse::TextCseTable`]).
//!
//! A scope is a table; `CseScope(parent)` is the parent's `scoped_copy`: lookups fall through to
//! the parent, writes stay in the child (the codegen opens one child per reduction loop). The
//! variable names are the caller's (the codegen numbers its own `tmp<N>`): `put` records the
//! name's Python string once per variable, and `get` hands the same string object back, so a hit
//! allocates nothing.

use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::cse::{CseVarId, TextCseTable};

/// The Python string of each variable of a table family, indexed by `CseVarId` (the core
/// numbers variables densely from 0 in creation order; only `put` creates them here).
type Names = Arc<Mutex<Vec<Py<PyString>>>>;

/// A CSE scope: expression text → variable name, with an optional parent scope that lookups
/// fall through to. Drop-in for a chain of dicts: `get` walks child → parent, `put` (or
/// `cache[key] = var`) writes the child only.
#[pyclass(name = "CseScope", module = "tilefuse._native")]
pub struct PyCseScope {
    table: TextCseTable,
    names: Names,
    parent: Option<Py<PyCseScope>>,
}

impl PyCseScope {
    fn name_of(&self, py: Python<'_>, v: CseVarId) -> Option<Py<PyString>> {
        let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        names.get(v.0 as usize).map(|n| n.clone_ref(py))
    }

    fn put_var(&mut self, key: &str, var: &Bound<'_, PyString>) -> PyResult<()> {
        let v = self.table.insert_named(key.to_owned(), var.to_str()?);
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        if v.0 as usize == names.len() {
            names.push(var.clone().unbind());
        }
        Ok(())
    }
}

#[pymethods]
impl PyCseScope {
    /// A new root scope, or (with `parent`) a child scope whose lookups fall through to `parent`.
    #[new]
    #[pyo3(signature = (parent=None))]
    fn new(parent: Option<Bound<'_, PyCseScope>>) -> Self {
        match parent {
            None => PyCseScope {
                table: TextCseTable::new(),
                names: Arc::new(Mutex::new(Vec::new())),
                parent: None,
            },
            Some(p) => {
                let (table, names) = {
                    let pb = p.borrow();
                    (pb.table.scoped_copy(), Arc::clone(&pb.names))
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
    fn get(&self, py: Python<'_>, key: &str) -> Option<Py<PyString>> {
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

    /// This scope's own entries as a mapping view (`cache[key] = var` is `put`; reads and `in`
    /// see this scope only, not its parents).
    #[getter]
    fn cache(slf: Bound<'_, Self>) -> PyCseScopeCache {
        PyCseScopeCache {
            scope: slf.unbind(),
        }
    }

    /// Whether `key` is cached in this scope or an enclosing one.
    fn __contains__(&self, key: &str) -> bool {
        self.table.contains(key)
    }

    /// Number of keys visible from this scope (its own and its parents').
    fn __len__(&self) -> usize {
        self.table.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "CseScope(local={}, visible={}, child={})",
            self.table.local_len(),
            self.table.len(),
            self.parent.is_some()
        )
    }
}

/// `CseScope.cache`: a scope's own entries as a mutable mapping of str → str.
#[pyclass(name = "CseScopeCache", module = "tilefuse._native")]
pub struct PyCseScopeCache {
    scope: Py<PyCseScope>,
}

#[pymethods]
impl PyCseScopeCache {
    fn __getitem__(&self, py: Python<'_>, key: &str) -> PyResult<Py<PyString>> {
        let s = self.scope.borrow(py);
        s.table
            .lookup_local(key)
            .and_then(|v| s.name_of(py, v))
            .ok_or_else(|| PyKeyError::new_err(key.to_owned()))
    }

    fn __setitem__(&self, py: Python<'_>, key: &str, var: &Bound<'_, PyString>) -> PyResult<()> {
        self.scope.borrow_mut(py).put_var(key, var)
    }

    fn __contains__(&self, py: Python<'_>, key: &str) -> bool {
        self.scope.borrow(py).table.lookup_local(key).is_some()
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.scope.borrow(py).table.local_len()
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCseScope>()?;
    m.add_class::<PyCseScopeCache>()
}
