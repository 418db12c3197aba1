//! Completion specifications as `complete` stores them in the shell's state, and how bash
//! prints one. The builtins that make and use them are in `builtins/complete.rs`.

/// The `-o` options in the order bash prints them.
pub(crate) const OPTIONS: [&str; 8] = [
    "bashdefault",
    "default",
    "dirnames",
    "filenames",
    "noquote",
    "nosort",
    "nospace",
    "plusdirs",
];

/// The actions in the order bash prints them: the twelve with a letter
/// of their own first (printed as that letter), then those only `-A` names.
pub(crate) const ACTIONS: [(&str, Option<char>); 24] = [
    ("alias", Some('a')),
    ("builtin", Some('b')),
    ("command", Some('c')),
    ("directory", Some('d')),
    ("export", Some('e')),
    ("file", Some('f')),
    ("group", Some('g')),
    ("job", Some('j')),
    ("keyword", Some('k')),
    ("service", Some('s')),
    ("user", Some('u')),
    ("variable", Some('v')),
    ("arrayvar", None),
    ("binding", None),
    ("disabled", None),
    ("enabled", None),
    ("function", None),
    ("helptopic", None),
    ("hostname", None),
    ("running", None),
    ("setopt", None),
    ("shopt", None),
    ("signal", None),
    ("stopped", None),
];

/// The names bash keeps the specifications of `-D`, `-E` and `-I` under.
pub(crate) const DEFAULT_CMD: &str = "_DefaultCmD_";
pub(crate) const EMPTY_CMD: &str = "_EmptycmD_";
pub(crate) const INITIAL_WORD: &str = "_InitialWorD_";

/// One completion specification: what `complete` was given for a command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompSpec {
    /// Bits of [`OPTIONS`].
    pub(crate) options: u8,
    /// Bits of [`ACTIONS`].
    pub(crate) actions: u32,
    pub(crate) glob: Option<String>,
    pub(crate) words: Option<String>,
    pub(crate) prefix: Option<String>,
    pub(crate) suffix: Option<String>,
    pub(crate) filter: Option<String>,
    pub(crate) command: Option<String>,
    pub(crate) function: Option<String>,
    /// When it was stored: bash lists each bucket of its table newest first.
    pub(crate) seq: u64,
}

impl CompSpec {
    /// The `complete` line that makes this specification for `name`, as bash prints it.
    pub(crate) fn line(&self, name: &str) -> String {
        let mut out = String::from("complete ");
        for (i, o) in OPTIONS.iter().enumerate() {
            if self.options & (1 << i) != 0 {
                out.push_str(&format!("-o {o} "));
            }
        }
        for (i, (a, letter)) in ACTIONS.iter().enumerate() {
            if self.actions & (1 << i) != 0 {
                match letter {
                    Some(l) => out.push_str(&format!("-{l} ")),
                    None => out.push_str(&format!("-A {a} ")),
                }
            }
        }
        for (flag, v) in [
            ("-G", &self.glob),
            ("-W", &self.words),
            ("-P", &self.prefix),
            ("-S", &self.suffix),
            ("-X", &self.filter),
            ("-C", &self.command),
        ] {
            if let Some(v) = v {
                out.push_str(&format!("{flag} {} ", single_quoted(v)));
            }
        }
        if let Some(f) = &self.function {
            out.push_str(&format!("-F {f} "));
        }
        out.push_str(match name {
            DEFAULT_CMD => "-D",
            EMPTY_CMD => "-E",
            INITIAL_WORD => "-I",
            n => n,
        });
        out
    }
}

/// `'text'`, a `'` in it written `'\''`, as bash's `sh_single_quote`.
/// Always plain single quotes: unlike `printf::quote_single` (`${x@Q}`, `declare -p`), bash
/// never switches to `$'...'` here, even for control characters.
pub(crate) fn single_quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}
