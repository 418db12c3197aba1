//! `echo`, `printf`, `read` and `mapfile`/`readarray`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::error::ShellError;
use crate::interp::{Fd, FlowResult, InSrc, Interp};
use crate::printf::echo_escapes;
use crate::vars::{ATTR_READONLY, Value, Var, is_valid_name};

impl Interp {
    pub(super) fn b_echo(&mut self, args: &[String]) -> i32 {
        let mut newline = true;
        let mut escapes = false;
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            if a.len() < 2 || !a.starts_with('-') || !a[1..].chars().all(|c| "neE".contains(c)) {
                break;
            }
            for c in a[1..].chars() {
                match c {
                    'n' => newline = false,
                    'e' => escapes = true,
                    _ => escapes = false,
                }
            }
            i += 1;
        }
        let mut out = Vec::new();
        for (j, a) in args[i..].iter().enumerate() {
            if j > 0 {
                out.push(b' ');
            }
            if escapes {
                let (bytes, stop) = echo_escapes(a);
                out.extend_from_slice(&bytes);
                if stop {
                    return match self.out(&out) {
                        Ok(()) => 0,
                        Err(s) => s,
                    };
                }
            } else {
                wasmsand_exec::raw::encode_into(a, &mut out);
            }
        }
        if newline {
            out.push(b'\n');
        }
        match self.out(&out) {
            Ok(()) => 0,
            Err(s) => s,
        }
    }

    pub(super) fn b_printf(&mut self, args: &[String]) -> FlowResult {
        let mut args = args;
        let mut var = None;
        // `-vNAME` is `-v NAME`.
        let attached: Vec<String>;
        if let Some(first) = args.first()
            && let Some(name) = first.strip_prefix("-v")
            && !name.is_empty()
        {
            attached = [vec!["-v".to_string(), name.to_string()], args[1..].to_vec()].concat();
            args = &attached;
        }
        if args.first().map(String::as_str) == Some("-v") {
            match args.get(1) {
                Some(v) => {
                    let base = v.split('[').next().unwrap_or("");
                    if !is_valid_name(base) || (v.contains('[') && !v.ends_with(']')) {
                        self.err(&format!("printf: `{v}': not a valid identifier"));
                        return Ok(2);
                    }
                    var = Some(v.clone());
                    args = &args[2..];
                }
                None => {
                    self.err("printf: -v: option requires an argument");
                    self.usage("printf");
                    return Ok(2);
                }
            }
        }
        if args.first().map(String::as_str) == Some("--") {
            args = &args[1..];
        } else if let Some(a) = args.first()
            && a.starts_with('-')
            && a.len() > 1
        {
            self.err(&format!("printf: {}: invalid option", &a[..2]));
            self.usage("printf");
            return Ok(2);
        }
        let Some(fmt) = args.first() else {
            // Only the usage line, with no "bash: line N:" before it, as bash.
            self.usage("printf");
            return Ok(2);
        };
        let now = (crate::interp::wall_clock_ns(&self.rt.vfs) / 1_000_000_000) as i64;
        let start = now - self.rt.started.elapsed().as_secs() as i64;
        let tz = self.clock_zone();
        let p = crate::printf::printf_in_zone(fmt, &args[1..], now, start, tz.as_deref());
        // Output before a diagnostic goes out before it, as bash's does; to a variable, none.
        let mut written = 0;
        for (e, &at) in p.errors.iter().zip(&p.error_at) {
            if var.is_none() && at > written {
                if let Err(s) = self.out(&p.out[written..at]) {
                    return Ok(s);
                }
                written = at;
            }
            self.err(e);
        }
        if let Some(n) = p.too_large {
            return Err(self.limit(format!(
                "printf: field width or precision too large ({n}, limit: {} bytes)",
                crate::printf::MAX_FIELD
            )));
        }
        let status = match var {
            Some(v) => {
                // A variable ends at a NUL byte, as a C string does in bash.
                let end = p.out.iter().position(|&b| b == 0).unwrap_or(p.out.len());
                let text = wasmsand_exec::raw::decode(&p.out[..end]);
                if let Err(m) = self.assign_named(&v, text) {
                    self.err(&format!("printf: {m}"));
                    return Ok(1);
                }
                p.status
            }
            None => match self.out(&p.out[written..]) {
                Ok(()) => p.status,
                Err(s) => s,
            },
        };
        Ok(status)
    }

    fn read_byte_by(&mut self, fd: u32, deadline: Instant) -> FlowResult<Result<Option<u8>, ()>> {
        let mut b = [0u8; 1];
        if let Some(Fd::In(InSrc::Pipe(p))) = self.fds.get(fd).cloned() {
            let until = match self.rt.deadline() {
                Some(d) if d < deadline => d,
                _ => deadline,
            };
            return match p.read_until(&mut b, until) {
                Ok(0) => Ok(Ok(None)),
                Ok(_) => Ok(Ok(Some(b[0]))),
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                    self.check()?;
                    Ok(Err(()))
                }
                Err(_) => {
                    self.check()?;
                    Ok(Ok(None))
                }
            };
        }
        Ok(Ok(self.read_byte(fd)?))
    }

    /// Reads one byte from descriptor `fd`; `None` at end of input.
    /// The descriptor of `read -u` / `mapfile -u`: a number of an open descriptor, else
    /// bash's message and status 1.
    fn input_fd(&mut self, name: &str, value: &str) -> Result<u32, i32> {
        let Ok(fd) = value.parse::<u32>() else {
            self.err(&format!(
                "{name}: {value}: invalid file descriptor specification"
            ));
            return Err(1);
        };
        if self.fds.get(fd).is_none() {
            self.err(&format!(
                "{name}: {fd}: invalid file descriptor: Bad file descriptor"
            ));
            return Err(1);
        }
        Ok(fd)
    }

    /// Everything left on input descriptor `fd` (what `source /dev/stdin` runs), up to the
    /// word limit.
    pub(crate) fn read_fd_to_end(&mut self, fd: u32, what: &str) -> FlowResult<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match self.fds.get(fd).cloned() {
                Some(Fd::In(InSrc::Pipe(p))) => match p.read(&mut buf) {
                    Ok(n) => n,
                    Err(_) => {
                        self.check()?;
                        0
                    }
                },
                Some(Fd::In(InSrc::File(f))) => f.read(&mut buf).unwrap_or(0),
                Some(Fd::In(InSrc::Bytes(c))) => {
                    let mut g = c.lock();
                    let (data, pos) = &mut *g;
                    let rest = &data[(*pos).min(data.len())..];
                    out.extend_from_slice(rest);
                    *pos = data.len();
                    0
                }
                _ => 0,
            };
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
            self.check_size(out.len(), what)?;
        }
        self.check_size(out.len(), what)?;
        Ok(out)
    }

    pub(crate) fn read_byte(&mut self, fd: u32) -> FlowResult<Option<u8>> {
        let mut b = [0u8; 1];
        match self.fds.get(fd).cloned() {
            Some(Fd::In(InSrc::Pipe(p))) => match p.read(&mut b) {
                Ok(0) => Ok(None),
                Ok(_) => Ok(Some(b[0])),
                Err(_) => {
                    self.check()?;
                    Ok(None)
                }
            },
            Some(Fd::In(InSrc::File(f))) => match f.read(&mut b) {
                Ok(0) | Err(_) => Ok(None),
                Ok(_) => Ok(Some(b[0])),
            },
            Some(Fd::In(InSrc::Bytes(c))) => {
                let mut g = c.lock();
                let pos = g.1;
                if pos < g.0.len() {
                    g.1 += 1;
                    Ok(Some(g.0[pos]))
                } else {
                    Ok(None)
                }
            }
            _ => Ok(None),
        }
    }

    pub(super) fn b_read(&mut self, args: &[String]) -> FlowResult {
        let o = match self.read_options(args) {
            Ok(o) => o,
            Err(status) => return Ok(status),
        };
        if let Some(p) = &o.prompt {
            let _ = self.write_fd(2, &wasmsand_exec::raw::encode(p));
        }
        if o.timeout == Some(0.0) {
            let ready = match self.fds.get(o.fd) {
                Some(Fd::In(InSrc::Bytes(_) | InSrc::File(_) | InSrc::Empty)) => true,
                Some(Fd::In(InSrc::Pipe(p))) => p.ready(),
                _ => false,
            };
            return Ok(if ready { 0 } else { 1 });
        }
        let Some(line) = self.read_line_for(&o)? else {
            return Ok(142);
        };
        self.read_store(&o, line)
    }

    /// `read`'s options, and the names after them; `Err` is the status of a usage error.
    fn read_options(&mut self, args: &[String]) -> Result<ReadOptions, i32> {
        let mut o = ReadOptions {
            delim: b'\n',
            ..ReadOptions::default()
        };
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            if !a.starts_with('-') || a == "-" || !o.names.is_empty() {
                o.names.push(a.clone());
                i += 1;
                continue;
            }
            if a == "--" {
                o.names.extend(args[i + 1..].iter().cloned());
                break;
            }
            let mut chars = a[1..].chars();
            while let Some(c) = chars.next() {
                let mut value = || -> Option<String> {
                    let rest: String = chars.by_ref().collect();
                    if !rest.is_empty() {
                        Some(rest)
                    } else {
                        i += 1;
                        args.get(i).cloned()
                    }
                };
                if !matches!(
                    c,
                    'r' | 's' | 'e' | 'p' | 'a' | 'd' | 'n' | 'N' | 't' | 'u' | 'i'
                ) {
                    self.err(&format!("read: -{c}: invalid option"));
                    self.usage("read");
                    return Err(2);
                }
                if matches!(c, 'r' | 's' | 'e') {
                    o.raw |= c == 'r';
                    continue;
                }
                let Some(v) = value() else {
                    self.err(&format!("read: -{c}: option requires an argument"));
                    self.usage("read");
                    return Err(2);
                };
                // A bad count or timeout fails before anything is read (status 1), as in
                // bash: the input stays for whoever reads next.
                let number = |me: &mut Interp, v: &str| match v.parse::<usize>() {
                    Ok(n) => Ok(n),
                    Err(_) => {
                        me.err(&format!("read: {v}: invalid number"));
                        Err(1)
                    }
                };
                match c {
                    'p' => o.prompt = Some(v),
                    'a' => o.array = Some(v),
                    'd' => o.delim = v.bytes().next().unwrap_or(0),
                    'n' => o.nchars = Some(number(self, &v)?),
                    'N' => {
                        o.nchars = Some(number(self, &v)?);
                        o.exact = true;
                    }
                    't' => match v.parse::<f64>() {
                        Ok(t) if t >= 0.0 && t.is_finite() => o.timeout = Some(t),
                        _ => {
                            self.err(&format!("read: {v}: invalid timeout specification"));
                            return Err(1);
                        }
                    },
                    'u' => o.fd = self.input_fd("read", &v)?,
                    // `-i text` only matters to readline (`-e`), which has no terminal here.
                    _ => {}
                }
            }
            i += 1;
        }
        Ok(o)
    }

    /// One line of standard input as `read` reads it (backslashes escape), for `select`;
    /// `None` at the end of input with nothing read.
    pub(crate) fn read_reply(&mut self) -> FlowResult<Option<String>> {
        let o = ReadOptions {
            raw: false,
            prompt: None,
            array: None,
            delim: b'\n',
            nchars: None,
            exact: false,
            fd: 0,
            timeout: None,
            names: Vec::new(),
        };
        let line = self.read_line_for(&o)?.unwrap_or_default();
        if !line.got_delim && line.buf.is_empty() {
            return Ok(None);
        }
        Ok(Some(wasmsand_exec::raw::decode(&line.buf)))
    }

    /// Reads up to the delimiter, the end of input or `-n`/`-N` characters; `None` when `-t`'s
    /// time ran out first.
    fn read_line_for(&mut self, o: &ReadOptions) -> FlowResult<Option<ReadLine>> {
        let deadline = o
            .timeout
            .map(|t| Instant::now() + Duration::from_secs_f64(t.max(0.0)));
        let mut line = ReadLine::default();
        let max = self.st.limits.max_word_bytes;
        loop {
            if let Some(n) = o.nchars
                && line.count >= n
            {
                break;
            }
            let next = match deadline {
                Some(d) => match self.read_byte_by(o.fd, d)? {
                    Ok(b) => b,
                    Err(()) => return Ok(None),
                },
                None => self.read_byte(o.fd)?,
            };
            let Some(b) = next else {
                break;
            };
            if b == o.delim && !o.exact {
                line.got_delim = true;
                break;
            }
            if b == 0 {
                // bash strings cannot hold NUL: `read` drops it.
                continue;
            }
            if b == b'\\' && !o.raw {
                match self.read_byte(o.fd)? {
                    Some(b'\n') => continue,
                    Some(n) => {
                        line.buf.push(n);
                        line.escaped.push(true);
                        line.count += 1;
                        continue;
                    }
                    None => break,
                }
            }
            line.buf.push(b);
            line.escaped.push(false);
            line.count += 1;
            if line.buf.len() > max {
                return Err(self.limit(format!("read: line too long (limit: {max} bytes)")));
            }
        }
        Ok(Some(line))
    }

    /// Splits what `read` read by `IFS` into the array or the names (or `REPLY`); the status:
    /// 1 when the input ended before the delimiter, even when some text was read.
    fn read_store(&mut self, o: &ReadOptions, line: ReadLine) -> FlowResult {
        let at_eof = !line.got_delim && o.nchars.is_none_or(|n| line.count < n);
        let text = wasmsand_exec::raw::decode(&line.buf);
        let ifs = self.get_var("IFS").unwrap_or_else(|| " \t\n".into());
        let status = i32::from(at_eof);
        let esc = escaped_chars(&text, &line.buf, &line.escaped);
        if let Some(arr) = &o.array {
            // `-N` reads one unsplit element.
            let fields = if o.exact {
                vec![text]
            } else {
                split_read(&text, &esc, &ifs, usize::MAX)
            };
            let items = fields.into_iter().map(|f| (None, f)).collect();
            if let Err(m) = self.assign_array_fresh(arr, items) {
                self.err(&format!("read: {m}"));
                return Ok(1);
            }
            return Ok(status);
        }
        if o.names.is_empty() {
            // REPLY keeps the line as read, without IFS trimming.
            if let Err(m) = self.set_var("REPLY", text) {
                self.err(&format!("read: {m}"));
                return Ok(1);
            }
            return Ok(status);
        }
        // `-N`: the characters as read go to the first name, unsplit and untrimmed.
        let fields = if o.exact {
            vec![text]
        } else {
            split_read(&text, &esc, &ifs, o.names.len())
        };
        for (k, n) in o.names.iter().enumerate() {
            if !is_valid_name(n) {
                self.err(&format!("read: `{n}': not a valid identifier"));
                return Ok(1);
            }
            let v = fields.get(k).cloned().unwrap_or_default();
            if let Err(m) = self.set_var(n, v) {
                self.err(&format!("read: {m}"));
                return Ok(1);
            }
        }
        Ok(status)
    }

    fn assign_array_fresh(
        &mut self,
        name: &str,
        items: Vec<(Option<String>, String)>,
    ) -> Result<(), ShellError> {
        // Through a reference, the array is the variable it names.
        let resolved = self.reference_target(name);
        let name = resolved.as_str();
        if let Some(v) = self.st.vars.get(name)
            && v.has(ATTR_READONLY)
        {
            return Err(ShellError::Readonly(name.to_string()));
        }
        let attrs = self.st.vars.get(name).map(|v| v.attrs).unwrap_or(0);
        self.st.vars.put(
            name,
            Var {
                value: Value::Indexed(BTreeMap::new()),
                attrs,
            },
        );
        let items = items.into_iter().map(|(k, v)| (k, false, v)).collect();
        self.assign_array(name, items, false)
    }

    pub(super) fn b_mapfile(&mut self, name: &str, args: &[String]) -> FlowResult {
        let mut trim = false;
        let mut delim = b'\n';
        let mut max: Option<usize> = None;
        let mut skip = 0usize;
        let mut fd = 0u32;
        let mut origin: Option<i64> = None;
        let mut callback: Option<String> = None;
        let mut quantum = 5000usize;
        let mut target = "MAPFILE".to_string();
        let mut i = 0;
        while i < args.len() {
            let a = args[i].as_str();
            if !(a.starts_with('-') && a.len() > 1) {
                target = a.to_string();
                i += 1;
                continue;
            }
            let flags: Vec<char> = a[1..].chars().collect();
            for (j, c) in flags.iter().enumerate() {
                let takes_value = matches!(c, 'd' | 'n' | 's' | 'u' | 'O' | 'c' | 'C');
                let value = if takes_value {
                    let rest: String = flags[j + 1..].iter().collect();
                    if rest.is_empty() {
                        i += 1;
                        args.get(i).cloned().unwrap_or_default()
                    } else {
                        rest
                    }
                } else {
                    String::new()
                };
                let bad_count = |me: &mut Interp, v: &str| {
                    me.err(&format!("{name}: {v}: invalid line count"));
                };
                match c {
                    't' => trim = true,
                    'd' => delim = value.bytes().next().unwrap_or(0),
                    'n' => match value.parse::<usize>() {
                        Ok(n) => max = (n > 0).then_some(n),
                        Err(_) => {
                            bad_count(self, &value);
                            return Ok(1);
                        }
                    },
                    's' => match value.parse::<usize>() {
                        Ok(n) => skip = n,
                        Err(_) => {
                            bad_count(self, &value);
                            return Ok(1);
                        }
                    },
                    'u' => match self.input_fd(name, &value) {
                        Ok(f) => fd = f,
                        Err(st) => return Ok(st),
                    },
                    'O' => match value.parse::<i64>() {
                        Ok(n) if n >= 0 => origin = Some(n),
                        _ => {
                            self.err(&format!("{name}: {value}: invalid array origin"));
                            return Ok(1);
                        }
                    },
                    'c' => match value.parse::<usize>() {
                        Ok(n) if n > 0 => quantum = n,
                        _ => {
                            self.err(&format!("{name}: {value}: invalid callback quantum"));
                            return Ok(1);
                        }
                    },
                    'C' => callback = Some(value),
                    c => {
                        self.err(&format!("{name}: -{c}: invalid option"));
                        return Ok(2);
                    }
                }
                if takes_value {
                    break;
                }
            }
            i += 1;
        }
        if !is_valid_name(&target) {
            self.err(&format!("{name}: `{target}': not a valid identifier"));
            return Ok(1);
        }
        let target = self.reference_target(&target);
        if self
            .st
            .vars
            .get(&target)
            .is_some_and(|v| matches!(v.value, Value::Assoc(_)))
        {
            self.err(&format!("{name}: {target}: not an indexed array"));
            return Ok(1);
        }
        if origin.is_none() {
            if let Err(m) = self.assign_array_fresh(&target, Vec::new()) {
                self.err(&format!("{name}: {m}"));
                return Ok(1);
            }
        } else if !self.st.vars.get(&target).is_some_and(|v| v.is_array()) {
            let _ = self.assign_array(&target, Vec::new(), true);
        }
        let mut index = origin.unwrap_or(0);
        let mut line = Vec::new();
        let mut seen = 0usize;
        let mut stored = 0usize;
        let mut total = 0usize;
        let limit = self.st.limits.max_word_bytes;
        loop {
            if max.is_some_and(|m| stored >= m) {
                break;
            }
            let b = self.read_byte(fd)?;
            let end = match b {
                None => true,
                Some(c) => {
                    line.push(c);
                    total += 1;
                    if total > limit {
                        return Err(
                            self.limit(format!("{name}: input too large (limit: {limit} bytes)"))
                        );
                    }
                    c == delim
                }
            };
            if end && !line.is_empty() {
                // A NUL delimiter cannot be kept: bash strings end there.
                if (trim || delim == 0) && line.last() == Some(&delim) {
                    line.pop();
                }
                if seen >= skip {
                    // An element is a C string: a NUL inside the line ends it.
                    let keep = line.iter().position(|&c| c == 0).unwrap_or(line.len());
                    let text = wasmsand_exec::raw::decode(&line[..keep]);
                    if let Some(cb) = &callback
                        && (stored + 1).is_multiple_of(quantum)
                    {
                        let cmd = format!("{cb} {index} {}", crate::printf::quote_single(&text));
                        self.eval_string(&cmd)?;
                    }
                    let r = self.assign(
                        &target,
                        Some(crate::interp::AssignKey::Index(index)),
                        text,
                        false,
                    );
                    if let Err(m) = r {
                        self.err(&format!("{name}: {m}"));
                        return Ok(1);
                    }
                    index += 1;
                    stored += 1;
                }
                seen += 1;
                line.clear();
            }
            if b.is_none() {
                break;
            }
        }
        Ok(0)
    }
}

pub(super) fn unescape_delim(v: &str) -> u8 {
    match v {
        "\\n" => b'\n',
        "\\t" => b'\t',
        "\\0" => 0,
        _ => v.bytes().next().unwrap_or(b'\n'),
    }
}

fn escaped_chars(text: &str, buf: &[u8], escaped: &[bool]) -> Vec<bool> {
    // Map byte flags onto chars (lossy decoding keeps one char per valid sequence).
    if text.len() == buf.len() {
        let mut v = Vec::new();
        let mut idx = 0;
        for c in text.chars() {
            v.push(escaped.get(idx).copied().unwrap_or(false));
            idx += c.len_utf8();
        }
        v
    } else {
        vec![false; text.chars().count()]
    }
}

/// `read`'s splitting: IFS whitespace trimmed at both ends, the last name gets the rest.
fn split_read(text: &str, escaped: &[bool], ifs: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let is_ws = |i: usize| {
        let c = chars[i];
        !escaped.get(i).copied().unwrap_or(false)
            && ifs.contains(c)
            && matches!(c, ' ' | '\t' | '\n')
    };
    let is_delim = |i: usize| !escaped.get(i).copied().unwrap_or(false) && ifs.contains(chars[i]);
    let mut fields = Vec::new();
    let mut i = 0;
    let len = chars.len();
    while i < len && is_ws(i) {
        i += 1;
    }
    while i < len {
        if fields.len() + 1 == n {
            // The last variable: the rest of the line minus trailing IFS whitespace.
            let mut end = len;
            while end > i && is_ws(end - 1) {
                end -= 1;
            }
            // When the rest is one field and the delimiter after it (`b,` of `a,b,`), bash
            // stores just the field.
            let mut j = i;
            while j < end && !is_delim(j) {
                j += 1;
            }
            let mut k = j;
            while k < end && is_ws(k) {
                k += 1;
            }
            if k < end && is_delim(k) && !is_ws(k) {
                k += 1;
                while k < end && is_ws(k) {
                    k += 1;
                }
            }
            let stop = if j < end && k >= end { j } else { end };
            fields.push(chars[i..stop].iter().collect());
            return fields;
        }
        let start = i;
        while i < len && !is_delim(i) {
            i += 1;
        }
        fields.push(chars[start..i].iter().collect::<String>());
        // Skip whitespace, one non-whitespace delimiter, then whitespace again.
        while i < len && is_ws(i) {
            i += 1;
        }
        if i < len && is_delim(i) && !is_ws(i) {
            i += 1;
            while i < len && is_ws(i) {
                i += 1;
            }
        }
    }
    fields
}

/// What `read`'s options ask for.
#[derive(Default)]
struct ReadOptions {
    /// `-r`: backslashes are ordinary characters.
    raw: bool,
    prompt: Option<String>,
    /// `-a NAME`: the fields go to this array.
    array: Option<String>,
    delim: u8,
    /// `-n N` / `-N N`: at most this many characters.
    nchars: Option<usize>,
    /// `-N`: exactly that many, the delimiter included as text.
    exact: bool,
    /// `-u FD`.
    fd: u32,
    /// `-t SECONDS`.
    timeout: Option<f64>,
    names: Vec<String>,
}

/// What `read` read.
#[derive(Default)]
struct ReadLine {
    buf: Vec<u8>,
    /// Per byte of `buf`: whether it came from a backslash escape (never a field separator).
    escaped: Vec<bool>,
    got_delim: bool,
    count: usize,
}
