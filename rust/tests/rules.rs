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
    assert_eq!(
        fd(lin(0, &[(x0, 1), (x1, 128)]), i(16)),
        lin(0, &[(x1, 8), (fd(x0, i(16)), 1)])
    );
    // C2
    assert_eq!(
        mi(lin(0, &[(x0, 1), (x1, 4096)]), i(64), i(64)),
        mi(x0, i(64), i(64))
    );
    // C4: the inner FloorDiv splits first (as torch does)
    let c4 = mi(fd(lin(0, &[(x0, 1), (x1, 64)]), i(8)), i(1), i(16));
    assert_eq!(c4, mi(lin(0, &[(x1, 8), (fd(x0, i(8)), 1)]), i(1), i(16)));
    // C5: nested pair folds
    assert_eq!(mi(mi(x0, i(1), i(4096)), i(1), i(64)), mi(x0, i(1), i(64)));
    // C6
    assert_eq!(
        fd(lin(0, &[(x1, 128), (x0, 16)]), i(16)),
        lin(0, &[(x0, 1), (x1, 8)])
    );
    // C7
    assert_eq!(
        mi(lin(0, &[(x1, 128), (x0, 1)]), i(1), i(64)),
        mi(x0, i(1), i(64))
    );
    // C8
    assert_eq!(fd(x0, i(1)), x0);
    // C9
    assert_eq!(
        mi(lin(0, &[(x0, 1), (x1, 64), (x2, 4096)]), i(64), i(64)),
        mi(lin(0, &[(x0, 1), (x1, 64)]), i(64), i(64))
    );
    // C10 (symbolic split, sound for positive s0)
    assert_eq!(
        fd(lin(0, &[(x0, 1), (s0.mul(&x1).unwrap(), 1)]), s0),
        x1.add(&fd(x0, s0)).unwrap()
    );
    // C11
    let s0s1 = s0.mul(&s1).unwrap();
    assert_eq!(
        mi(lin(0, &[(x0, 1), (s0s1.mul(&x1).unwrap(), 1)]), s0, s1),
        mi(x0, s0, s1)
    );
    // K5
    assert_eq!(fd(s0s1, s1), s0);
    // gcd
    assert_eq!(fd(lin(4, &[(x0, 2)]), i(6)), fd(lin(2, &[(x0, 1)]), i(3)));
    assert_eq!(
        mi(
            lin(0, &[(s0.mul(&x0).unwrap(), 1), (s0s1.mul(&x1).unwrap(), 1)]),
            s0,
            s1
        ),
        mi(lin(0, &[(x0, 1), (s1.mul(&x1).unwrap(), 1)]), i(1), s1)
    );
    // negative constant dropped only when the surviving base is non-negative
    assert_eq!(mi(lin(-8, &[(x0, 1)]), i(2), i(4)), mi(x0, i(2), i(4)));
    assert_eq!(
        fd(lin(-8, &[(x0, 1)]), i(4)),
        fd(x0, i(4)).add_int(-2).unwrap()
    );
    let not_split = fd(lin(8, &[(x0, 1), (x1, -2)]), i(4));
    assert!(matches!(not_split.node(), tilefuse::Node::FloorDiv(..)));
    // integers
    assert_eq!(mi(i(-17), i(2), i(5)), i(1));
    assert_eq!(fd(i(-7), i(2)), i(-4));
    assert_eq!(fd(x0, i(-1)), x0.neg().unwrap());
    // CeilDiv
    assert_eq!(x0.ceil_div(&i(4)).unwrap(), fd(lin(3, &[(x0, 1)]), i(4)));
    assert_eq!(
        x0.scale(4).unwrap().ceil_div(&i(2)).unwrap(),
        x0.scale(2).unwrap()
    );
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
    assert!(matches!(
        x0.modular_indexing(&i(0), &i(3)),
        Err(SymError::ZeroDivision(_))
    ));
    assert!(matches!(
        x0.modular_indexing(&i(1), &i(0)),
        Err(SymError::Value(_))
    ));
    assert!(matches!(
        x0.modular_indexing(&i(1), &i(-3)),
        Err(SymError::Value(_))
    ));
    assert!(matches!(i(i64::MAX).add(&i(1)), Err(SymError::Overflow(_))));
    assert!(matches!(
        x0.scale(i64::MAX).unwrap().scale(2),
        Err(SymError::Overflow(_))
    ));
    assert!(matches!(
        i(i64::MIN).floordiv(&i(-1)),
        Err(SymError::Overflow(_))
    ));
    assert!(matches!(
        x0.evaluate(&|_| None),
        Err(SymError::UnknownSymbol(_))
    ));
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
    assert_eq!(
        format!(
            "{}",
            lin(0, &[(s("x2"), 4096), (s("x0"), 1), (s("x1"), 64)])
        ),
        "x0 + 64*x1 + 4096*x2"
    );
}

// ------------------------------------------------------------------------------------------------
// Property tests: every construction rule preserves the value. A random tree is built twice: as a
// plain tree evaluated with Python floor semantics (the definition), and through the smart
// constructors (which rewrite). Both must agree at random points of the symbols' domains.

mod props {
    use super::*;
    use proptest::prelude::*;
    use tilefuse::expr::{floor_div, floor_mod};

    #[derive(Clone, Debug)]
    pub enum T {
        Idx(usize),  // x0..x3 in [0, 64)
        Size(usize), // s0, s1 in [1, 40]
        Any,         // `a`: an integer of unknown sign, in [-60, 60]
        Int(i64),
        Add(Box<T>, Box<T>),
        Sub(Box<T>, Box<T>),
        Mul(Box<T>, Box<T>),
        Fd(Box<T>, Box<T>),         // divisor: positive
        Mi(Box<T>, Box<T>, Box<T>), // divisor, modulus: positive
        Clean(Box<T>, Box<T>),      // (a*d) clean/ d
        Ceil(Box<T>, Box<T>),
        Mod(Box<T>, Box<T>),
        Min(Box<T>, Box<T>),
        Max(Box<T>, Box<T>),
    }

    #[derive(Debug)]
    pub struct Point {
        pub idx: [i64; 4],
        pub size: [i64; 2],
        pub any: i64,
    }

    fn leaf() -> impl Strategy<Value = T> {
        prop_oneof![
            (0usize..4).prop_map(T::Idx),
            (0usize..2).prop_map(T::Size),
            Just(T::Any),
            (-20i64..=20).prop_map(T::Int),
        ]
    }

    /// Positive divisor: a positive integer, a size symbol, or a product of those.
    fn divisor() -> impl Strategy<Value = T> {
        prop_oneof![
            4 => (1i64..=16).prop_map(T::Int),
            2 => (0usize..2).prop_map(T::Size),
            1 => ((1i64..=8), (0usize..2)).prop_map(|(c, s)| T::Mul(Box::new(T::Int(c)), Box::new(T::Size(s)))),
        ]
    }

    pub fn tree(depth: u32) -> BoxedStrategy<T> {
        leaf()
            .prop_recursive(depth, 24, 3, |inner| {
                prop_oneof![
                    3 => (inner.clone(), inner.clone()).prop_map(|(a, b)| T::Add(Box::new(a), Box::new(b))),
                    1 => (inner.clone(), inner.clone()).prop_map(|(a, b)| T::Sub(Box::new(a), Box::new(b))),
                    2 => (inner.clone(), (-16i64..=16).prop_map(T::Int)).prop_map(|(a, b)| T::Mul(Box::new(a), Box::new(b))),
                    1 => (inner.clone(), inner.clone()).prop_map(|(a, b)| T::Mul(Box::new(a), Box::new(b))),
                    3 => (inner.clone(), divisor()).prop_map(|(a, b)| T::Fd(Box::new(a), Box::new(b))),
                    3 => (inner.clone(), divisor(), divisor()).prop_map(|(a, b, c)| T::Mi(Box::new(a), Box::new(b), Box::new(c))),
                    1 => (inner.clone(), divisor()).prop_map(|(a, b)| T::Clean(Box::new(a), Box::new(b))),
                    1 => (inner.clone(), divisor()).prop_map(|(a, b)| T::Ceil(Box::new(a), Box::new(b))),
                    1 => (inner.clone(), divisor()).prop_map(|(a, b)| T::Mod(Box::new(a), Box::new(b))),
                    1 => (inner.clone(), inner.clone()).prop_map(|(a, b)| T::Min(Box::new(a), Box::new(b))),
                    1 => (inner.clone(), inner).prop_map(|(a, b)| T::Max(Box::new(a), Box::new(b))),
                ]
            })
            .boxed()
    }

    /// The definition, in Python floor semantics; None when a divisor is 0 at this point.
    pub fn eval(t: &T, p: &Point) -> Option<i64> {
        Some(match t {
            T::Idx(i) => p.idx[*i],
            T::Size(i) => p.size[*i],
            T::Any => p.any,
            T::Int(v) => *v,
            T::Add(a, b) => eval(a, p)?.checked_add(eval(b, p)?)?,
            T::Sub(a, b) => eval(a, p)?.checked_sub(eval(b, p)?)?,
            T::Mul(a, b) => eval(a, p)?.checked_mul(eval(b, p)?)?,
            T::Fd(a, b) => floor_div(eval(a, p)?, eval(b, p)?).ok()?,
            T::Mi(a, b, c) => {
                floor_mod(floor_div(eval(a, p)?, eval(b, p)?).ok()?, eval(c, p)?).ok()?
            }
            T::Clean(a, b) => {
                let d = eval(b, p)?;
                floor_div(eval(a, p)?.checked_mul(d)?, d).ok()?
            }
            T::Ceil(a, b) => {
                let (x, d) = (eval(a, p)?, eval(b, p)?);
                -floor_div(x.checked_neg()?, d).ok()?
            }
            T::Mod(a, b) => floor_mod(eval(a, p)?, eval(b, p)?).ok()?,
            T::Min(a, b) => eval(a, p)?.min(eval(b, p)?),
            T::Max(a, b) => eval(a, p)?.max(eval(b, p)?),
        })
    }

    pub fn syms() -> (Vec<Expr>, Vec<Expr>, Expr) {
        let idx = (0..4)
            .map(|i| Expr::symbol_with(&format!("x{i}"), None, None, Some(63)).unwrap())
            .collect();
        let size = (0..2)
            .map(|i| Expr::symbol_with(&format!("s{i}"), None, None, Some(40)).unwrap())
            .collect();
        (
            idx,
            size,
            Expr::symbol_with("a", None, Some(-60), Some(60)).unwrap(),
        )
    }

    pub fn build(t: &T, s: &(Vec<Expr>, Vec<Expr>, Expr)) -> tilefuse::SymResult<Expr> {
        Ok(match t {
            T::Idx(i) => s.0[*i],
            T::Size(i) => s.1[*i],
            T::Any => s.2,
            T::Int(v) => Expr::int(*v),
            T::Add(a, b) => build(a, s)?.add(&build(b, s)?)?,
            T::Sub(a, b) => build(a, s)?.sub(&build(b, s)?)?,
            T::Mul(a, b) => build(a, s)?.mul(&build(b, s)?)?,
            T::Fd(a, b) => build(a, s)?.floordiv(&build(b, s)?)?,
            T::Mi(a, b, c) => build(a, s)?.modular_indexing(&build(b, s)?, &build(c, s)?)?,
            T::Clean(a, b) => {
                let d = build(b, s)?;
                build(a, s)?.mul(&d)?.clean_div(&d)?
            }
            T::Ceil(a, b) => build(a, s)?.ceil_div(&build(b, s)?)?,
            T::Mod(a, b) => build(a, s)?.floor_mod(&build(b, s)?)?,
            T::Min(a, b) => Expr::min_of(&[build(a, s)?, build(b, s)?])?,
            T::Max(a, b) => Expr::max_of(&[build(a, s)?, build(b, s)?])?,
        })
    }

    pub fn point() -> impl Strategy<Value = Point> {
        (
            prop::array::uniform4(0i64..64),
            prop::array::uniform2(1i64..=40),
            -60i64..=60,
        )
            .prop_map(|(idx, size, any)| Point { idx, size, any })
    }

    pub fn check(t: &T, points: &[Point]) -> Result<(), TestCaseError> {
        let s = syms();
        let built = match build(t, &s) {
            Ok(e) => e,
            // a constructor may only refuse with an error (never panic) — overflow of huge
            // intermediate coefficients is legitimate; anything else is a bug
            Err(tilefuse::SymError::Overflow(_)) => return Ok(()),
            Err(e) => {
                return Err(TestCaseError::fail(format!(
                    "constructor failed: {e} for {t:?}"
                )))
            }
        };
        for p in points {
            let Some(want) = eval(t, p) else { continue };
            let got = built.evaluate(&|e: &Expr| {
                let name = &e.as_symbol()?.name;
                let (k, i) = name.split_at(1);
                let i: usize = i.parse().unwrap_or(0);
                Some(match k {
                    "x" => p.idx[i],
                    "s" => p.size[i],
                    _ => p.any,
                })
            });
            match got {
                Ok(v) => prop_assert_eq!(v, want, "tree {:?}\nbuilt {}", t, built),
                Err(tilefuse::SymError::Overflow(_)) => {}
                Err(e) => {
                    return Err(TestCaseError::fail(format!(
                        "eval error {e}: {t:?} -> {built}"
                    )))
                }
            }
        }
        Ok(())
    }

    fn floordiv_tree() -> impl Strategy<Value = T> {
        (tree(3), divisor()).prop_map(|(a, b)| T::Fd(Box::new(a), Box::new(b)))
    }
    fn mi_tree() -> impl Strategy<Value = T> {
        (tree(3), divisor(), divisor())
            .prop_map(|(a, b, c)| T::Mi(Box::new(a), Box::new(b), Box::new(c)))
    }
    fn clean_ceil_tree() -> impl Strategy<Value = T> {
        prop_oneof![
            (tree(3), divisor()).prop_map(|(a, b)| T::Clean(Box::new(a), Box::new(b))),
            (tree(3), divisor()).prop_map(|(a, b)| T::Ceil(Box::new(a), Box::new(b))),
        ]
    }
    fn mod_minmax_tree() -> impl Strategy<Value = T> {
        prop_oneof![
            (tree(3), divisor()).prop_map(|(a, b)| T::Mod(Box::new(a), Box::new(b))),
            (tree(3), tree(3)).prop_map(|(a, b)| T::Min(Box::new(a), Box::new(b))),
            (tree(3), tree(3)).prop_map(|(a, b)| T::Max(Box::new(a), Box::new(b))),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(10_000))]
        #[test]
        fn floordiv_rules_preserve_value(t in floordiv_tree(), pts in prop::collection::vec(point(), 8)) {
            check(&t, &pts)?;
        }
        #[test]
        fn modular_indexing_rules_preserve_value(t in mi_tree(), pts in prop::collection::vec(point(), 8)) {
            check(&t, &pts)?;
        }
        #[test]
        fn clean_and_ceil_div_preserve_value(t in clean_ceil_tree(), pts in prop::collection::vec(point(), 8)) {
            check(&t, &pts)?;
        }
        #[test]
        fn mod_min_max_preserve_value(t in mod_minmax_tree(), pts in prop::collection::vec(point(), 8)) {
            check(&t, &pts)?;
        }
        #[test]
        fn polynomial_canonical_form(a in tree(2), b in tree(2), pts in prop::collection::vec(point(), 4)) {
            // a*b - b*a == 0 and (a+b) - a == b structurally
            let s = syms();
            if let (Ok(x), Ok(y)) = (build(&a, &s), build(&b, &s)) {
                if let (Ok(p), Ok(q)) = (x.mul(&y), y.mul(&x)) {
                    prop_assert_eq!(p, q);
                }
                if let Ok(z) = x.add(&y).and_then(|z| z.sub(&x)) {
                    prop_assert_eq!(z, y);
                }
            }
            check(&T::Add(Box::new(a), Box::new(b)), &pts)?;
        }
        #[test]
        fn assumption_ranges_contain_values(t in tree(3), pts in prop::collection::vec(point(), 8)) {
            let s = syms();
            if let Ok(e) = build(&t, &s) {
                let r = e.range();
                for p in &pts {
                    if let Some(v) = eval(&t, p) {
                        prop_assert!(r.lo <= v as i128 && v as i128 <= r.hi, "{} = {} outside [{}, {}]", e, v, r.lo, r.hi);
                    }
                }
            }
        }
    }
}

// ------------------------------------------------------------------------------------------------
// One test per named rule: it fires when its precondition holds (and the result keeps the value),
// and does not fire when the precondition fails.

mod per_rule {
    use super::*;
    use tilefuse::rules::*;

    fn x(n: &str, hi: i64) -> Expr {
        Expr::symbol_with(n, None, None, Some(hi)).unwrap()
    }
    /// value check over a grid of x in [0, 40), y in [0, 12)
    fn same(a: Expr, b: Expr) {
        let (x0, x1) = (x("x0", 1000), x("x1", 1000));
        let any = Expr::symbol_with("a", None, Some(-30), Some(30)).unwrap();
        for v0 in 0..40 {
            for v1 in 0..12 {
                for va in [-17i64, -1, 0, 5] {
                    let f = |e: &Expr| {
                        if *e == x0 {
                            Some(v0)
                        } else if *e == x1 {
                            Some(v1)
                        } else if *e == any {
                            Some(va)
                        } else {
                            e.as_symbol().map(|_| 3)
                        }
                    };
                    assert_eq!(
                        a.evaluate(&f).unwrap(),
                        b.evaluate(&f).unwrap(),
                        "{a} vs {b}"
                    );
                }
            }
        }
    }
    fn fd_node(a: Expr, b: Expr) -> Expr {
        // the unevaluated definition, for value comparison: (a - a % b) / b computed through Mod
        // is itself rewritten, so compare against evaluation of the parts instead
        a.sub(&a.floor_mod(&b).unwrap())
            .unwrap()
            .floordiv(&b)
            .unwrap()
    }

    #[test]
    fn nested_floordiv() {
        let (x0, _) = (x("x0", 1000), ());
        let inner = Expr::symbol("a").unwrap().floordiv(&i(3)).unwrap(); // a may be negative: no split rules
        let r = rule_nested_floordiv(inner, i(4)).unwrap().unwrap();
        assert_eq!(r, Expr::symbol("a").unwrap().floordiv(&i(12)).unwrap());
        // divisor not provably positive: does not fire
        let y = Expr::symbol("a").unwrap();
        assert!(rule_nested_floordiv(x0.floordiv(&i(3)).unwrap(), y)
            .unwrap()
            .is_none());
    }

    #[test]
    fn floordiv_small_base() {
        let x0 = x("x0", 6);
        assert_eq!(rule_floordiv_small_base(x0, i(7)).unwrap(), Some(i(0)));
        assert!(rule_floordiv_small_base(x0, i(6)).unwrap().is_none());
        let any = Expr::symbol_with("a", None, Some(-1), Some(3)).unwrap();
        assert!(rule_floordiv_small_base(any, i(7)).unwrap().is_none());
    }

    #[test]
    fn split_exact_terms() {
        let (x0, x1) = (x("x0", 1000), x("x1", 1000));
        let base = lin(5, &[(x0, 1), (x1, 8)]);
        let r = rule_split_exact_terms(base, i(4)).unwrap().unwrap();
        same(r, fd_node(base, i(4)));
        assert_eq!(r, lin(0, &[(x1, 2), (fd(lin(5, &[(x0, 1)]), i(4)), 1)]));
        // surviving base x0 - 2*x1 is not provably non-negative: no split
        let neg = lin(8, &[(x0, 1), (x1, -2)]);
        assert!(rule_split_exact_terms(neg, i(4)).unwrap().is_none());
        // symbolic monomial divisor
        let s1 = Expr::symbol("s1").unwrap();
        let b2 = x0.add(&s1.mul(&x1).unwrap()).unwrap();
        assert_eq!(
            rule_split_exact_terms(b2, s1).unwrap().unwrap(),
            x1.add(&fd(x0, s1)).unwrap()
        );
    }

    #[test]
    fn floordiv_gcd() {
        let x0 = x("x0", 1000);
        let any = Expr::symbol("a").unwrap();
        let r = rule_floordiv_gcd(lin(4, &[(any, 6)]), i(10))
            .unwrap()
            .unwrap();
        assert_eq!(r, fd(lin(2, &[(any, 3)]), i(5)));
        same(r, fd_node(lin(4, &[(any, 6)]), i(10)));
        assert!(rule_floordiv_gcd(lin(1, &[(x0, 2)]), i(4))
            .unwrap()
            .is_none());
        // common factor that may be zero (an index variable) is not cancelled
        let x1 = x("x1", 1000);
        assert!(rule_floordiv_gcd(x0.mul(&x1).unwrap(), x1)
            .unwrap()
            .is_none());
    }

    #[test]
    fn mi_of_floordiv_and_mi_of_mi() {
        let x0 = x("x0", 1000);
        let r = rule_mi_of_floordiv(fd(x0, i(4)), i(2), i(8))
            .unwrap()
            .unwrap();
        assert_eq!(r, mi(x0, i(8), i(8)));
        let r2 = rule_mi_of_mi(mi(x0, i(1), i(64)), i(4), i(8))
            .unwrap()
            .unwrap();
        assert_eq!(r2, mi(x0, i(4), i(8)));
        same(
            r2,
            x0.floor_mod(&i(64))
                .unwrap()
                .floordiv(&i(4))
                .unwrap()
                .floor_mod(&i(8))
                .unwrap(),
        );
        // 64 is not a multiple of 4*24: does not fire
        assert!(rule_mi_of_mi(mi(x0, i(1), i(64)), i(4), i(24))
            .unwrap()
            .is_none());
    }

    #[test]
    fn mi_gcd_and_drop_multiples() {
        let (x0, x1) = (x("x0", 1000), x("x1", 1000));
        let r = rule_mi_gcd(lin(0, &[(x0, 4), (x1, 8)]), i(4), i(5))
            .unwrap()
            .unwrap();
        assert_eq!(r, mi(lin(0, &[(x0, 1), (x1, 2)]), i(1), i(5)));
        assert!(rule_mi_gcd(x0, i(1), i(5)).unwrap().is_none());
        let base = lin(-24, &[(x0, 1), (x1, 32)]);
        let r = rule_mi_drop_multiples(base, i(2), i(4)).unwrap().unwrap();
        assert_eq!(r, mi(x0, i(2), i(4)));
        // surviving base may be negative: keep
        let neg = lin(8, &[(x0, -1), (x1, 8)]);
        assert!(rule_mi_drop_multiples(neg, i(2), i(4)).unwrap().is_none());
    }

    #[test]
    fn mi_no_wrap() {
        let x0 = x("x0", 63);
        assert_eq!(
            rule_mi_no_wrap(x0, i(2), i(32)).unwrap(),
            Some(fd(x0, i(2)))
        );
        assert!(rule_mi_no_wrap(x0, i(2), i(31)).unwrap().is_none());
    }

    #[test]
    fn mod_min_max_constructors() {
        let any = Expr::symbol("a").unwrap();
        let x0 = x("x0", 1000);
        assert_eq!(any.floor_mod(&i(8)).unwrap(), mi(any, i(1), i(8)));
        assert!(matches!(
            x0.floor_mod(&any).unwrap().node(),
            tilefuse::Node::Mod(..)
        ));
        assert_eq!(Expr::max_of(&[x0, i(-3)]).unwrap(), x0); // x0 >= 0 > -3
        assert_eq!(Expr::min_of(&[x0, x0.add_int(1).unwrap()]).unwrap(), x0);
        assert_eq!(Expr::min_of(&[i(3), i(-2), i(7)]).unwrap(), i(-2));
        assert!(Expr::max_of(&[]).is_err());
        let m = Expr::max_of(&[x0, any]).unwrap();
        assert_eq!(m, Expr::max_of(&[any, x0]).unwrap());
    }
}

#[test]
fn integer_quotient_terms_fold_into_the_constant() {
    let (x0, s0) = (s("x0"), s("s0"));
    assert_eq!(s0.scale(2).unwrap().clean_div(&s0).unwrap(), i(2));
    let e = x0.mul(&s0).unwrap().add(&s0).unwrap();
    assert_eq!(fd(e, s0), x0.add_int(1).unwrap());
}
