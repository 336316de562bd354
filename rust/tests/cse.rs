//! The kernel CSE table: structural keys, equal keys →
//! same variable, bounds tightening and use counts, clone / scoped-copy isolation, invalidate
//! semantics, and the text-keyed table behaving the same.

use proptest::prelude::*;
use rustc_hash::FxHashMap;
use tilefuse::cse::{CseArg, CseKey, CseTable, CseVarId, DtypeTag, Name, TextCseTable};
use tilefuse::expr::Expr;
use tilefuse::interval::Interval;

fn key(op: &str, args: &[CseArg]) -> CseKey {
    CseKey::from_op(op, DtypeTag::FLOAT32, args)
}

#[test]
fn structural_keys() {
    let x0 = Expr::symbol("x0").unwrap();
    let e1 = x0.scale(4).unwrap().add_int(1).unwrap();
    let e2 = Expr::linear_combination(1, &[(x0, 4)]).unwrap();
    let buf = CseArg::Name(Name::intern("in_ptr0"));
    let a = key("load", &[buf, CseArg::Expr(e1)]);
    let b = key("load", &[buf, CseArg::Expr(e2)]);
    assert_eq!(a, b);
    assert_eq!(a.hash_value(), b.hash_value());
    assert_ne!(a, key("load", &[buf, CseArg::Expr(x0)]));
    assert_ne!(a, key("store", &[buf, CseArg::Expr(e1)]));
    assert_ne!(
        a,
        CseKey::from_op("load", DtypeTag::FLOAT16, &[buf, CseArg::Expr(e1)])
    );
    // argument order and arity matter
    let v = |k| CseArg::Var(CseVarId(k));
    assert_ne!(key("sub", &[v(0), v(1)]), key("sub", &[v(1), v(0)]));
    assert_ne!(key("f", &[v(0)]), key("f", &[v(0), CseArg::None]));
    // heap-stored (more than three) arguments compare by content
    let long: Vec<CseArg> = (0..6).map(CseArg::Int).collect();
    assert_eq!(key("where", &long), key("where", &long.clone()));
    assert_ne!(key("where", &long), key("where", &long[..5]));
    assert_eq!(key("where", &long).args(), &long[..]);
    assert_eq!(a.op().as_str(), "load");
    assert_eq!(a.dtype(), DtypeTag::FLOAT32);
    // floats by bits
    assert_ne!(
        key("c", &[CseArg::float(0.0)]),
        key("c", &[CseArg::float(-0.0)])
    );
    assert_eq!(
        key("c", &[CseArg::float(f64::NAN)]),
        key("c", &[CseArg::float(f64::NAN)])
    );
    assert_eq!(Name::intern("load"), a.op());
}

#[test]
fn equal_keys_same_var_names_and_counts() {
    let mut t: CseTable = CseTable::new();
    let (v0, new0) = t.get_or_insert(key("sin", &[CseArg::Int(1)]));
    let (v1, new1) = t.get_or_insert(key("cos", &[CseArg::Int(1)]));
    let (v2, new2) = t.get_or_insert(key("sin", &[CseArg::Int(1)]));
    assert!(new0 && new1 && !new2);
    assert_eq!(v0, v2);
    assert_ne!(v0, v1);
    assert_eq!(
        (t.var_name(v0), t.var_name(v1)),
        ("tmp0".into(), "tmp1".into())
    );
    assert_eq!(t.var(v0).unwrap().use_count, 2);
    assert_eq!(t.var(v1).unwrap().use_count, 1);
    assert_eq!(t.lookup(&key("cos", &[CseArg::Int(1)])), Some(v1));
    assert!(!t.contains(&key("cos", &[CseArg::Int(2)])));
    assert_eq!(t.len(), 2);
    assert_eq!(t.var_by_name("tmp1"), Some(v1));
    // insert (put) an existing var under another key
    t.insert(key("alias", &[]), v1);
    assert_eq!(t.lookup(&key("alias", &[])), Some(v1));
    // reuse_var (generate on a CSE variable) bumps the count
    t.reuse_var(v1, Interval::UNKNOWN);
    assert_eq!(t.var(v1).unwrap().use_count, 2);
    // names from a custom prefix; namedvar duplicates are errors
    let mut u: CseTable = CseTable::with_name_prefix("acc");
    let n = u.newvar(Interval::UNKNOWN, DtypeTag::INT64);
    assert_eq!(u.var_name(n), "acc0");
    assert!(u
        .namedvar("acc0", Interval::UNKNOWN, DtypeTag::NONE)
        .is_err());
    let named = u
        .namedvar("acc1", Interval::UNKNOWN, DtypeTag::NONE)
        .unwrap();
    assert_eq!(u.var_name(named), "acc1");
    // the counter skips a name a namedvar already took
    let nv = u.newvar(Interval::UNKNOWN, DtypeTag::NONE);
    assert_eq!(u.var_name(nv), "acc2");
    assert_eq!(u.var_name(CseVarId(999)), "?");
    assert!(u.var(CseVarId(999)).is_none());
}

#[test]
fn bounds_tighten_monotonically() {
    let mut t: CseTable = CseTable::new();
    let k = key("load", &[CseArg::Int(0)]);
    let (v, _) = t.generate(k.clone(), Interval::new(0, 100), DtypeTag::INT32);
    assert_eq!(t.var(v).unwrap().dtype, DtypeTag::INT32);
    t.generate(k.clone(), Interval::new(10, 200), DtypeTag::INT32);
    assert_eq!(t.var(v).unwrap().bounds, Interval::new(10, 100));
    // unknown never widens
    t.generate(k.clone(), Interval::UNKNOWN, DtypeTag::INT32);
    assert_eq!(t.var(v).unwrap().bounds, Interval::new(10, 100));
    // a contradictory range keeps the old bounds
    t.generate(k.clone(), Interval::new(500, 600), DtypeTag::INT32);
    assert_eq!(t.var(v).unwrap().bounds, Interval::new(10, 100));
    t.reuse_var(v, Interval::new(20, 30));
    let info = t.var(v).unwrap();
    assert_eq!((info.bounds, info.use_count), (Interval::new(20, 30), 5));
}

#[test]
fn clone_shares_counter_not_cache() {
    let mut t: CseTable = CseTable::new();
    let (a, _) = t.get_or_insert(key("a", &[]));
    let mut c = t.clone_table();
    assert_eq!(c.lookup(&key("a", &[])), None);
    let (b, new) = c.get_or_insert(key("a", &[]));
    assert!(new);
    assert_ne!(a, b);
    assert_eq!(c.var_name(b), "tmp1");
    let nv = t.newvar(Interval::UNKNOWN, DtypeTag::NONE);
    assert_eq!(t.var_name(nv), "tmp2");
    // the store cache is shared by clones
    c.store_cache_insert(Name::intern("buf0"), b);
    assert_eq!(t.store_cache_get(Name::intern("buf0")), Some(b));
    assert_eq!(t.var_by_name("tmp1"), Some(b));
}

#[test]
fn scoped_copy_isolation() {
    let mut t: CseTable = CseTable::new();
    let (a, _) = t.get_or_insert(key("a", &[]));
    let buf = Name::intern("buf1");
    t.store_cache_insert(buf, a);
    let rk = CseKey::from_op("reduction:sum", DtypeTag::FLOAT32, &[CseArg::Var(a)]);
    t.reduction_cache_insert(rk.clone(), a);

    let mut s = t.scoped_copy();
    // reads fall through
    assert_eq!(s.lookup(&key("a", &[])), Some(a));
    assert_eq!(s.store_cache_get(buf), Some(a));
    assert_eq!(s.reduction_cache_get(&rk), Some(a));
    // writes stay in the copy
    let (b, new) = s.get_or_insert(key("b", &[]));
    assert!(new);
    s.store_cache_insert(buf, b);
    s.reduction_cache_insert(rk.clone(), b);
    assert_eq!(t.lookup(&key("b", &[])), None);
    assert_eq!(t.store_cache_get(buf), Some(a));
    assert_eq!(t.reduction_cache_get(&rk), Some(a));
    assert_eq!(s.store_cache_get(buf), Some(b));
    // variables are shared: a hit through the copy is counted on the parent's variable
    s.get_or_insert(key("a", &[]));
    assert_eq!(t.var(a).unwrap().use_count, 2);
    // names never collide
    let nv = t.newvar(Interval::UNKNOWN, DtypeTag::NONE);
    assert_eq!(t.var_name(nv), "tmp2");
    // parent writes after the copy are visible through it (live overlay)
    let (c, _) = t.get_or_insert(key("c", &[]));
    assert_eq!(s.lookup(&key("c", &[])), Some(c));
    // invalidating the copy does not touch the parent
    s.invalidate(&[]);
    assert!(s.is_empty());
    assert_eq!(s.store_cache_get(buf), None);
    assert_eq!(s.invalidated_stores(), &[buf]);
    assert_eq!(t.lookup(&key("a", &[])), Some(a));
    assert_eq!(t.store_cache_get(buf), Some(a));
    assert!(t.invalidated_stores().is_empty());
    // nested copies
    let s2 = t.scoped_copy().scoped_copy();
    assert_eq!(s2.lookup(&key("c", &[])), Some(c));
}

#[test]
fn invalidate_semantics() {
    let mut t: CseTable = CseTable::new();
    let (a, _) = t.get_or_insert(key("a", &[]));
    let (b, _) = t.get_or_insert(key("b", &[]));
    let (c, _) = t.get_or_insert(key("c", &[]));
    t.insert(key("b2", &[]), b);
    let (b0, b1) = (Name::intern("st0"), Name::intern("st1"));
    t.store_cache_insert(b0, a);
    t.store_cache_insert(b1, b);
    t.invalidate(&[b]);
    assert_eq!(t.lookup(&key("a", &[])), None);
    assert_eq!(t.lookup(&key("b", &[])), Some(b));
    assert_eq!(t.lookup(&key("b2", &[])), Some(b));
    assert_eq!(t.lookup(&key("c", &[])), None);
    assert_eq!(t.len(), 2);
    assert_eq!(t.store_cache_get(b0), None);
    assert_eq!(t.store_cache_get(b1), Some(b));
    assert_eq!(t.invalidated_stores(), &[b0]);
    // by name
    t.invalidate_names(&["tmp9", "tmp1"]);
    assert_eq!(t.lookup(&key("b", &[])), Some(b));
    // empty keep clears everything
    t.invalidate(&[]);
    assert!(t.is_empty());
    assert_eq!(t.store_cache_get(b1), None);
    assert_eq!(t.invalidated_stores(), &[b0, b1]);
    // new entries after invalidation get fresh names
    let (d, new) = t.get_or_insert(key("a", &[]));
    assert!(new);
    assert_ne!(d, a);
    assert_eq!(t.var_name(d), "tmp3");
    let _ = c;
}

#[test]
fn tables_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<CseTable>();
    check::<TextCseTable>();
    check::<CseKey>();
    check::<tilefuse::tree::RangeTrees>();
}

#[test]
fn text_table_same_semantics() {
    let mut t: TextCseTable = TextCseTable::new();
    let (a, new) = t.get_or_insert("tl.load(in_ptr0 + (x0), xmask)".to_string());
    assert!(new);
    let (b, new) = t.get_or_insert("tl.load(in_ptr0 + (x0), xmask)".to_string());
    assert!(!new);
    assert_eq!(a, b);
    assert_eq!(t.lookup("tl.load(in_ptr0 + (x0), xmask)"), Some(a));
    let s = t.scoped_copy();
    assert!(s.contains("tl.load(in_ptr0 + (x0), xmask)"));
    assert_eq!(t.var_name(a), "tmp0");
}

#[test]
fn local_lookups_and_caller_handles() {
    // a caller that numbers its own variables caches handles; lookups give them back, the local
    // lookups see only the scoped copy's own layer
    let mut root: TextCseTable = TextCseTable::new();
    root.insert("a".to_string(), CseVarId(7));
    let mut child = root.scoped_copy();
    assert_eq!(child.lookup("a"), Some(CseVarId(7)));
    assert_eq!(child.lookup_local("a"), None);
    assert_eq!((child.local_len(), child.len()), (0, 1));
    child.insert("a".to_string(), CseVarId(9));
    child.insert("b".to_string(), CseVarId(9));
    assert_eq!(child.lookup_local("a"), Some(CseVarId(9)));
    assert_eq!(root.lookup("a"), Some(CseVarId(7)));
    assert_eq!(root.lookup("b"), None);
    assert_eq!(
        (child.local_len(), child.len(), root.local_len()),
        (2, 2, 1)
    );
    // writes to the parent after the copy are visible through it
    root.insert("c".to_string(), CseVarId(1));
    assert_eq!(child.lookup("c"), Some(CseVarId(1)));
    for k in 0..100 {
        root.insert(format!("k{k}"), CseVarId(k));
    }
    assert_eq!(child.lookup("k99"), Some(CseVarId(99)));
    assert_eq!(root.local_len(), 102);
}

// ------------------------------------------------------------------------------ properties

#[derive(Clone, Debug)]
enum Op {
    Gen(u8, i8),
    Invalidate(Vec<u8>),
    Store(u8, u8),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        8 => (0u8..6, -2i8..3).prop_map(|(o, a)| Op::Gen(o, a)),
        1 => prop::collection::vec(0u8..12, 0..4).prop_map(Op::Invalidate),
        2 => (0u8..3, 0u8..12).prop_map(|(b, v)| Op::Store(b, v)),
    ];
    prop::collection::vec(op, 1..24)
}

fn op_key(o: u8, a: i8) -> CseKey {
    CseKey::new(
        Name(o as u32 + 1000),
        DtypeTag::NONE,
        &[CseArg::Int(a as i64)],
    )
}
fn op_text(o: u8, a: i8) -> String {
    format!("op{o}({a})")
}

/// A plain-map model of Inductor's CSE for one table.
#[derive(Default)]
struct Model {
    cache: FxHashMap<(u8, i8), u32>,
    stores: FxHashMap<u8, u32>,
    counter: u32,
    uses: Vec<u32>,
    invalidated: Vec<u8>,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    /// Equal keys ↔ same variable, use counts and invalidate semantics match a plain-map model of
    /// Inductor's CSE; the text-keyed table hands out the same variables for the same stream.
    #[test]
    fn prop_matches_model(stream in ops()) {
        let mut t: CseTable = CseTable::new();
        let mut tt: TextCseTable = TextCseTable::new();
        let mut m = Model::default();
        for op in &stream {
            match op {
                Op::Gen(o, a) => {
                    let (v, new) = t.get_or_insert(op_key(*o, *a));
                    let (tv, tnew) = tt.get_or_insert(op_text(*o, *a));
                    prop_assert_eq!((v, new), (tv, tnew));
                    match m.cache.get(&(*o, *a)) {
                        Some(&mv) => {
                            prop_assert!(!new);
                            prop_assert_eq!(v.0, mv);
                            m.uses[mv as usize] += 1;
                        }
                        None => {
                            prop_assert!(new);
                            prop_assert_eq!(v.0, m.counter);
                            prop_assert_eq!(t.var_name(v), format!("tmp{}", m.counter));
                            m.cache.insert((*o, *a), m.counter);
                            m.uses.push(1);
                            m.counter += 1;
                        }
                    }
                }
                Op::Invalidate(keep) => {
                    let keep_ids: Vec<CseVarId> = keep.iter().map(|k| CseVarId(*k as u32)).collect();
                    t.invalidate(&keep_ids);
                    tt.invalidate(&keep_ids);
                    let keep32: Vec<u32> = keep.iter().map(|k| *k as u32).collect();
                    let mut gone: Vec<u8> = m.stores.iter().filter(|(_, v)| !keep32.contains(v)).map(|(b, _)| *b).collect();
                    gone.sort();
                    for b in gone {
                        m.stores.remove(&b);
                        if !m.invalidated.contains(&b) {
                            m.invalidated.push(b);
                        }
                    }
                    m.cache.retain(|_, v| keep32.contains(v));
                }
                Op::Store(b, v) => {
                    if (*v as u32) < m.counter {
                        t.store_cache_insert(Name(*b as u32 + 2000), CseVarId(*v as u32));
                        m.stores.insert(*b, *v as u32);
                    }
                }
            }
        }
        prop_assert_eq!(t.len(), m.cache.len());
        for (&(o, a), &v) in &m.cache {
            prop_assert_eq!(t.lookup(&op_key(o, a)), Some(CseVarId(v)));
        }
        for (k, &u) in m.uses.iter().enumerate() {
            prop_assert_eq!(t.var(CseVarId(k as u32)).unwrap().use_count, u);
        }
        for b in 0..3u8 {
            prop_assert_eq!(t.store_cache_get(Name(b as u32 + 2000)), m.stores.get(&b).map(|v| CseVarId(*v)));
        }
        let inv: Vec<Name> = m.invalidated.iter().map(|b| Name(*b as u32 + 2000)).collect();
        prop_assert_eq!(t.invalidated_stores(), &inv[..]);
    }

    /// Whatever happens in a scoped copy, the parent's caches are unchanged.
    #[test]
    fn prop_scoped_copy_isolation(before in ops(), inside in ops()) {
        let mut t: CseTable = CseTable::new();
        for op in &before {
            match op {
                Op::Gen(o, a) => { t.get_or_insert(op_key(*o, *a)); }
                Op::Invalidate(keep) => t.invalidate(&keep.iter().map(|k| CseVarId(*k as u32)).collect::<Vec<_>>()),
                Op::Store(b, v) => if (*v as usize) < t.num_vars() { t.store_cache_insert(Name(*b as u32 + 2000), CseVarId(*v as u32)) },
            }
        }
        let snapshot: Vec<Option<CseVarId>> = (0..6u8).flat_map(|o| (-2i8..3).map(move |a| (o, a))).map(|(o, a)| t.lookup(&op_key(o, a))).collect();
        let stores: Vec<Option<CseVarId>> = (0..3u32).map(|b| t.store_cache_get(Name(b + 2000))).collect();
        let len = t.len();
        let mut s = t.scoped_copy();
        for op in &inside {
            match op {
                Op::Gen(o, a) => {
                    let (v, new) = s.get_or_insert(op_key(*o, *a));
                    prop_assert_eq!(new, (v.0 as usize) == s.num_vars() - 1 && new);
                }
                Op::Invalidate(keep) => s.invalidate(&keep.iter().map(|k| CseVarId(*k as u32)).collect::<Vec<_>>()),
                Op::Store(b, v) => if (*v as usize) < s.num_vars() { s.store_cache_insert(Name(*b as u32 + 2000), CseVarId(*v as u32)) },
            }
        }
        let after: Vec<Option<CseVarId>> = (0..6u8).flat_map(|o| (-2i8..3).map(move |a| (o, a))).map(|(o, a)| t.lookup(&op_key(o, a))).collect();
        prop_assert_eq!(after, snapshot);
        let stores_after: Vec<Option<CseVarId>> = (0..3u32).map(|b| t.store_cache_get(Name(b + 2000))).collect();
        prop_assert_eq!(stores_after, stores);
        prop_assert_eq!(t.len(), len);
        prop_assert!(t.invalidated_stores().len() <= 3);
    }
}
