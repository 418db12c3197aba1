//! Builtins about commands: `type`, `command`, `builtin`, `enable`, `help`,
//! `alias`/`unalias`, `history`.

use crate::error::strerror;
use crate::interp::{FlowResult, Interp};

use super::{BUILTINS, builtin_table, lookup};

/// What `help` prints above its list, as bash does.
const HELP_BANNER: &str =
    "These shell commands are defined internally.  Type `help' to see this list.
Type `help name' to find out more about the function `name'.
Use `info bash' to find out more about the shell in general.
Use `man -k' or `info' to find out more about commands not in this list.

A star (*) next to a name means that the command is disabled.

";

/// The compound commands and other topics bash's `help` knows beside its builtins, by the
/// names its table sorts them by.
const GRAMMAR_TOPICS: [(&str, &str); 15] = [
    ("%", "job_spec [&]"),
    ("((", "(( expression ))"),
    ("[[", "[[ expression ]]"),
    (
        "case",
        "case WORD in [PATTERN [| PATTERN]...) COMMANDS ;;]... esac",
    ),
    ("coproc", "coproc [NAME] command [redirections]"),
    ("for", "for NAME [in WORDS ... ] ; do COMMANDS; done"),
    ("for ((", "for (( exp1; exp2; exp3 )); do COMMANDS; done"),
    (
        "function",
        "function name { COMMANDS ; } or name () { COMMANDS ; }",
    ),
    (
        "if",
        "if COMMANDS; then COMMANDS; [ elif COMMANDS; then COMMANDS; ]... [ else COMMANDS; ] fi",
    ),
    ("select", "select NAME [in WORDS ... ;] do COMMANDS; done"),
    ("time", "time [-p] pipeline"),
    ("until", "until COMMANDS; do COMMANDS-2; done"),
    (
        "variables",
        "variables - Names and meanings of some shell variables",
    ),
    ("while", "while COMMANDS; do COMMANDS-2; done"),
    ("{", "{ COMMANDS ; }"),
];

/// `help`'s topics: the shell's own builtins and the grammar, sorted as bash sorts them.
fn help_topics() -> Vec<(&'static str, &'static str)> {
    let mut all: Vec<(&str, &str)> = BUILTINS
        .iter()
        .filter(|b| !b.program)
        .filter_map(|b| Some((b.name, b.synopsis?)))
        .chain(GRAMMAR_TOPICS)
        .collect();
    all.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    all
}

impl Interp {
    pub(super) fn b_builtin(&mut self, args: &[String]) -> FlowResult {
        let args = match self.no_options("builtin", args) {
            Ok(a) => a,
            Err(st) => return Ok(st),
        };
        match args.first() {
            Some(n) if self.builtin_enabled(n) => self.run_builtin(&n.clone(), args),
            Some(n) => {
                self.err(&format!("builtin: {n}: not a shell builtin"));
                Ok(1)
            }
            None => Ok(0),
        }
    }

    /// `enable [-a] [-dnps] [-f filename] [name ...]`: `-n` turns builtins off, so that their
    /// names are looked up along `$PATH` (and `builtin NAME` refuses them); without `-n` turns
    /// them back on. Without names, lists them as bash does (`enable NAME` / `enable -n NAME`,
    /// `-a` all, `-n` the ones off, `-s` only the special ones). No builtin can be loaded from
    /// a file (`-f`) or deleted (`-d`).
    pub(super) fn b_enable(&mut self, args: &[String]) -> i32 {
        let (mut all, mut off, mut special, mut delete) = (false, false, false, false);
        let mut file: Option<&String> = None;
        let mut i = 0;
        while let Some(a) = args.get(i) {
            if a == "--" {
                i += 1;
                break;
            }
            let Some(flags) = a.strip_prefix('-').filter(|f| !f.is_empty()) else {
                break;
            };
            for c in flags.chars() {
                match c {
                    'a' => all = true,
                    'n' => off = true,
                    'p' => {}
                    's' => special = true,
                    'd' => delete = true,
                    'f' => {
                        i += 1;
                        match args.get(i) {
                            Some(f) => file = Some(f),
                            None => {
                                self.err("enable: -f: option requires an argument");
                                self.usage("enable");
                                return 2;
                            }
                        }
                    }
                    _ => {
                        self.err(&format!("enable: -{c}: invalid option"));
                        self.usage("enable");
                        return 2;
                    }
                }
            }
            i += 1;
        }
        if let Some(f) = file {
            self.err(&format!(
                "enable: cannot open shared object {f}: {f}: cannot open shared object file: No such file or directory"
            ));
            return 1;
        }
        let names = &args[i..];
        if names.is_empty() {
            let mut text = String::new();
            for b in builtin_table() {
                let is_off = self.st.disabled_builtins.contains(b.name);
                // The programs the shell runs itself are files to bash, not its builtins.
                if b.program || (special && !b.special) || !(all || is_off == off) {
                    continue;
                }
                let flag = if is_off { "-n " } else { "" };
                text.push_str(&format!("enable {flag}{}\n", b.name));
            }
            return self.out_str(&text);
        }
        let mut status = 0;
        for n in names {
            if lookup(n).is_none() {
                self.err(&format!("enable: {n}: not a shell builtin"));
                status = 1;
            } else if delete {
                self.err(&format!("enable: {n}: not dynamically loaded"));
                status = 1;
            } else if off {
                self.st.disabled_builtins.insert(n.clone());
            } else {
                self.st.disabled_builtins.remove(n);
            }
        }
        status
    }

    /// `help NAME`: the synopsis line (the long descriptions are not carried).
    /// `hash NAME...` checks each name is a command found along `$PATH` (scripts use it as an
    /// existence test); no table is kept, so the listing and `-t` have nothing to show.
    /// `hash [-lr] [-p path] [-dt] [name ...]`: the table of remembered program paths.
    pub(super) fn b_hash(&mut self, args: &[String]) -> i32 {
        let (mut list, mut reset, mut delete, mut show) = (false, false, false, false);
        let mut given_path: Option<String> = None;
        let mut i = 0;
        while let Some(a) = args.get(i) {
            if a == "--" {
                i += 1;
                break;
            }
            if !a.starts_with('-') || a.len() < 2 {
                break;
            }
            let letters: Vec<char> = a[1..].chars().collect();
            for (k, c) in letters.iter().enumerate() {
                match c {
                    'l' => list = true,
                    'r' => reset = true,
                    'd' => delete = true,
                    't' => show = true,
                    'p' => {
                        // The path is the rest of this word, or the next word.
                        let rest: String = letters[k + 1..].iter().collect();
                        given_path = Some(if rest.is_empty() {
                            i += 1;
                            match args.get(i) {
                                Some(p) => p.clone(),
                                None => {
                                    self.err("hash: -p: option requires an argument");
                                    self.usage("hash");
                                    return 2;
                                }
                            }
                        } else {
                            rest
                        });
                        break;
                    }
                    c => {
                        self.err(&format!("hash: -{c}: invalid option"));
                        self.usage("hash");
                        return 2;
                    }
                }
            }
            i += 1;
        }
        let names = &args[i..];
        if reset {
            self.st.hashed.clear();
        }
        if names.is_empty() {
            if reset {
                return 0;
            }
            return self.hash_listing(list);
        }
        let mut status = 0;
        let mut text = String::new();
        for n in names {
            if let Some(p) = &given_path {
                self.remember_path(n, p, 0);
                continue;
            }
            if delete {
                if self.st.hashed.remove(n).is_none() {
                    self.err(&format!("hash: {n}: not found"));
                    status = 1;
                }
                continue;
            }
            if show {
                match self.st.hashed.get(n) {
                    Some(h) if list => text.push_str(&format!("builtin hash -p {} {n}\n", h.path)),
                    Some(h) if names.len() > 1 => text.push_str(&format!("{n}\t{}\n", h.path)),
                    Some(h) => text.push_str(&format!("{}\n", h.path)),
                    None => {
                        self.err(&format!("hash: {n}: not found"));
                        status = 1;
                    }
                }
                continue;
            }
            // Builtins and functions are not looked up; a name with a slash is not hashed.
            if n.contains('/')
                || self.st.functions.contains_key(n)
                || (self.builtin_enabled(n) && !self.is_program_builtin(n))
            {
                continue;
            }
            // bash forgets what it remembered before it looks again.
            self.st.hashed.remove(n);
            match self.find_in_path(n) {
                Some(p) => self.remember_path(n, &p, 0),
                None if self.builtin_enabled(n) => {}
                None => {
                    self.err(&format!("hash: {n}: not found"));
                    status = 1;
                }
            }
        }
        let s = self.out_str(&text);
        if s != 0 { s } else { status }
    }

    /// The table as bash lists it: by its 256 buckets of the names' hash, each bucket newest
    /// first.
    fn hash_listing(&mut self, reusable: bool) -> i32 {
        if self.st.hashed.is_empty() {
            return self.out_str("hash: hash table empty\n");
        }
        let mut entries: Vec<(&String, &crate::interp::Hashed)> = self.st.hashed.iter().collect();
        entries.sort_by_key(|(n, h)| (crate::vars::bash_hash(n) & 255, std::cmp::Reverse(h.seq)));
        let mut text = String::new();
        if !reusable {
            text.push_str("hits\tcommand\n");
        }
        for (n, h) in entries {
            if reusable {
                text.push_str(&format!("builtin hash -p {} {n}\n", h.path));
            } else {
                text.push_str(&format!("{:>4}\t{}\n", h.hits, h.path));
            }
        }
        self.out_str(&text)
    }

    pub(super) fn b_help(&mut self, args: &[String]) -> i32 {
        if let Some(c) = args
            .iter()
            .take_while(|a| a.len() > 1 && a.starts_with('-') && *a != "--")
            .flat_map(|a| a[1..].chars())
            .find(|c| !matches!(c, 'd' | 'm' | 's'))
        {
            self.err(&format!("help: -{c}: invalid option"));
            self.usage("help");
            return 2;
        }
        let topics: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
        let table = help_topics();
        if topics.is_empty() {
            let text = self.help_listing(&table);
            return self.out_str(&text);
        }
        let mut text = String::new();
        let mut found = 0;
        let mut last = "";
        for t in topics {
            last = t;
            // bash's two passes: names the word matches as a pattern, else names it begins.
            let mut hits: Vec<&(&str, &str)> = table
                .iter()
                .filter(|(n, _)| crate::pattern::matches(t, n))
                .collect();
            if hits.is_empty() {
                hits = table
                    .iter()
                    .filter(|(n, _)| n.starts_with(t.as_str()))
                    .collect();
            }
            found += hits.len();
            for (n, syn) in hits {
                text.push_str(&format!("{n}: {syn}\n"));
            }
        }
        if found == 0 {
            self.err(&format!(
                "help: no help topics match `{last}'.  Try `help help' or `man -k {last}' or `info {last}'."
            ));
        }
        let s = self.out_str(&text);
        if s != 0 {
            s
        } else if found == 0 {
            1
        } else {
            0
        }
    }

    /// `help` alone: bash's banner, then every topic's synopsis in two columns of half the
    /// screen's width, cut with a `>`, a `*` in front of a disabled builtin.
    fn help_listing(&self, table: &[(&str, &str)]) -> String {
        let width = self
            .get_var("COLUMNS")
            .and_then(|c| c.trim().parse::<usize>().ok())
            .filter(|&c| c > 0)
            .unwrap_or(80)
            / 2;
        let width = if width <= 3 { 40 } else { width.min(128) };
        // bash copies a synopsis with strncpy into `room` places and writes `>` on the last:
        // one that reaches it is cut there, even one that just fits.
        let cell = |i: usize, room: usize| {
            let (name, syn) = table[i];
            let flag = if self.st.disabled_builtins.contains(name) {
                '*'
            } else {
                ' '
            };
            match syn.get(..room - 1) {
                Some(head) if syn.len() + 1 >= room => format!("{flag}{head}>"),
                _ => format!("{flag}{syn}"),
            }
        };
        let mut text = format!("{}\n{HELP_BANNER}", super::flow::BASH_VERSION_LINE);
        let total = table.len();
        let height = total.div_ceil(2);
        for i in 0..height {
            let first = cell(i, width - 2);
            text.push_str(&first);
            if i * 2 >= total || i + height >= total {
                text.push('\n');
                continue;
            }
            text.push_str(&" ".repeat(width.saturating_sub(first.len())));
            text.push_str(&cell(i + height, width - 3));
            text.push('\n');
        }
        text
    }

    /// `history`: a non-interactive bash keeps no history, so there is never anything to
    /// list; the arguments are still checked as bash does.
    /// `history`: the history list (`-c -d -r -n -w -a -s -p`, and the listing). A
    /// non-interactive shell records no commands itself; the list holds what `-r`, `-n` and
    /// `-s` put there.
    pub(super) fn b_history(&mut self, args: &[String]) -> FlowResult {
        let mut rest = args;
        let mut flags = String::new();
        let mut delete: Option<String> = None;
        while let Some(a) = rest.first() {
            if a == "--" {
                rest = &rest[1..];
                break;
            }
            let Some(f) = a.strip_prefix('-').filter(|f| !f.is_empty()) else {
                break;
            };
            rest = &rest[1..];
            for c in f.chars() {
                if !"canrwpsd".contains(c) {
                    self.err(&format!("history: -{c}: invalid option"));
                    self.err_raw(&format!(
                        "history: usage: {}\n",
                        lookup("history").and_then(|b| b.synopsis).unwrap_or("")
                    ));
                    return Ok(2);
                }
                if c == 'd' {
                    let Some(off) = rest.first() else {
                        self.err("history: -d: option requires an argument");
                        return Ok(2);
                    };
                    delete = Some(off.clone());
                    rest = &rest[1..];
                } else {
                    flags.push(c);
                }
            }
        }
        self.truncate_history(false);
        if let Some(off) = delete {
            let len = self.st.history.len() as i64;
            let pos = match off.parse::<i64>() {
                Ok(n) if n < 0 => len + n,
                Ok(n) => n - self.st.history_base as i64,
                Err(_) => -1,
            };
            if pos < 0 || pos >= len {
                self.err(&format!("history: {off}: history position out of range"));
                return Ok(1);
            }
            self.st.history.remove(pos as usize);
            return Ok(0);
        }
        if flags.contains('c') {
            self.st.history.clear();
            self.st.history_new = 0;
            self.st.history_offset = 0;
            self.st.history_base = 1;
        }
        if flags.contains('p') {
            let text: String = rest.iter().map(|a| format!("{a}\n")).collect();
            return Ok(self.out_str(&text));
        }
        if flags.contains('s') {
            if !rest.is_empty() {
                // The `history -s` line itself gives way to the entry (once).
                if self.keeps_history()
                    && self.st.history_last_added
                    && !self.st.history_pushed
                    && self.st.history.pop_back().is_some()
                {
                    self.st.history_new = self.st.history_new.saturating_sub(1);
                }
                self.st.history.push_back(rest.join(" "));
                self.st.history_new += 1;
                self.st.history_last_added = true;
                self.st.history_pushed = true;
                self.truncate_history(true);
            }
            return Ok(0);
        }
        if let Some(op) = flags.chars().find(|c| "anrw".contains(*c)) {
            let file = match rest.first().cloned().or_else(|| self.get_var("HISTFILE")) {
                Some(f) if !f.is_empty() => f,
                _ => format!("{}/.bash_history", self.get_var("HOME").unwrap_or_default()),
            };
            let path = wasmsand_vfs::path::join(&self.st.cwd, &file);
            return Ok(self.history_file_op(op, &file, &path));
        }
        if flags.contains('c') {
            return Ok(0);
        }
        if let Some(n) = rest.first()
            && n.trim_start_matches('+').parse::<i64>().is_err()
        {
            self.err(&format!("history: {n}: numeric argument required"));
            return Ok(1);
        }
        if rest.len() > 1 {
            return Err(self.too_many_arguments("history"));
        }
        let count = rest
            .first()
            .and_then(|n| n.trim_start_matches('+').parse::<usize>().ok())
            .unwrap_or(usize::MAX);
        let len = self.st.history.len();
        let text: String = self
            .st
            .history
            .iter()
            .enumerate()
            .skip(len.saturating_sub(count))
            .map(|(i, line)| format!("{:5}  {line}\n", i + self.st.history_base))
            .collect();
        Ok(self.out_str(&text))
    }

    /// `fc`: lists history entries (`-l`, `-n`, `-r`), re-runs one with substitutions (`-s
    /// [pat=rep ...] [command]`, `-e -`), or writes a range to a file, runs an editor on it
    /// (`-e ename`, else `$FCEDIT`, `$EDITOR`, `vi`) and runs what the file then holds, each
    /// line echoed on stderr. A first or last entry is a history number, a negative offset
    /// from the last entry, or the start of an entry's text. bash's arithmetic of ranges is
    /// kept, quirks included: a positive number past the entries before the last is the
    /// first entry as a range's start and the last as its end, and the editing form first
    /// removes the last entry when it was added as a line (`history -s`), taking it for its
    /// own command line.
    pub(super) fn b_fc(&mut self, args: &[String]) -> FlowResult {
        let (mut listing, mut numbering, mut reverse, mut execute) = (false, true, false, false);
        let mut ename: Option<String> = None;
        let mut rest = args;
        // Options end at the first word that is a number (`fc -l -5`), as in bash.
        while let Some(a) = rest.first() {
            if a == "--" {
                rest = &rest[1..];
                break;
            }
            let numeric = a.strip_prefix('-').unwrap_or(a);
            if !a.starts_with('-')
                || a == "-"
                || (!numeric.is_empty() && numeric.bytes().all(|b| b.is_ascii_digit()))
            {
                break;
            }
            rest = &rest[1..];
            let flags: Vec<char> = a[1..].chars().collect();
            let mut k = 0;
            while k < flags.len() {
                match flags[k] {
                    'l' => listing = true,
                    'n' => numbering = false,
                    'r' => reverse = true,
                    's' => execute = true,
                    'e' => {
                        let joined: String = flags[k + 1..].iter().collect();
                        if !joined.is_empty() {
                            ename = Some(joined);
                        } else if let Some(next) = rest.first() {
                            ename = Some(next.clone());
                            rest = &rest[1..];
                        } else {
                            self.err("fc: -e: option requires an argument");
                            self.usage("fc");
                            return Ok(2);
                        }
                        k = flags.len();
                        continue;
                    }
                    c => {
                        self.err(&format!("fc: -{c}: invalid option"));
                        self.usage("fc");
                        return Ok(2);
                    }
                }
                k += 1;
            }
        }
        if ename.as_deref() == Some("-") {
            execute = true;
        }
        if execute {
            return self.fc_rerun(rest);
        }
        let count = self.st.history.len();
        if count == 0 {
            return Ok(0);
        }
        let last = self.fc_last();
        let (mut beg, mut end) = match rest {
            [] if listing => ((last - 15).max(0), last),
            [] => (last, last),
            [first, more @ ..] => {
                let beg = self.fc_entry(first, listing, true);
                let real_last = count as i64 - 1;
                let end = match more.first() {
                    Some(second) => self.fc_entry(second, listing, false),
                    None if listing && beg != Ok(real_last) => Ok(last),
                    None if listing => Ok(real_last),
                    None => beg.clone(),
                };
                match (beg, end) {
                    (Ok(b), Ok(e)) => (b, e),
                    (Err(msg), _) | (_, Err(msg)) => {
                        self.err(&format!("fc: {msg}"));
                        return Ok(1);
                    }
                }
            }
        };
        // "When not listing, the fc command that caused the editing shall not be entered
        // into the history list" (POSIX); what it runs is entered instead.
        if !listing && self.st.history_last_added {
            self.st.history.pop_back();
            self.st.history_new = self.st.history_new.saturating_sub(1);
            self.st.history_last_added = false;
            let last = last.min(self.st.history.len() as i64 - 1);
            if end >= last {
                end = last;
            } else if beg >= last {
                beg = last;
            }
        }
        let (beg, end) = (beg.max(0), end.max(0));
        let (lo, hi) = if end < beg {
            reverse = true;
            (end, beg)
        } else {
            (beg, end)
        };
        let mut picked: Vec<(i64, String)> = (lo..=hi)
            .filter_map(|i| {
                let number = i + self.st.history_base as i64;
                self.st.history.get(i as usize).map(|l| (number, l.clone()))
            })
            .collect();
        if reverse {
            picked.reverse();
        }
        if listing {
            let text: String = picked
                .iter()
                .map(|(n, line)| match numbering {
                    true => format!("{n}\t {line}\n"),
                    false => format!("\t {line}\n"),
                })
                .collect();
            return Ok(self.out_str(&text));
        }
        let text: String = picked.iter().map(|(_, l)| format!("{l}\n")).collect();
        self.fc_edit_and_run(&text, ename)
    }

    /// The last entry `fc` works on: the one before its own command line when that is in
    /// the history.
    fn fc_last(&self) -> i64 {
        // bash's `i - rh - hist_last_line_added`, backed up to the last entry there is.
        let count = self.st.history.len() as i64;
        let last = count - self.keeps_history() as i64 - self.st.history_last_added as i64;
        last.min(count - 1).max(0)
    }

    /// The entry a `fc` range names (0-based, possibly out of range below), or bash's message.
    fn fc_entry(&self, spec: &str, listing: bool, first: bool) -> Result<i64, String> {
        let last = self.fc_last();
        let real_last = self.st.history.len() as i64 - 1;
        let base = self.st.history_base as i64;
        let (negative, digits) = match spec.strip_prefix('-') {
            Some(d) => (true, d),
            None => (false, spec),
        };
        if digits.starts_with(|c: char| c.is_ascii_digit()) {
            let lead: String = digits.chars().take_while(char::is_ascii_digit).collect();
            let n: i64 = lead.parse().unwrap_or(i64::MAX / 2);
            return Ok(match (negative, n) {
                (_, 0) if negative && listing => real_last,
                (_, 0) if negative => return Err("history specification out of range".into()),
                (_, 0) => last,
                (true, n) => (last + 1 - n).max(0),
                (false, n) if n - base < 0 || n - base > last - 1 => {
                    if first {
                        0
                    } else {
                        last
                    }
                }
                (false, n) => (n - base).max(0),
            });
        }
        (0..=last)
            .rev()
            .find(|&j| self.st.history[j as usize].starts_with(spec))
            .ok_or_else(|| "no command found".to_string())
    }

    /// `fc -s [pat=rep ...] [command]`: the entry with every `pat` replaced, echoed on stderr,
    /// put in the history in place of the last entry, and run.
    fn fc_rerun(&mut self, args: &[String]) -> FlowResult {
        let mut rest = args;
        let mut subs = Vec::new();
        while let Some((pat, rep)) = rest.first().and_then(|a| a.split_once('=')) {
            subs.push((pat.to_string(), rep.to_string()));
            rest = &rest[1..];
        }
        let found = match self.st.history.len() {
            0 => None,
            _ => match rest.first() {
                None => Some(self.fc_last()),
                Some(spec) => self.fc_entry(spec, false, false).ok(),
            },
        };
        let Some(mut command) = found.and_then(|i| self.st.history.get(i as usize).cloned()) else {
            self.err("fc: no command found");
            return Ok(1);
        };
        for (pat, rep) in &subs {
            if !pat.is_empty() {
                command = command.replace(pat.as_str(), rep);
            }
        }
        self.err_raw(&format!("{command}\n"));
        // The command takes the place of the `fc -s` line in the history.
        if !command.is_empty() {
            self.st.history.pop_back();
            self.st
                .history
                .push_back(command.trim_end_matches('\n').to_string());
            self.st.history_last_added = true;
        }
        self.eval_text(&command)
    }

    /// `fc`'s editing form: `text` written to a temporary file, the editor run on it, and
    /// what the file then holds run a command at a time, each echoed on stderr and added to
    /// the history.
    fn fc_edit_and_run(&mut self, text: &str, ename: Option<String>) -> FlowResult {
        let dir = self
            .get_var("TMPDIR")
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| "/tmp".into());
        let file = format!("{}/bash-fc.{}", dir.trim_end_matches('/'), self.bashpid());
        let path = wasmsand_vfs::path::join(&self.st.cwd, &file);
        let wrote = self
            .rt
            .vfs
            .lock()
            .write(&path, wasmsand_exec::raw::encode(text));
        if let Err(e) = wrote {
            self.err(&format!(
                "fc: {file}: cannot open temp file: {}",
                strerror(e.errno)
            ));
            return Ok(1);
        }
        let editor = match ename {
            Some(e) => e,
            None => ["FCEDIT", "EDITOR"]
                .iter()
                .find_map(|v| self.get_var(v).filter(|e| !e.is_empty()))
                .unwrap_or_else(|| "vi".into()),
        };
        let edited = self.eval_text(&format!("{editor} {file}"));
        let read = self.rt.vfs.lock().read(&path).map(|d| d.to_vec());
        let _ = self.rt.vfs.lock().unlink(&path);
        if edited? != 0 {
            return Ok(1);
        }
        let script = wasmsand_exec::raw::decode(&read.unwrap_or_default());
        let lines: Vec<&str> = script.split_inclusive('\n').collect();
        let mut status = 0;
        let mut start = 0;
        while start < lines.len() {
            match crate::next_chunk(self, &lines, start) {
                Ok((parsed, end)) => {
                    let chunk: String = lines[start..end].concat();
                    self.err_raw(&chunk);
                    let entry = chunk.trim_end_matches('\n');
                    if !entry.trim().is_empty() {
                        self.st.history.push_back(entry.to_string());
                        self.st.history_new += 1;
                        self.st.history_last_added = true;
                        self.truncate_history(true);
                    }
                    status = self.run_script(&parsed)?;
                    start = end;
                }
                Err(e) => {
                    self.err_raw(&e.render_in(&script, crate::SourceKind::Eval));
                    return Ok(2);
                }
            }
        }
        Ok(status)
    }

    /// `history -a/-n/-r/-w` on the history file.
    fn history_file_op(&mut self, op: char, shown: &str, path: &str) -> i32 {
        if op == 'w' || op == 'a' {
            // `-a` appends only what this shell added since the last `-a` or `-w`.
            let skip = if op == 'a' {
                self.st.history.len().saturating_sub(self.st.history_new)
            } else {
                0
            };
            let mut text: String = self
                .st
                .history
                .iter()
                .skip(skip)
                .map(|l| format!("{l}\n"))
                .collect();
            if op == 'a' {
                let old = self
                    .rt
                    .vfs
                    .lock()
                    .read(path)
                    .map(|d| d.to_vec())
                    .unwrap_or_default();
                text = wasmsand_exec::raw::decode(&old) + &text;
            }
            let written = self
                .rt
                .vfs
                .lock()
                .write(path, wasmsand_exec::raw::encode(&text));
            return match written {
                Ok(_) => {
                    self.st.history_new = 0;
                    0
                }
                Err(e) => {
                    self.err(&format!("history: {shown}: {}", strerror(e.errno)));
                    1
                }
            };
        }
        let read = self.rt.vfs.lock().read(path);
        let data = match read {
            Ok(d) => d,
            Err(e) => {
                self.err(&format!("history: {shown}: {}", strerror(e.errno)));
                return 1;
            }
        };
        let text = wasmsand_exec::raw::decode(&data);
        let lines: Vec<&str> = text.lines().collect();
        // `-n` reads only the lines past those already read.
        let skip = if op == 'n' {
            self.st.history_lines_read
        } else {
            0
        };
        for l in lines.iter().skip(skip) {
            self.st.history.push_back((*l).to_string());
        }
        self.st.history_lines_read = lines.len();
        self.truncate_history(true);
        0
    }

    /// Cuts the history file to its last `n` lines (assigning `HISTFILESIZE`).
    pub(crate) fn truncate_history_file(&mut self, n: usize) {
        let Some(file) = self.get_var("HISTFILE").filter(|f| !f.is_empty()) else {
            return;
        };
        let path = wasmsand_vfs::path::join(&self.st.cwd, &file);
        let mut vfs = self.rt.vfs.lock();
        if let Ok(data) = vfs.read(&path) {
            let text = wasmsand_exec::raw::decode(&data);
            let lines: Vec<&str> = text.lines().collect();
            if lines.len() > n {
                let kept: String = lines[lines.len() - n..]
                    .iter()
                    .map(|l| format!("{l}\n"))
                    .collect();
                let _ = vfs.write(&path, wasmsand_exec::raw::encode(&kept));
            }
        }
    }

    /// What `name` runs as (`command -v`): alias, keyword, function, builtin or a file
    /// found along `search`, else `$PATH`.
    fn describe_in(&self, name: &str, search: Option<&str>) -> Option<(&'static str, String)> {
        if self.st.opts.expand_aliases
            && let Some(a) = self.st.aliases.get(name)
        {
            return Some(("alias", a.clone()));
        }
        if KEYWORDS.contains(&name) {
            return Some(("keyword", String::new()));
        }
        if self.st.functions.contains_key(name) {
            return Some(("function", String::new()));
        }
        if self.builtin_enabled(name) && !self.is_program_builtin(name) {
            return Some(("builtin", String::new()));
        }
        let remembered = self
            .st
            .hashed
            .get(name)
            .filter(|_| search.is_none())
            .map(|h| h.path.clone());
        let path = if let Some(p) = remembered {
            Some(p)
        } else if name.contains('/') {
            let p = wasmsand_vfs::path::join(&self.st.cwd, name);
            self.rt
                .vfs
                .lock()
                .stat(&p)
                .ok()
                .filter(|m| m.mode & 0o111 != 0 && m.file_type == wasmsand_vfs::FileType::File)
                .map(|_| name.to_string())
        } else {
            self.find_in(name, search)
        };
        match path {
            Some(p) => Some(("file", p)),
            // A program bash would run from a file, provided here without one.
            None if self.builtin_enabled(name) => Some(("builtin", String::new())),
            None => None,
        }
    }

    /// Every meaning of `name` in lookup order (`type -a`): alias, keyword, function,
    /// builtin, then each executable file along `$PATH`.
    fn describe_all(&self, name: &str, skip_funcs: bool) -> Vec<(&'static str, String)> {
        let mut v = Vec::new();
        if self.st.opts.expand_aliases
            && let Some(a) = self.st.aliases.get(name)
        {
            v.push(("alias", a.clone()));
        }
        if KEYWORDS.contains(&name) {
            v.push(("keyword", String::new()));
        }
        if !skip_funcs && self.st.functions.contains_key(name) {
            v.push(("function", String::new()));
        }
        let files = self.path_files(name);
        if self.builtin_enabled(name) && (files.is_empty() || !self.is_program_builtin(name)) {
            v.push(("builtin", String::new()));
        }
        v.extend(files.into_iter().map(|p| ("file", p)));
        v
    }

    /// The executable files `name` finds: itself when it has a slash, else along `$PATH`.
    fn path_files(&self, name: &str) -> Vec<String> {
        let vfs = self.rt.vfs.lock();
        let ok = |p: &str| {
            vfs.stat(p)
                .is_ok_and(|m| m.mode & 0o111 != 0 && m.file_type == wasmsand_vfs::FileType::File)
        };
        if name.contains('/') {
            let p = wasmsand_vfs::path::join(&self.st.cwd, name);
            return if ok(&p) {
                vec![name.to_string()]
            } else {
                Vec::new()
            };
        }
        if name.is_empty() {
            return Vec::new();
        }
        let path = self.get_var("PATH").unwrap_or_default();
        let mut out: Vec<String> = Vec::new();
        for dir in path.split(':') {
            let shown = if dir.is_empty() {
                name.to_string()
            } else {
                format!("{}/{name}", dir.trim_end_matches('/'))
            };
            let full = wasmsand_vfs::path::join(&self.st.cwd, &shown);
            if ok(&full) && !out.contains(&shown) {
                out.push(shown);
            }
        }
        out
    }

    pub(super) fn b_type(&mut self, args: &[String]) -> i32 {
        let (flags, names) = match self.short_options("type", args, "tpPaf") {
            Ok(split) => split,
            Err(status) => return status,
        };
        let terse = flags.contains(&'t');
        let path_only = flags.contains(&'p');
        let force_path = flags.contains(&'P');
        let all = flags.contains(&'a');
        let skip_funcs = flags.contains(&'f');
        let names = names.to_vec();
        let mut status = 0;
        for n in names {
            let mut text = String::new();
            // Without -a, a plain file along PATH stands in when no executable is found, as
            // bash's lookup does (running it is then "Permission denied").
            let fallback = || {
                (!all && !n.contains('/'))
                    .then(|| self.find_in_path(&n))
                    .flatten()
            };
            let found = if force_path {
                // bash answers from the `hash` table first, with or without -a.
                let files = match self.st.hashed.get(&n) {
                    Some(h) => vec![h.path.clone()],
                    None => self.path_files(&n),
                };
                let files = if all {
                    files
                } else if files.is_empty() {
                    fallback().into_iter().collect()
                } else {
                    files.into_iter().take(1).collect()
                };
                for f in &files {
                    text.push_str(&format!("{f}\n"));
                }
                !files.is_empty()
            } else {
                let mut meanings = self.describe_all(&n, skip_funcs);
                if meanings.is_empty()
                    && let Some(p) = fallback()
                {
                    meanings.push(("file", p));
                }
                // A name the `hash` table remembers runs from there, and `type` says so.
                let mut hashed = false;
                if !all {
                    meanings.truncate(1);
                    if let Some(first) = meanings.first_mut()
                        && first.0 == "file"
                        && let Some(h) = self.st.hashed.get(&n)
                    {
                        first.1 = h.path.clone();
                        hashed = true;
                    }
                }
                for (kind, extra) in &meanings {
                    if path_only {
                        if *kind == "file" {
                            text.push_str(&format!("{extra}\n"));
                        }
                    } else if terse {
                        text.push_str(&format!("{kind}\n"));
                    } else {
                        text.push_str(&match *kind {
                            "alias" => format!("{n} is aliased to `{extra}'\n"),
                            "keyword" => format!("{n} is a shell keyword\n"),
                            "function" => {
                                let body = self
                                    .st
                                    .functions
                                    .get(&n)
                                    .map(|f| crate::printer::function_text(f))
                                    .unwrap_or_default();
                                format!("{n} is a function\n{body}\n")
                            }
                            "builtin" => format!("{n} is a shell builtin\n"),
                            _ if hashed => format!("{n} is hashed ({extra})\n"),
                            _ => format!("{n} is {extra}\n"),
                        });
                    }
                }
                !meanings.is_empty()
            };
            if !found {
                if !terse && !path_only && !force_path {
                    self.err(&format!("type: {n}: not found"));
                }
                status = 1;
            }
            let s = self.out_str(&text);
            if s != 0 {
                return s;
            }
        }
        status
    }

    pub(super) fn b_command(&mut self, args: &[String]) -> FlowResult {
        let mut verbose = None;
        // `-p`: the standard utilities' path instead of `$PATH`, for the lookup only.
        let mut search = None;
        let mut i = 0;
        while i < args.len() && args[i].starts_with('-') && args[i].len() > 1 {
            if args[i] == "--" {
                i += 1;
                break;
            }
            for c in args[i][1..].chars() {
                match c {
                    'v' => verbose = Some(false),
                    'V' => verbose = Some(true),
                    'p' => search = Some(STANDARD_PATH),
                    _ => {
                        self.err(&format!("command: -{c}: invalid option"));
                        self.usage("command");
                        return Ok(2);
                    }
                }
            }
            i += 1;
        }
        let rest = &args[i..];
        let Some(name) = rest.first() else {
            return Ok(0);
        };
        if let Some(long) = verbose {
            let mut status = 0;
            let mut found = false;
            for n in rest {
                let text = match self.describe_in(n, search) {
                    Some(("file", p)) if long && search.is_some() => format!("{n} is {p}\n"),
                    Some(_) if long => {
                        if self.b_type(std::slice::from_ref(n)) != 0 {
                            status = 1;
                        } else {
                            found = true;
                        }
                        continue;
                    }
                    Some(("file", p)) => format!("{p}\n"),
                    Some(("alias", v)) => {
                        format!("alias {n}={}\n", crate::printf::quote_single(&v))
                    }
                    Some(_) => format!("{n}\n"),
                    None => {
                        if long {
                            self.err(&format!("command: {n}: not found"));
                        }
                        continue;
                    }
                };
                found = true;
                let s = self.out_str(&text);
                if s != 0 {
                    return Ok(s);
                }
            }
            // Found at least one name: bash's status is then 0.
            return Ok(if found { 0 } else { status.max(1) });
        }
        if self.builtin_enabled(name) {
            let outer = std::mem::replace(&mut self.via_command, true);
            let r = self.run_builtin(&name.clone(), rest);
            self.via_command = outer;
            return r;
        }
        let env = self.st.vars.environ();
        self.run_external_in(rest.to_vec(), env, search)
    }

    pub(super) fn b_alias(&mut self, args: &[String]) -> i32 {
        if let Some(o) = args.first().filter(|a| a.len() > 1 && a.starts_with('-'))
            && o != "--"
            && let Some(c) = o[1..].chars().find(|&c| c != 'p')
        {
            self.err(&format!("alias: -{c}: invalid option"));
            self.usage("alias");
            return 2;
        }
        let args = args.strip_prefix(&["--".to_string()]).unwrap_or(args);
        let args: Vec<&String> = args.iter().filter(|a| *a != "-p").collect();
        if args.is_empty() {
            let mut text = String::new();
            for (k, v) in self.st.aliases.iter() {
                text.push_str(&format!("alias {k}={}\n", crate::printf::quote_single(v)));
            }
            return self.out_str(&text);
        }
        let mut status = 0;
        let mut text = String::new();
        for a in args {
            match a.split_once('=') {
                Some((k, v)) => {
                    self.st.aliases.insert(k.to_string(), v.to_string());
                }
                None => match self.st.aliases.get(a.as_str()) {
                    Some(v) => {
                        text.push_str(&format!("alias {a}={}\n", crate::printf::quote_single(v)))
                    }
                    None => {
                        self.err(&format!("alias: {a}: not found"));
                        status = 1;
                    }
                },
            }
        }
        let s = self.out_str(&text);
        if s != 0 { s } else { status }
    }

    pub(super) fn b_unalias(&mut self, args: &[String]) -> i32 {
        let args = args.strip_prefix(&["--".to_string()]).unwrap_or(args);
        if args.is_empty() {
            self.usage("unalias");
            return 2;
        }
        let mut status = 0;
        for a in args {
            if a == "-a" {
                self.st.aliases.clear();
            } else if self.st.aliases.remove(a.as_str()).is_none() {
                self.err(&format!("unalias: {a}: not found"));
                status = 1;
            }
        }
        status
    }
}

/// Where `command -p` looks for programs: bash's standard utilities path.
const STANDARD_PATH: &str = "/bin:/usr/bin:/sbin:/usr/sbin";

pub(super) const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until", "do",
    "done", "in", "function", "time", "{", "}", "!", "[[", "]]", "coproc",
];
