//! The kernel-level common-subexpression table (Inductor's `CSE` / `CSEVariable`).
//!
//! Inductor keys its CSE cache by the *generated expression text*: every op renders a string such
//! as `tl.load(in_ptr0 + (x0), xmask)` and looks it up in a dict. Here the key is structural: a
//! [`CseKey`] is built from an op name, the op's arguments (CSE variable ids, integers, interned
//! index expressions, names) and a dtype tag, and carries a precomputed FxHash, so building and
//! comparing keys never renders text. [`TextCseTable`] is the same table keyed by text: the
//! Python binding (`tilefuse._native.CseScope`) uses it, since the codegen's keys are the rendered
//! expression text.
//!
//! Semantics follow Inductor's `CSE` class:
//! * variables are named `{name_prefix}{n}` (`tmp0`, `tmp1`, …) from a counter shared by every
//!   clone of the table; each carries bounds, a dtype tag and a use count (1 when created, +1 per
//!   reuse); a hit tightens the bounds;
//! * `clone_table` shares the counter, the variable names, the store cache and the reduction cache,
//!   with a fresh expression cache (Inductor's `clone`);
//! * `scoped_copy` is a clone whose expression, store and reduction caches are overlays of the
//!   parent's: reads fall through to the parent, writes stay in the copy (Inductor's `ScopedDict`).
//!   Variables themselves are shared, so use counts and bounds updated through a copy are seen by
//!   the parent, as with Inductor's shared `CSEVariable` objects;
//! * `invalidate(keep)` drops store-cache entries whose variable is not kept (recording the buffer
//!   as invalidated) and filters the expression cache down to kept variables (clearing it when
//!   `keep` is empty).
//!
//! All clones of one table share their state through one `Arc<Mutex<…>>` (no reference cycles), so
//! a table is `Send + Sync` and can live inside a Python object.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};

use rustc_hash::{FxHashMap, FxHashSet, FxHasher};

use crate::error::{SymError, SymResult};
use crate::expr::Expr;
use crate::interval::Interval;

// ------------------------------------------------------------------------------------- names

struct NameTable {
    ids: FxHashMap<&'static str, u32>,
    names: Vec<&'static str>,
}

static NAMES: Mutex<Option<NameTable>> = Mutex::new(None);

/// An interned string (op names, buffer names): a `u32`, so keys hold and compare it in O(1).
/// Interned strings live for the whole process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(pub u32);

impl Name {
    /// The unique `Name` of `s` (the same id for equal strings within a process).
    pub fn intern(s: &str) -> Name {
        let mut guard = NAMES.lock().unwrap_or_else(|e| e.into_inner());
        let t = guard.get_or_insert_with(|| NameTable {
            ids: FxHashMap::default(),
            names: Vec::new(),
        });
        if let Some(&id) = t.ids.get(s) {
            return Name(id);
        }
        let leaked: &'static str = Box::leak(s.to_owned().into_boxed_str());
        let id = t.names.len() as u32;
        t.names.push(leaked);
        t.ids.insert(leaked, id);
        Name(id)
    }

    /// The interned text. An id that was never handed out by [`Name::intern`] gives `"?"`.
    pub fn as_str(self) -> &'static str {
        let guard = NAMES.lock().unwrap_or_else(|e| e.into_inner());
        guard
            .as_ref()
            .and_then(|t| t.names.get(self.0 as usize).copied())
            .unwrap_or("?")
    }
}

// ------------------------------------------------------------------------------------- keys

/// Dtype tag of a CSE key or variable: a small integer the caller assigns to each dtype (the
/// Python side maps `torch.dtype`s to tags). `NONE` means "no dtype in the key".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DtypeTag(pub u8);

impl DtypeTag {
    /// No dtype (Inductor's key carries none: use this to reproduce its keying exactly).
    pub const NONE: DtypeTag = DtypeTag(0);
    /// Suggested tags for the common torch dtypes (any other `u8` is fine too).
    pub const BOOL: DtypeTag = DtypeTag(1);
    #[allow(missing_docs)]
    pub const INT8: DtypeTag = DtypeTag(2);
    #[allow(missing_docs)]
    pub const INT16: DtypeTag = DtypeTag(3);
    #[allow(missing_docs)]
    pub const INT32: DtypeTag = DtypeTag(4);
    #[allow(missing_docs)]
    pub const INT64: DtypeTag = DtypeTag(5);
    #[allow(missing_docs)]
    pub const UINT8: DtypeTag = DtypeTag(6);
    #[allow(missing_docs)]
    pub const FLOAT16: DtypeTag = DtypeTag(7);
    #[allow(missing_docs)]
    pub const BFLOAT16: DtypeTag = DtypeTag(8);
    #[allow(missing_docs)]
    pub const FLOAT32: DtypeTag = DtypeTag(9);
    #[allow(missing_docs)]
    pub const FLOAT64: DtypeTag = DtypeTag(10);
}

/// Handle of a CSE variable: an index into the variables shared by a table and its clones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CseVarId(pub u32);

/// One argument of a CSE key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CseArg {
    /// An absent / `None` argument.
    #[default]
    None,
    /// A CSE variable (an earlier op's result).
    Var(CseVarId),
    /// An integer constant.
    Int(i64),
    /// A floating-point constant, by its bit pattern (so `-0.0 != 0.0` and NaNs compare by bits).
    Float(u64),
    /// A boolean constant.
    Bool(bool),
    /// An interned index expression (O(1) equality and a precomputed structural hash).
    Expr(Expr),
    /// A buffer name, reduction type or other identifier.
    Name(Name),
}

impl CseArg {
    /// A float argument (by bits).
    pub fn float(v: f64) -> CseArg {
        CseArg::Float(v.to_bits())
    }
}

const INLINE_ARGS: usize = 3;

#[derive(Clone, Debug)]
enum KeyArgs {
    Inline(u8, [CseArg; INLINE_ARGS]),
    Heap(Box<[CseArg]>),
}

/// A structural CSE key: op name, dtype tag and arguments, with an FxHash computed once at
/// construction. Equal keys (same op, dtype and arguments) always have the same hash; `Hash`
/// writes only the precomputed value. Up to three arguments are stored inline (no allocation).
#[derive(Clone, Debug)]
pub struct CseKey {
    hash: u64,
    op: Name,
    dtype: DtypeTag,
    args: KeyArgs,
}

impl CseKey {
    /// Key for op `op` (an interned name) with `dtype` and `args`.
    pub fn new(op: Name, dtype: DtypeTag, args: &[CseArg]) -> CseKey {
        let mut h = FxHasher::default();
        op.hash(&mut h);
        dtype.hash(&mut h);
        args.len().hash(&mut h);
        for a in args {
            a.hash(&mut h);
        }
        let args = if args.len() <= INLINE_ARGS {
            let mut items = [CseArg::None; INLINE_ARGS];
            items[..args.len()].copy_from_slice(args);
            KeyArgs::Inline(args.len() as u8, items)
        } else {
            KeyArgs::Heap(args.into())
        };
        CseKey {
            hash: h.finish(),
            op,
            dtype,
            args,
        }
    }

    /// Key for an op given by its text name (interned on the way; prefer [`CseKey::new`] with a
    /// cached [`Name`] in hot loops).
    pub fn from_op(op: &str, dtype: DtypeTag, args: &[CseArg]) -> CseKey {
        CseKey::new(Name::intern(op), dtype, args)
    }

    /// The op name.
    pub fn op(&self) -> Name {
        self.op
    }
    /// The dtype tag.
    pub fn dtype(&self) -> DtypeTag {
        self.dtype
    }
    /// The arguments, in order.
    pub fn args(&self) -> &[CseArg] {
        match &self.args {
            KeyArgs::Inline(n, items) => &items[..*n as usize],
            KeyArgs::Heap(b) => b,
        }
    }
    /// The precomputed hash.
    pub fn hash_value(&self) -> u64 {
        self.hash
    }
}

impl PartialEq for CseKey {
    fn eq(&self, o: &Self) -> bool {
        self.hash == o.hash && self.op == o.op && self.dtype == o.dtype && self.args() == o.args()
    }
}
impl Eq for CseKey {}
impl Hash for CseKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash)
    }
}

// ------------------------------------------------------------------------------------- variables

/// What is known of a CSE variable (Inductor's `CSEVariable`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CseVarInfo {
    /// `{name_prefix}{n}` for generated variables, or the name given to `namedvar`.
    pub name: Box<str>,
    /// Integer value range (`Interval::UNKNOWN` when nothing is known). Float and boolean ranges
    /// are kept by the caller.
    pub bounds: Interval,
    /// 1 when created, +1 for every reuse through the table.
    pub use_count: u32,
    /// The dtype tag given when the variable was created.
    pub dtype: DtypeTag,
}

/// `ValueRanges.tighten`: an unknown `new` keeps `old`; otherwise the intersection, except that a
/// contradictory (empty) intersection keeps `old`.
fn tighten(old: Interval, new: Interval) -> Interval {
    if new == Interval::UNKNOWN {
        return old;
    }
    let t = old.intersect(&new);
    if t.lo > t.hi {
        old
    } else {
        t
    }
}

// ------------------------------------------------------------------------------------- layered maps

struct Layer<K> {
    map: FxHashMap<K, CseVarId>,
    removed: FxHashSet<K>,
    parent: Option<usize>,
}

impl<K> Layer<K> {
    fn new(parent: Option<usize>) -> Self {
        Layer {
            map: FxHashMap::default(),
            removed: FxHashSet::default(),
            parent,
        }
    }
}

fn layer_get<K, Q>(layers: &[Layer<K>], mut at: usize, key: &Q) -> Option<CseVarId>
where
    K: Eq + Hash + Borrow<Q>,
    Q: Eq + Hash + ?Sized,
{
    loop {
        let l = &layers[at];
        if let Some(v) = l.map.get(key) {
            return Some(*v);
        }
        if l.removed.contains(key) {
            return None;
        }
        at = l.parent?;
    }
}

/// Capacity a layer's map takes at its first insert.
const LAYER_INITIAL_CAPACITY: usize = 32;

fn layer_insert<K: Eq + Hash>(layers: &mut [Layer<K>], at: usize, key: K, v: CseVarId) {
    let l = &mut layers[at];
    if !l.removed.is_empty() {
        l.removed.remove(&key);
    }
    if l.map.capacity() == 0 {
        // a kernel scope caches tens of keys: skip the first few doublings (each rehashes
        // every key)
        l.map.reserve(LAYER_INITIAL_CAPACITY);
    }
    l.map.insert(key, v);
}

fn layer_remove<K: Eq + Hash + Clone>(layers: &mut [Layer<K>], at: usize, key: &K) {
    let parent_has = layers[at]
        .parent
        .is_some_and(|p| layer_get(layers, p, key).is_some());
    let l = &mut layers[at];
    l.map.remove(key);
    if parent_has {
        l.removed.insert(key.clone());
    }
}

/// Every visible `(key, var)` of a layer chain (children override parents).
fn layer_items<K: Eq + Hash + Clone>(layers: &[Layer<K>], at: usize) -> Vec<(K, CseVarId)> {
    let mut chain = vec![at];
    while let Some(p) = layers[*chain.last().unwrap()].parent {
        chain.push(p);
    }
    let mut out: FxHashMap<K, CseVarId> = FxHashMap::default();
    for &i in chain.iter().rev() {
        for k in &layers[i].removed {
            out.remove(k);
        }
        for (k, v) in &layers[i].map {
            out.insert(k.clone(), *v);
        }
    }
    out.into_iter().collect()
}

struct Shared<K> {
    vars: Vec<CseVarInfo>,
    varname_map: FxHashMap<Box<str>, CseVarId>,
    counter: u64,
    caches: Vec<Layer<K>>,
    stores: Vec<Layer<Name>>,
    reductions: Vec<Layer<CseKey>>,
}

// ------------------------------------------------------------------------------------- the table

/// A kernel's CSE table keyed by `K` ([`CseKey`] by default; see [`TextCseTable`]).
///
/// Handles: variables are [`CseVarId`]s, valid in this table and every clone / scoped copy of it.
/// Passing an id from an unrelated table is a caller error: the methods that take ids never panic
/// on it (they ignore unknown ids or return `None` / `"?"`).
pub struct CseTable<K = CseKey> {
    shared: Arc<Mutex<Shared<K>>>,
    cache: usize,
    store: usize,
    reduction: usize,
    name_prefix: Arc<str>,
    invalidated_stores: Vec<Name>,
}

/// The text-keyed equivalent of [`CseTable`]: the key is the generated expression text, exactly
/// as Inductor's `CSE._cache` (same semantics otherwise), for callers that only have text.
pub type TextCseTable = CseTable<String>;

impl<K: Eq + Hash + Clone> Default for CseTable<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Eq + Hash + Clone> CseTable<K> {
    /// An empty table whose variables are named `tmp0, tmp1, …`.
    pub fn new() -> Self {
        Self::with_name_prefix("tmp")
    }

    /// An empty table whose variables are named `{name_prefix}{n}`.
    pub fn with_name_prefix(name_prefix: &str) -> Self {
        let shared = Shared {
            vars: Vec::new(),
            varname_map: FxHashMap::default(),
            counter: 0,
            caches: vec![Layer::new(None)],
            stores: vec![Layer::new(None)],
            reductions: vec![Layer::new(None)],
        };
        CseTable {
            shared: Arc::new(Mutex::new(shared)),
            cache: 0,
            store: 0,
            reduction: 0,
            name_prefix: name_prefix.into(),
            invalidated_stores: Vec::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Shared<K>> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The variable name prefix (`tmp` by default).
    pub fn name_prefix(&self) -> &str {
        &self.name_prefix
    }

    /// Inductor's `CSE.clone`: shares the variable counter, names, store cache and reduction cache;
    /// starts with an empty expression cache and no invalidated stores.
    pub fn clone_table(&self) -> Self {
        let cache = {
            let mut s = self.lock();
            s.caches.push(Layer::new(None));
            s.caches.len() - 1
        };
        CseTable {
            shared: Arc::clone(&self.shared),
            cache,
            store: self.store,
            reduction: self.reduction,
            name_prefix: Arc::clone(&self.name_prefix),
            invalidated_stores: Vec::new(),
        }
    }

    /// Inductor's `CSE.scoped_copy`: a clone whose expression, store and reduction caches are
    /// overlays of this table's (reads fall through, writes and removals stay in the copy). The
    /// counter and variables are shared, so names never collide.
    pub fn scoped_copy(&self) -> Self {
        let (cache, store, reduction) = {
            let mut s = self.lock();
            s.caches.push(Layer::new(Some(self.cache)));
            s.stores.push(Layer::new(Some(self.store)));
            s.reductions.push(Layer::new(Some(self.reduction)));
            (
                s.caches.len() - 1,
                s.stores.len() - 1,
                s.reductions.len() - 1,
            )
        };
        CseTable {
            shared: Arc::clone(&self.shared),
            cache,
            store,
            reduction,
            name_prefix: Arc::clone(&self.name_prefix),
            invalidated_stores: Vec::new(),
        }
    }

    // ------------------------------------------------------------------------- expression cache

    /// The variable cached for `key` (Inductor's `try_get`); no side effects.
    pub fn lookup<Q>(&self, key: &Q) -> Option<CseVarId>
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        let s = self.lock();
        layer_get(&s.caches, self.cache, key)
    }

    /// Whether `key` is cached (Inductor's `contains`).
    pub fn contains<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        self.lookup(key).is_some()
    }

    /// Cache `var` under `key` (Inductor's `put`); replaces an earlier entry. Only the lookups
    /// read `var` back: a caller that keeps its variables' data itself may cache handles of its
    /// own numbering (the Python binding caches indices into its list of variable names), as long
    /// as it does not mix them with this table's variables (`newvar`, `generate`, ...).
    pub fn insert(&mut self, key: K, var: CseVarId) {
        let mut s = self.lock();
        let at = self.cache;
        layer_insert(&mut s.caches, at, key, var);
    }

    /// The variable cached for `key` in this table's own layer only (a scoped copy's entries, not
    /// its parent's); `None` also for a key this layer removed.
    pub fn lookup_local<Q>(&self, key: &Q) -> Option<CseVarId>
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        self.lock().caches[self.cache].map.get(key).copied()
    }

    /// Number of keys cached in this table's own layer.
    pub fn local_len(&self) -> usize {
        self.lock().caches[self.cache].map.len()
    }

    /// [`CseTable::generate`] with unknown bounds and no dtype: `(var, true)` for a new variable,
    /// `(cached var, false)` on a hit (whose use count is incremented).
    pub fn get_or_insert(&mut self, key: K) -> (CseVarId, bool) {
        self.generate(key, Interval::UNKNOWN, DtypeTag::NONE)
    }

    /// Inductor's `CSE.generate` for a keyed expression: on a hit, tighten the cached variable's
    /// bounds with `bounds`, increment its use count and return `(var, false)`; on a miss create
    /// a new variable (`newvar(bounds, dtype)`), cache it and return `(var, true)`. Dtype and
    /// bounds are not part of the key (put the dtype in the key to separate dtypes).
    pub fn generate(&mut self, key: K, bounds: Interval, dtype: DtypeTag) -> (CseVarId, bool) {
        let mut s = self.lock();
        if let Some(v) = layer_get(&s.caches, self.cache, &key) {
            if let Some(info) = s.vars.get_mut(v.0 as usize) {
                info.bounds = tighten(info.bounds, bounds);
                info.use_count += 1;
            }
            return (v, false);
        }
        let v = Self::newvar_locked(&mut s, &self.name_prefix, bounds, dtype);
        let at = self.cache;
        layer_insert(&mut s.caches, at, key, v);
        (v, true)
    }

    /// Inductor's `CSE.generate` called with an existing variable: tighten its bounds and
    /// increment its use count. Unknown ids are ignored.
    pub fn reuse_var(&mut self, var: CseVarId, bounds: Interval) {
        let mut s = self.lock();
        if let Some(info) = s.vars.get_mut(var.0 as usize) {
            info.bounds = tighten(info.bounds, bounds);
            info.use_count += 1;
        }
    }

    fn newvar_locked(
        s: &mut Shared<K>,
        prefix: &str,
        bounds: Interval,
        dtype: DtypeTag,
    ) -> CseVarId {
        // skip numbers taken by a `namedvar` with the same spelling
        let name: Box<str> = loop {
            let n = s.counter;
            s.counter += 1;
            let name: Box<str> = format!("{prefix}{n}").into_boxed_str();
            if !s.varname_map.contains_key(&name) {
                break name;
            }
        };
        let id = CseVarId(s.vars.len() as u32);
        s.vars.push(CseVarInfo {
            name: name.clone(),
            bounds,
            use_count: 1,
            dtype,
        });
        s.varname_map.insert(name, id);
        id
    }

    /// A new, uncached variable `{name_prefix}{n}` from the shared counter (Inductor's `newvar`).
    pub fn newvar(&mut self, bounds: Interval, dtype: DtypeTag) -> CseVarId {
        let mut s = self.lock();
        Self::newvar_locked(&mut s, &self.name_prefix, bounds, dtype)
    }

    /// A new variable with an explicit name (Inductor's `namedvar`). Error: `Value` when the name
    /// is already used by a variable of this table family.
    pub fn namedvar(
        &mut self,
        name: &str,
        bounds: Interval,
        dtype: DtypeTag,
    ) -> SymResult<CseVarId> {
        let mut s = self.lock();
        if s.varname_map.contains_key(name) {
            return Err(SymError::Value(format!(
                "duplicate CSE variable name: {name}"
            )));
        }
        let id = CseVarId(s.vars.len() as u32);
        s.vars.push(CseVarInfo {
            name: name.into(),
            bounds,
            use_count: 1,
            dtype,
        });
        s.varname_map.insert(name.into(), id);
        Ok(id)
    }

    /// The variable's name (`"?"` for an unknown id).
    pub fn var_name(&self, var: CseVarId) -> String {
        self.lock()
            .vars
            .get(var.0 as usize)
            .map_or_else(|| "?".to_string(), |v| v.name.to_string())
    }

    /// A snapshot of the variable's name, bounds, use count and dtype.
    pub fn var(&self, var: CseVarId) -> Option<CseVarInfo> {
        self.lock().vars.get(var.0 as usize).cloned()
    }

    /// The variable with this name (Inductor's `varname_map`).
    pub fn var_by_name(&self, name: &str) -> Option<CseVarId> {
        self.lock().varname_map.get(name).copied()
    }

    /// Number of variables created by this table family.
    pub fn num_vars(&self) -> usize {
        self.lock().vars.len()
    }

    /// Number of keys visible in this table's expression cache.
    pub fn len(&self) -> usize {
        let s = self.lock();
        layer_items(&s.caches, self.cache).len()
    }

    /// No key is visible in this table's expression cache.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Inductor's `CSE.invalidate(keep_vars)`: every store-cache entry whose variable is not in
    /// `keep` is removed (from the shared store cache, or masked in a scoped copy) and its buffer
    /// recorded in [`CseTable::invalidated_stores`]; the expression cache is replaced by the
    /// entries whose variable is in `keep` (an empty `keep` clears it). The replacement cache is
    /// detached from any parent, as Inductor's new plain dict is.
    pub fn invalidate(&mut self, keep: &[CseVarId]) {
        let keep: FxHashSet<CseVarId> = keep.iter().copied().collect();
        let shared = Arc::clone(&self.shared);
        let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
        let mut stores = layer_items(&s.stores, self.store);
        stores.sort_by_key(|(n, _)| *n);
        for (name, v) in stores {
            if !keep.contains(&v) {
                layer_remove(&mut s.stores, self.store, &name);
                if !self.invalidated_stores.contains(&name) {
                    self.invalidated_stores.push(name);
                }
            }
        }
        let mut fresh = Layer::new(None);
        if !keep.is_empty() {
            for (k, v) in layer_items(&s.caches, self.cache) {
                if keep.contains(&v) {
                    fresh.map.insert(k, v);
                }
            }
        }
        s.caches.push(fresh);
        self.cache = s.caches.len() - 1;
    }

    /// [`CseTable::invalidate`] with the kept variables given by name (unknown names are ignored).
    pub fn invalidate_names(&mut self, keep: &[&str]) {
        let ids: Vec<CseVarId> = keep.iter().filter_map(|n| self.var_by_name(n)).collect();
        self.invalidate(&ids);
    }

    /// Buffers whose store-cache entry this table invalidated (Inductor's `invalidated_stores`).
    pub fn invalidated_stores(&self) -> &[Name] {
        &self.invalidated_stores
    }

    // ------------------------------------------------------------------------- store / reduction caches

    /// The variable last stored to `buffer` (store → load forwarding), if cached.
    pub fn store_cache_get(&self, buffer: Name) -> Option<CseVarId> {
        let s = self.lock();
        layer_get(&s.stores, self.store, &buffer)
    }

    /// Record that `var` was stored to `buffer`.
    pub fn store_cache_insert(&mut self, buffer: Name, var: CseVarId) {
        let mut s = self.lock();
        let at = self.store;
        layer_insert(&mut s.stores, at, buffer, var);
    }

    /// The cached result of a reduction (key: dtype, reduction type and value variables).
    pub fn reduction_cache_get(&self, key: &CseKey) -> Option<CseVarId> {
        let s = self.lock();
        layer_get(&s.reductions, self.reduction, key)
    }

    /// Cache the result of a reduction.
    pub fn reduction_cache_insert(&mut self, key: CseKey, var: CseVarId) {
        let mut s = self.lock();
        let at = self.reduction;
        layer_insert(&mut s.reductions, at, key, var);
    }
}
