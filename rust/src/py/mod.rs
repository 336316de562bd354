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
//!
//! One file per topic: `convert` (Python objects ↔ core values), `expr` (the `Expr` class),
//! `pickle`, `build` (constructors and printers), `simplify` (range-aware simplification and
//! static queries), `split` (iteration-range splitting) and `cse` (the kernel CSE scopes).

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::create_exception;
use pyo3::exceptions::{
    PyException, PyOverflowError, PyRuntimeError, PyValueError, PyZeroDivisionError,
};
use pyo3::prelude::*;

use crate::error::{SymError, SymResult};

mod build;
mod convert;
mod cse;
mod expr;
mod pickle;
mod simplify;
mod split;

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

// ------------------------------------------------------------------------------ module

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("CantSplit", py.get_type::<CantSplit>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<expr::PyExpr>()?;
    pickle::register(m)?;
    build::register(m)?;
    simplify::register(m)?;
    split::register(m)?;
    cse::register(m)?;
    Ok(())
}
