//! Printers: a sympy-like display string, Python source (`pexpr`) and Triton source (`texpr`).
//!
//! Python's `//` and `%` are floor operations, so `pexpr` prints them as they are. Triton's
//! integer `//` and `%` truncate toward zero (C semantics), so `texpr` emits the plain operators
//! only where the dividend is provably non-negative and the divisor provably positive (from the
//! symbols' assumptions); elsewhere it emits a floor-correct `tl.where` form, one that is also
//! right where the operands are Python ints with floor `//` and `%` (Triton's interpreter passes
//! size parameters as constexprs).

use crate::error::{SymError, SymResult};
use crate::expr::{Expr, Node};

const ADD: u8 = 1;
const MUL: u8 = 2;
const ATOM: u8 = 3;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    Sympy,
    Python,
    Triton { int32: bool },
}

fn wrap(s: (String, u8), need: u8) -> String {
    if s.1 >= need {
        s.0
    } else {
        format!("({})", s.0)
    }
}

fn term_str(t: Expr, c: i64, style: Style) -> SymResult<(String, bool)> {
    // returns (text of |c|·t, negative?)
    let body = pr(t, style)?;
    let neg = c < 0;
    let mag = c.unsigned_abs();
    let s = if mag == 1 {
        wrap(body, MUL)
    } else {
        format!("{}*{}", int_lit(mag as i128, style)?, wrap(body, MUL))
    };
    Ok((s, neg))
}

fn int_lit(v: i128, style: Style) -> SymResult<String> {
    if let Style::Triton { int32: true } = style {
        if v > i32::MAX as i128 || v < i32::MIN as i128 {
            return Err(SymError::Value(format!(
                "the integer {v} does not fit the int32 index dtype; print with index dtype \
                 tl.int64"
            )));
        }
    }
    Ok(v.to_string())
}

fn pr(e: Expr, style: Style) -> SymResult<(String, u8)> {
    Ok(match e.node() {
        Node::Int(v) => {
            let s = int_lit(*v as i128, style)?;
            (s, if *v < 0 { ADD } else { ATOM })
        }
        Node::Sym(s) => (s.name.to_string(), ATOM),
        Node::Add { constant, terms } => {
            let mut out = String::new();
            for (i, (t, c)) in terms.iter().enumerate() {
                let (s, neg) = term_str(*t, *c, style)?;
                if i == 0 {
                    if neg {
                        out.push('-');
                    }
                } else {
                    out.push_str(if neg { " - " } else { " + " });
                }
                out.push_str(&s);
            }
            if *constant != 0 {
                out.push_str(if *constant < 0 { " - " } else { " + " });
                out.push_str(&int_lit((*constant as i128).abs(), style)?);
            }
            (out, ADD)
        }
        Node::Mul { factors } => {
            let mut parts: Vec<String> = Vec::new();
            for (f, k) in factors.iter() {
                let fs = wrap(pr(*f, style)?, ATOM);
                match style {
                    Style::Triton { .. } => {
                        for _ in 0..*k {
                            parts.push(fs.clone());
                        }
                    }
                    _ => parts.push(if *k == 1 { fs } else { format!("{fs}**{k}") }),
                }
            }
            (parts.join("*"), MUL)
        }
        Node::FloorDiv(a, b) | Node::CleanDiv(a, b) => {
            if style == Style::Sympy && matches!(e.node(), Node::CleanDiv(..)) {
                let (x, y) = (pr(*a, style)?.0, pr(*b, style)?.0);
                return Ok((format!("CleanDiv({x}, {y})"), ATOM));
            }
            (floordiv_str(*a, *b, style)?, ATOM)
        }
        Node::ModularIndexing(a, b, c) => match style {
            Style::Sympy => {
                let (x, y, z) = (pr(*a, style)?.0, pr(*b, style)?.0, pr(*c, style)?.0);
                (format!("ModularIndexing({x}, {y}, {z})"), ATOM)
            }
            Style::Python => {
                let q = if b.as_int() == Some(1) {
                    wrap(pr(*a, style)?, ATOM)
                } else {
                    floordiv_str(*a, *b, style)?
                };
                (format!("({q} % {})", wrap(pr(*c, style)?, ATOM)), ATOM)
            }
            Style::Triton { .. } => {
                let q = if b.as_int() == Some(1) {
                    wrap(pr(*a, style)?, ATOM)
                } else {
                    floordiv_str(*a, *b, style)?
                };
                let q_nonneg = a.is_nonneg() && b.is_positive();
                let cs = wrap(pr(*c, style)?, ATOM);
                if q_nonneg && c.is_positive() {
                    (format!("({q} % {cs})"), ATOM)
                } else {
                    (triton_floor_mod(&q, &cs), ATOM)
                }
            }
        },
        Node::Mod(a, b) => {
            let (pa, pb) = (pr(*a, style)?, pr(*b, style)?);
            if style == Style::Sympy {
                return Ok((format!("Mod({}, {})", pa.0, pb.0), ATOM));
            }
            let (x, y) = (wrap(pa, ATOM), wrap(pb, ATOM));
            match style {
                Style::Sympy => unreachable!(),
                Style::Python => (format!("({x} % {y})"), ATOM),
                Style::Triton { .. } => {
                    if a.is_nonneg() && b.is_positive() {
                        (format!("({x} % {y})"), ATOM)
                    } else {
                        (triton_floor_mod(&x, &y), ATOM)
                    }
                }
            }
        }
        Node::Min(args) | Node::Max(args) => {
            let is_max = matches!(e.node(), Node::Max(_));
            let mut strs: Vec<String> = Vec::new();
            for a in args.iter() {
                strs.push(pr(*a, style)?.0);
            }
            match style {
                Style::Sympy => (
                    format!(
                        "{}({})",
                        if is_max { "Max" } else { "Min" },
                        strs.join(", ")
                    ),
                    ATOM,
                ),
                Style::Python => (
                    format!(
                        "{}({})",
                        if is_max { "max" } else { "min" },
                        strs.join(", ")
                    ),
                    ATOM,
                ),
                Style::Triton { .. } => {
                    let f = if is_max { "tl.maximum" } else { "tl.minimum" };
                    let mut acc = strs.pop().unwrap();
                    while let Some(s) = strs.pop() {
                        acc = format!("{f}({s}, {acc})");
                    }
                    (acc, ATOM)
                }
            }
        }
    })
}

fn triton_floor_mod(x: &str, y: &str) -> String {
    // r = x % y truncates (sign of x); floor mod adds y when r is non-zero and signs differ
    format!("tl.where((({x} % {y}) != 0) & ((({x} % {y}) < 0) != ({y} < 0)), ({x} % {y}) + {y}, {x} % {y})")
}

fn floordiv_str(a: Expr, b: Expr, style: Style) -> SymResult<String> {
    // each child is printed once (printing them again per use would be exponential in depth)
    let (pa, pb) = (pr(a, style)?, pr(b, style)?);
    if style == Style::Sympy {
        return Ok(format!("({}//{})", wrap(pa, MUL), wrap(pb, ATOM)));
    }
    let (x, y) = (wrap(pa, ATOM), wrap(pb, ATOM));
    Ok(match style {
        Style::Sympy => unreachable!(),
        Style::Python => format!("({x} // {y})"),
        Style::Triton { .. } => {
            if a.is_nonneg() && b.is_positive() {
                format!("({x} // {y})")
            } else {
                // the correction tests the remainder's sign, not the dividend's: under C semantics
                // they agree, and where the operands are Python ints (size parameters are
                // constexprs under Triton's interpreter) `//` already floors and the remainder has
                // the divisor's sign, so nothing is subtracted
                format!("tl.where((({x} % {y}) != 0) & ((({x} % {y}) < 0) != ({y} < 0)), ({x} // {y}) - 1, {x} // {y})")
            }
        }
    })
}

/// Sympy-like display string (`x0 + 64*x1`, `(x0//16)`, `ModularIndexing(x0, 1, 64)`).
pub fn sympy_str(e: Expr) -> String {
    pr(e, Style::Sympy)
        .map(|s| s.0)
        .unwrap_or_else(|err| format!("<unprintable: {err}>"))
}

/// Python source for `e`: floor `//` and `%` as Python defines them; `min`/`max` builtins.
/// Inductor's PythonPrinter (`pexpr`).
pub fn pexpr(e: Expr) -> String {
    pr(e, Style::Python)
        .map(|s| s.0)
        .unwrap_or_else(|err| format!("<unprintable: {err}>"))
}

/// Triton source for `e` with the given index dtype (`"tl.int32"`/`"int32"` or `"tl.int64"`/
/// `"int64"`). Plain `//`/`%` only where operands are provably non-negative (divisor positive);
/// otherwise floor-correct `tl.where` forms. Errors: an unknown dtype, or an integer literal that
/// does not fit int32 when printing for int32.
pub fn texpr(e: Expr, index_dtype: &str) -> SymResult<String> {
    let int32 = match index_dtype {
        "tl.int32" | "int32" | "torch.int32" => true,
        "tl.int64" | "int64" | "torch.int64" => false,
        other => {
            return Err(SymError::Value(format!(
                "unknown index dtype {other:?}: use 'tl.int32' or 'tl.int64'"
            )))
        }
    };
    pr(e, Style::Triton { int32 }).map(|s| s.0)
}
