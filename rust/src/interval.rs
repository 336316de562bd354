//! Integer intervals with infinite ends: the value-range arithmetic behind bounds, the
//! `statically_known_*` queries and the non-negativity preconditions of the division rules.
//!
//! An interval is `[lo, hi]` over the integers, either end possibly infinite. Arithmetic is done in
//! i128 and saturates, so a bound that leaves i64 becomes infinite (sound, never wrapped).

/// Sentinel for -infinity / +infinity in `Interval` ends.
pub const NEG_INF: i128 = -(1i128 << 100);
pub const POS_INF: i128 = 1i128 << 100;

/// A closed integer interval `[lo, hi]`; ends at or beyond `NEG_INF`/`POS_INF` are infinite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Interval {
    pub lo: i128,
    pub hi: i128,
}

fn clamp(v: i128) -> i128 {
    if v <= i64::MIN as i128 {
        NEG_INF
    } else if v >= i64::MAX as i128 {
        POS_INF
    } else {
        v
    }
}

fn floor_div_i128(a: i128, b: i128) -> i128 {
    let q = a / b;
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

impl Interval {
    pub const UNKNOWN: Interval = Interval {
        lo: NEG_INF,
        hi: POS_INF,
    };
    pub const NONNEG: Interval = Interval { lo: 0, hi: POS_INF };
    pub const POSITIVE: Interval = Interval { lo: 1, hi: POS_INF };

    pub fn new(lo: i128, hi: i128) -> Interval {
        Interval {
            lo: clamp(lo),
            hi: clamp(hi),
        }
    }
    pub fn point(v: i64) -> Interval {
        Interval {
            lo: v as i128,
            hi: v as i128,
        }
    }
    pub fn lo_finite(&self) -> bool {
        self.lo > NEG_INF
    }
    pub fn hi_finite(&self) -> bool {
        self.hi < POS_INF
    }
    /// Lower end as i64 when finite.
    pub fn lo_i64(&self) -> Option<i64> {
        self.lo_finite().then_some(self.lo as i64)
    }
    /// Upper end as i64 when finite.
    pub fn hi_i64(&self) -> Option<i64> {
        self.hi_finite().then_some(self.hi as i64)
    }
    pub fn is_nonneg(&self) -> bool {
        self.lo >= 0
    }
    pub fn is_positive(&self) -> bool {
        self.lo >= 1
    }
    pub fn intersect(&self, o: &Interval) -> Interval {
        Interval {
            lo: self.lo.max(o.lo),
            hi: self.hi.min(o.hi),
        }
    }
    pub fn union(&self, o: &Interval) -> Interval {
        Interval {
            lo: self.lo.min(o.lo),
            hi: self.hi.max(o.hi),
        }
    }
    pub fn add(&self, o: &Interval) -> Interval {
        let lo = if self.lo_finite() && o.lo_finite() {
            clamp(self.lo + o.lo)
        } else {
            NEG_INF
        };
        let hi = if self.hi_finite() && o.hi_finite() {
            clamp(self.hi + o.hi)
        } else {
            POS_INF
        };
        Interval { lo, hi }
    }
    pub fn scale(&self, c: i64) -> Interval {
        self.mul(&Interval::point(c))
    }
    fn end_mul(a: i128, b: i128) -> i128 {
        if a == 0 || b == 0 {
            return 0;
        }
        let inf = a.abs() >= POS_INF || b.abs() >= POS_INF;
        if inf {
            return if (a < 0) != (b < 0) { NEG_INF } else { POS_INF };
        }
        clamp(a.saturating_mul(b))
    }
    pub fn mul(&self, o: &Interval) -> Interval {
        let c = [
            Self::end_mul(self.lo, o.lo),
            Self::end_mul(self.lo, o.hi),
            Self::end_mul(self.hi, o.lo),
            Self::end_mul(self.hi, o.hi),
        ];
        Interval {
            lo: *c.iter().min().unwrap(),
            hi: *c.iter().max().unwrap(),
        }
    }
    pub fn pow(&self, e: u32) -> Interval {
        if e == 0 {
            return Interval::point(1);
        }
        let mut r = *self;
        for _ in 1..e {
            r = r.mul(self);
        }
        if e.is_multiple_of(2) && r.lo < 0 {
            r.lo = 0;
        }
        r
    }
    /// Floor division by a divisor interval that is known positive (`d.lo >= 1`); returns
    /// UNKNOWN otherwise.
    pub fn floordiv(&self, d: &Interval) -> Interval {
        if d.lo < 1 {
            return Interval::UNKNOWN;
        }
        let div = |a: i128, b: i128| -> i128 {
            if a <= NEG_INF {
                return NEG_INF;
            }
            if a >= POS_INF {
                return POS_INF;
            }
            if b >= POS_INF {
                return if a >= 0 { 0 } else { -1 };
            }
            floor_div_i128(a, b)
        };
        let c = [
            div(self.lo, d.lo),
            div(self.lo, d.hi),
            div(self.hi, d.lo),
            div(self.hi, d.hi),
        ];
        Interval {
            lo: *c.iter().min().unwrap(),
            hi: *c.iter().max().unwrap(),
        }
    }
    /// Python (floor) modulus by a positive divisor interval: `[0, d.hi-1]`, narrowed when the
    /// dividend already lies in one period.
    pub fn floormod(&self, d: &Interval) -> Interval {
        if d.lo < 1 {
            if d.lo_finite() && d.hi_finite() {
                let m = d.lo.abs().max(d.hi.abs());
                return Interval::new(-(m - 1), m - 1);
            }
            return Interval::UNKNOWN;
        }
        let generic = Interval {
            lo: 0,
            hi: if d.hi_finite() { d.hi - 1 } else { POS_INF },
        };
        if self.lo >= 0 && self.hi < d.lo {
            return *self;
        }
        if d.lo == d.hi && self.lo_finite() && self.hi_finite() {
            let q_lo = floor_div_i128(self.lo, d.lo);
            let q_hi = floor_div_i128(self.hi, d.lo);
            if q_lo == q_hi {
                return Interval {
                    lo: self.lo - q_lo * d.lo,
                    hi: self.hi - q_lo * d.lo,
                };
            }
        }
        if self.lo >= 0 {
            return Interval {
                lo: 0,
                hi: generic.hi.min(self.hi),
            };
        }
        generic
    }
    pub fn min(&self, o: &Interval) -> Interval {
        Interval {
            lo: self.lo.min(o.lo),
            hi: self.hi.min(o.hi),
        }
    }
    pub fn max(&self, o: &Interval) -> Interval {
        Interval {
            lo: self.lo.max(o.lo),
            hi: self.hi.max(o.hi),
        }
    }
}
