//! Result rows in sqlite3's output modes, byte for byte as the shell prints them.

use std::io::Write;
use std::sync::Mutex;

static OUT: Mutex<Vec<u8>> = Mutex::new(Vec::new());

/// Buffered stdout (written out in 64 KiB pieces); a closed pipe ends the program quietly.
pub fn out(data: &[u8]) {
    let mut buf = OUT.lock().unwrap_or_else(|e| e.into_inner());
    buf.extend_from_slice(data);
    if buf.len() >= 1 << 16 {
        write_out(&buf);
        buf.clear();
    }
}

pub fn flush() {
    let mut buf = OUT.lock().unwrap_or_else(|e| e.into_inner());
    write_out(&buf);
    buf.clear();
}

fn write_out(data: &[u8]) {
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_all(data).and_then(|()| o.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("sqlite3: write error: {e}");
        std::process::exit(1);
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    List,
    Csv,
    Tabs,
    Json,
    Line,
    Column,
    Box,
    Table,
    Markdown,
    Quote,
    Insert,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Mode> {
        Some(match s {
            "list" => Mode::List,
            "csv" => Mode::Csv,
            "tabs" => Mode::Tabs,
            "json" => Mode::Json,
            "line" | "lines" => Mode::Line,
            "column" | "columns" => Mode::Column,
            "box" => Mode::Box,
            "table" => Mode::Table,
            "markdown" => Mode::Markdown,
            "quote" => Mode::Quote,
            "insert" => Mode::Insert,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::List => "list",
            Mode::Csv => "csv",
            Mode::Tabs => "tabs",
            Mode::Json => "json",
            Mode::Line => "line",
            Mode::Column => "column",
            Mode::Box => "box",
            Mode::Table => "table",
            Mode::Markdown => "markdown",
            Mode::Quote => "quote",
            Mode::Insert => "insert",
        }
    }

    /// Modes that size their columns from every row before printing any.
    pub fn columnar(self) -> bool {
        matches!(
            self,
            Mode::Column | Mode::Box | Mode::Table | Mode::Markdown
        )
    }
}

pub enum Value {
    Null,
    Int(String),
    Real(f64, String),
    Text(String),
    Blob(Vec<u8>),
}

pub struct Printer {
    pub mode: Mode,
    pub header: bool,
    pub col_sep: String,
    pub row_sep: String,
    pub null: String,
    pub insert_table: String,
}

impl Default for Printer {
    fn default() -> Self {
        Printer {
            mode: Mode::List,
            header: false,
            col_sep: "|".into(),
            row_sep: "\n".into(),
            null: String::new(),
            insert_table: "\"table\"".into(),
        }
    }
}

impl Printer {
    /// `dot`: set by `.mode` rather than an option; sqlite3's `.mode csv` ends rows with CRLF
    /// (RFC 4180) while `-csv` keeps `\n`.
    pub fn set_mode(&mut self, mode: Mode, dot: bool) {
        match mode {
            Mode::Csv => {
                self.col_sep = ",".into();
                self.row_sep = if dot { "\r\n" } else { "\n" }.into();
            }
            Mode::Tabs => self.col_sep = "\t".into(),
            Mode::List if self.col_sep == "," || self.col_sep == "\t" => {
                self.col_sep = "|".into();
                self.row_sep = "\n".into();
            }
            _ => {}
        }
        self.mode = mode;
    }

    fn text<'a>(&'a self, v: &'a Value) -> std::borrow::Cow<'a, str> {
        match v {
            Value::Null => self.null.as_str().into(),
            Value::Int(s) | Value::Real(_, s) | Value::Text(s) => s.as_str().into(),
            Value::Blob(b) => String::from_utf8_lossy(b),
        }
    }

    /// One row of a streaming mode; `n` rows came before it.
    pub fn row(&mut self, names: &[String], row: &[Value], n: usize) {
        let mut s = String::new();
        match self.mode {
            Mode::List | Mode::Tabs | Mode::Csv | Mode::Quote => {
                if n == 0 && self.header {
                    for (i, name) in names.iter().enumerate() {
                        if i > 0 {
                            s.push_str(&self.col_sep);
                        }
                        match self.mode {
                            Mode::Csv => self.csv(&mut s, Some(name)),
                            Mode::Quote => s.push_str(&sql_string(name)),
                            _ => s.push_str(name),
                        }
                    }
                    s.push_str(&self.row_sep);
                }
                for (i, v) in row.iter().enumerate() {
                    if i > 0 {
                        s.push_str(if self.mode == Mode::Quote {
                            ","
                        } else {
                            &self.col_sep
                        });
                    }
                    match self.mode {
                        Mode::Csv => {
                            let t = (!matches!(v, Value::Null)).then(|| self.text(v));
                            self.csv(&mut s, t.as_deref());
                        }
                        Mode::Quote => s.push_str(&sql_literal(v)),
                        _ => s.push_str(&self.text(v)),
                    }
                }
                s.push_str(&self.row_sep);
            }
            Mode::Insert => {
                s.push_str("INSERT INTO ");
                s.push_str(&self.insert_table);
                if self.header {
                    s.push('(');
                    s.push_str(&names.join(","));
                    s.push(')');
                }
                s.push_str(" VALUES(");
                for (i, v) in row.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    s.push_str(&sql_literal(v));
                }
                s.push_str(");\n");
            }
            Mode::Json => {
                s.push_str(if n == 0 { "[{" } else { ",\n{" });
                for (i, (name, v)) in names.iter().zip(row).enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    json_string(&mut s, name.as_bytes());
                    s.push(':');
                    match v {
                        Value::Null => s.push_str("null"),
                        Value::Int(t) => s.push_str(t),
                        Value::Real(r, _) => s.push_str(&real_literal(*r)),
                        Value::Text(t) => json_string(&mut s, t.as_bytes()),
                        Value::Blob(b) => json_string(&mut s, b),
                    }
                }
                s.push('}');
            }
            Mode::Line => {
                if n > 0 {
                    s.push_str(&self.row_sep);
                }
                let w = names.iter().map(|c| c.len()).max().unwrap_or(0).max(5);
                for (name, v) in names.iter().zip(row) {
                    s.push_str(&format!("{name:>w$} = {}", self.text(v)));
                    s.push_str(&self.row_sep);
                }
            }
            Mode::Column | Mode::Box | Mode::Table | Mode::Markdown => unreachable!(),
        }
        out(s.as_bytes());
    }

    /// After the last row of a streaming mode.
    pub fn end(&mut self, _names: &[String], _n: usize) {
        if self.mode == Mode::Json {
            out(b"]\n");
        }
    }

    fn csv(&self, s: &mut String, v: Option<&str>) {
        let Some(v) = v else {
            s.push_str(&self.null);
            return;
        };
        let needs = v.is_empty()
            || v.bytes().any(|b| b <= b' ' || b == b'"' || b == 0x7f)
            || (!self.col_sep.is_empty() && v.contains(self.col_sep.as_str()));
        if needs {
            s.push('"');
            s.push_str(&v.replace('"', "\"\""));
            s.push('"');
        } else {
            s.push_str(v);
        }
    }

    /// A whole result in a columnar mode.
    pub fn table(&mut self, names: &[String], rows: &[Vec<Value>]) {
        let cells: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|v| {
                        self.text(v)
                            .chars()
                            .map(|c| if c == '\n' || c == '\t' { ' ' } else { c })
                            .collect()
                    })
                    .collect()
            })
            .collect();
        let mut widths: Vec<usize> = names.iter().map(|n| width(n)).collect();
        for r in &cells {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(width(c));
            }
        }
        let pad = |s: &str, w: usize| format!("{s}{}", " ".repeat(w.saturating_sub(width(s))));
        let center = |s: &str, w: usize| {
            let extra = w.saturating_sub(width(s));
            format!(
                "{}{s}{}",
                " ".repeat(extra / 2),
                " ".repeat(extra - extra / 2)
            )
        };
        let mut s = String::new();
        match self.mode {
            Mode::Column => {
                let line = |s: &mut String, cells: Vec<String>| {
                    s.push_str(&cells.join("  "));
                    s.push('\n');
                };
                if self.header {
                    line(
                        &mut s,
                        names.iter().zip(&widths).map(|(n, w)| pad(n, *w)).collect(),
                    );
                    line(&mut s, widths.iter().map(|w| "-".repeat(*w)).collect());
                }
                for r in &cells {
                    line(
                        &mut s,
                        r.iter().zip(&widths).map(|(c, w)| pad(c, *w)).collect(),
                    );
                }
            }
            Mode::Markdown => {
                let line = |s: &mut String, cells: Vec<String>| {
                    s.push_str("| ");
                    s.push_str(&cells.join(" | "));
                    s.push_str(" |\n");
                };
                line(
                    &mut s,
                    names
                        .iter()
                        .zip(&widths)
                        .map(|(n, w)| center(n, *w))
                        .collect(),
                );
                s.push('|');
                for w in &widths {
                    s.push_str(&"-".repeat(w + 2));
                    s.push('|');
                }
                s.push('\n');
                for r in &cells {
                    line(
                        &mut s,
                        r.iter().zip(&widths).map(|(c, w)| pad(c, *w)).collect(),
                    );
                }
            }
            Mode::Table | Mode::Box => {
                let bx = self.mode == Mode::Box;
                let (h, v) = if bx { ("─", "│") } else { ("-", "|") };
                let rule = |s: &mut String, l: &str, m: &str, r: &str| {
                    s.push_str(l);
                    for (i, w) in widths.iter().enumerate() {
                        if i > 0 {
                            s.push_str(m);
                        }
                        s.push_str(&h.repeat(w + 2));
                    }
                    s.push_str(r);
                    s.push('\n');
                };
                let line = |s: &mut String, cells: Vec<String>| {
                    s.push_str(v);
                    s.push(' ');
                    s.push_str(&cells.join(&format!(" {v} ")));
                    s.push(' ');
                    s.push_str(v);
                    s.push('\n');
                };
                if bx {
                    rule(&mut s, "┌", "┬", "┐");
                } else {
                    rule(&mut s, "+", "+", "+");
                }
                line(
                    &mut s,
                    names
                        .iter()
                        .zip(&widths)
                        .map(|(n, w)| center(n, *w))
                        .collect(),
                );
                if bx {
                    rule(&mut s, "├", "┼", "┤");
                } else {
                    rule(&mut s, "+", "+", "+");
                }
                for r in &cells {
                    line(
                        &mut s,
                        r.iter().zip(&widths).map(|(c, w)| pad(c, *w)).collect(),
                    );
                }
                if bx {
                    rule(&mut s, "└", "┴", "┘");
                } else {
                    rule(&mut s, "+", "+", "+");
                }
            }
            _ => unreachable!(),
        }
        out(s.as_bytes());
    }
}

fn width(s: &str) -> usize {
    s.chars().count()
}

fn sql_string(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn sql_literal(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Int(t) => t.clone(),
        Value::Real(r, _) => real_literal(*r),
        Value::Text(t) => sql_string(t),
        Value::Blob(b) => {
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            format!("X'{hex}'")
        }
    }
}

/// A REAL as sqlite3's quote/insert/json modes write it: integral values as `N.0`, others
/// with SQLite's own `%!.20g`, infinities as `1e999`.
fn real_literal(r: f64) -> String {
    if r == f64::INFINITY {
        return "1e999".into();
    }
    if r == f64::NEG_INFINITY {
        return "-1e999".into();
    }
    if r.fract() == 0.0 && r.abs() < 9.2e18 {
        return format!("{}.0", r as i64);
    }
    g20(r)
}

/// C's `%!.20g` as sqlite3 3.40 prints it: 20 significant digits from the exact decimal value,
/// trailing zeros dropped but one digit kept after the point.
fn g20(r: f64) -> String {
    let e = format!("{r:.19e}");
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (neg, mant) = match mant.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mant),
    };
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    if !(-4..20).contains(&exp) {
        s.push_str(&digits[..1]);
        s.push('.');
        s.push_str(if digits.len() > 1 { &digits[1..] } else { "0" });
        s.push_str(&format!(
            "e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        ));
    } else if exp < 0 {
        s.push_str("0.");
        s.push_str(&"0".repeat((-exp - 1) as usize));
        s.push_str(digits);
    } else {
        let point = exp as usize + 1;
        if digits.len() > point {
            s.push_str(&digits[..point]);
            s.push('.');
            s.push_str(&digits[point..]);
        } else {
            s.push_str(digits);
            s.push_str(&"0".repeat(point - digits.len()));
            s.push_str(".0");
        }
    }
    s
}

fn json_string(s: &mut String, bytes: &[u8]) {
    s.push('"');
    for ch in String::from_utf8_lossy(bytes).chars() {
        match ch {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\u{8}' => s.push_str("\\b"),
            '\u{c}' => s.push_str("\\f"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            c if (c as u32) < 0x20 => s.push_str(&format!("\\u{:04x}", c as u32)),
            c => s.push(c),
        }
    }
    s.push('"');
}
