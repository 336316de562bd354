//! tilefuse's native symbolic-indexing core.
//!
//! Integer index expressions (`expr`), their construction rules (`rules`), value ranges
//! (`interval`), range-aware simplification and loop merging (`simplify`), range trees and
//! iteration-range splitting (`tree`, `split`), the kernel CSE table (`cse`) and printers
//! (`print`). Floor semantics throughout: `ModularIndexing(a, b, c) = (a // b) % c`.
//! The Python bindings (`py`, behind the `python` feature) expose it as `tilefuse._native`.

pub mod cse;
pub mod error;
pub mod expr;
pub mod interval;
pub mod print;
pub mod rules;
pub mod simplify;
pub mod split;
pub mod tree;

#[cfg(feature = "python")]
mod py;

pub use error::{SymError, SymResult};
pub use expr::{Expr, Node, SymKind};
