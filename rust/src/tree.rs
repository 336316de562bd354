//! Range trees: the per-kernel iteration variables of a tiled (SIMD) kernel.
//!
//! A fused Triton kernel iterates over one flat index per tiled dimension (`zindex`, `yindex`,
//! `xindex`, `r0_index`, `r1_index`). Each such dimension is a *root*; the loop variables the fused
//! nodes use are mixed-radix digits of a root, `(root // divisor) % length`, called *entries* and
//! named `x0`, `x1`, `r0_2`, … with one counter shared by every root of the kernel. This module is
//! Inductor's `IterationRangesRoot` / `IterationRangesEntry` (`lookup`, `construct_entries`,
//! `vars_and_sizes`) together with the kernel-level operations that work on them:
//! `set_ranges`, `map_kernel_groups_to_node_sizes` (MAP), `combine_contiguous_dims` (CCD) and
//! `combine_modular_indexing_pairs` (CMPK).
//!
//! The data layout is flat: a [`RangeTrees`] owns every root and every entry in two vectors and
//! hands out indices ([`RootId`], [`EntryId`]); entries know their root by index. There are no
//! reference cycles, so the whole structure is one value that moves and drops as a unit.
//!
//! Range trees have no Python binding. tilefuse's codegen creates no per-digit entry variables:
//! a node's loop variables are the row-major digits of the kernel's flat `xindex` / `rindex`
//! (`tilefuse.ir.nodes.digits`), simplified with `simplify_with_ranges`, and a 2-D tile maps them
//! with `split_iteration_ranges`; the index text then prints the `//` and `%` inline, CSE'd by
//! the kernel's CSE scope. Emitting entries (`x0 = xindex % 64` lines) would change every
//! generated kernel, so this module stays core-only until a codegen adopts entries.

use rustc_hash::FxHashMap;

use crate::error::{SymError, SymResult};
use crate::expr::{Expr, Node, SymKind};
use crate::simplify as sv;
use crate::split;

/// Size hint used for symbols without one, as Inductor's `config.unbacked_symint_fallback`.
pub const UNBACKED_SIZE_HINT_FALLBACK: i64 = 8192;

fn known_eq(a: Expr, b: Expr) -> bool {
    sv::statically_known_equals(a, b, &[])
}

/// A tiled kernel dimension, in Inductor's order `z, y, x, r0_, r1_`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Prefix {
    /// `z`: third pointwise dimension (grid axis 2).
    Z,
    /// `y`: second pointwise dimension (grid axis 1).
    Y,
    /// `x`: innermost pointwise dimension (grid axis 0).
    X,
    /// `r0_`: first reduction dimension.
    R0,
    /// `r1_`: second reduction dimension.
    R1,
}

impl Prefix {
    /// Every prefix in Inductor's canonical order (`all_prefixes`).
    pub const ALL: [Prefix; 5] = [Prefix::Z, Prefix::Y, Prefix::X, Prefix::R0, Prefix::R1];

    /// The prefix text used in names: `"z"`, `"y"`, `"x"`, `"r0_"`, `"r1_"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Prefix::Z => "z",
            Prefix::Y => "y",
            Prefix::X => "x",
            Prefix::R0 => "r0_",
            Prefix::R1 => "r1_",
        }
    }

    /// Parse the prefix text (`"x"`, `"r0_"`, …); `None` for anything else.
    pub fn parse(s: &str) -> Option<Prefix> {
        Prefix::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// Reduction prefixes (`r0_`, `r1_`), as Inductor's `prefix_is_reduction`.
    pub fn is_reduction(self) -> bool {
        matches!(self, Prefix::R0 | Prefix::R1)
    }

    /// Fixed launch-grid axis of a pointwise prefix: `x → 0`, `y → 1`, `z → 2`; reductions have none.
    pub fn grid_dim(self) -> Option<usize> {
        match self {
            Prefix::X => Some(0),
            Prefix::Y => Some(1),
            Prefix::Z => Some(2),
            _ => None,
        }
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Index of a root in its [`RangeTrees`] (roots are stored in `z, y, x, r0_, r1_` order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RootId(pub usize);

/// Index of an entry in its [`RangeTrees`] (entries are stored in creation order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryId(pub usize);

/// One tiled dimension of a kernel (Inductor's `IterationRangesRoot`).
#[derive(Clone, Debug)]
pub struct IterationRangesRoot {
    /// `"{prefix}index"`, e.g. `xindex`, `r0_index`.
    pub name: String,
    /// Which tiled dimension this is.
    pub prefix: Prefix,
    /// Number of elements this dimension iterates over.
    pub numel: Expr,
    /// The grid axis for pointwise roots; the position among the active prefixes for reductions.
    pub index: usize,
    /// The dimension is one program looping over the whole range (non-persistent reduction).
    /// Only a reduction root without a grid dimension may loop.
    pub is_loop: bool,
    /// Axis of this dimension in the Triton block tensors, if it has one.
    pub tensor_dim: Option<usize>,
    /// Axis of the launch grid, if any (`x → 0`, `y → 1`, `z → 2`).
    pub grid_dim: Option<usize>,
    /// The kernel has a `z` dimension.
    pub has_zdim: bool,
    /// The root symbol `{prefix}index`.
    pub index_sym: Expr,
    /// Entry memo keyed by entry expression (Inductor's `nodes` dict).
    nodes: FxHashMap<Expr, EntryId>,
    /// This root's entries in creation order (Inductor's `var_list` / `var_ranges`).
    var_list: Vec<EntryId>,
}

impl IterationRangesRoot {
    /// Reduction root (`r0_`/`r1_`).
    pub fn is_reduction(&self) -> bool {
        self.prefix.is_reduction()
    }
    /// This root's entries, in creation order.
    pub fn entries(&self) -> &[EntryId] {
        &self.var_list
    }
    /// The memoized entry whose expression is `expr`, if one exists.
    pub fn entry_for_expr(&self, expr: &Expr) -> Option<EntryId> {
        self.nodes.get(expr).copied()
    }
}

/// One digit `(root // divisor) % length` of a root (Inductor's `IterationRangesEntry`).
#[derive(Clone, Debug)]
pub struct IterationRangesEntry {
    /// `prefix + counter`, e.g. `x0`, `r0_2`.
    pub name: String,
    /// The index symbol named `name`.
    pub symbol: Expr,
    /// The root this digit belongs to.
    pub root: RootId,
    /// The root's prefix.
    pub prefix: Prefix,
    /// Product of the lengths of the digits inside this one.
    pub divisor: Expr,
    /// Number of values of this digit (its variable ranges over `[0, length)`).
    pub length: Expr,
    /// Value of the digit in terms of the root symbol: `root // divisor` when
    /// `divisor·length == numel` was statically known at creation, else
    /// `ModularIndexing(root, divisor, length)` (after the construction rules, so e.g. `xindex`
    /// for `divisor = 1, length = numel`, or `0` for `length = 1`).
    pub expr: Expr,
}

impl IterationRangesEntry {
    /// Reduction entry.
    pub fn is_reduction(&self) -> bool {
        self.prefix.is_reduction()
    }

    /// Divisor / modulus arguments of `expr` that are compound expressions built only from size
    /// symbols (`s*`); a kernel hoists them into host-computed `ps*` arguments (Inductor's
    /// `IterationRangesEntry.precomputed_args`). Integers and single symbols are never listed; an
    /// expression that is a symbol or a constant has none.
    pub fn precomputed_args(&self) -> Vec<Expr> {
        let args: Vec<Expr> = match self.expr.node() {
            Node::FloorDiv(_, b) => vec![*b],
            Node::ModularIndexing(_, b, c) => vec![*b, *c],
            _ => return Vec::new(),
        };
        args.into_iter()
            .filter(|a| a.as_int().is_none() && !a.is_symbol())
            .filter(|a| {
                let syms = a.free_symbols();
                !syms.is_empty()
                    && syms
                        .iter()
                        .all(|s| s.as_symbol().is_some_and(|i| i.kind == SymKind::Size))
            })
            .collect()
    }
}

/// How the roots of a kernel are laid out (the inputs of Inductor's `construct_range_trees`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreeOptions {
    /// Code is currently generated inside the reduction loop (reduction roots are active).
    pub inside_reduction: bool,
    /// The kernel contains a reduction.
    pub is_reduction: bool,
    /// Persistent reduction with only an `x` pointwise dim and XBLOCK == 1: tensors have no x axis.
    pub no_x_dim: bool,
    /// The reduction is persistent (reduction roots do not loop).
    pub persistent_reduction: bool,
}

/// The range trees of one kernel: its roots, every entry created so far, the symbol → entry map
/// (Inductor's `range_tree_nodes`) and the shared iteration-variable counter.
#[derive(Clone, Debug, Default)]
pub struct RangeTrees {
    roots: Vec<IterationRangesRoot>,
    entries: Vec<IterationRangesEntry>,
    by_symbol: FxHashMap<Expr, EntryId>,
    iter_vars_count: usize,
    size_hints: FxHashMap<Expr, i64>,
    inside_reduction: bool,
}

impl RangeTrees {
    /// Build one root per `(prefix, numel)` (Inductor's `construct_range_trees`). Roots are stored
    /// in `z, y, x, r0_, r1_` order whatever the input order. Tensor dims: only `r0_, r1_` when
    /// `no_x_dim`; `z, y, x` when not inside a reduction or the kernel is not a reduction;
    /// otherwise `z, y, x, r0_, r1_` — each filtered to the active prefixes. Grid dims are fixed
    /// (`x → 0, y → 1, z → 2`). `is_loop = is_reduction && !persistent_reduction`.
    ///
    /// Errors: `Value` for a repeated prefix.
    pub fn new(numels: &[(Prefix, Expr)], opts: TreeOptions) -> SymResult<RangeTrees> {
        let mut sorted: Vec<(Prefix, Expr)> = numels.to_vec();
        sorted.sort_by_key(|p| p.0);
        for w in sorted.windows(2) {
            if w[0].0 == w[1].0 {
                return Err(SymError::Value(format!(
                    "range trees: prefix '{}' given twice; give one numel per prefix",
                    w[0].0
                )));
            }
        }
        let active: Vec<Prefix> = sorted.iter().map(|p| p.0).collect();
        let no_r_dim = !opts.inside_reduction || !opts.is_reduction;
        let pointwise = [Prefix::Z, Prefix::Y, Prefix::X];
        let reduction = [Prefix::R0, Prefix::R1];
        let tensor_dims: Vec<Prefix> = if opts.no_x_dim {
            reduction.to_vec()
        } else if no_r_dim {
            pointwise.to_vec()
        } else {
            pointwise.iter().chain(reduction.iter()).copied().collect()
        };
        let tensor_dims: Vec<Prefix> = tensor_dims
            .into_iter()
            .filter(|p| active.contains(p))
            .collect();
        let has_zdim = active.contains(&Prefix::Z);
        let mut roots = Vec::with_capacity(sorted.len());
        for (i, &(prefix, numel)) in sorted.iter().enumerate() {
            let grid_dim = prefix.grid_dim();
            let is_loop = prefix.is_reduction() && !opts.persistent_reduction;
            let name = format!("{}index", prefix.as_str());
            let index_sym = Expr::symbol(&name)?;
            roots.push(IterationRangesRoot {
                name,
                prefix,
                numel,
                index: grid_dim.unwrap_or(i),
                is_loop,
                tensor_dim: tensor_dims.iter().position(|p| *p == prefix),
                grid_dim,
                has_zdim,
                index_sym,
                nodes: FxHashMap::default(),
                var_list: Vec::new(),
            });
        }
        Ok(RangeTrees {
            roots,
            inside_reduction: opts.inside_reduction,
            ..Default::default()
        })
    }

    /// Roots for a tiling given as pointwise and reduction numels, labelled as Inductor's
    /// `create_tiling` does: the pointwise numels take the *last* `len` of `z, y, x`, the
    /// reduction numels `r0_, r1_` in order. The kernel counts as a reduction (and code starts
    /// inside the reduction) when some reduction numel is not statically 1; the reduction is not
    /// persistent. E.g. `from_tiling(&[32, 1024], &[1])` gives roots `y, x, r0_`.
    ///
    /// Errors: `Value` for more than 3 pointwise or more than 2 reduction numels.
    pub fn from_tiling(pointwise: &[Expr], reduction: &[Expr]) -> SymResult<RangeTrees> {
        if pointwise.len() > 3 || reduction.len() > 2 {
            return Err(SymError::Value(format!(
                "a tiling has at most 3 pointwise and 2 reduction dimensions, got {} and {}",
                pointwise.len(),
                reduction.len()
            )));
        }
        let pw = [Prefix::Z, Prefix::Y, Prefix::X];
        let mut numels: Vec<(Prefix, Expr)> = pw[3 - pointwise.len()..]
            .iter()
            .copied()
            .zip(pointwise.iter().copied())
            .collect();
        numels.extend(
            [Prefix::R0, Prefix::R1]
                .iter()
                .copied()
                .zip(reduction.iter().copied()),
        );
        let is_reduction = reduction.iter().any(|r| !known_eq(*r, Expr::one()));
        RangeTrees::new(
            &numels,
            TreeOptions {
                inside_reduction: is_reduction,
                is_reduction,
                no_x_dim: false,
                persistent_reduction: false,
            },
        )
    }

    // ----------------------------------------------------------------------------- accessors

    /// All roots, in `z, y, x, r0_, r1_` order.
    pub fn roots(&self) -> &[IterationRangesRoot] {
        &self.roots
    }
    /// One root. Panics only on an id that did not come from this `RangeTrees`.
    pub fn root(&self, id: RootId) -> &IterationRangesRoot {
        &self.roots[id.0]
    }
    /// The root with this prefix, if the kernel has one.
    pub fn root_by_prefix(&self, prefix: Prefix) -> Option<RootId> {
        self.roots
            .iter()
            .position(|r| r.prefix == prefix)
            .map(RootId)
    }
    /// Every entry created so far, in creation order.
    pub fn entries(&self) -> &[IterationRangesEntry] {
        &self.entries
    }
    /// One entry. Panics only on an id that did not come from this `RangeTrees`.
    pub fn entry(&self, id: EntryId) -> &IterationRangesEntry {
        &self.entries[id.0]
    }
    /// The entry named by an index symbol (Inductor's `range_tree_nodes[sym]`).
    pub fn entry_for_symbol(&self, sym: &Expr) -> Option<EntryId> {
        self.by_symbol.get(sym).copied()
    }
    /// Next value of the shared iteration-variable counter.
    pub fn iter_vars_count(&self) -> usize {
        self.iter_vars_count
    }
    /// Whether code is generated inside the reduction loop (reduction roots active).
    pub fn inside_reduction(&self) -> bool {
        self.inside_reduction
    }
    /// Enter / leave the reduction loop (Inductor's `inside_reduction` flag).
    pub fn set_inside_reduction(&mut self, inside: bool) {
        self.inside_reduction = inside;
    }
    /// Roots that are active now: every pointwise root, reduction roots only inside the reduction
    /// (Inductor's `active_range_trees`).
    pub fn active_roots(&self) -> Vec<RootId> {
        (0..self.roots.len())
            .filter(|&i| !self.roots[i].is_reduction() || self.inside_reduction)
            .map(RootId)
            .collect()
    }
    /// `(entry symbol, length)` for every entry of every root, root by root in creation order
    /// (Inductor's kernel-level `var_ranges()`).
    pub fn var_ranges(&self) -> Vec<(Expr, Expr)> {
        self.roots
            .iter()
            .flat_map(|r| {
                r.var_list
                    .iter()
                    .map(|id| (self.entries[id.0].symbol, self.entries[id.0].length))
            })
            .collect()
    }

    /// Give a size symbol a hint (its typical value), used only to order entries by divisor in
    /// [`RangeTrees::vars_and_sizes`]. Symbols without a hint use
    /// [`UNBACKED_SIZE_HINT_FALLBACK`].
    pub fn set_size_hint(&mut self, sym: Expr, value: i64) {
        self.size_hints.insert(sym, value);
    }
    /// `e` evaluated with every symbol at its hint (or the fallback); `i64::MAX` on overflow.
    pub fn size_hint(&self, e: &Expr) -> i64 {
        if let Some(v) = e.as_int() {
            return v;
        }
        e.evaluate(&|s| {
            Some(
                self.size_hints
                    .get(s)
                    .copied()
                    .unwrap_or(UNBACKED_SIZE_HINT_FALLBACK),
            )
        })
        .unwrap_or(i64::MAX)
    }

    /// Replace an entry's expression (used by codegen when precomputed size arguments are
    /// substituted, as Inductor's `codegen_indexing` does). The memo key is not changed.
    pub fn set_entry_expr(&mut self, id: EntryId, expr: Expr) {
        self.entries[id.0].expr = expr;
    }

    fn check_root(&self, root: RootId) -> SymResult<&IterationRangesRoot> {
        self.roots.get(root.0).ok_or_else(|| {
            SymError::Value(format!(
                "range trees: no root {} (the kernel has {})",
                root.0,
                self.roots.len()
            ))
        })
    }

    // ----------------------------------------------------------------------------- RT-lookup

    /// The entry for digit `(root // divisor) % length`, created if needed (Inductor's
    /// `IterationRangesRoot.lookup`). Its expression is `FloorDiv(root, divisor)`
    /// when `divisor·length == numel` is statically known, else
    /// `ModularIndexing(root, divisor, length)`. Entries are memoized per expression, so two
    /// lookups giving the same expression return the same entry. A new entry is named
    /// `prefix + counter` (the counter is shared by every root), registered for symbol lookup and
    /// appended to the root's variable list.
    ///
    /// Errors: `Value` for an unknown root or a non-positive integer length; `ZeroDivision` for a
    /// zero divisor; `Overflow` from the product.
    pub fn lookup(&mut self, root: RootId, divisor: Expr, length: Expr) -> SymResult<EntryId> {
        let r = self.check_root(root)?;
        let (numel, index_sym, prefix) = (r.numel, r.index_sym, r.prefix);
        let expr = if known_eq(divisor.mul(&length)?, numel) {
            index_sym.floordiv(&divisor)?
        } else {
            index_sym.modular_indexing(&divisor, &length)?
        };
        if let Some(&id) = self.roots[root.0].nodes.get(&expr) {
            return Ok(id);
        }
        let name = format!("{}{}", prefix.as_str(), self.iter_vars_count);
        let symbol = Expr::symbol(&name)?;
        self.iter_vars_count += 1;
        let id = EntryId(self.entries.len());
        self.entries.push(IterationRangesEntry {
            name,
            symbol,
            root,
            prefix,
            divisor,
            length,
            expr,
        });
        self.by_symbol.insert(symbol, id);
        let r = &mut self.roots[root.0];
        r.nodes.insert(expr, id);
        r.var_list.push(id);
        Ok(id)
    }

    // ----------------------------------------------------------------------------- RT-construct

    /// Mixed-radix digits of a root for `lengths` (outermost first): digit i is
    /// `lookup(Π_{j>i} lengths[j], lengths[i])`, created innermost first (Inductor's
    /// `construct_entries`). When `Π lengths == numel`, for every root value in
    /// `[0, numel)`: `root = Σ_i digit_i · Π_{j>i} lengths[j]` with `digit_i ∈ [0, lengths[i])`.
    ///
    /// Errors: as [`RangeTrees::lookup`].
    pub fn construct_entries(&mut self, root: RootId, lengths: &[Expr]) -> SymResult<Vec<EntryId>> {
        let mut divisor = Expr::one();
        let mut out = Vec::with_capacity(lengths.len());
        for &length in lengths.iter().rev() {
            out.push(self.lookup(root, divisor, length)?);
            divisor = divisor.mul(&length)?;
        }
        out.reverse();
        Ok(out)
    }

    /// The symbols of [`RangeTrees::construct_entries`] (Inductor's `construct`).
    pub fn construct(&mut self, root: RootId, lengths: &[Expr]) -> SymResult<Vec<Expr>> {
        Ok(self
            .construct_entries(root, lengths)?
            .into_iter()
            .map(|id| self.entries[id.0].symbol)
            .collect())
    }

    // ----------------------------------------------------------------------------- RT-vars_and_sizes

    /// The chain of digits of `root` that `index` uses, with filler digits for the gaps (Inductor's
    /// `vars_and_sizes`). The entries of this root free in `index` are
    /// sorted by (divisor hint, length ≠ 1); walking upward from divisor 1, a filler entry
    /// `lookup(d, divisor // d)` is inserted wherever the next divisor is not statically the
    /// running one, and a last filler tops the chain up to `numel`. Returns `(vars, sizes)`
    /// outermost first, with `Π sizes == numel` and each var's divisor equal to the product of the
    /// sizes after it.
    ///
    /// Precondition (as Inductor): the used entries form a non-overlapping chain (each divisor a
    /// multiple of the previous divisor·length). Otherwise the fillers are meaningless, and a
    /// filler of length 0 is a `Value` error. Creates filler entries (side effect, as Inductor).
    pub fn vars_and_sizes(
        &mut self,
        root: RootId,
        index: &Expr,
    ) -> SymResult<(Vec<Expr>, Vec<Expr>)> {
        let numel = self.check_root(root)?.numel;
        let mut nodes: Vec<EntryId> = index
            .free_symbols()
            .iter()
            .filter_map(|s| self.by_symbol.get(s).copied())
            .filter(|id| self.entries[id.0].root == root)
            .collect();
        let keys: FxHashMap<EntryId, (i64, bool)> = nodes
            .iter()
            .map(|&id| {
                let e = &self.entries[id.0];
                (
                    id,
                    (self.size_hint(&e.divisor), self.size_hint(&e.length) != 1),
                )
            })
            .collect();
        nodes.sort_by_key(|id| keys[id]);
        let mut divisor = Expr::one();
        let mut vars = Vec::with_capacity(nodes.len() + 1);
        let mut sizes = Vec::with_capacity(nodes.len() + 1);
        for id in nodes {
            let (ndiv, nlen, nsym) = {
                let e = &self.entries[id.0];
                (e.divisor, e.length, e.symbol)
            };
            if !known_eq(ndiv, divisor) {
                let filler = self.lookup(root, divisor, ndiv.floordiv(&divisor)?)?;
                let f = &self.entries[filler.0];
                vars.push(f.symbol);
                sizes.push(f.length);
                divisor = ndiv;
            }
            vars.push(nsym);
            sizes.push(nlen);
            divisor = divisor.mul(&nlen)?;
        }
        if !known_eq(numel, divisor) {
            let filler = self.lookup(root, divisor, numel.floordiv(&divisor)?)?;
            let f = &self.entries[filler.0];
            vars.push(f.symbol);
            sizes.push(f.length);
        }
        vars.reverse();
        sizes.reverse();
        Ok((vars, sizes))
    }

    // ----------------------------------------------------------------------------- set_ranges / MAP

    /// `construct(lengths[i])` on every root i (Inductor's `set_ranges`); returns the symbols per
    /// root. Errors: `Value` unless there is exactly one length list per root.
    pub fn set_ranges(&mut self, lengths: &[Vec<Expr>]) -> SymResult<Vec<Vec<Expr>>> {
        if lengths.len() != self.roots.len() {
            return Err(SymError::Value(format!(
                "set_ranges needs one length list per range tree ({} trees), got {}",
                self.roots.len(),
                lengths.len()
            )));
        }
        (0..self.roots.len())
            .map(|i| self.construct(RootId(i), &lengths[i]))
            .collect()
    }

    /// Express a node's loop variables in this kernel's range-tree symbols (Inductor's
    /// `map_kernel_groups_to_node_sizes`). When there are as many length lists as
    /// groups and each multiplies to its group, the lengths are used as they are
    /// (`set_ranges(lengths)`). Otherwise the sizes are re-split onto the groups with
    /// [`split::split_iteration_ranges`], the new ranges are constructed on the roots, and the
    /// getters are applied to the resulting symbols (flattened in root order).
    ///
    /// `groups` must have one entry per root. Errors: `CantSplit` from the split; `Value` when the
    /// group count does not match the roots.
    pub fn map_kernel_groups_to_node_sizes(
        &mut self,
        groups: &[Expr],
        lengths: &[Vec<Expr>],
    ) -> SymResult<Vec<Vec<Expr>>> {
        if lengths.len() == groups.len() {
            let mut all_match = true;
            for (l, g) in lengths.iter().zip(groups) {
                if Expr::product(l)?.sub(g)?.as_int() != Some(0) {
                    all_match = false;
                    break;
                }
            }
            if all_match {
                return self.set_ranges(lengths);
            }
        }
        let res = split::split_iteration_ranges(groups, lengths)?;
        let itervars: Vec<Expr> = self
            .set_ranges(&res.new_ranges)?
            .into_iter()
            .flatten()
            .collect();
        res.apply(&itervars)
    }

    /// Map a node's sizes onto this kernel (Inductor's `split_and_set_ranges`): the groups are the
    /// roots' numels, with reduction roots counted as 1 outside the reduction loop.
    pub fn split_and_set_ranges(&mut self, lengths: &[Vec<Expr>]) -> SymResult<Vec<Vec<Expr>>> {
        let groups: Vec<Expr> = self
            .roots
            .iter()
            .map(|r| {
                if r.is_reduction() && !self.inside_reduction {
                    Expr::one()
                } else {
                    r.numel
                }
            })
            .collect();
        self.map_kernel_groups_to_node_sizes(&groups, lengths)
    }

    // ----------------------------------------------------------------------------- CCD / CMPK

    /// Merge adjacent digits of `root` that `index` accesses contiguously into one coarser digit
    /// (Inductor's `combine_contiguous_dims`). If `expand_floor_div(index)` gives
    /// `(N, D)` the result is `FloorDiv(CCD'(N), D)`, else `CCD'(index)`, where CCD' leaves
    /// integers and symbols alone, takes `vars_and_sizes(index)`, and — when there are at least two
    /// sizes and `simplify_loops` (with the order-preserving formula) changes them — constructs the
    /// new sizes on the root and substitutes the old digits by the new ones. The value of the
    /// index, with every entry replaced by its expression, is unchanged for every root value in
    /// `[0, numel)` (given the vars_and_sizes chain precondition).
    ///
    /// May create entries (fillers and merged digits), as Inductor does.
    pub fn combine_contiguous_dims(&mut self, index: Expr, root: RootId) -> SymResult<Expr> {
        if let Some((num, den)) = sv::expand_floor_div(index) {
            return self
                .combine_contiguous_dims_inner(num, root)?
                .floordiv(&den);
        }
        self.combine_contiguous_dims_inner(index, root)
    }

    fn combine_contiguous_dims_inner(&mut self, index: Expr, root: RootId) -> SymResult<Expr> {
        if matches!(index.node(), Node::Int(_) | Node::Sym(_)) {
            return Ok(index);
        }
        let (vars, sizes) = self.vars_and_sizes(root, &index)?;
        if sizes.len() <= 1 {
            return Ok(index);
        }
        let simp = sv::simplify_loops(&vars, &sizes, &[index], true)?;
        if simp.new_sizes == sizes {
            return Ok(index);
        }
        let new_vars = self.construct(root, &simp.new_sizes)?;
        // Inductor substitutes through `reindex` (the inner slot takes the merged var, the others 0):
        // exact here because the merge test proved the index only sees the merged combination.
        let old = simp.reindex(&new_vars)?;
        let map: FxHashMap<Expr, Expr> = vars.iter().copied().zip(old).collect();
        index.subs(&map)
    }

    /// Kernel-level nested-ModularIndexing clean-up (Inductor's
    /// `combine_modular_indexing_pairs`). Only acts when `index` is `ModularIndexing(x, d, m)` with `x` an entry symbol:
    /// `x` is replaced by its expression, the sizevars pair rule is applied, and the root symbol is
    /// replaced by the full-range entry `lookup(1, numel)` (always looked up, creating it if
    /// needed, as Inductor does). E.g. `MI(x_k, 1, m)` with `x_k = MI(xindex, 1, L)`, `L % m == 0`
    /// becomes `MI(x_full, 1, m)`. Any other index is returned unchanged. Value-preserving for
    /// every root value.
    pub fn combine_modular_indexing_pairs(&mut self, index: Expr) -> SymResult<Expr> {
        let Node::ModularIndexing(x, _, _) = index.node() else {
            return Ok(index);
        };
        let Some(id) = self.entry_for_symbol(x) else {
            return Ok(index);
        };
        let (entry_expr, root) = (self.entries[id.0].expr, self.entries[id.0].root);
        let mut m: FxHashMap<Expr, Expr> = FxHashMap::default();
        m.insert(*x, entry_expr);
        let new_index = sv::combine_modular_indexing_pairs(index.subs(&m)?)?;
        let (numel, index_sym) = (self.roots[root.0].numel, self.roots[root.0].index_sym);
        let full = self.lookup(root, Expr::one(), numel)?;
        let mut m2: FxHashMap<Expr, Expr> = FxHashMap::default();
        m2.insert(index_sym, self.entries[full.0].symbol);
        new_index.subs(&m2)
    }

    // ----------------------------------------------------------------------------- queries

    /// `index` with every entry symbol replaced by its expression (so only root symbols and
    /// non-tree symbols remain).
    pub fn substitute_entries(&self, index: &Expr) -> SymResult<Expr> {
        let map: FxHashMap<Expr, Expr> = index
            .free_symbols()
            .into_iter()
            .filter_map(|s| {
                self.by_symbol
                    .get(&s)
                    .map(|id| (s, self.entries[id.0].expr))
            })
            .collect();
        index.subs(&map)
    }

    /// The index reads a value loaded from memory (an indirect `tmp*` symbol is free in it), as
    /// Inductor's `is_indirect_indexing`.
    pub fn is_indirect_indexing(index: &Expr) -> bool {
        index
            .free_symbols()
            .iter()
            .any(|s| s.as_symbol().is_some_and(|i| i.kind == SymKind::Indirect))
    }

    /// The index is broadcast along some root: the product of the lengths of that root's entries
    /// used in `index` is not (structurally) the root's numel. Indirect indices are never reported
    /// as broadcast. Follows Inductor's `is_broadcasted` but accumulates the products per root
    /// (Inductor indexes them by grid dimension, which mixes roots that share one).
    pub fn is_broadcasted(&self, index: &Expr) -> SymResult<bool> {
        if Self::is_indirect_indexing(index) {
            return Ok(false);
        }
        let mut numels = vec![Expr::one(); self.roots.len()];
        for s in index.free_symbols() {
            if let Some(id) = self.by_symbol.get(&s) {
                let e = &self.entries[id.0];
                numels[e.root.0] = numels[e.root.0].mul(&e.length)?;
            }
        }
        Ok(numels.iter().zip(&self.roots).any(|(n, r)| *n != r.numel))
    }
}
