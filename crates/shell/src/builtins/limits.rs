//! The process's resources as bash reports them: `ulimit`, `umask`, `times`.

use std::time::Duration;

use crate::error::ShellError;
use crate::interp::Interp;

impl Interp {
    /// `ulimit`: soft and hard limits per session, checked as the kernel checks them (a soft
    /// limit above the hard one is refused, a hard limit cannot be raised). `-n` bounds the
    /// shell's redirections and, under the sandbox's `open_files`, the descriptors of the
    /// programs it starts; `-n` and `-u` start as the sandbox's `open_files` and `pids`; the
    /// others only report.
    pub(super) fn b_ulimit(&mut self, args: &[String]) -> i32 {
        let mut ops: Vec<(char, Option<String>)> = Vec::new();
        let mut all = false;
        let (mut soft, mut hard) = (false, false);
        let mut i = 0;
        while let Some(a) = args.get(i) {
            i += 1;
            if a == "--" {
                if let Some(v) = args.get(i) {
                    match ops.last_mut() {
                        Some((_, slot @ None)) => *slot = Some(v.clone()),
                        _ => ops.push(('f', Some(v.clone()))),
                    }
                }
                break;
            }
            if let Some(flags) = a.strip_prefix('-').filter(|f| !f.is_empty()) {
                for c in flags.chars() {
                    match c {
                        'S' => soft = true,
                        'H' => hard = true,
                        'a' => all = true,
                        c if ULIMITS.iter().any(|u| u.0 == c) => ops.push((c, None)),
                        c => {
                            self.err(&format!("ulimit: -{c}: invalid option"));
                            self.err_raw(
                                "ulimit: usage: ulimit [-SHabcdefiklmnpqrstuvxPRT] [limit]\n",
                            );
                            return 2;
                        }
                    }
                }
                continue;
            }
            // One limit per option; bash ignores words beyond (`ulimit 1 2` sets -f to 1).
            match ops.last_mut() {
                Some((_, slot @ None)) => *slot = Some(a.clone()),
                Some(_) => {}
                None => ops.push(('f', Some(a.clone()))),
            }
        }
        // Shown: the soft limit unless only -H is given. Set: both unless one is named.
        let show_hard = hard && !soft;
        let (set_soft, set_hard) = if soft || hard {
            (soft, hard)
        } else {
            (true, true)
        };
        let mut text = String::new();
        if all {
            for (c, ..) in ULIMITS {
                text.push_str(&self.ulimit_line(*c, true, show_hard));
            }
        }
        if ops.is_empty() && !all {
            ops.push(('f', None));
        }
        let labelled = ops.len() > 1;
        let mut status = 0;
        for (c, v) in ops {
            let Some(v) = v else {
                text.push_str(&self.ulimit_line(c, labelled, show_hard));
                continue;
            };
            let value = match v.as_str() {
                "unlimited" => None,
                "hard" => self.ulimit_value(c, true),
                "soft" => self.ulimit_value(c, false),
                _ => match v.parse::<u64>() {
                    // The number is in the option's units; its bytes must fit a limit.
                    Ok(n) if n.checked_mul(unit_bytes(c)).is_some() => Some(n),
                    Ok(_) => {
                        self.err(&format!("ulimit: {v}: limit out of range"));
                        status = 1;
                        continue;
                    }
                    Err(_) => {
                        self.err(&format!("ulimit: {v}: invalid number"));
                        return 1;
                    }
                },
            };
            let new_hard = if set_hard {
                value
            } else {
                self.ulimit_value(c, true)
            };
            let new_soft = if set_soft {
                value
            } else {
                self.ulimit_value(c, false)
            };
            // `None` is unlimited, above every number.
            let above =
                |a: Option<u64>, b: Option<u64>| a.unwrap_or(u64::MAX) > b.unwrap_or(u64::MAX);
            let why = if set_hard && above(new_hard, self.ulimit_value(c, true)) {
                Some("Operation not permitted")
            } else if above(new_soft, new_hard) {
                Some("Invalid argument")
            } else {
                None
            };
            if let Some(why) = why {
                let desc = ULIMITS.iter().find(|u| u.0 == c).map_or("", |u| u.1);
                self.err(&format!("ulimit: {desc}: cannot modify limit: {why}"));
                status = 1;
                continue;
            }
            if set_soft {
                self.st.ulimits.insert(c, new_soft);
            }
            if set_hard {
                self.st.ulimits_hard.insert(c, new_hard);
            }
        }
        let printed = self.out_str(&text);
        if status != 0 { status } else { printed }
    }

    /// A soft or hard limit now (`None`: unlimited).
    pub(crate) fn ulimit_value(&self, c: char, hard: bool) -> Option<u64> {
        let set = if hard {
            self.st.ulimits_hard.get(&c)
        } else {
            self.st.ulimits.get(&c)
        };
        match set {
            Some(v) => *v,
            // Linux's usual hard limits: a million files; no bound on core files or stack.
            None if hard && c == 'n' => Some(1_048_576),
            // The soft limits the sandbox enforces: its programs' descriptors and its
            // processes.
            None if c == 'n' && self.rt.open_files.is_some() => {
                self.rt.open_files.as_ref().map(|o| o.per_program)
            }
            None if c == 'u' => Some(self.rt.pids.max()),
            None if hard && matches!(c, 'c' | 's') => None,
            None => ULIMITS.iter().find(|u| u.0 == c).and_then(|u| u.3),
        }
    }

    fn ulimit_line(&self, c: char, labelled: bool, hard: bool) -> String {
        let value = match self.ulimit_value(c, hard) {
            Some(n) => n.to_string(),
            None => "unlimited".into(),
        };
        if !labelled {
            return format!("{value}\n");
        }
        let Some((_, desc, units, _)) = ULIMITS.iter().find(|u| u.0 == c) else {
            return format!("{value}\n");
        };
        let unit = if units.is_empty() {
            format!("(-{c}) ")
        } else {
            format!("({units}, -{c}) ")
        };
        format!("{desc:<20} {unit:>20}{value}\n")
    }

    /// `times`: the shell's own time (none worth counting: it runs in the host) and its
    /// children's, the programs' CPU time.
    pub(super) fn b_times(&mut self) -> i32 {
        let fmt = |d: Duration| {
            let secs = d.as_secs();
            format!("{}m{}.{:03}s", secs / 60, secs % 60, d.subsec_millis())
        };
        let children = self.usage.stats().cpu_time;
        let text = format!(
            "{} {}\n{} {}\n",
            fmt(Duration::ZERO),
            fmt(Duration::ZERO),
            fmt(children),
            fmt(Duration::ZERO)
        );
        self.out_str(&text)
    }

    pub(super) fn b_umask(&mut self, args: &[String]) -> i32 {
        let mut symbolic = false;
        let mut reusable = false;
        let mut i = 0;
        while let Some(a) = args.get(i) {
            if a == "--" {
                i += 1;
                break;
            }
            // A lone `-` is no option: bash takes it as "no mode", like plain `umask`.
            if !a.starts_with('-') || a == "-" {
                break;
            }
            for c in a[1..].chars() {
                match c {
                    'S' => symbolic = true,
                    'p' => reusable = true,
                    _ => {
                        self.err(&format!("umask: -{c}: invalid option"));
                        self.err_raw("umask: usage: umask [-p] [-S] [mode]\n");
                        return 2;
                    }
                }
            }
            i += 1;
        }
        let mode = args.get(i);
        if mode.is_some_and(|m| m == "-") {
            return 0;
        }
        if let Some(v) = mode {
            let new = if v.starts_with(|c: char| c.is_ascii_digit()) {
                match u32::from_str_radix(v, 8) {
                    Ok(n) if n <= 0o777 => n,
                    _ => {
                        self.err(&format!("umask: {v}: octal number out of range"));
                        return 1;
                    }
                }
            } else {
                match symbolic_mode(v, !self.st.umask & 0o777) {
                    Ok(perms) => !perms & 0o777,
                    Err(e) => {
                        self.err(&format!("umask: {e}"));
                        return 1;
                    }
                }
            };
            self.st.umask = new;
            self.rt.vfs.lock().set_umask(new);
            // bash prints the mask after setting it only for `-S`.
            if !symbolic {
                return 0;
            }
        }
        let m = self.st.umask;
        let prefix = if reusable { "umask " } else { "" };
        if symbolic {
            let f = |shift: u32| {
                let bits = !(m >> shift) & 7;
                let mut s = String::new();
                for (bit, ch) in [(4, 'r'), (2, 'w'), (1, 'x')] {
                    if bits & bit != 0 {
                        s.push(ch);
                    }
                }
                s
            };
            let opt = if reusable { "-S " } else { "" };
            self.out_str(&format!("{prefix}{opt}u={},g={},o={}\n", f(6), f(3), f(0)))
        } else {
            self.out_str(&format!("{prefix}{m:04o}\n"))
        }
    }
}

/// `ulimit`'s resources as bash lists them: option, description, units, default (the values
/// of a typical Linux host; `None` is unlimited).
/// Bytes (or the unit) per unit of each limit's number, as bash multiplies them.
fn unit_bytes(c: char) -> u64 {
    match c {
        'c' | 'd' | 'f' | 'l' | 'm' | 's' | 'v' => 1024,
        'p' => 512,
        _ => 1,
    }
}

const ULIMITS: &[(char, &str, &str, Option<u64>)] = &[
    ('R', "real-time non-blocking time", "microseconds", None),
    ('c', "core file size", "blocks", Some(0)),
    ('d', "data seg size", "kbytes", None),
    ('e', "scheduling priority", "", Some(0)),
    ('f', "file size", "blocks", None),
    ('i', "pending signals", "", Some(63_459)),
    ('l', "max locked memory", "kbytes", Some(8192)),
    ('m', "max memory size", "kbytes", None),
    ('n', "open files", "", Some(1024)),
    ('p', "pipe size", "512 bytes", Some(8)),
    ('q', "POSIX message queues", "bytes", Some(819_200)),
    ('r', "real-time priority", "", Some(0)),
    ('s', "stack size", "kbytes", Some(8192)),
    ('t', "cpu time", "seconds", None),
    ('u', "max user processes", "", Some(63_459)),
    ('v', "virtual memory", "kbytes", None),
    ('x', "file locks", "", None),
];

/// Applies a symbolic mode (`u=rwx,g-w,+x`) to permission bits, as bash's `umask` does:
/// no `who` means all, and `X`, `s`, `t` or copying (`g=u`) are not accepted.
fn symbolic_mode(mode: &str, initial: u32) -> Result<u32, ShellError> {
    let mut bits = initial;
    let b = mode.as_bytes();
    let mut i = 0;
    loop {
        let mut who = 0;
        while let Some(&c) = b.get(i) {
            who |= match c {
                b'u' => 0o700,
                b'g' => 0o070,
                b'o' => 0o007,
                b'a' => 0o777,
                _ => break,
            };
            i += 1;
        }
        let op = b.get(i).copied();
        i += 1;
        if !matches!(op, Some(b'+' | b'-' | b'=')) {
            let c = op.map(char::from).unwrap_or_default();
            return Err(ShellError::Usage(format!(
                "`{c}': invalid symbolic mode operator"
            )));
        }
        let mut perm = 0;
        while let Some(&c) = b.get(i) {
            perm |= match c {
                b'r' => 0o444,
                b'w' => 0o222,
                b'x' => 0o111,
                _ => break,
            };
            i += 1;
        }
        match b.get(i) {
            None | Some(b',') => {}
            Some(_) => {
                let c = mode[i..].chars().next().unwrap_or_default();
                return Err(ShellError::Usage(format!(
                    "`{c}': invalid symbolic mode character"
                )));
            }
        }
        if who != 0 {
            perm &= who;
        }
        match op {
            Some(b'+') => bits |= perm,
            Some(b'-') => bits &= !perm,
            _ => {
                let who = if who == 0 { 0o777 } else { who };
                bits = (bits & !who) | perm;
            }
        }
        if i >= b.len() {
            return Ok(bits);
        }
        i += 1;
    }
}
