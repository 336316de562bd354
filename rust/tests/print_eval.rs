//! Printers and evaluation.
use tilefuse::expr::Expr;
use tilefuse::print::{pexpr, texpr};

#[test]
fn printers() {
    let x0 = Expr::symbol("x0").unwrap();
    let s0 = Expr::symbol("s0").unwrap();
    let e = x0
        .modular_indexing(&Expr::int(4), &Expr::int(8))
        .unwrap()
        .add(&s0.scale(3).unwrap())
        .unwrap();
    assert_eq!(pexpr(e), "3*s0 + ((x0 // 4) % 8)");
    assert_eq!(texpr(e, "tl.int32").unwrap(), "3*s0 + ((x0 // 4) % 8)");
    let u = Expr::symbol("a").unwrap();
    let f = u.floordiv(&Expr::int(4)).unwrap();
    assert!(texpr(f, "tl.int64").unwrap().contains("tl.where"));
    assert!(texpr(Expr::int(1 << 40), "tl.int32").is_err());
    assert_eq!(
        texpr(Expr::int(1 << 40), "tl.int64").unwrap(),
        (1i64 << 40).to_string()
    );
}
