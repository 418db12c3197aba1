//! Shell options: `set` (also the variable listing of a bare `set`) and `shopt`.

use crate::interp::Interp;
use crate::options::{SET_OPTIONS, SHOPT_OPTIONS, option_letter};
use crate::vars::print::set_line;
use crate::vars::{Value, Var};

impl Interp {
    pub(crate) fn option_value(&self, name: &str) -> Option<bool> {
        let o = &self.st.opts;
        Some(match name {
            "errexit" => o.errexit,
            "nounset" => o.nounset,
            "pipefail" => o.pipefail,
            "xtrace" => o.xtrace,
            "noglob" => o.noglob,
            "noclobber" => o.noclobber,
            "allexport" => o.allexport,
            "noexec" => o.noexec,
            "errtrace" => o.errtrace,
            "functrace" => o.functrace,
            n if SET_OPTIONS.contains(&n) => o.extra.contains(n),
            _ => return None,
        })
    }

    pub(crate) fn set_option(&mut self, name: &str, on: bool) -> bool {
        let o = &mut self.st.opts;
        match name {
            "errexit" => o.errexit = on,
            "nounset" => o.nounset = on,
            "pipefail" => o.pipefail = on,
            "xtrace" => o.xtrace = on,
            "noglob" => o.noglob = on,
            "noclobber" => o.noclobber = on,
            "allexport" => o.allexport = on,
            "noexec" => o.noexec = on,
            "errtrace" => o.errtrace = on,
            "functrace" => o.functrace = on,
            n if SET_OPTIONS.contains(&n) => {
                if on {
                    // One line-editing mode at a time: turning one on turns the other off.
                    match n {
                        "vi" => o.extra.remove("emacs"),
                        "emacs" => o.extra.remove("vi"),
                        _ => false,
                    };
                    o.extra.insert(n.to_string());
                } else {
                    o.extra.remove(n);
                }
            }
            _ => return false,
        }
        self.sync_exported_option_vars();
        true
    }

    /// Keeps an exported `SHELLOPTS`/`BASHOPTS` current, since programs see it at once.
    fn sync_exported_option_vars(&mut self) {
        let exported = ["SHELLOPTS", "BASHOPTS"].iter().any(|n| {
            self.st
                .vars
                .get(n)
                .is_some_and(|v| v.has(crate::vars::ATTR_EXPORT))
        });
        if exported {
            self.sync_option_vars();
        }
    }

    /// `shopt` options: the ones the shell models, then the rest as plain flags.
    pub(crate) fn shopt_value(&self, name: &str) -> Option<bool> {
        let o = &self.st.opts;
        Some(match name {
            "nullglob" => o.nullglob,
            "dotglob" => o.dotglob,
            "failglob" => o.failglob,
            "nocaseglob" => o.nocaseglob,
            "nocasematch" => o.nocasematch,
            "expand_aliases" => o.expand_aliases,
            "lastpipe" => o.lastpipe,
            "extdebug" => o.extdebug,
            n if SHOPT_OPTIONS.iter().any(|(k, _)| *k == n) => o.extra.contains(n),
            _ => return None,
        })
    }

    pub(crate) fn set_shopt(&mut self, name: &str, on: bool) -> bool {
        let o = &mut self.st.opts;
        let slot = match name {
            "nullglob" => &mut o.nullglob,
            "dotglob" => &mut o.dotglob,
            "failglob" => &mut o.failglob,
            "nocaseglob" => &mut o.nocaseglob,
            "nocasematch" => &mut o.nocasematch,
            "expand_aliases" => &mut o.expand_aliases,
            "lastpipe" => &mut o.lastpipe,
            // As in bash, extdebug turns function and error tracing on and off with it.
            "extdebug" => {
                o.extdebug = on;
                o.functrace = on;
                o.errtrace = on;
                if on {
                    self.init_bash_argv();
                }
                self.sync_exported_option_vars();
                return true;
            }
            n if SHOPT_OPTIONS.iter().any(|(k, _)| *k == n) => {
                if on {
                    o.extra.insert(n.to_string());
                } else {
                    o.extra.remove(n);
                }
                return true;
            }
            _ => return false,
        };
        *slot = on;
        self.sync_exported_option_vars();
        true
    }

    /// Stores `$SHELLOPTS` and `$BASHOPTS` as the readonly variables bash has, so that they
    /// exist for `test -v`, refuse assignment and list with their current value. Reads go
    /// through `get_var`, which computes them afresh.
    pub(crate) fn sync_option_vars(&mut self) {
        for (name, value) in [
            ("SHELLOPTS", self.shellopts()),
            ("BASHOPTS", self.bashopts()),
        ] {
            // `export SHELLOPTS` stays exported, with the value kept current. Unchanged (as
            // at the start of most runs), it is left as it is: a put copies the map's path.
            let current = self.st.vars.get(name);
            if let Some(v) = current
                && v.attrs & crate::vars::ATTR_READONLY != 0
                && matches!(&v.value, Value::Str(s) if *s == value)
            {
                continue;
            }
            let attrs = current.map_or(0, |v| v.attrs);
            self.st.vars.put(
                name,
                Var {
                    value: Value::Str(value),
                    attrs: attrs | crate::vars::ATTR_READONLY,
                },
            );
        }
    }

    /// `$SHELLOPTS`: the `set -o` options that are on.
    pub(crate) fn shellopts(&self) -> String {
        SET_OPTIONS
            .iter()
            .filter(|n| self.option_value(n) == Some(true))
            .copied()
            .collect::<Vec<_>>()
            .join(":")
    }

    /// `$BASHOPTS`: the `shopt` options that are on.
    pub(crate) fn bashopts(&self) -> String {
        SHOPT_OPTIONS
            .iter()
            .filter(|(n, _)| self.shopt_value(n) == Some(true))
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(":")
    }

    pub(super) fn b_set(&mut self, args: &[String]) -> i32 {
        if args.is_empty() {
            self.sync_option_vars();
            let mut text = String::new();
            for n in self.st.vars.names() {
                if let Some(v) = self.st.vars.get(&n)
                    && !matches!(v.value, Value::Unset)
                {
                    text.push_str(&set_line(&n, v));
                }
            }
            return self.out_str(&text);
        }
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            if a == "--" {
                self.st.positional = args[i + 1..].to_vec();
                return 0;
            }
            if a == "-" {
                self.st.opts.xtrace = false;
                self.st.opts.extra.remove("verbose");
                if i + 1 < args.len() {
                    self.st.positional = args[i + 1..].to_vec();
                }
                return 0;
            }
            // A lone `+` is an option word without letters: option parsing goes on after it
            // (`set + -` changes nothing).
            if a == "+" {
                i += 1;
                continue;
            }
            let on = a.starts_with('-');
            if !(on || a.starts_with('+')) || a.len() < 2 {
                self.st.positional = args[i..].to_vec();
                return 0;
            }
            for c in a[1..].chars() {
                let name = match c {
                    'o' => {
                        i += 1;
                        match args.get(i) {
                            Some(n) => {
                                if !self.set_option(n, on) {
                                    self.err(&format!("set: {n}: invalid option name"));
                                    return 2;
                                }
                            }
                            None => {
                                let text = self.options_listing(on);
                                return self.out_str(&text);
                            }
                        }
                        continue;
                    }
                    c => match option_letter(c) {
                        Some(name) => name,
                        None => {
                            self.err(&format!("set: {}{c}: invalid option", &a[..1]));
                            return 2;
                        }
                    },
                };
                self.set_option(name, on);
            }
            i += 1;
        }
        0
    }

    fn options_listing(&self, dash: bool) -> String {
        let mut s = String::new();
        for n in SET_OPTIONS {
            let v = self.option_value(n).unwrap_or(false);
            if dash {
                s.push_str(&format!("{n:<15}\t{}\n", if v { "on" } else { "off" }));
            } else {
                s.push_str(&format!("set {}o {n}\n", if v { '-' } else { '+' }));
            }
        }
        s
    }

    pub(super) fn b_shopt(&mut self, args: &[String]) -> i32 {
        let (flags, names) = match self.short_options("shopt", args, "suqpo") {
            Ok(split) => split,
            Err(status) => return status,
        };
        // The last of -s and -u wins.
        let mode = flags.iter().rev().find_map(|c| match c {
            's' => Some(true),
            'u' => Some(false),
            _ => None,
        });
        let quiet = flags.contains(&'q');
        let print = flags.contains(&'p');
        let set_o = flags.contains(&'o');
        let names = names.to_vec();
        let all: Vec<String> = if set_o {
            SET_OPTIONS.iter().map(|s| s.to_string()).collect()
        } else {
            SHOPT_OPTIONS.iter().map(|(s, _)| s.to_string()).collect()
        };
        let listing = names.is_empty();
        let targets = if listing { all } else { names };
        let mut status = 0;
        let mut text = String::new();
        for n in &targets {
            let current = if set_o {
                self.option_value(n)
            } else {
                self.shopt_value(n)
            };
            let Some(v) = current else {
                self.err(&format!("shopt: {n}: invalid shell option name"));
                status = 1;
                continue;
            };
            match mode {
                Some(m) if !listing => {
                    if set_o {
                        self.set_option(n, m);
                    } else {
                        self.set_shopt(n, m);
                    }
                }
                Some(m) => {
                    // `shopt -s` alone lists the options that are on.
                    if v == m {
                        text.push_str(&shopt_line(n, v, print, set_o));
                    }
                }
                None => {
                    if !v {
                        status = 1;
                    }
                    text.push_str(&shopt_line(n, v, print, set_o));
                }
            }
        }
        if listing {
            status = 0;
        }
        if !quiet && !text.is_empty() {
            let s = self.out_str(&text);
            if s != 0 {
                return s;
            }
        }
        status
    }
}

fn shopt_line(n: &str, v: bool, print: bool, set_o: bool) -> String {
    match (print, set_o) {
        (true, true) => format!("set {}o {n}\n", if v { '-' } else { '+' }),
        (true, false) => format!("shopt {} {n}\n", if v { "-s" } else { "-u" }),
        _ => format!("{n:<15}\t{}\n", if v { "on" } else { "off" }),
    }
}
