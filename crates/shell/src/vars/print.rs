//! How variables print: `declare -p` lines (also `${x@A}` and `${x@a}`) and the lines of a
//! bare `set`. The builtins and the expansions that print variables share these.

use super::{
    ATTR_EXPORT, ATTR_INTEGER, ATTR_LOWER, ATTR_NAMEREF, ATTR_NOVALUE, ATTR_READONLY, ATTR_TRACE,
    ATTR_UPPER, Value, Var,
};
use crate::printf::{quote_double, quote_single, quote_unless};

/// A value in `declare -p` form: double quotes, or `$'...'` when it holds a control
/// character (scalars, array elements and keys alike).
fn decl_quote(s: &str) -> String {
    if crate::printf::needs_ansi_c(s) {
        quote_single(s)
    } else {
        quote_double(s)
    }
}

/// `${x@a}`: the attribute letters.
pub(crate) fn attr_letters(v: &Var) -> String {
    attr_flags(v).trim_start_matches('-').to_string()
}

/// `${x@A}`: a command that recreates the variable.
pub(crate) fn assignment_form(name: &str, v: &Var) -> String {
    let flags = attr_flags(v);
    match &v.value {
        Value::Str(s) if flags == "--" => format!("{name}={}", quote_single(s)),
        Value::Str(s) => format!("declare {flags} {name}={}", quote_single(s)),
        Value::Unset => format!("declare {flags} {name}"),
        _ => declare_line(name, v),
    }
}

fn attr_flags(v: &Var) -> String {
    let mut f = String::new();
    match v.value {
        Value::Indexed(_) => f.push('a'),
        Value::Assoc(_) => f.push('A'),
        _ => {}
    }
    for (bit, c) in [
        (ATTR_INTEGER, 'i'),
        (ATTR_NAMEREF, 'n'),
        (ATTR_READONLY, 'r'),
        (ATTR_TRACE, 't'),
        (ATTR_EXPORT, 'x'),
        (super::ATTR_CAPCASE, 'c'),
        (ATTR_LOWER, 'l'),
        (ATTR_UPPER, 'u'),
    ] {
        let case = v.attrs & super::ATTR_CAPCASE;
        let shown = match bit {
            super::ATTR_CAPCASE => case == bit,
            ATTR_LOWER | ATTR_UPPER => case == bit,
            _ => v.has(bit),
        };
        if shown {
            f.push(c);
        }
    }
    if f.is_empty() {
        "--".into()
    } else {
        format!("-{f}")
    }
}

pub(crate) fn declare_line(name: &str, v: &Var) -> String {
    let flags = attr_flags(v);
    match &v.value {
        Value::Unset => format!("declare {flags} {name}"),
        Value::Str(s) => format!("declare {flags} {name}={}", decl_quote(s)),
        Value::Indexed(_) | Value::Assoc(_) if v.has(ATTR_NOVALUE) => {
            format!("declare {flags} {name}")
        }
        Value::Indexed(m) => {
            let body: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("[{k}]={}", decl_quote(v)))
                .collect();
            format!("declare {flags} {name}=({})", body.join(" "))
        }
        Value::Assoc(m) => {
            let body: String = m
                .iter()
                .map(|(k, v)| format!("[{}]={} ", assoc_key(k), decl_quote(v)))
                .collect();
            format!("declare {flags} {name}=({body})")
        }
    }
}

pub(crate) fn assoc_key(k: &str) -> String {
    if k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !k.is_empty() {
        k.to_string()
    } else {
        decl_quote(k)
    }
}

/// A variable as a bare `set` lists it.
pub(crate) fn set_line(name: &str, v: &Var) -> String {
    match &v.value {
        Value::Str(s) => format!(
            "{name}={}\n",
            quote_unless(s, |c| {
                c.is_ascii_alphanumeric() || "_-./:,+@%=".contains(c)
            })
        ),
        Value::Indexed(m) => {
            let body: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("[{k}]={}", quote_double(v)))
                .collect();
            format!("{name}=({})\n", body.join(" "))
        }
        Value::Assoc(m) => {
            let body: String = m
                .iter()
                .map(|(k, v)| format!("[{}]={} ", assoc_key(k), quote_double(v)))
                .collect();
            format!("{name}=({body})\n")
        }
        Value::Unset => String::new(),
    }
}
