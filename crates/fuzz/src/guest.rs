//! `guest_args`: the guest programs' option parsers, as a sandbox runs them. A tool from
//! `wasm-tools/commands.txt` gets an argument list built from option-shaped words (its own and
//! every tool's common ones), numbers, paths and free text, with chosen bytes on stdin, in a
//! fork of a prepared sandbox. Whatever the arguments, the program ends with a status and a
//! message of its own: never a Rust panic, a failed C assertion or a trap (`program
//! crashed`). Running out of the fork's memory or time is a limit doing its work, not a
//! finding.
//!
//! The fuzzer sees the host's side only (what the program asked of WASI, and how it ended):
//! the guests are wasm, which libFuzzer cannot instrument. The arguments are therefore built
//! from words that reach the parsers' branches, and not left to raw bytes alone.

use std::sync::OnceLock;

use arbitrary::{Arbitrary, Unstructured};

/// The command table the guests are built from: one command and its module per line.
const COMMANDS: &str = include_str!("../../../wasm-tools/commands.txt");

/// Commands left out: those that reach the network, the JavaScript engine (its start-up is
/// seconds under a fuzzer) and the test guests that exist to exhaust limits.
const LEFT_OUT: &[&str] = &["curl", "wget", "node", "js", "spin", "alloc", "flood"];

/// The programs under test: every other command of the table.
fn tools() -> &'static [&'static str] {
    static TOOLS: OnceLock<Vec<&'static str>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        COMMANDS
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|c| !LEFT_OUT.contains(c))
            .collect()
    })
}

/// Words that option parsers branch on: flags common to many tools, flags with values,
/// option terminators, and values of the forms they parse (sizes, ranges, formats).
const WORDS: &[&str] = &[
    "-",
    "--",
    "-n",
    "-c",
    "-f",
    "-d",
    "-e",
    "-s",
    "-t",
    "-k",
    "-r",
    "-R",
    "-i",
    "-v",
    "-x",
    "-z",
    "-0",
    "-1",
    "-a",
    "-b",
    "-l",
    "-o",
    "-p",
    "-q",
    "-u",
    "-w",
    "-h",
    "-H",
    "-L",
    "-P",
    "-E",
    "-F",
    "-N",
    "-S",
    "-T",
    "-C",
    "-A",
    "-B",
    "-m",
    "-g",
    "-j",
    "-y",
    "--help",
    "--version",
    "--null",
    "--zero-terminated",
    "--format=%s",
    "--sort=",
    "--color=never",
    "--max-depth=1",
    "--block-size=1K",
    "--bytes=",
    "--lines=",
    "--field-separator=,",
    "--output=",
    "--",
    "-n5",
    "-c3",
    "-3",
    "+2",
    "-k2,2n",
    "-t,",
    "-d,",
    "-f1-3",
    "-f2-",
    "-b1-",
    "--from=iec",
    "--to=si",
    "--suffix=B",
    "if=f.txt",
    "of=out",
    "bs=1",
    "count=2",
    "skip=1",
    "conv=ucase",
    "status=none",
    "-name",
    "-type",
    "-maxdepth",
    "-exec",
    "{}",
    ";",
    "+",
    "-print0",
    "-printf",
    "%p\\n",
    "-newer",
    "-size",
    "-mtime",
    "-o",
    "-a",
    "!",
    "(",
    ")",
    "s/a/b/g",
    "1d",
    "$p",
    "/a/,/b/p",
    "y/ab/ba/",
    "{print $1}",
    "BEGIN{x=1}",
    ".",
    ".[]",
    ".a",
    "-r",
    "--arg",
    "--argjson",
    "--slurp",
    "1+2",
    "scale=3",
    "0",
    "1",
    "-1",
    "999999999999999999999",
    "1e9",
    "0x10",
    "1K",
    "1M",
    "1G",
    "-0",
    "1.5",
    "1,2",
    "1-2",
    "%d",
    "%s",
    "%x",
    "%",
    "\\",
    "*",
    "?",
    "[a-z]",
    "f.txt",
    "/tmp/work",
    "/tmp/work/f.txt",
    "in",
    "out",
    "dir/",
    "/",
    "..",
    "-czf",
    "-xzf",
    "-tf",
    "-cf",
    "-C",
    "a.tar",
    "a.zip",
    "--stat",
    "log",
    "status",
    "init",
    "-U1",
    "-u",
    "--label",
    "--normal",
    "-y",
    "-W",
    "80",
    "HEAD",
    "--oneline",
    "--json",
    "select 1;",
    ".tables",
    ".mode",
    "-csv",
];

#[derive(Debug, Arbitrary)]
enum Arg {
    /// One of `WORDS`.
    Word(u8),
    /// A short option cluster (`-abc`) of the letters chosen.
    Short(Vec<u8>),
    /// A word joined to a value (`-n5`, `--lines=x`).
    Joined(u8, String),
    Number(i64),
    Text(String),
}

#[derive(Debug, Arbitrary)]
struct Input {
    tool: u8,
    args: Vec<Arg>,
    stdin: Vec<u8>,
}

fn word(i: u8) -> &'static str {
    WORDS[usize::from(i) % WORDS.len()]
}

impl Arg {
    fn text(&self) -> String {
        match self {
            Arg::Word(i) => word(*i).to_owned(),
            Arg::Short(letters) => {
                let mut s = String::from("-");
                s.extend(letters.iter().take(6).map(|b| char::from(b'a' + b % 26)));
                s
            }
            Arg::Joined(i, value) => format!("{}{value}", word(*i)),
            Arg::Number(n) => n.to_string(),
            Arg::Text(t) => t.clone(),
        }
    }
}

/// `s` in single quotes for the shell, with NUL bytes (which no argument can hold) dropped.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\0', "").replace('\'', "'\\''"))
}

/// The command line the input stands for, its stdin a file the run redirects.
fn command_line(input: &Input) -> String {
    let tools = tools();
    let mut line = tools[usize::from(input.tool) % tools.len()].to_owned();
    for a in input.args.iter().take(12) {
        line.push(' ');
        line.push_str(&quote(&a.text()));
    }
    line.push_str(" < /tmp/work/in");
    line
}

/// The contract, for the fuzzer's bytes.
pub fn run(data: &[u8]) {
    let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let line = command_line(&input);
    let sb = crate::shell::root()
        .fork()
        .expect("a fork of a live sandbox");
    sb.write_file("/tmp/work/in", &input.stdin)
        .expect("the fork takes its stdin file");
    if let Ok(r) = sb.run(&format!("cd /tmp/work && {line}")) {
        for said in [
            "program crashed",
            "panicked at",
            "Assertion failed",
            "assertion failed",
        ] {
            assert!(
                !r.stderr.contains(said),
                "`{line}` ended in {said:?} (status {}):\n{}",
                r.exit_code,
                r.stderr
            );
        }
    }
    sb.destroy();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tools_are_the_command_table_but_those_left_out() {
        let tools = tools();
        assert!(tools.len() > 80, "{tools:?}");
        for t in ["jq", "sed", "tar", "sqlite3", "git"] {
            assert!(tools.contains(&t), "{t} is missing");
        }
        for t in LEFT_OUT {
            assert!(!tools.contains(t), "{t} is in");
        }
    }
}
