//! The formatting engine of the `printf` builtin, `echo -e` escapes and shell quoting.
//!
//! Everything here follows GNU bash 5.2 running with `LC_ALL=C.UTF-8`. Output is bytes, not
//! text: escapes such as `\377` or `%c` of a multibyte character produce bytes that are not
//! UTF-8 on their own, and widths and precisions of `%s` count bytes, as bash does.
//!
//! Differences from bash that are deliberate: floating-point arguments are `f64` (bash uses
//! the x87 `long double`), so digits beyond double precision and `%a` of inexact values
//! differ; field widths and precisions are capped at [`MAX_FIELD`] so that a script cannot
//! make one conversion allocate gigabytes.

use std::time::{SystemTime, UNIX_EPOCH};

/// Largest width or precision honoured; a larger one is clamped to it and reported in
/// [`Printf::too_large`], so the caller can stop with a limit error rather than print a
/// silently shortened field.
pub const MAX_FIELD: usize = 32 << 20;

/// What one run of `printf` produced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Printf {
    /// The bytes to write.
    pub out: Vec<u8>,
    /// Diagnostics, without the `bash: ` prefix, e.g. `printf: abc: invalid number`.
    pub errors: Vec<String>,
    /// For each of `errors`, how many bytes of `out` came before it. bash flushes its output
    /// after each pass over the format, so a diagnostic follows the passes completed before it.
    pub error_at: Vec<usize>,
    /// Exit status: 1 after an invalid number or format, else 0.
    pub status: i32,
    /// The largest width or precision asked for beyond [`MAX_FIELD`], if any.
    pub too_large: Option<u64>,
}

/// `printf format args...`, with `%(...)T` reading the system clock.
pub fn printf(format: &str, args: &[String]) -> Printf {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    printf_with_time(format, args, now, now)
}

/// `printf format args...` with the clock given: `now` is what `%(...)T` shows for an empty
/// argument or `-1`, `shell_start` what it shows for `-2` (seconds since the epoch, UTC).
pub fn printf_with_time(format: &str, args: &[String], now: i64, shell_start: i64) -> Printf {
    printf_in_zone(format, args, now, shell_start, None)
}

/// As [`printf_with_time`], with `%(...)T` in the zone a POSIX `TZ` value names.
pub fn printf_in_zone(
    format: &str,
    args: &[String],
    now: i64,
    shell_start: i64,
    tz: Option<&str>,
) -> Printf {
    let mut st = State {
        res: Printf::default(),
        args,
        next: 0,
        now,
        shell_start,
        zone: tz.map_or(Zone::Fixed(0, "UTC".into()), Zone::from_tz),
        pass_start: 0,
    };
    let fmt: Vec<char> = format.chars().collect();
    loop {
        let before = st.next;
        st.place_errors();
        st.pass_start = st.res.out.len();
        if st.pass(&fmt) == Flow::Stop {
            break;
        }
        // The format is reused while arguments remain, but only if it consumes any.
        if st.next >= args.len() || st.next == before {
            break;
        }
    }
    st.place_errors();
    st.res
}

/// The bytes of `echo -e` for one argument, and whether `\c` was met (then nothing more,
/// not even the newline, is to be written).
pub fn echo_escapes(s: &str) -> (Vec<u8>, bool) {
    let mut out = Vec::with_capacity(s.len());
    let mut errors = Vec::new();
    let chars: Vec<char> = s.chars().collect();
    let stopped = expand_escapes(&chars, Mode::Echo, &mut out, &mut errors);
    (out, stopped)
}

/// What `printf %q` prints for `s`: backslash quoting, `''` for the empty string, and the
/// `$'...'` form when `s` holds control characters.
pub fn quote_q(s: &str) -> String {
    if s.is_empty() {
        return "''".into();
    }
    if needs_ansi_c(s) {
        return ansi_c_quote(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for (i, c) in s.chars().enumerate() {
        let special = matches!(
            c,
            ' ' | '\t'
                | '\n'
                | '\''
                | '"'
                | '\\'
                | '|'
                | '&'
                | ';'
                | '('
                | ')'
                | '<'
                | '>'
                | '!'
                | '{'
                | '}'
                | '*'
                | '['
                | '?'
                | ']'
                | '^'
                | '$'
                | '`'
                | ','
        ) || (i == 0 && matches!(c, '~' | '#'));
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Double quotes with `"`, `\`, `$` and `` ` `` escaped: how `declare -p` and `set` print a
/// value (`"a \"b\" \$c"`).
pub(crate) fn quote_double(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        if matches!(c, '"' | '\\' | '$' | '`') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// `s` itself when it is not empty and every character is `safe`, else [`quote_single`]:
/// how `set` lists a scalar and `set -x` shows a word (they differ in what they leave bare).
pub(crate) fn quote_unless(s: &str, safe: impl Fn(char) -> bool) -> String {
    if !s.is_empty() && s.chars().all(safe) {
        s.to_string()
    } else {
        quote_single(s)
    }
}

/// What `${x@Q}` and `declare -p` print for `s`: single quotes (`'it'\''s'`), or the
/// `$'...'` form when `s` holds control characters.
pub fn quote_single(s: &str) -> String {
    // bash's sh_single_quote writes a lone quote as `\'`.
    if s == "'" {
        return "\\'".into();
    }
    if needs_ansi_c(s) {
        return ansi_c_quote(s);
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

fn is_unprintable(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}')
        || wasmsand_exec::raw::raw_byte(c).is_some()
}

pub(crate) fn needs_ansi_c(s: &str) -> bool {
    s.chars().any(is_unprintable)
}

fn ansi_c_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    out.push_str("$'");
    for c in s.chars() {
        match c {
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            '\x1b' => out.push_str("\\E"),
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            c if is_unprintable(c) => {
                let mut bytes = Vec::new();
                push_char(&mut bytes, c);
                for b in bytes {
                    out.push_str(&format!("\\{b:03o}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Escapes in the format string itself.
    Format,
    /// The argument of `%b`.
    Arg,
    /// `echo -e`.
    Echo,
}

/// Expands backslash escapes of `chars` into `out`; true when `\c` stopped it.
fn expand_escapes(chars: &[char], mode: Mode, out: &mut Vec<u8>, errors: &mut Vec<String>) -> bool {
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' {
            push_char(out, c);
            i += 1;
            continue;
        }
        let (next, stop) = escape_at(chars, i + 1, mode, out, errors);
        if stop {
            return true;
        }
        i = next;
    }
    false
}

/// Expands the escape whose backslash is just before `i`. Returns the index after it, and
/// whether it was a `\c` that stops output.
fn escape_at(
    chars: &[char],
    i: usize,
    mode: Mode,
    out: &mut Vec<u8>,
    errors: &mut Vec<String>,
) -> (usize, bool) {
    let Some(&c) = chars.get(i) else {
        out.push(b'\\');
        return (i, false);
    };
    let simple = match c {
        'a' => Some(7u8),
        'b' => Some(8),
        'e' | 'E' => Some(0x1b),
        'f' => Some(0x0c),
        'n' => Some(b'\n'),
        'r' => Some(b'\r'),
        't' => Some(b'\t'),
        'v' => Some(0x0b),
        '\\' => Some(b'\\'),
        '"' | '\'' | '?' if mode == Mode::Format => Some(c as u8),
        _ => None,
    };
    if let Some(b) = simple {
        out.push(b);
        return (i + 1, false);
    }
    match c {
        'c' if mode != Mode::Format => (i + 1, true),
        // `\0` takes up to three more octal digits in `%b` and `echo -e`, while in the format
        // the zero is one of at most three digits.
        '0' if mode != Mode::Format => {
            let (v, n) = read_digits(chars, i + 1, 8, 3);
            out.push(v as u8);
            (i + 1 + n, false)
        }
        '0'..='7' if mode != Mode::Echo => {
            let (v, n) = read_digits(chars, i, 8, 3);
            out.push(v as u8);
            (i + n, false)
        }
        'x' => {
            let (v, n) = read_digits(chars, i + 1, 16, 2);
            if n == 0 {
                if mode != Mode::Echo {
                    errors.push("printf: missing hex digit for \\x".into());
                }
                out.extend_from_slice(b"\\x");
            } else {
                out.push(v as u8);
            }
            (i + 1 + n, false)
        }
        'u' | 'U' => {
            let max = if c == 'u' { 4 } else { 8 };
            let (v, n) = read_digits(chars, i + 1, 16, max);
            if n == 0 {
                if mode != Mode::Echo {
                    errors.push(format!("printf: missing unicode digit for \\{c}"));
                }
                out.push(b'\\');
                push_char(out, c);
            } else {
                push_code_point(out, v);
            }
            (i + 1 + n, false)
        }
        _ => {
            out.push(b'\\');
            push_char(out, c);
            (i + 1, false)
        }
    }
}

/// Reads up to `max` digits of `radix` from `chars[i..]`: (value, digits read).
fn read_digits(chars: &[char], i: usize, radix: u32, max: usize) -> (u32, usize) {
    let mut v: u32 = 0;
    let mut n = 0;
    while n < max {
        let Some(d) = chars.get(i + n).and_then(|c| c.to_digit(radix)) else {
            break;
        };
        v = v.wrapping_mul(radix).wrapping_add(d);
        n += 1;
    }
    (v, n)
}

fn push_char(out: &mut Vec<u8>, c: char) {
    match wasmsand_exec::raw::raw_byte(c) {
        Some(b) => out.push(b),
        None => out.extend_from_slice(c.encode_utf8(&mut [0u8; 4]).as_bytes()),
    }
}

/// Encodes a code point the way bash does for `\u`/`\U`: plain UTF-8, also for surrogates and
/// values beyond U+10FFFF (the original 6-byte scheme), which are not valid `char`s.
fn push_code_point(out: &mut Vec<u8>, v: u32) {
    if let Some(c) = char::from_u32(v) {
        push_char(out, c);
        return;
    }
    let (len, first) = match v {
        0..=0xffff => (3, 0xe0u32),
        0x1_0000..=0x1f_ffff => (4, 0xf0),
        0x20_0000..=0x3ff_ffff => (5, 0xf8),
        0x400_0000..=0x7fff_ffff => (6, 0xfc),
        _ => return,
    };
    let mut bytes = [0u8; 6];
    let mut rest = v;
    for k in (1..len).rev() {
        bytes[k] = 0x80 | (rest & 0x3f) as u8;
        rest >>= 6;
    }
    bytes[0] = (first | rest) as u8;
    out.extend_from_slice(&bytes[..len]);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Stop,
}

#[derive(Debug, Clone, Copy, Default)]
struct Spec {
    left: bool,
    plus: bool,
    space: bool,
    alt: bool,
    zero: bool,
    width: usize,
    precision: Option<usize>,
}

struct State<'a> {
    res: Printf,
    args: &'a [String],
    next: usize,
    now: i64,
    shell_start: i64,
    zone: Zone,
    /// How much output there was when the current pass over the format began.
    pass_start: usize,
}

/// The time zone `%(...)T` shows times in.
enum Zone {
    /// Seconds east of UTC and the zone's abbreviation.
    Fixed(i64, String),
    /// A zone of the compiled-in database, or POSIX rules with summer time.
    Rules(jiff::tz::TimeZone),
}

impl Zone {
    /// As glibc reads `TZ`: a zone name first (`Asia/Tokyo`, `:UTC`), then POSIX rules
    /// (`EST5EDT,M3.2.0,M11.1.0`); what is neither keeps its name at offset 0.
    fn from_tz(tz: &str) -> Zone {
        let name = tz.strip_prefix(':').unwrap_or(tz);
        if let Ok(z) = jiff::tz::db().get(name) {
            return Zone::Rules(z);
        }
        if !tz.starts_with(':')
            && tz.contains(',')
            && let Ok(z) = jiff::tz::TimeZone::posix(tz)
        {
            return Zone::Rules(z);
        }
        let (off, name) = parse_tz(tz);
        Zone::Fixed(off, name)
    }

    /// Seconds east of UTC and the abbreviation in force at `t`.
    fn at(&self, t: i64) -> (i64, String) {
        match self {
            Zone::Fixed(off, name) => (*off, name.clone()),
            Zone::Rules(z) => match jiff::Timestamp::from_second(t) {
                Ok(ts) => {
                    let info = z.to_offset_info(ts);
                    (
                        i64::from(info.offset().seconds()),
                        info.abbreviation().to_string(),
                    )
                }
                Err(_) => (0, "UTC".into()),
            },
        }
    }
}

/// A POSIX `TZ` value's standard offset and name (`JST-9`, `UTC+3`, `<+05>-5`), for values
/// neither the zone database nor the full POSIX rules take; a name no zone has is UTC, as
/// glibc treats a zone it cannot find.
fn parse_tz(tz: &str) -> (i64, String) {
    let tz = tz.strip_prefix(':').unwrap_or(tz);
    let (name, rest) = if let Some(r) = tz.strip_prefix('<') {
        match r.find('>') {
            Some(e) => (r[..e].to_string(), &r[e + 1..]),
            None => return (0, "UTC".into()),
        }
    } else {
        let e = tz
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(tz.len());
        (tz[..e].to_string(), &tz[e..])
    };
    if name.len() < 3 {
        return (0, "UTC".into());
    }
    let (sign, rest) = match rest.as_bytes().first() {
        Some(b'-') => (1, &rest[1..]),
        Some(b'+') => (-1, &rest[1..]),
        _ => (-1, rest),
    };
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == ':'))
        .unwrap_or(rest.len());
    if end == 0 {
        return (0, name);
    }
    let mut secs = 0i64;
    for (i, part) in rest[..end].split(':').take(3).enumerate() {
        let n: i64 = part.parse().unwrap_or(0);
        secs += n * [3600, 60, 1][i];
    }
    (sign * secs, name)
}

impl State<'_> {
    /// A width or precision, clamped; a clamped one is remembered for the caller.
    fn field(&mut self, v: u64) -> usize {
        if v > MAX_FIELD as u64 {
            self.res.too_large = Some(self.res.too_large.unwrap_or(0).max(v));
        }
        clamp_field(v)
    }

    fn take(&mut self) -> Option<&str> {
        let a = self.args.get(self.next)?;
        self.next += 1;
        Some(a.as_str())
    }

    fn error(&mut self, msg: String) {
        self.place_errors();
        self.res.errors.push(msg);
        self.place_errors();
    }

    /// Places the diagnostics not yet placed after the passes completed so far.
    fn place_errors(&mut self) {
        let at = self.pass_start;
        let missing = self.res.errors.len() - self.res.error_at.len();
        self.res.error_at.extend(std::iter::repeat_n(at, missing));
    }

    /// One pass over the format.
    fn pass(&mut self, fmt: &[char]) -> Flow {
        let mut i = 0;
        while i < fmt.len() {
            let c = fmt[i];
            if c == '\\' {
                let (next, _) = escape_at(
                    fmt,
                    i + 1,
                    Mode::Format,
                    &mut self.res.out,
                    &mut self.res.errors,
                );
                self.place_errors();
                i = next;
                continue;
            }
            if c != '%' {
                push_char(&mut self.res.out, c);
                i += 1;
                continue;
            }
            match self.conversion(fmt, i) {
                Ok(next) => i = next,
                Err(flow) => return flow,
            }
        }
        Flow::Continue
    }

    /// Handles the conversion starting at the `%` at `start`; returns the index after it.
    fn conversion(&mut self, fmt: &[char], start: usize) -> Result<usize, Flow> {
        let mut i = start + 1;
        if fmt.get(i) == Some(&'%') {
            self.res.out.push(b'%');
            return Ok(i + 1);
        }
        let mut spec = Spec::default();
        while let Some(&f) = fmt.get(i) {
            match f {
                '-' => spec.left = true,
                '+' => spec.plus = true,
                ' ' => spec.space = true,
                '#' => spec.alt = true,
                '0' => spec.zero = true,
                // Digit grouping: none in the C.UTF-8 locale.
                '\'' => {}
                _ => break,
            }
            i += 1;
        }
        if fmt.get(i) == Some(&'*') {
            i += 1;
            let w = self.int_arg();
            if w < 0 {
                spec.left = true;
            }
            spec.width = self.field(w.unsigned_abs());
        } else {
            let (w, n) = read_number(fmt, i);
            spec.width = self.field(w as u64);
            i += n;
        }
        if fmt.get(i) == Some(&'.') {
            i += 1;
            if fmt.get(i) == Some(&'*') {
                i += 1;
                let p = self.int_arg();
                spec.precision = (p >= 0).then(|| self.field(p.unsigned_abs()));
            } else {
                let (p, n) = read_number(fmt, i);
                spec.precision = Some(self.field(p as u64));
                i += n;
            }
        }
        if fmt.get(i) == Some(&'(') {
            // Bash only warns about a malformed `%(...)T` and prints it as it stands.
            let close = fmt[i + 1..].iter().position(|&c| c == ')');
            let after = close.map_or(fmt.len(), |c| i + c + 2);
            if close.is_none() || fmt.get(after) != Some(&'T') {
                let bad = fmt.get(after).copied().unwrap_or(' ');
                self.error(format!(
                    "printf: warning: `{bad}': invalid time format specification"
                ));
                let end = (after + 1).min(fmt.len());
                for &c in &fmt[start..end] {
                    push_char(&mut self.res.out, c);
                }
                return Ok(end);
            }
            let tfmt: String = fmt[i + 1..after - 1].iter().collect();
            i = after;
            let t = match self.take() {
                None | Some("") => -1,
                Some(a) => {
                    let a = a.to_owned();
                    self.parse_signed(&a)
                }
            };
            let t = match t {
                -1 => self.now,
                -2 => self.shell_start,
                t => t,
            };
            let tfmt = if tfmt.is_empty() {
                "%X".to_string()
            } else {
                tfmt
            };
            let mut text = strftime(&tfmt, t, &self.zone.at(t));
            // bash formats into a 128-byte buffer and prints nothing when it does not fit.
            if text.len() >= 128 {
                text.clear();
            }
            self.put_str(text.as_bytes(), &spec);
            return Ok(i + 1);
        }
        while matches!(fmt.get(i), Some('h' | 'l' | 'L' | 'j' | 'z' | 't')) {
            i += 1;
        }
        let Some(&conv) = fmt.get(i) else {
            return Err(self.missing_char(fmt, start));
        };
        match conv {
            'd' | 'i' => {
                let v = self.int_arg();
                let s = format_int(v < 0, u128::from(v.unsigned_abs()), 10, false, true, &spec);
                self.res.out.extend_from_slice(s.as_bytes());
            }
            'o' | 'u' | 'x' | 'X' => {
                let v = self.uint_arg();
                let radix = match conv {
                    'o' => 8,
                    'u' => 10,
                    _ => 16,
                };
                let s = format_int(false, u128::from(v), radix, conv == 'X', false, &spec);
                self.res.out.extend_from_slice(s.as_bytes());
            }
            'f' | 'F' | 'e' | 'E' | 'g' | 'G' | 'a' | 'A' => {
                let v = self.float_arg();
                let s = format_float(v, conv, &spec);
                self.res.out.extend_from_slice(s.as_bytes());
            }
            'c' => {
                let b = self
                    .take()
                    .and_then(|a| wasmsand_exec::raw::encode(a).first().copied())
                    .unwrap_or(0);
                let spec = Spec {
                    precision: None,
                    ..spec
                };
                self.put_str(&[b], &spec);
            }
            's' => {
                let a = wasmsand_exec::raw::encode(self.take().unwrap_or("")).into_owned();
                self.put_str(&a, &spec);
            }
            'b' => {
                let a: Vec<char> = self.take().unwrap_or("").chars().collect();
                let mut buf = Vec::new();
                let stop = expand_escapes(&a, Mode::Arg, &mut buf, &mut self.res.errors);
                self.place_errors();
                self.put_str(&buf, &spec);
                if stop {
                    return Err(Flow::Stop);
                }
            }
            'q' => {
                let q = quote_q(self.take().unwrap_or(""));
                self.put_str(q.as_bytes(), &spec);
            }
            'Q' => {
                let a = self.take().unwrap_or("");
                let cut = match spec.precision {
                    Some(p) => prefix_at_char(a, p),
                    None => a,
                };
                let q = quote_q(cut);
                let spec = Spec {
                    precision: None,
                    ..spec
                };
                self.put_str(q.as_bytes(), &spec);
            }
            _ => return Err(self.bad_char(fmt, start, i)),
        }
        Ok(i + 1)
    }

    fn missing_char(&mut self, fmt: &[char], start: usize) -> Flow {
        let text: String = fmt[start..].iter().collect();
        self.error(format!("printf: `{text}': missing format character"));
        self.res.status = 1;
        Flow::Stop
    }

    fn bad_char(&mut self, fmt: &[char], _start: usize, at: usize) -> Flow {
        let c = fmt.get(at).copied().unwrap_or('%');
        self.error(format!("printf: `{c}': invalid format character"));
        self.res.status = 1;
        Flow::Stop
    }

    /// Pads (and, with a precision, truncates) bytes into the output.
    fn put_str(&mut self, s: &[u8], spec: &Spec) {
        let s = match spec.precision {
            Some(p) if p < s.len() => &s[..p],
            _ => s,
        };
        let pad = spec.width.saturating_sub(s.len());
        let out = &mut self.res.out;
        if !spec.left {
            out.resize(out.len() + pad, b' ');
        }
        out.extend_from_slice(s);
        if spec.left {
            out.resize(out.len() + pad, b' ');
        }
    }

    fn int_arg(&mut self) -> i64 {
        match self.take() {
            None => 0,
            Some(a) => {
                let a = a.to_owned();
                self.parse_signed(&a)
            }
        }
    }

    fn uint_arg(&mut self) -> u64 {
        let Some(a) = self.take().map(str::to_owned) else {
            return 0;
        };
        // bash's strtol-based conversion takes an empty argument as 0 without complaint.
        if a.is_empty() {
            return 0;
        }
        if let Some(v) = char_code(&a) {
            return v as u64;
        }
        let p = parse_c_int(&a);
        if !p.complete {
            self.invalid_number(&a);
        }
        let mag = if p.overflow || p.mag > u128::from(u64::MAX) {
            self.error(format!(
                "printf: warning: {a}: Numerical result out of range"
            ));
            u64::MAX
        } else {
            p.mag as u64
        };
        if p.negative && !(p.overflow || p.mag > u128::from(u64::MAX)) {
            mag.wrapping_neg()
        } else {
            mag
        }
    }

    fn parse_signed(&mut self, a: &str) -> i64 {
        if a.is_empty() {
            return 0;
        }
        if let Some(v) = char_code(a) {
            return v;
        }
        let p = parse_c_int(a);
        if !p.complete {
            self.invalid_number(a);
        }
        let limit = if p.negative {
            1u128 << 63
        } else {
            (1u128 << 63) - 1
        };
        if p.overflow || p.mag > limit {
            self.error(format!(
                "printf: warning: {a}: Numerical result out of range"
            ));
            return if p.negative { i64::MIN } else { i64::MAX };
        }
        let v = p.mag as i128;
        (if p.negative { -v } else { v }) as i64
    }

    fn float_arg(&mut self) -> f64 {
        let Some(a) = self.take().map(str::to_owned) else {
            return 0.0;
        };
        if a.is_empty() {
            return 0.0;
        }
        if let Some(v) = char_code(&a) {
            return v as f64;
        }
        let (v, complete) = parse_c_float(&a);
        if !complete {
            self.invalid_number(&a);
        }
        v
    }

    fn invalid_number(&mut self, a: &str) {
        let b = a.as_bytes();
        let kind = if b.first() == Some(&b'0') && b.get(1).is_some_and(u8::is_ascii_digit) {
            "invalid octal number"
        } else if b.first() == Some(&b'0') && b.get(1) == Some(&b'x') {
            "invalid hex number"
        } else {
            "invalid number"
        };
        self.error(format!("printf: {a}: {kind}"));
        self.res.status = 1;
    }
}

fn clamp_field(v: u64) -> usize {
    usize::try_from(v).unwrap_or(MAX_FIELD).min(MAX_FIELD)
}

/// A decimal number in a format, saturating (callers clamp it).
fn read_number(fmt: &[char], i: usize) -> (usize, usize) {
    let mut v: usize = 0;
    let mut n = 0;
    while let Some(d) = fmt.get(i + n).and_then(|c| c.to_digit(10)) {
        v = v.saturating_mul(10).saturating_add(d as usize);
        n += 1;
    }
    (v, n)
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn prefix_at_char(s: &str, max: usize) -> &str {
    let mut end = max.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `'c` or `"c` as a number: the code point of `c` (0 when nothing follows the quote).
fn char_code(a: &str) -> Option<i64> {
    let mut it = a.chars();
    match it.next() {
        Some('\'' | '"') => Some(it.next().map_or(0, |c| i64::from(u32::from(c)))),
        _ => None,
    }
}

struct CInt {
    negative: bool,
    mag: u128,
    overflow: bool,
    /// Whether the whole argument was a number (no trailing garbage, some digits).
    complete: bool,
}

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// `strtoimax(a, &end, 0)`: leading blanks, a sign, then decimal, `0x` hex or `0` octal.
fn parse_c_int(a: &str) -> CInt {
    let b = a.as_bytes();
    let mut i = 0;
    while i < b.len() && is_c_space(b[i]) {
        i += 1;
    }
    let mut negative = false;
    if let Some(&s @ (b'+' | b'-')) = b.get(i) {
        negative = s == b'-';
        i += 1;
    }
    let mut radix = 10;
    let mut digits_start = i;
    if b.get(i) == Some(&b'0') {
        if matches!(b.get(i + 1), Some(b'x' | b'X'))
            && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
        {
            radix = 16;
            i += 2;
            digits_start = i;
        } else {
            radix = 8;
        }
    }
    let mut mag: u128 = 0;
    let mut overflow = false;
    while let Some(d) = b.get(i).and_then(|&c| (c as char).to_digit(radix)) {
        mag = match mag
            .checked_mul(u128::from(radix))
            .and_then(|m| m.checked_add(u128::from(d)))
        {
            Some(m) if m <= u128::from(u64::MAX) => m,
            _ => {
                overflow = true;
                u128::from(u64::MAX)
            }
        };
        i += 1;
    }
    let any = i > digits_start || radix == 8;
    CInt {
        negative,
        mag,
        overflow,
        complete: any && i == b.len(),
    }
}

/// `strtold(a, &end)` on the longest numeric prefix: (value, whole argument consumed).
fn parse_c_float(a: &str) -> (f64, bool) {
    let b = a.as_bytes();
    let mut i = 0;
    while i < b.len() && is_c_space(b[i]) {
        i += 1;
    }
    let start = i;
    let mut negative = false;
    if let Some(&s @ (b'+' | b'-')) = b.get(i) {
        negative = s == b'-';
        i += 1;
    }
    let rest = &a[i..];
    let lower = rest.to_ascii_lowercase();
    let sign = |v: f64| if negative { -v } else { v };
    for (word, v) in [
        ("infinity", f64::INFINITY),
        ("inf", f64::INFINITY),
        ("nan", f64::NAN),
    ] {
        if lower.starts_with(word) {
            return (sign(v), i + word.len() == b.len());
        }
    }
    if lower.starts_with("0x")
        && lower[2..].starts_with(|c: char| c.is_ascii_hexdigit() || c == '.')
    {
        let (v, n) = parse_hex_float(&lower[2..]);
        if n > 0 {
            return (sign(v), i + 2 + n == b.len());
        }
    }
    let mut j = i;
    let digits = |j: &mut usize| {
        let s = *j;
        while b.get(*j).is_some_and(u8::is_ascii_digit) {
            *j += 1;
        }
        *j - s
    };
    let mut n = digits(&mut j);
    if b.get(j) == Some(&b'.') {
        let mut k = j + 1;
        let m = digits(&mut k);
        if n + m > 0 {
            j = k;
            n += m;
        }
    }
    if n == 0 {
        return (0.0, false);
    }
    if matches!(b.get(j), Some(b'e' | b'E')) {
        let mut k = j + 1;
        if matches!(b.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        if digits(&mut k) > 0 {
            j = k;
        }
    }
    let v = a[start..j].parse::<f64>().unwrap_or(0.0);
    (v, j == b.len())
}

/// Hex float digits after `0x` (lowercase): (value, bytes consumed).
fn parse_hex_float(s: &str) -> (f64, usize) {
    let b = s.as_bytes();
    let mut v = 0.0f64;
    let mut i = 0;
    let mut any = false;
    while let Some(d) = b.get(i).and_then(|&c| (c as char).to_digit(16)) {
        v = v * 16.0 + f64::from(d);
        i += 1;
        any = true;
    }
    let mut scale = 0i32;
    if b.get(i) == Some(&b'.') {
        let mut k = i + 1;
        while let Some(d) = b.get(k).and_then(|&c| (c as char).to_digit(16)) {
            v = v * 16.0 + f64::from(d);
            scale = scale.saturating_sub(4);
            k += 1;
            any = true;
        }
        if any {
            i = k;
        }
    }
    if !any {
        return (0.0, 0);
    }
    if b.get(i) == Some(&b'p') {
        let mut k = i + 1;
        let neg = b.get(k) == Some(&b'-');
        if matches!(b.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        let ds = k;
        let mut e: i32 = 0;
        while let Some(d) = b.get(k).and_then(|&c| (c as char).to_digit(10)) {
            e = e.saturating_mul(10).saturating_add(d as i32);
            k += 1;
        }
        if k > ds {
            scale = scale.saturating_add(if neg { -e } else { e });
            i = k;
        }
    }
    (v * 2f64.powi(scale), i)
}

/// C-style integer conversion: sign, `#` prefix, precision as minimum digits, width.
fn format_int(
    negative: bool,
    mag: u128,
    radix: u32,
    upper: bool,
    signed: bool,
    spec: &Spec,
) -> String {
    let mut digits = match radix {
        8 => format!("{mag:o}"),
        16 if upper => format!("{mag:X}"),
        16 => format!("{mag:x}"),
        _ => mag.to_string(),
    };
    if spec.precision == Some(0) && mag == 0 {
        digits.clear();
    }
    if let Some(p) = spec.precision
        && digits.len() < p
    {
        digits = "0".repeat(p - digits.len()) + &digits;
    }
    if spec.alt && radix == 8 && !digits.starts_with('0') {
        digits.insert(0, '0');
    }
    let mut prefix = String::new();
    if signed {
        if negative {
            prefix.push('-');
        } else if spec.plus {
            prefix.push('+');
        } else if spec.space {
            prefix.push(' ');
        }
    }
    if spec.alt && radix == 16 && mag != 0 {
        prefix.push_str(if upper { "0X" } else { "0x" });
    }
    pad_number(prefix, digits, spec, spec.zero && spec.precision.is_none())
}

fn pad_number(prefix: String, body: String, spec: &Spec, zero: bool) -> String {
    let len = prefix.len() + body.len();
    let pad = spec.width.saturating_sub(len);
    if spec.left {
        prefix + &body + &" ".repeat(pad)
    } else if zero {
        prefix + &"0".repeat(pad) + &body
    } else {
        " ".repeat(pad) + &prefix + &body
    }
}

fn format_float(v: f64, conv: char, spec: &Spec) -> String {
    let upper = conv.is_ascii_uppercase();
    let mut prefix = String::new();
    if v.is_sign_negative() {
        prefix.push('-');
    } else if spec.plus {
        prefix.push('+');
    } else if spec.space {
        prefix.push(' ');
    }
    if !v.is_finite() {
        let body = if v.is_nan() { "nan" } else { "inf" };
        let body = if upper {
            body.to_ascii_uppercase()
        } else {
            body.to_owned()
        };
        return pad_number(prefix, body, spec, false);
    }
    let a = v.abs();
    let body = match conv.to_ascii_lowercase() {
        'f' => fixed(a, spec.precision.unwrap_or(6), spec.alt),
        'e' => exponential(a, spec.precision.unwrap_or(6), spec.alt, upper),
        'g' => general(a, spec.precision.unwrap_or(6), spec.alt, upper),
        _ => hex_float(a, spec.precision, spec.alt, upper),
    };
    pad_number(prefix, body, spec, spec.zero)
}

fn fixed(a: f64, p: usize, alt: bool) -> String {
    let mut s = format!("{a:.p$}");
    if alt && p == 0 {
        s.push('.');
    }
    s
}

/// `(mantissa digits, exponent)` of `a` rounded to `p` digits after the point.
fn exp_parts(a: f64, p: usize) -> (String, i32) {
    let s = format!("{a:.p$e}");
    match s.split_once('e') {
        Some((m, e)) => (m.to_owned(), e.parse().unwrap_or(0)),
        None => (s, 0),
    }
}

fn exponential(a: f64, p: usize, alt: bool, upper: bool) -> String {
    let (mut m, e) = exp_parts(a, p);
    if alt && p == 0 {
        m.push('.');
    }
    let sign = if e < 0 { '-' } else { '+' };
    let ech = if upper { 'E' } else { 'e' };
    format!("{m}{ech}{sign}{:02}", e.unsigned_abs())
}

fn general(a: f64, p: usize, alt: bool, upper: bool) -> String {
    let p = p.max(1);
    let x = if a == 0.0 { 0 } else { exp_parts(a, p - 1).1 };
    let mut s = if x < -4 || x >= p as i64 as i32 {
        exponential(a, p - 1, alt, upper)
    } else {
        let decimals = (p as i64 - 1 - i64::from(x)).max(0) as usize;
        fixed(a, decimals, alt)
    };
    if !alt {
        let (num, exp) = match s.find(['e', 'E']) {
            Some(k) => s.split_at(k),
            None => (s.as_str(), ""),
        };
        if num.contains('.') {
            let trimmed = num.trim_end_matches('0').trim_end_matches('.');
            s = format!("{trimmed}{exp}");
        }
    }
    s
}

/// `%a` as glibc prints a `long double`: the leading hex digit holds four bits (8 to f), so
/// 1 is `0x8p-3`.
fn hex_float(a: f64, precision: Option<usize>, alt: bool, upper: bool) -> String {
    let (lead, mut frac, mut exp) = if a == 0.0 {
        (0u64, 0u64, 0i64)
    } else {
        let bits = a.to_bits();
        let raw_exp = ((bits >> 52) & 0x7ff) as i64;
        let mut m = bits & ((1u64 << 52) - 1);
        let mut e = raw_exp - 1023;
        if raw_exp == 0 {
            // Subnormal: normalize so that bit 52 is the leading one.
            e = -1022;
            while m & (1u64 << 52) == 0 {
                m <<= 1;
                e -= 1;
            }
        } else {
            m |= 1u64 << 52;
        }
        let full = m << 11;
        (full >> 60, full & ((1u64 << 60) - 1), e - 3)
    };
    let mut lead = lead;
    let mut digits = format!("{frac:015x}");
    match precision {
        Some(p) if p < 15 => {
            let drop = (15 - p) as u32 * 4;
            let half = 1u64 << (drop - 1);
            let rem = frac & ((1u64 << drop) - 1);
            frac >>= drop;
            if rem > half || (rem == half && frac & 1 == 1) {
                frac += 1;
                if p == 0 || frac >> (p as u32 * 4) != 0 {
                    frac = 0;
                    lead += 1;
                    if lead > 0xf {
                        lead = 8;
                        exp += 1;
                    }
                }
            }
            digits = if p == 0 {
                String::new()
            } else {
                format!("{frac:0w$x}", w = p)
            };
        }
        Some(p) => digits.push_str(&"0".repeat(p - 15)),
        None => digits = digits.trim_end_matches('0').to_owned(),
    }
    let point = if !digits.is_empty() || alt { "." } else { "" };
    let sign = if exp < 0 { '-' } else { '+' };
    let s = format!("0x{lead:x}{point}{digits}p{sign}{}", exp.unsigned_abs());
    if upper { s.to_ascii_uppercase() } else { s }
}

/// Civil date (year, month 1-12, day 1-31) of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// ISO 8601 week-based year and week of a date given its year, day of year (0-based) and
/// weekday (0 = Sunday).
fn iso_week(year: i64, yday: i64, wday: i64) -> (i64, i64) {
    let wd = (wday + 6) % 7; // Monday = 0
    let week = (yday - wd + 10) / 7;
    if week < 1 {
        let py = year - 1;
        let pdays = if is_leap(py) { 366 } else { 365 };
        return iso_week(py, yday + pdays, wday);
    }
    let days = if is_leap(year) { 366 } else { 365 };
    if week == 53 && yday - wd + 3 >= days {
        return (year + 1, 1);
    }
    (year, week)
}

const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// `strftime(fmt)` of the time `t` (seconds since the epoch) in the zone a `TZ` value names
/// (UTC without one), as `printf '%(fmt)T'` shows it.
pub(crate) fn format_time(fmt: &str, t: i64, tz: Option<&str>) -> String {
    let zone = tz.map_or(Zone::Fixed(0, "UTC".into()), Zone::from_tz);
    strftime(fmt, t, &zone.at(t))
}

/// `strftime` in UTC with the C locale's names and formats.
fn strftime(fmt: &str, t: i64, zone: &(i64, String)) -> String {
    let when = BrokenDown::new(t + zone.0);
    let mut out = String::new();
    let chars: Vec<char> = fmt.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c != '%' {
            out.push(c);
            continue;
        }
        let start = i - 1;
        let mut pad: Option<char> = None;
        while let Some(&f @ ('-' | '_' | '0' | '^' | '#')) = chars.get(i) {
            if f != '^' && f != '#' {
                pad = Some(f);
            }
            i += 1;
        }
        let (width, n) = read_number(&chars, i);
        let width = width.min(MAX_FIELD);
        i += n;
        while matches!(chars.get(i), Some('E' | 'O')) {
            i += 1;
        }
        let Some(&conv) = chars.get(i) else {
            out.extend(&chars[start..]);
            break;
        };
        i += 1;
        let field = time_field(conv, &when, zone)
            .unwrap_or_else(|| TimeField::Text(chars[start..i].iter().collect()));
        push_time_field(&mut out, field, pad, width);
    }
    out
}

/// A time as calendar fields, in the zone it was shifted to.
struct BrokenDown {
    t: i64,
    year: i64,
    month: u32,
    mday: u32,
    hour: i64,
    hour12: i64,
    min: i64,
    sec: i64,
    /// 0 for Sunday.
    wday: i64,
    /// 0 for January 1st.
    yday: i64,
    iso_year: i64,
    iso_week: i64,
}

impl BrokenDown {
    fn new(t: i64) -> BrokenDown {
        let days = t.div_euclid(86_400);
        let secs = t.rem_euclid(86_400);
        let (year, month, mday) = civil_from_days(days);
        let hour = secs / 3600;
        let wday = (days + 4).rem_euclid(7);
        let yday = days - days_from_civil(year);
        let (iso_year, iso_week) = iso_week(year, yday, wday);
        BrokenDown {
            t,
            year,
            month,
            mday,
            hour,
            hour12: if hour % 12 == 0 { 12 } else { hour % 12 },
            min: secs / 60 % 60,
            sec: secs % 60,
            wday,
            yday,
            iso_year,
            iso_week,
        }
    }
}

/// What one conversion of `strftime` gives.
enum TimeField {
    /// A number, with its natural width and padding character.
    Number(i64, usize, char),
    Text(String),
}

/// The field `%conv` stands for; `None` for a conversion `strftime` does not know (it is
/// printed as written).
fn time_field(conv: char, w: &BrokenDown, zone: &(i64, String)) -> Option<TimeField> {
    use TimeField::{Number as N, Text as T};
    let day = DAYS[w.wday as usize];
    let month = MONTHS[w.month as usize - 1];
    let am = w.hour < 12;
    Some(match conv {
        'a' => T(day[..3].into()),
        'A' => T(day.into()),
        'b' | 'h' => T(month[..3].into()),
        'B' => T(month.into()),
        'c' => T(format!(
            "{} {} {:2} {:02}:{:02}:{:02} {}",
            &day[..3],
            &month[..3],
            w.mday,
            w.hour,
            w.min,
            w.sec,
            w.year
        )),
        'C' => N(w.year.div_euclid(100), 2, '0'),
        'd' => N(i64::from(w.mday), 2, '0'),
        'D' | 'x' => T(format!(
            "{:02}/{:02}/{:02}",
            w.month,
            w.mday,
            w.year.rem_euclid(100)
        )),
        'e' => N(i64::from(w.mday), 2, ' '),
        'F' => T(format!("{}-{:02}-{:02}", w.year, w.month, w.mday)),
        'g' => N(w.iso_year.rem_euclid(100), 2, '0'),
        'G' => N(w.iso_year, 1, '0'),
        'H' => N(w.hour, 2, '0'),
        'I' => N(w.hour12, 2, '0'),
        'j' => N(w.yday + 1, 3, '0'),
        'k' => N(w.hour, 2, ' '),
        'l' => N(w.hour12, 2, ' '),
        'm' => N(i64::from(w.month), 2, '0'),
        'M' => N(w.min, 2, '0'),
        'n' => T("\n".into()),
        'p' => T(if am { "AM" } else { "PM" }.into()),
        'P' => T(if am { "am" } else { "pm" }.into()),
        'r' => T(format!(
            "{:02}:{:02}:{:02} {}",
            w.hour12,
            w.min,
            w.sec,
            if am { "AM" } else { "PM" }
        )),
        'R' => T(format!("{:02}:{:02}", w.hour, w.min)),
        's' => N(w.t - zone.0, 1, '0'),
        'S' => N(w.sec, 2, '0'),
        't' => T("\t".into()),
        'T' | 'X' => T(format!("{:02}:{:02}:{:02}", w.hour, w.min, w.sec)),
        'u' => N(if w.wday == 0 { 7 } else { w.wday }, 1, '0'),
        'U' => N((w.yday + 7 - w.wday) / 7, 2, '0'),
        'V' => N(w.iso_week, 2, '0'),
        'w' => N(w.wday, 1, '0'),
        'W' => N((w.yday + 7 - (w.wday + 6) % 7) / 7, 2, '0'),
        'y' => N(w.year.rem_euclid(100), 2, '0'),
        'Y' => N(w.year, 1, '0'),
        'z' => {
            let off = zone.0.abs();
            let sign = if zone.0 < 0 { '-' } else { '+' };
            T(format!("{sign}{:02}{:02}", off / 3600, off / 60 % 60))
        }
        'Z' => T(zone.1.clone()),
        '%' => T("%".into()),
        _ => return None,
    })
}

/// Appends a field with the flags of its conversion: `-` (no padding), `_` (spaces), `0`
/// (zeros) and a width.
fn push_time_field(out: &mut String, field: TimeField, pad: Option<char>, width: usize) {
    match field {
        TimeField::Number(v, natural, natural_pad) => {
            let digits = v.unsigned_abs().to_string();
            let sign = if v < 0 { "-" } else { "" };
            let (w, p) = match pad {
                Some('-') => (0, ' '),
                Some('_') => (width.max(natural), ' '),
                Some(_) => (width.max(natural), '0'),
                None => (width.max(natural), natural_pad),
            };
            let len = sign.len() + digits.len();
            let fill: String = std::iter::repeat_n(p, w.saturating_sub(len)).collect();
            if p == '0' {
                out.push_str(sign);
                out.push_str(&fill);
            } else {
                out.push_str(&fill);
                out.push_str(sign);
            }
            out.push_str(&digits);
        }
        TimeField::Text(text) => {
            let fill = if pad == Some('0') { '0' } else { ' ' };
            let n = width.saturating_sub(text.chars().count());
            out.extend(std::iter::repeat_n(fill, n));
            out.push_str(&text);
        }
    }
}

fn days_from_civil(year: i64) -> i64 {
    // Days from 1970-01-01 to January 1st of `year`.
    let y = year - 1;
    let leaps = |y: i64| y.div_euclid(4) - y.div_euclid(100) + y.div_euclid(400);
    365 * (year - 1970) + leaps(y) - leaps(1969)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(format: &str, args: &[&str]) -> Printf {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        printf_with_time(format, &args, 1_700_000_000, 1_600_000_000)
    }

    #[test]
    fn oversized_fields_are_reported_not_silently_cut() {
        let p = run("%999999999d", &["1"]);
        assert_eq!(p.too_large, Some(999_999_999));
        assert!(p.out.len() <= MAX_FIELD);
        let p = run("%.*s|%*d", &["99999999999", "x", "-5", "3"]);
        assert_eq!(p.too_large, Some(99_999_999_999));
        assert_eq!(run("%5d", &["1"]).too_large, None);
        assert_eq!(run("%5d", &["1"]).out, b"    1");
    }

    #[test]
    fn time_zones_from_posix_rules() {
        let at = |tz: &str| {
            let p = printf_in_zone("%(%H:%M %z %Z)T", &["0".to_string()], 0, 0, Some(tz));
            String::from_utf8(p.out).unwrap()
        };
        assert_eq!(at("JST-9"), "09:00 +0900 JST");
        assert_eq!(at("EST5EDT"), "19:00 -0500 EST");
        assert_eq!(at("<+0530>-5:30"), "05:30 +0530 +0530");
        assert_eq!(at("UTC"), "00:00 +0000 UTC");
        // `%s` counts from the epoch whatever the zone (bash 5.2: `TZ=JST-9 printf '%(%s)T' 0`).
        let p = printf_in_zone("%(%s %H)T", &["0".to_string()], 0, 0, Some("JST-9"));
        assert_eq!(p.out, b"0 09");
        // Zone names and full POSIX rules follow summer time (bash 5.2.15 on Debian 12).
        let may = |tz: &str| {
            let p = printf_in_zone(
                "%(%F %T %z %Z)T",
                &["1557978599".to_string()],
                0,
                0,
                Some(tz),
            );
            String::from_utf8(p.out).unwrap()
        };
        assert_eq!(may("Asia/Tokyo"), "2019-05-16 12:49:59 +0900 JST");
        assert_eq!(may("US/Eastern"), "2019-05-15 23:49:59 -0400 EDT");
        assert_eq!(may(":Portugal"), "2019-05-16 04:49:59 +0100 WEST");
        assert_eq!(
            may("CET-1CEST,M3.5.0,M10.5.0/3"),
            "2019-05-16 05:49:59 +0200 CEST"
        );
        assert_eq!(may("Nowhere/Land"), "2019-05-16 03:49:59 +0000 Nowhere");
    }

    fn out(format: &str, args: &[&str]) -> Vec<u8> {
        run(format, args).out
    }

    fn s(format: &str, args: &[&str]) -> String {
        String::from_utf8_lossy(&out(format, args)).into_owned()
    }

    // Every expected value below was printed by GNU bash 5.2.15 with LC_ALL=C.UTF-8.

    #[test]
    fn integers() {
        assert_eq!(
            s("%x %o %X %#x %#o\n", &["255", "8", "255", "255", "8"]),
            "ff 10 FF 0xff 010\n"
        );
        assert_eq!(
            s(
                "%5d|%-5d|%05d|%+d|% d|%.3d|%5.3d\n",
                &["42", "42", "42", "42", "42", "7", "7"]
            ),
            "   42|42   |00042|+42| 42|007|  007\n"
        );
        assert_eq!(s("%'d\n", &["1234567"]), "1234567\n");
        assert_eq!(s("%u\n", &["-1"]), "18446744073709551615\n");
        assert_eq!(s("%i|%i\n", &["010", "0x1F"]), "8|31\n");
        assert_eq!(s("%d %d %d\n", &["0x1f", "010", "'A"]), "31 8 65\n");
        assert_eq!(s("%d\n%d\n%d\n", &["'é", "'", "\"x"]), "233\n0\n120\n");
        assert_eq!(
            s("%#x|%#o|%#X|%#o\n", &["0", "0", "10", "8"]),
            "0|0|0XA|010\n"
        );
        assert_eq!(s("%-08d|%08.3d|\n", &["5", "5"]), "5       |     005|\n");
        assert_eq!(
            s("%*d|%-*d|%.*f\n", &["5", "1", "4", "2", "2", "3.14159"]),
            "    1|2   |3.14\n"
        );
        assert_eq!(
            s(
                "%ld %hd %lld %Lf %jd %zd %td %qd\n",
                &["1", "2", "3", "4.5", "5", "6", "7", "8"]
            ),
            "1 2 3 4.500000 5 6 7 8d\n"
        );
    }

    #[test]
    fn invalid_numbers() {
        let r = run("%d\n", &["abc"]);
        assert_eq!(
            (r.out, r.errors, r.status),
            (
                b"0\n".to_vec(),
                vec!["printf: abc: invalid number".to_string()],
                1
            )
        );
        let r = run("%d|\n", &["12abc"]);
        assert_eq!((r.out, r.status), (b"12|\n".to_vec(), 1));
        let r = run("%d\n", &["99999999999999999999"]);
        assert_eq!(r.out, b"9223372036854775807\n");
        assert_eq!(
            r.errors,
            ["printf: warning: 99999999999999999999: Numerical result out of range"]
        );
        assert_eq!(r.status, 0);
        assert_eq!(
            out("%d\n", &["-99999999999999999999"]),
            b"-9223372036854775808\n"
        );
        let r = run("%d|", &["  ", " 5", "+5", "-0x10", "0x", "08", "'", "-'a"]);
        assert_eq!(r.out, b"0|5|5|-16|0|0|0|0|");
        assert_eq!(
            r.errors,
            [
                "printf:   : invalid number",
                "printf: 0x: invalid hex number",
                "printf: 08: invalid octal number",
                "printf: -'a: invalid number",
            ]
        );
        assert_eq!(r.status, 1);
        let r = run("%d\n", &[" 12 "]);
        assert_eq!((r.out, r.status), (b"12\n".to_vec(), 1));
        let r = run("%d\n", &["1.5"]);
        assert_eq!((r.out, r.status), (b"1\n".to_vec(), 1));
        let r = run("%f\n", &["1.5x"]);
        assert_eq!((r.out, r.status), (b"1.500000\n".to_vec(), 1));
        let r = run("%f\n", &["abc"]);
        assert_eq!((r.out, r.status), (b"0.000000\n".to_vec(), 1));
    }

    #[test]
    fn floats() {
        assert_eq!(
            s(
                "%f %e %g %G %E %a\n",
                &["3.5", "1234.5", "0.0001", "1e20", "1", "1"]
            ),
            "3.500000 1.234500e+03 0.0001 1E+20 1.000000E+00 0x8p-3\n"
        );
        assert_eq!(
            s("%.0f %F %g\n", &["2.5", "1.5", "100000000"]),
            "2 1.500000 1e+08\n"
        );
        assert_eq!(
            s("%f|%e|%g|%f|%F\n", &["inf", "-inf", "nan", "-nan", "INF"]),
            "inf|-inf|nan|-nan|INF\n"
        );
        assert_eq!(
            s("%a|%a|%A|%.2a\n", &["3.5", "0", "255", "1"]),
            "0xep-2|0x0p+0|0XF.FP+4|0x8.00p-3\n"
        );
        assert_eq!(
            s("%#.3g|%#g|%#f|%#.0f|%#.0e\n", &["1", "2.5", "1", "1", "1"]),
            "1.00|2.50000|1.000000|1.|1.e+00\n"
        );
        assert_eq!(
            s(
                "%g|%g|%g|%g|%g|%g|%.3g|%.0g|%.10g\n",
                &[
                    "0.0001", "0.00001", "123456", "1234567", "1e100", "0", "3.14159", "0.5", "0.1"
                ]
            ),
            "0.0001|1e-05|123456|1.23457e+06|1e+100|0|3.14|0.5|0.1\n"
        );
        assert_eq!(
            s(
                "%010.3f|%-10.2e|%+.2f|% .1f|%08.2f|\n",
                &["3.14159", "1234.5", "2", "2", "-3.5"]
            ),
            "000003.142|1.23e+03  |+2.00| 2.0|-0003.50|\n"
        );
    }

    #[test]
    fn strings_and_reuse() {
        assert_eq!(s("%s|", &["a", "b", "c"]), "a|b|c|");
        assert_eq!(s("%s %s|", &["a", "b", "c"]), "a b|c |");
        assert_eq!(s("x\n", &["a", "b"]), "x\n");
        assert_eq!(s("%d %s|\n", &[]), "0 |\n");
        assert_eq!(s("%s %d\n", &["a", "1", "b"]), "a 1\nb 0\n");
        assert_eq!(
            out("%5.2s|%-5s|%.1s|\n", &["héllo", "ab", "é"]),
            b"   h\xc3|ab   |\xc3|\n"
        );
        assert_eq!(out("%c|%c|%c", &["héllo", "", "5"]), b"h|\0|5");
        assert_eq!(out("[%c]", &[]), b"[\0]");
        assert_eq!(
            s("%5c|%-3c|%.0s|%.s|%+5s|\n", &["a", "b", "xyz", "xyz", "x"]),
            "    a|b  |||    x|\n"
        );
        assert_eq!(s("%s\n", &["\\n"]), "\\n\n");
        assert_eq!(s("[%s][%d][%b]\n", &[]), "[][0][]\n");
    }

    #[test]
    fn format_errors() {
        let r = run("%y\n", &["1"]);
        assert_eq!((r.out.as_slice(), r.status), (&b""[..], 1));
        assert_eq!(r.errors, ["printf: `y': invalid format character"]);
        let r = run("a%yb%s\n", &["1"]);
        assert_eq!((r.out.as_slice(), r.status), (&b"a"[..], 1));
        let r = run("%%|%5%|\n", &[]);
        assert_eq!(r.out, b"%|");
        assert_eq!(r.errors, ["printf: `%': invalid format character"]);
        assert_eq!(s("a%zb\n", &["1"]), "a1\n");
        let r = run("a%", &[]);
        assert_eq!((r.out.as_slice(), r.status), (&b"a"[..], 1));
        assert_eq!(r.errors, ["printf: `%': missing format character"]);
        let r = run("a%5", &[]);
        assert_eq!(r.errors, ["printf: `%5': missing format character"]);
    }

    #[test]
    fn escapes() {
        let r = run(
            "\\101\\0101\\x41\\xZ|\\u00e9\\U0001F600\\e\\E|\\c|\\q\n",
            &[],
        );
        assert_eq!(
            r.out,
            b"A\x081A\\xZ|\xc3\xa9\xf0\x9f\x98\x80\x1b\x1b|\\c|\\q\n"
        );
        assert_eq!(r.errors, ["printf: missing hex digit for \\x"]);
        assert_eq!(r.status, 0);
        let r = run("\\u\\U|\\x|\\uZ\n", &[]);
        assert_eq!(r.out, b"\\u\\U|\\x|\\uZ\n");
        assert_eq!(r.errors.len(), 4);
        assert_eq!(
            out("\\ud800|\\U110000|\\", &[]),
            b"\xed\xa0\x80|\xf4\x90\x80\x80|\\"
        );
        let r = run(
            "%b|",
            &[
                "\\\"\\?\\q\\'\\a",
                "\\x41\\xg",
                "\\u00e9\\u",
                "\\0",
                "\\08",
                "\\1234",
            ],
        );
        assert_eq!(r.out, b"\\\"\\?\\q\\'\x07|A\\xg|\xc3\xa9\\u|\0|\08|S4|");
        assert_eq!(
            r.errors,
            [
                "printf: missing hex digit for \\x",
                "printf: missing unicode digit for \\u"
            ]
        );
        let r = run("%b|\n", &["a\\nb\\tc\\\\d\\0101\\101\\x41\\u00e9\\c", "zz"]);
        assert_eq!(r.out, b"a\nb\tc\\dAAA\xc3\xa9");
        assert_eq!(s("%5b|%.2b|\n", &["x\\ty", "abc"]), "  x\ty|ab|\n");
    }

    #[test]
    fn echo() {
        assert_eq!(
            echo_escapes("\\101|\\0101|\\x41|\\c|after"),
            (b"\\101|A|A|".to_vec(), true)
        );
        assert_eq!(echo_escapes("a\\cb"), (b"a".to_vec(), true));
        assert_eq!(
            echo_escapes("\\u00e9|\\e|\\E|\\q|\\'|\\\"|\\?|\\08|\\0|\\1"),
            (
                b"\xc3\xa9|\x1b|\x1b|\\q|\\'|\\\"|\\?|\08|\0|\\1".to_vec(),
                false
            )
        );
        assert_eq!(
            echo_escapes("\\xg|\\u|\\ud800|\\U110000|x\\"),
            (
                b"\\xg|\\u|\xed\xa0\x80|\xf4\x90\x80\x80|x\\".to_vec(),
                false
            )
        );
    }

    #[test]
    fn quoting() {
        let table = [
            ("", "''"),
            ("a b", "a\\ b"),
            ("it's", "it\\'s"),
            ("a\tb", "$'a\\tb'"),
            ("é", "é"),
            ("~x", "\\~x"),
            ("a~", "a~"),
            ("#a", "\\#a"),
            ("a#", "a#"),
            ("x=y", "x=y"),
            ("$HOME", "\\$HOME"),
            ("a*", "a\\*"),
            ("a,b", "a\\,b"),
            ("{a}", "\\{a\\}"),
            ("%+-./:=@_", "%+-./:=@_"),
            (
                "^!\"&'();<>?[\\]`|",
                "\\^\\!\\\"\\&\\'\\(\\)\\;\\<\\>\\?\\[\\\\\\]\\`\\|",
            ),
            ("\x01é", "$'\\001é'"),
            (
                "\x07\x08\x1b\x0c\n\r\t\x0b\\\x7f\x1b\"' a",
                "$'\\a\\b\\E\\f\\n\\r\\t\\v\\\\\\177\\E\"\\' a'",
            ),
        ];
        for (input, want) in table {
            assert_eq!(quote_q(input), want, "%q of {input:?}");
        }
        assert_eq!(s("%10q|%-6q|\n", &["a b", "x"]), "      a\\ b|x     |\n");
        assert_eq!(s("%.3q|%.3Q|\n", &["a b", "a b c"]), "a\\ |a\\ b|\n");
        assert_eq!(quote_single("it's"), "'it'\\''s'");
        assert_eq!(quote_single(""), "''");
        assert_eq!(quote_single("a\tb'c\x01"), "$'a\\tb\\'c\\001'");
        assert_eq!(quote_single("a b$`\\\""), "'a b$`\\\"'");
        assert_eq!(quote_single("é"), "'é'");
        assert_eq!(quote_single("a\nb"), "$'a\\nb'");
    }

    #[test]
    fn time() {
        let t = |f: &str, a: &[&str]| s(f, a);
        assert_eq!(
            t("%(%a %A %b %B %c|%C %d %D %e)T\n", &["1700000000"]),
            "Tue Tuesday Nov November Tue Nov 14 22:13:20 2023|20 14 11/14/23 14\n"
        );
        assert_eq!(
            t("%(%F %g %G %h %H %I %j %k %l)T\n", &["1700000000"]),
            "2023-11-14 23 2023 Nov 22 10 318 22 10\n"
        );
        assert_eq!(
            t("%(%m %M %p %P %r %R %s %S %T %u)T\n", &["1700000000"]),
            "11 13 PM pm 10:13:20 PM 22:13 1700000000 20 22:13:20 2\n"
        );
        assert_eq!(
            t("%(%U %V %w %W %x %X %y %Y %z %Z %%)T\n", &["1700000000"]),
            "46 46 2 46 11/14/23 22:13:20 23 2023 +0000 UTC %\n"
        );
        assert_eq!(
            t(
                "%(%G-%V %g %U %W %j)T\n",
                &["1704067199", "1609459200", "0", "-86400"]
            ),
            "2023-52 23 53 52 365\n2020-53 20 00 00 001\n1970-01 70 00 00 001\n1970-01 70 52 52 365\n"
        );
        assert_eq!(
            t("%(%n%t|%Ey|%Od|%-d|%_d|%10Y)T\n", &["1700000000"]),
            "\n\t|23|14|14|14|0000002023\n"
        );
        assert_eq!(
            t("%5(%H)T|%.1(%H)T|%(%Q)T\n", &["3600", "3600", "0"]),
            "   01|0|%Q\n"
        );
        assert_eq!(
            t("%(%s)T|%(%s)T|%(%s)T\n", &["", "-1", "-2"]),
            "1700000000|1700000000|1600000000\n"
        );
        assert_eq!(t("%(%s)T\n", &[]), "1700000000\n");
        let r = run("a%(x)d|", &[]);
        assert_eq!((r.out.as_slice(), r.status), (&b"a%(x)d|"[..], 0));
        assert_eq!(
            r.errors,
            ["printf: warning: `d': invalid time format specification"]
        );
        assert_eq!(t("a%(x", &[]), "a%(x");
        assert_eq!(t("%.*s|%*s|", &["-1", "abc", "-4", "x"]), "abc|x   |");
    }

    #[test]
    fn never_panics_on_odd_input() {
        for f in [
            "%",
            "%-",
            "%.",
            "%*",
            "%(",
            "%(x",
            "%(x)",
            "\\",
            "\\x",
            "\\u",
            "%999999999999999999999d",
            "%.*s",
            "%.-1s",
        ] {
            let _ = run(f, &["é", "-5", "'", "\"", "0x", "1e999999"]);
        }
        let _ = run("%a %e %g %f", &["1e-320", "1e308", "-0", "0x1.8p3"]);
        assert!(s("%a", &["1e-320"]).starts_with("0x"));
        assert_eq!(s("%g", &["0x1.8p3"]), "12");
    }
}
