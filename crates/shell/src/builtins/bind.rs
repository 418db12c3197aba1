//! `bind`: lists, queries and changes readline's keymaps and variables (`crate::readline`).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::interp::{FlowResult, Interp};
use crate::readline::{
    Binding, Readline, defaults, invokers, key_name, keymap, quoted_keyseq, same_function,
    translate, untranslate,
};

const USAGE_ERR: i32 = 2;

impl Interp {
    fn readline(&self) -> &Readline {
        self.st.readline.as_deref().unwrap_or(&defaults().readline)
    }

    fn readline_mut(&mut self) -> &mut Readline {
        let rl = self
            .st
            .readline
            .get_or_insert_with(|| Arc::new(defaults().readline.clone()));
        Arc::make_mut(rl)
    }

    /// The keymap bind works on: `-m`'s, else the editing mode's.
    fn current_keymap(&self) -> (usize, &'static [u8]) {
        if self.st.opts.extra.contains("vi") {
            (2, b"")
        } else {
            (0, b"")
        }
    }

    /// The bindings of keymap `(map, prefix)`, their sequences seen under the prefix.
    fn bindings_of(&self, (map, prefix): (usize, &[u8])) -> Vec<(Vec<u8>, Binding)> {
        self.readline().maps[map]
            .iter()
            .filter_map(|(k, b)| {
                let rest = k.strip_prefix(prefix)?;
                (!rest.is_empty()).then(|| (rest.to_vec(), b.clone()))
            })
            .collect()
    }

    /// The sequences of keymap `km` bound to function `f` (`-p` asks for every function in
    /// turn: only the matching keys are copied).
    fn seqs_of(&self, (map, prefix): (usize, &[u8]), f: &str) -> Vec<Vec<u8>> {
        self.readline().maps[map]
            .iter()
            .filter(|(_, b)| matches!(b, Binding::Function(n) if same_function(n, f)))
            .filter_map(|(k, _)| k.strip_prefix(prefix).filter(|r| !r.is_empty()))
            .map(<[u8]>::to_vec)
            .collect()
    }

    fn set_binding(&mut self, (map, prefix): (usize, &[u8]), seq: &[u8], b: Option<Binding>) {
        let mut key = prefix.to_vec();
        key.extend_from_slice(seq);
        let m = &mut self.readline_mut().maps[map];
        match b {
            Some(b) => {
                m.insert(key, b);
            }
            None => {
                m.remove(&key);
            }
        }
    }

    /// One line of an inputrc (`bind`'s arguments, `bind -f`'s file): `set VAR VALUE`,
    /// `"keyseq": function` or `"keyseq": "macro"`, `keyname: function`.
    fn parse_and_bind(&mut self, km: (usize, &'static [u8]), line: &str) {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') || line.starts_with('$') {
            return;
        }
        if let Some(rest) = line
            .strip_prefix("set")
            .filter(|r| r.starts_with([' ', '\t']))
        {
            let mut words = rest.split_whitespace();
            let name = words.next().unwrap_or("");
            let value = words.next().unwrap_or("");
            let rl = self.readline_mut();
            match rl
                .vars
                .iter_mut()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
            {
                Some((k, v)) => {
                    *v = if *v == "on" || *v == "off" {
                        let on =
                            value.is_empty() || value.eq_ignore_ascii_case("on") || value == "1";
                        (if on { "on" } else { "off" }).to_string()
                    } else {
                        value.to_string()
                    };
                    // readline binds the closing brackets to a function of no name of its
                    // own while it blinks their matches (`bind -p` then lists them nowhere).
                    if k == "blink-matching-paren" {
                        let f = if v == "on" {
                            "insert-close"
                        } else {
                            "self-insert"
                        };
                        for map in [0, 2] {
                            for c in [b")", b"]", b"}"] {
                                rl.maps[map].insert(c.to_vec(), Binding::Function(f.into()));
                            }
                        }
                    }
                }
                None => self.err_raw(&format!("readline: {name}: unknown variable name\n")),
            }
            return;
        }
        let (seq, rest) = if line.starts_with('"') {
            match quoted_keyseq(line) {
                Some(x) => x,
                None => return,
            }
        } else {
            let Some((name, rest)) = line.split_once(':') else {
                return;
            };
            match key_name(name.trim()) {
                Some(c) => (vec![c], rest),
                None => return,
            }
        };
        let value = rest.trim_start().trim_start_matches(':').trim();
        let binding = if let Some(q) = value.chars().next().filter(|c| *c == '"' || *c == '\'') {
            let inner = value[1..].strip_suffix(q).unwrap_or(&value[1..]);
            Some(Binding::Macro(translate(inner)))
        } else {
            let name = value.split_whitespace().next().unwrap_or("");
            // An unknown function unbinds the key, as in readline.
            defaults()
                .functions
                .iter()
                .any(|f| f == name)
                .then(|| Binding::Function(name.to_string()))
        };
        if !seq.is_empty() {
            self.set_binding(km, &seq, binding);
        }
    }

    /// `bind [-lpsvPSVX] [-m keymap] [-f filename] [-q name] [-u name] [-r keyseq]
    /// [-x keyseq:shell-command] [keyseq:readline-function or readline-command]`.
    pub(super) fn b_bind(&mut self, args: &[String]) -> FlowResult {
        self.err("bind: warning: line editing not enabled");
        let mut flags = String::new();
        let mut with_arg: BTreeMap<char, String> = BTreeMap::new();
        let mut rest = args;
        while let Some(a) = rest.first() {
            if a == "--" {
                rest = &rest[1..];
                break;
            }
            if !a.starts_with('-') || a == "-" {
                break;
            }
            rest = &rest[1..];
            let chars: Vec<char> = a[1..].chars().collect();
            let mut k = 0;
            while k < chars.len() {
                let c = chars[k];
                match c {
                    'l' | 'p' | 'P' | 's' | 'S' | 'v' | 'V' | 'X' => flags.push(c),
                    'm' | 'f' | 'q' | 'u' | 'r' | 'x' => {
                        let joined: String = chars[k + 1..].iter().collect();
                        let value = if !joined.is_empty() {
                            joined
                        } else if let Some(next) = rest.first() {
                            rest = &rest[1..];
                            next.clone()
                        } else {
                            self.err(&format!("bind: -{c}: option requires an argument"));
                            self.usage("bind");
                            return Ok(USAGE_ERR);
                        };
                        with_arg.insert(c, value);
                        break;
                    }
                    _ => {
                        self.err(&format!("bind: -{c}: invalid option"));
                        self.usage("bind");
                        return Ok(USAGE_ERR);
                    }
                }
                k += 1;
            }
        }
        let km = match with_arg.get(&'m') {
            Some(name) => match keymap(name) {
                Some(km) => km,
                None => {
                    self.err(&format!("bind: `{name}': invalid keymap name"));
                    return Ok(1);
                }
            },
            None => self.current_keymap(),
        };
        let mut out = String::new();
        let mut status = 0;
        let functions = &defaults().functions;
        if flags.contains('l') {
            for f in functions {
                out.push_str(f);
                out.push('\n');
            }
        }
        for (flag, found_on) in [('p', None), ('P', Some("can be found on"))] {
            if !flags.contains(flag) {
                continue;
            }
            out.push('\n');
            for f in functions {
                let seqs = self.seqs_of(km, f);
                match found_on {
                    None if seqs.is_empty() => out.push_str(&format!("# {f} (not bound)\n")),
                    None => {
                        for s in &seqs {
                            out.push_str(&format!("\"{}\": {f}\n", untranslate(s)));
                        }
                    }
                    Some(_) if seqs.is_empty() => {
                        out.push_str(&format!("{f} is not bound to any keys\n"));
                    }
                    Some(words) => {
                        let refs: Vec<&Vec<u8>> = seqs.iter().collect();
                        out.push_str(&format!("{f} {words} {}", invokers(&refs, ".")));
                    }
                }
            }
        }
        for (flag, readable) in [('s', true), ('S', false)] {
            if !flags.contains(flag) {
                continue;
            }
            for (k, b) in self.bindings_of(km) {
                if let Binding::Macro(m) = b {
                    let (k, m) = (untranslate(&k), untranslate(&m));
                    out.push_str(&match readable {
                        true => format!("\"{k}\": \"{m}\"\n"),
                        false => format!("{k} outputs {m}\n"),
                    });
                }
            }
        }
        for (flag, readable) in [('v', true), ('V', false)] {
            if !flags.contains(flag) {
                continue;
            }
            for (k, v) in &self.readline().vars {
                out.push_str(&match readable {
                    true => format!("set {k} {v}\n"),
                    false => format!("{k} is set to `{v}'\n"),
                });
            }
        }
        if !out.is_empty() {
            let s = self.out_str(&std::mem::take(&mut out));
            if s != 0 {
                return Ok(s);
            }
        }
        if let Some(file) = with_arg.get(&'f').cloned() {
            let path = wasmsand_vfs::path::join(&self.st.cwd, &file);
            let read = self.rt.vfs.lock().read(&path).map(|d| d.to_vec());
            match read {
                Ok(data) => {
                    for line in String::from_utf8_lossy(&data).lines() {
                        self.parse_and_bind(km, line);
                    }
                }
                Err(e) => {
                    self.err(&format!(
                        "bind: {file}: cannot read: {}",
                        crate::error::strerror(e.errno)
                    ));
                    return Ok(1);
                }
            }
        }
        if let Some(f) = with_arg.get(&'q').cloned() {
            if !functions.contains(&f) {
                self.err(&format!("bind: `{f}': unknown function name"));
                return Ok(1);
            }
            let seqs = self.seqs_of(km, &f);
            if seqs.is_empty() {
                self.out_str(&format!("{f} is not bound to any keys.\n"));
                status = 1;
            } else {
                let refs: Vec<&Vec<u8>> = seqs.iter().collect();
                self.out_str(&format!("{f} can be invoked via {}", invokers(&refs, ".")));
            }
        }
        if let Some(f) = with_arg.get(&'u').cloned() {
            if !functions.contains(&f) {
                self.err(&format!("bind: `{f}': unknown function name"));
                return Ok(1);
            }
            for s in self.seqs_of(km, &f) {
                self.set_binding(km, &s, None);
            }
        }
        if let Some(seq) = with_arg.get(&'r') {
            let bytes = match quoted_keyseq(seq) {
                Some((b, _)) => b,
                None => translate(seq),
            };
            self.set_binding(km, &bytes, None);
        }
        if let Some(spec) = with_arg.get(&'x').cloned() {
            let Some((seq, rest)) = quoted_keyseq(spec.trim_start()) else {
                self.err(&format!(
                    "bind: {spec}: first non-whitespace character is not `\"'"
                ));
                return Ok(1);
            };
            let cmd = rest.trim_start().trim_start_matches(':').trim();
            let cmd = match cmd.chars().next() {
                Some(q @ ('"' | '\'')) => cmd[1..].strip_suffix(q).unwrap_or(&cmd[1..]),
                _ => cmd,
            };
            self.set_binding(km, &seq, Some(Binding::Command(cmd.to_string())));
        }
        if flags.contains('X') {
            for (k, b) in self.bindings_of(km) {
                if let Binding::Command(c) = b {
                    out.push_str(&format!("\"{}\": \"{c}\"\n", untranslate(&k)));
                }
            }
            let s = self.out_str(&out);
            if s != 0 {
                return Ok(s);
            }
        }
        for line in rest {
            self.parse_and_bind(km, line);
        }
        Ok(status)
    }
}
