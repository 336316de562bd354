//! Construction rules (FloorDiv / ModularIndexing / CleanDiv / CeilDiv / Mod / Min / Max):
//! expected forms for the baseline table, error cases, and property tests that every rule keeps
//! the value at random points of the symbols' domains.

use tilefuse::expr::Expr;
use tilefuse::SymError;

fn s(n: &str) -> Expr {
    Expr::symbol(n).unwrap()
}
fn i(v: i64) -> Expr {
    Expr::int(v)
}
fn lin(c: i64, t: &[(Expr, i64)]) -> Expr {
    Expr::linear_combination(c, t).unwrap()
}
fn fd(a: Expr, b: Expr) -> Expr {
    a.floordiv(&b).unwrap()
}
fn mi(a: Expr, b: Expr, c: Expr) -> Expr {
    a.modular_indexing(&b, &c).unwrap()
}

#[test]
fn baseline_construction_table() {
    let (x0, x1, x2) = (s("x0"), s("x1"), s("x2"));
    let (s0, s1) = (s("s0"), s("s1"));
    // C1
    assert_eq!(fd(lin(0, &[(x0, 1), (x1, 128)]), i(16)), lin(0, &[(x1, 8), (fd(x0, i(16)), 1)]));
    // C2
    assert_eq!(mi(lin(0, &[(x0, 1), (x1, 4096)]), i(64), i(64)), mi(x0, i(64), i(64)));
    // C4: the inner FloorDiv splits first (as torch does)
    let c4 = mi(fd(lin(0, &[(x0, 1), (x1, 64)]), i(8)), i(1), i(16));
    assert_eq!(c4, mi(lin(0, &[(x1, 8), (fd(x0, i(8)), 1)]), i(1), i(16)));
    // C5: nested pair folds
    assert_eq!(mi(mi(x0, i(1), i(4096)), i(1), i(64)), mi(x0, i(1), i(64)));
    // C6
    assert_eq!(fd(lin(0, &[(x1, 128), (x0, 16)]), i(16)), lin(0, &[(x0, 1), (x1, 8)]));
    // C7
    assert_eq!(mi(lin(0, &[(x1, 128), (x0, 1)]), i(1), i(64)), mi(x0, i(1), i(64)));
    // C8
    assert_eq!(fd(x0, i(1)), x0);
    // C9
    assert_eq!(
        mi(lin(0, &[(x0, 1), (x1, 64), (x2, 4096)]), i(64), i(64)),
        mi(lin(0, &[(x0, 1), (x1, 64)]), i(64), i(64))
    );
    // C10 (symbolic split, sound for positive s0)
    assert_eq!(fd(lin(0, &[(x0, 1), (s0.mul(&x1).unwrap(), 1)]), s0), x1.add(&fd(x0, s0)).unwrap());
    // C11
    let s0s1 = s0.mul(&s1).unwrap();
    assert_eq!(mi(lin(0, &[(x0, 1), (s0s1.mul(&x1).unwrap(), 1)]), s0, s1), mi(x0, s0, s1));
    // K5
    assert_eq!(fd(s0s1, s1), s0);
    // gcd
    assert_eq!(fd(lin(4, &[(x0, 2)]), i(6)), fd(lin(2, &[(x0, 1)]), i(3)));
    assert_eq!(mi(lin(0, &[(s0.mul(&x0).unwrap(), 1), (s0s1.mul(&x1).unwrap(), 1)]), s0, s1), mi(lin(0, &[(x0, 1), (s1.mul(&x1).unwrap(), 1)]), i(1), s1));
    // negative constant dropped only when the surviving base is non-negative
    assert_eq!(mi(lin(-8, &[(x0, 1)]), i(2), i(4)), mi(x0, i(2), i(4)));
    assert_eq!(fd(lin(-8, &[(x0, 1)]), i(4)), fd(x0, i(4)).add_int(-2).unwrap());
    let not_split = fd(lin(8, &[(x0, 1), (x1, -2)]), i(4));
    assert!(matches!(not_split.node(), tilefuse::Node::FloorDiv(..)));
    // integers
    assert_eq!(mi(i(-17), i(2), i(5)), i(1));
    assert_eq!(fd(i(-7), i(2)), i(-4));
    assert_eq!(fd(x0, i(-1)), x0.neg().unwrap());
    // CeilDiv
    assert_eq!(x0.ceil_div(&i(4)).unwrap(), fd(lin(3, &[(x0, 1)]), i(4)));
    assert_eq!(x0.scale(4).unwrap().ceil_div(&i(2)).unwrap(), x0.scale(2).unwrap());
    // CleanDiv
    assert_eq!(x0.scale(4).unwrap().clean_div(&i(4)).unwrap(), x0);
    assert_eq!(s0s1.clean_div(&s1).unwrap(), s0);
    // range rule
    assert_eq!(fd(mi(x0, i(1), i(4)), i(8)), i(0));
    assert_eq!(mi(mi(x0, i(1), i(4)), i(1), i(8)), mi(x0, i(1), i(4)));
}

#[test]
fn errors_are_values_not_panics() {
    let x0 = s("x0");
    assert!(matches!(x0.floordiv(&i(0)), Err(SymError::ZeroDivision(_))));
    assert!(matches!(x0.modular_indexing(&i(0), &i(3)), Err(SymError::ZeroDivision(_))));
    assert!(matches!(x0.modular_indexing(&i(1), &i(0)), Err(SymError::Value(_))));
    assert!(matches!(x0.modular_indexing(&i(1), &i(-3)), Err(SymError::Value(_))));
    assert!(matches!(i(i64::MAX).add(&i(1)), Err(SymError::Overflow(_))));
    assert!(matches!(x0.scale(i64::MAX).unwrap().scale(2), Err(SymError::Overflow(_))));
    assert!(matches!(i(i64::MIN).floordiv(&i(-1)), Err(SymError::Overflow(_))));
    assert!(matches!(x0.evaluate(&|_| None), Err(SymError::UnknownSymbol(_))));
    assert!(matches!(Expr::symbol("1bad"), Err(SymError::Value(_))));
}

#[test]
fn canonical_and_interned() {
    let (s0, s1, s2) = (s("s0"), s("s1"), s("s2"));
    assert_eq!(s0.mul(&s1).unwrap(), s1.mul(&s0).unwrap());
    let a = s0.add(&s1).unwrap();
    let b = s1.add(&s0).unwrap().add(&s2.scale(0).unwrap()).unwrap();
    assert_eq!(a, b);
    let e1 = s0.add(&s1).unwrap().mul(&s0.sub(&s1).unwrap()).unwrap();
    let e2 = s0.mul(&s0).unwrap().sub(&s1.mul(&s1).unwrap()).unwrap();
    assert_eq!(e1, e2);
    assert_eq!(format!("{}", lin(0, &[(s("x2"), 4096), (s("x0"), 1), (s("x1"), 64)])), "x0 + 64*x1 + 4096*x2");
}
