//! Errors of the symbolic core. Every fallible operation returns `Result<_, SymError>`; nothing in
//! the core panics on bad input. The Python bindings map each variant to the Python exception a
//! user expects (see `py/mod.rs`).

use std::fmt;

/// What went wrong, with a message that says what the input was and what to do instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SymError {
    /// A division, FloorDiv, ModularIndexing or Mod by an expression that is (or evaluates to) 0.
    ZeroDivision(String),
    /// An argument outside the operation's domain (non-positive modulus, negative exponent, ...).
    Value(String),
    /// An integer result does not fit in i64. The core never wraps.
    Overflow(String),
    /// Evaluation met a symbol that the mapping does not give a value for.
    UnknownSymbol(String),
    /// `split_iteration_ranges` could not map a node's sizes onto the kernel's groups.
    CantSplit(String),
}

impl fmt::Display for SymError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SymError::ZeroDivision(m)
            | SymError::Value(m)
            | SymError::Overflow(m)
            | SymError::UnknownSymbol(m)
            | SymError::CantSplit(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for SymError {}

/// Result alias used throughout the core.
pub type SymResult<T> = Result<T, SymError>;

pub(crate) fn overflow(what: &str) -> SymError {
    SymError::Overflow(format!(
        "integer overflow in {what}: the result does not fit in a signed 64-bit integer; \
         index expressions must stay within int64"
    ))
}
