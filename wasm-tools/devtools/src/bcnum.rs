//! bc's numbers: an integer and a count of decimal places (value = v / 10^s), with bc's rules
//! for the scale of each result, and the `-l` functions computed in fixed point with guard
//! digits, then truncated to the caller's scale as bc's library does.

use num_bigint::BigInt;
use num_integer::Integer;
use num_traits::{One, Signed, ToPrimitive, Zero};

#[derive(Clone, Debug, Default)]
pub struct Num {
    pub v: BigInt,
    pub s: u32,
}

pub fn pow10(n: u32) -> BigInt {
    num_traits::pow(BigInt::from(10u8), n as usize)
}

impl Num {
    pub fn int(i: i64) -> Num {
        Num {
            v: BigInt::from(i),
            s: 0,
        }
    }

    pub fn is_zero(&self) -> bool {
        self.v.is_zero()
    }

    pub fn is_neg(&self) -> bool {
        self.v.is_negative()
    }

    /// The value at scale `s`, truncated toward zero when it has more places.
    pub fn at(&self, s: u32) -> BigInt {
        if s >= self.s {
            &self.v * pow10(s - self.s)
        } else {
            &self.v / pow10(self.s - s)
        }
    }

    pub fn rescale(&self, s: u32) -> Num {
        Num { v: self.at(s), s }
    }

    pub fn cmp(&self, o: &Num) -> std::cmp::Ordering {
        let s = self.s.max(o.s);
        self.at(s).cmp(&o.at(s))
    }

    pub fn add(&self, o: &Num) -> Num {
        let s = self.s.max(o.s);
        Num {
            v: self.at(s) + o.at(s),
            s,
        }
    }

    pub fn sub(&self, o: &Num) -> Num {
        let s = self.s.max(o.s);
        Num {
            v: self.at(s) - o.at(s),
            s,
        }
    }

    pub fn neg(&self) -> Num {
        Num {
            v: -&self.v,
            s: self.s,
        }
    }

    /// bc: the exact product, truncated to min(s1+s2, max(scale, s1, s2)) places.
    pub fn mul(&self, o: &Num, scale: u32) -> Num {
        let full = Num {
            v: &self.v * &o.v,
            s: self.s + o.s,
        };
        full.rescale((self.s + o.s).min(scale.max(self.s).max(o.s)))
    }

    /// Truncating division to `scale` places; None when dividing by zero.
    pub fn div(&self, o: &Num, scale: u32) -> Option<Num> {
        if o.is_zero() {
            return None;
        }
        // (v1/10^s1) / (v2/10^s2) at scale S = v1 * 10^(s2+S) / (v2 * 10^s1)
        let num = &self.v * pow10(o.s + scale);
        let den = &o.v * pow10(self.s);
        Some(Num {
            v: num / den,
            s: scale,
        })
    }

    /// bc: a - (a/b)*b, the quotient at `scale`, the result at max(scale + s2, s1) places.
    pub fn rem(&self, o: &Num, scale: u32) -> Option<Num> {
        let q = self.div(o, scale)?;
        let prod = Num {
            v: &q.v * &o.v,
            s: q.s + o.s,
        };
        let r = self.sub(&prod);
        Some(r.rescale((scale + o.s).max(self.s)))
    }

    /// Integer exponents only (the caller warns about and drops a fraction).
    pub fn pow(&self, e: &BigInt, scale: u32) -> Option<Num> {
        if e.is_zero() {
            return Some(Num::int(1));
        }
        let mag = e.abs().to_u64()?;
        if mag > 1_000_000 {
            return None;
        }
        let p = Num {
            v: num_traits::pow(self.v.clone(), mag as usize),
            s: self.s * mag as u32,
        };
        if e.is_negative() {
            Num::int(1).div(&p, scale)
        } else {
            let keep = (self.s.saturating_mul(mag as u32)).min(scale.max(self.s));
            Some(p.rescale(keep))
        }
    }

    pub fn sqrt(&self, scale: u32) -> Option<Num> {
        if self.is_neg() {
            return None;
        }
        let s = scale.max(self.s);
        Some(Num {
            v: self.at(2 * s).sqrt(),
            s,
        })
    }

    /// bc's length(): significant digits.
    pub fn length(&self) -> u32 {
        let int_part = self.v.abs() / pow10(self.s);
        if int_part.is_zero() {
            return self.s.max(1);
        }
        int_part.to_string().len() as u32 + self.s
    }

    pub fn to_i64(&self) -> Option<i64> {
        self.at(0).to_i64()
    }

    /// The digits bc prints for this number in base `obase`.
    pub fn format(&self, obase: u32) -> String {
        let neg = self.is_neg() && !self.is_zero();
        let abs = self.v.abs();
        let den = pow10(self.s);
        let (ip, fp) = abs.div_rem(&den);
        let mut out = String::new();
        if neg {
            out.push('-');
        }
        let big_base = obase > 16;
        let width = (obase - 1).to_string().len();
        let digit = |d: u32, out: &mut String| {
            if big_base {
                out.push_str(&format!(" {d:0width$}"));
            } else {
                out.push(char::from_digit(d, 16).unwrap().to_ascii_uppercase());
            }
        };
        if obase == 10 {
            if !ip.is_zero() || self.s == 0 {
                out.push_str(&ip.to_string());
            }
            if self.s > 0 {
                if ip.is_zero() && fp.is_zero() {
                    return "0".into();
                }
                let f = fp.to_string();
                out.push('.');
                out.push_str(&"0".repeat(self.s as usize - f.len()));
                out.push_str(&f);
            }
            return out;
        }
        if ip.is_zero() && fp.is_zero() {
            return if big_base {
                format!(" {:0width$}", 0)
            } else {
                "0".into()
            };
        }
        if !ip.is_zero() {
            let mut ds = Vec::new();
            let b = BigInt::from(obase);
            let mut n = ip;
            while !n.is_zero() {
                let (q, r) = n.div_rem(&b);
                ds.push(r.to_u32().unwrap_or(0));
                n = q;
            }
            for d in ds.into_iter().rev() {
                digit(d, &mut out);
            }
        }
        if self.s > 0 {
            out.push('.');
            // bc prints digits while obase^k still has no more digits than the scale.
            let mut t = BigInt::one();
            let mut f = fp;
            while t.to_string().len() as u32 <= self.s {
                f *= obase;
                let (d, r) = f.div_rem(&den);
                digit(d.to_u32().unwrap_or(0), &mut out);
                f = r;
                t *= obase;
            }
        }
        out
    }

    /// A numeral in base `ibase`. Digits are 0-9 and A-Z (10-35); a lone digit keeps its value
    /// whatever the base (leading zeros aside: `0A` is 10), and in a longer numeral each digit
    /// counts as at most `ibase - 1`, as GNU bc reads them (`ibase=16; G0` is 240, `1A` in base
    /// 10 is 19).
    pub fn parse(text: &str, ibase: u32) -> Num {
        let (ip, fp) = text.split_once('.').unwrap_or((text, ""));
        let significant = ip.trim_start_matches('0');
        let mut lone = significant.chars();
        if let (Some(c), None, true) = (lone.next(), lone.next(), fp.is_empty()) {
            return Num {
                v: BigInt::from(c.to_digit(36).unwrap_or(0)),
                s: 0,
            };
        }
        let val = |c: char| c.to_digit(36).unwrap_or(0).min(ibase - 1);
        if ibase == 10 {
            let mut v = BigInt::zero();
            for c in ip.chars().chain(fp.chars()) {
                v = v * 10u8 + val(c);
            }
            return Num {
                v,
                s: fp.len() as u32,
            };
        }
        let mut v = BigInt::zero();
        for c in ip.chars() {
            v = v * ibase + val(c);
        }
        let s = fp.len() as u32;
        let mut fnum = BigInt::zero();
        for c in fp.chars() {
            fnum = fnum * ibase + val(c);
        }
        let fden = num_traits::pow(BigInt::from(ibase), fp.len());
        let frac = fnum * pow10(s) / fden;
        Num {
            v: v * pow10(s) + frac,
            s,
        }
    }
}

// ---- the math library (-l), in fixed point: value = F / 10^p ----

fn fmul(a: &BigInt, b: &BigInt, p: u32) -> BigInt {
    a * b / pow10(p)
}

fn fdiv(a: &BigInt, b: &BigInt, p: u32) -> BigInt {
    a * pow10(p) / b
}

/// atan(1/n) for an integer n > 1, by its series.
fn atan_inv(n: u32, p: u32) -> BigInt {
    let one = pow10(p);
    let n2 = BigInt::from(n) * n;
    let mut term = &one / n;
    let mut sum = term.clone();
    let mut k = 1u32;
    loop {
        term = -term / &n2;
        let t = &term / (2 * k + 1);
        if t.is_zero() {
            break;
        }
        sum += t;
        k += 1;
    }
    sum
}

fn pi(p: u32) -> BigInt {
    // Machin: pi = 16 atan(1/5) - 4 atan(1/239).
    let q = p + 5;
    (atan_inv(5, q) * 16 - atan_inv(239, q) * 4) / pow10(5)
}

fn exp_fixed(x: &BigInt, p: u32) -> BigInt {
    let one = pow10(p);
    if x.is_negative() {
        let e = exp_fixed(&-x, p);
        return fdiv(&one, &e, p);
    }
    // Halve until below 1/2, sum the series, square back.
    let mut k = 0;
    let mut y = x.clone();
    let half = &one / 2u8;
    while y > half {
        y /= 2u8;
        k += 1;
    }
    let mut term = one.clone();
    let mut sum = one.clone();
    let mut n = 1u32;
    loop {
        term = fmul(&term, &y, p) / n;
        if term.is_zero() {
            break;
        }
        sum += &term;
        n += 1;
    }
    for _ in 0..k {
        sum = fmul(&sum, &sum, p);
    }
    sum
}

fn ln_fixed(x: &BigInt, p: u32) -> BigInt {
    let one = pow10(p);
    // x = m * 2^k with m in [1/2, 1).
    let mut m = x.clone();
    let mut k: i64 = 0;
    while m >= one {
        m /= 2u8;
        k += 1;
    }
    let half = &one / 2u8;
    while m < half {
        m *= 2u8;
        k -= 1;
    }
    let atanh = |u: &BigInt| {
        let u2 = fmul(u, u, p);
        let mut term = u.clone();
        let mut sum = u.clone();
        let mut n = 1u32;
        loop {
            term = fmul(&term, &u2, p);
            let t = &term / (2 * n + 1);
            if t.is_zero() {
                break;
            }
            sum += t;
            n += 1;
        }
        sum * 2u8
    };
    let u = fdiv(&(&m - &one), &(&m + &one), p);
    let ln_m = atanh(&u);
    let ln2 = atanh(&(&one / 3u8));
    ln_m + ln2 * k
}

fn sin_fixed(x: &BigInt, p: u32, cos: bool) -> BigInt {
    let one = pow10(p);
    let pi = pi(p);
    let two_pi = &pi * 2u8;
    // Into (-pi, pi].
    let mut y = x % &two_pi;
    if y > pi {
        y -= &two_pi;
    } else if y < -&pi {
        y += &two_pi;
    }
    let y2 = fmul(&y, &y, p);
    let (mut term, mut n) = if cos {
        (one.clone(), 0u32)
    } else {
        (y.clone(), 1u32)
    };
    let mut sum = term.clone();
    loop {
        term = -fmul(&term, &y2, p) / ((n + 1) * (n + 2));
        if term.is_zero() {
            break;
        }
        sum += &term;
        n += 2;
    }
    sum
}

fn atan_fixed(x: &BigInt, p: u32) -> BigInt {
    let one = pow10(p);
    if x.is_negative() {
        return -atan_fixed(&-x, p);
    }
    if *x > one {
        return pi(p) / 2u8 - atan_fixed(&fdiv(&one, x, p), p);
    }
    // atan(x) = 2 atan(x / (1 + sqrt(1 + x^2))) until x is small.
    let mut y = x.clone();
    let mut doublings = 0;
    let small = &one / 10u8;
    while y > small {
        let r = (fmul(&y, &y, p) + &one) * pow10(p);
        let s = r.sqrt() + &one;
        y = fdiv(&y, &s, p);
        doublings += 1;
    }
    let y2 = fmul(&y, &y, p);
    let mut term = y.clone();
    let mut sum = y.clone();
    let mut n = 1u32;
    loop {
        term = -fmul(&term, &y2, p);
        let t = &term / (2 * n + 1);
        if t.is_zero() {
            break;
        }
        sum += t;
        n += 1;
    }
    sum << doublings
}

fn bessel_fixed(n: u32, x: &BigInt, p: u32) -> BigInt {
    let one = pow10(p);
    let half = x / 2u8;
    // (x/2)^n / n!
    let mut lead = one.clone();
    for k in 1..=n {
        lead = fmul(&lead, &half, p) / k;
    }
    let h2 = fmul(&half, &half, p);
    let mut term = lead.clone();
    let mut sum = lead;
    let mut k = 1u32;
    loop {
        term = -fmul(&term, &h2, p) / (k * (k + n));
        if term.is_zero() {
            break;
        }
        sum += &term;
        k += 1;
    }
    sum
}

/// Digits of the integer part, to size the guard digits of a function that grows.
fn int_digits(x: &Num) -> u32 {
    let i = x.at(0).abs();
    if i.is_zero() {
        0
    } else {
        i.to_string().len() as u32
    }
}

pub enum MathErr {
    Domain,
}

/// The `-l` functions s c a l e j: `scale` is the caller's, the result has that many places.
pub fn math(name: &str, args: &[Num], scale: u32) -> Result<Num, MathErr> {
    let x = args.last().cloned().unwrap_or_default();
    let mut p = scale + 12;
    let v = match name {
        "e" => {
            // e^x has about 0.44 x integer digits; halvings cost a digit each few.
            let mag = x.at(0).abs().to_u32().unwrap_or(u32::MAX / 4).min(1 << 24);
            p += mag / 2 + int_digits(&x) + 4;
            exp_fixed(&x.at(p), p)
        }
        "l" => {
            if !x.v.is_positive() {
                return Err(MathErr::Domain);
            }
            p += int_digits(&x);
            ln_fixed(&x.at(p), p)
        }
        "s" => {
            p += int_digits(&x);
            sin_fixed(&x.at(p), p, false)
        }
        "c" => {
            p += int_digits(&x);
            sin_fixed(&x.at(p), p, true)
        }
        "a" => atan_fixed(&x.at(p), p),
        _ => {
            let order = args.first().cloned().unwrap_or_default();
            let n = order.at(0);
            let odd = n.is_odd();
            let n = n.abs().to_u32().unwrap_or(0).min(10_000);
            p += int_digits(&x) * 2 + 4;
            let mut r = bessel_fixed(n, &x.at(p), p);
            if order.is_neg() && odd {
                r = -r;
            }
            r
        }
    };
    Ok(Num { v, s: p }.rescale(scale))
}
