//! An awk interpreter that follows GNU awk (gawk 5): its command line, language extensions,
//! output formatting, error messages and exit statuses.
//!
//! Everything that plain `std` cannot do inside a WASI sandbox (running commands) goes through
//! the [`Host`] trait; files, stdin, stdout and stderr are plain `std`.

mod array;
mod ast;
mod builtins;
mod format;
mod interp;
mod io;
mod lexer;
mod parser;
mod regex;
mod time;
mod value;

use interp::{Flow, Interp};

/// What awk needs from outside that plain std cannot give inside the sandbox.
pub trait Host {
    /// Runs `command` with `/bin/sh -c` semantics; `input` (if Some) is its standard input;
    /// returns its standard output bytes and exit status. Used by `"cmd" | getline` (run when
    /// first read; the command's whole output is then read line by line) and `print ... | "cmd"`
    /// (the bytes printed to it are collected and the command runs at close()/exit, its
    /// output going to awk's stdout).
    fn run_captured(
        &mut self,
        command: &str,
        input: Option<&[u8]>,
    ) -> std::io::Result<(Vec<u8>, i32)>;
    /// Runs `command` with awk's own stdout/stderr (for system()); awk's stdout must be
    /// flushed before. Returns its exit status.
    fn run_inherit(&mut self, command: &str) -> std::io::Result<i32>;
}

/// A [`Host`] that runs commands with `std::process` (native builds only).
#[cfg(not(target_os = "wasi"))]
pub struct ProcessHost;

#[cfg(not(target_os = "wasi"))]
fn exit_code(st: std::process::ExitStatus) -> i32 {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = st.signal() {
            return 256 + sig;
        }
    }
    st.code().unwrap_or(-1)
}

#[cfg(not(target_os = "wasi"))]
impl Host for ProcessHost {
    fn run_captured(
        &mut self,
        command: &str,
        input: Option<&[u8]>,
    ) -> std::io::Result<(Vec<u8>, i32)> {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let mut child = Command::new("/bin/sh")
            .arg("-c")
            .arg(command)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::inherit()
            })
            .stdout(Stdio::piped())
            .spawn()?;
        // Feed stdin from another thread so a command that writes a lot before reading all of
        // its input cannot deadlock against us.
        let writer = match (input, child.stdin.take()) {
            (Some(data), Some(mut stdin)) => {
                let data = data.to_vec();
                Some(std::thread::spawn(move || {
                    let _ = stdin.write_all(&data);
                }))
            }
            _ => None,
        };
        let out = child.wait_with_output()?;
        if let Some(w) = writer {
            let _ = w.join();
        }
        Ok((out.stdout, exit_code(out.status)))
    }

    fn run_inherit(&mut self, command: &str) -> std::io::Result<i32> {
        let st = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(command)
            .status()?;
        Ok(exit_code(st))
    }
}

const USAGE: &str = "Usage: awk [POSIX or GNU style options] -f progfile [--] file ...
Usage: awk [POSIX or GNU style options] [--] 'program' file ...
POSIX options:\t\tGNU long options: (standard)
\t-f progfile\t\t--file=progfile
\t-F fs\t\t\t--field-separator=fs
\t-v var=val\t\t--assign=var=val
Short options:\t\tGNU long options: (extensions)
\t-e 'program-text'\t--source='program-text'
\t-V\t\t\t--version
";

enum Source {
    Text(String),
    File(String),
}

fn usage_error(msg: Option<String>) -> i32 {
    if let Some(m) = msg {
        eprintln!("awk: {m}");
    }
    eprint!("{USAGE}");
    1
}

fn read_source_file(path: &str) -> Result<String, String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    let r = if path == "-" || path == "/dev/stdin" {
        std::io::stdin().read_to_end(&mut bytes).map(|_| ())
    } else {
        std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut bytes).map(|_| ()))
    };
    match r {
        Ok(()) => Ok(value::decode(&bytes)),
        Err(e) => Err(format!(
            "awk: fatal: cannot open source file `{path}' for reading: {}",
            io::errno_text(&e)
        )),
    }
}

fn valid_name(n: &str) -> bool {
    let mut cs = n.chars();
    matches!(cs.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Runs awk with gawk's command line (`args` excludes argv[0]); returns the exit status.
pub fn main(args: Vec<String>, host: &mut dyn Host) -> i32 {
    main_with(args, host, None)
}

/// Standard input and a buffer for standard output, replacing the process's own (for tests).
pub(crate) struct Capture {
    pub stdin: Vec<u8>,
    pub out: std::rc::Rc<std::cell::RefCell<Vec<u8>>>,
}

pub(crate) fn main_with(args: Vec<String>, host: &mut dyn Host, cap: Option<Capture>) -> i32 {
    let mut sources: Vec<Source> = Vec::new();
    let mut assigns: Vec<(String, String)> = Vec::new();
    let mut fs: Option<String> = None;
    let mut i = 0;
    let take_arg = |i: &mut usize, inline: &str, opt: char| -> Result<String, i32> {
        if !inline.is_empty() {
            return Ok(inline.to_string());
        }
        *i += 1;
        match args.get(*i) {
            Some(a) => Ok(a.clone()),
            None => Err(usage_error(Some(format!(
                "option requires an argument -- {opt}"
            )))),
        }
    };
    while i < args.len() {
        let a = &args[i];
        if a == "--" {
            i += 1;
            break;
        }
        if a == "-" || !a.starts_with('-') {
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (name, val) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let need = |i: &mut usize| -> Result<String, i32> {
                if let Some(v) = &val {
                    return Ok(v.clone());
                }
                *i += 1;
                args.get(*i).cloned().ok_or_else(|| {
                    usage_error(Some(format!("option '--{name}' requires an argument")))
                })
            };
            match name {
                "version" => {
                    println!(
                        "GNU Awk 5.2.1 compatible (wasm-awk {})",
                        env!("CARGO_PKG_VERSION")
                    );
                    return 0;
                }
                "help" | "usage" => {
                    print!("{USAGE}");
                    return 0;
                }
                "source" => match need(&mut i) {
                    Ok(v) => sources.push(Source::Text(v)),
                    Err(c) => return c,
                },
                "file" | "exec" => match need(&mut i) {
                    Ok(v) => sources.push(Source::File(v)),
                    Err(c) => return c,
                },
                "field-separator" => match need(&mut i) {
                    Ok(v) => fs = Some(v),
                    Err(c) => return c,
                },
                "assign" => match need(&mut i).and_then(|v| assignment(&v)) {
                    Ok(pair) => assigns.push(pair),
                    Err(c) => return c,
                },
                "characters-as-bytes"
                | "traditional"
                | "copyright"
                | "gen-pot"
                | "lint"
                | "lint-old"
                | "bignum"
                | "use-lc-numeric"
                | "non-decimal-data"
                | "optimize"
                | "no-optimize"
                | "posix"
                | "re-interval"
                | "sandbox"
                | "dump-variables"
                | "debug"
                | "pretty-print"
                | "profile"
                | "trace"
                | "include"
                | "load" => {}
                _ => {
                    return usage_error(Some(format!("unrecognized option '{a}'")));
                }
            }
            i += 1;
            continue;
        }
        let opt = a[1..].chars().next().unwrap_or(' ');
        let inline = &a[1 + opt.len_utf8()..];
        match opt {
            'F' => match take_arg(&mut i, inline, 'F') {
                Ok(v) => fs = Some(v),
                Err(c) => return c,
            },
            'v' => match take_arg(&mut i, inline, 'v').and_then(|v| assignment(&v)) {
                Ok(pair) => assigns.push(pair),
                Err(c) => return c,
            },
            'f' | 'E' => match take_arg(&mut i, inline, opt) {
                Ok(v) => sources.push(Source::File(v)),
                Err(c) => return c,
            },
            'e' => match take_arg(&mut i, inline, 'e') {
                Ok(v) => sources.push(Source::Text(v)),
                Err(c) => return c,
            },
            'V' => {
                println!(
                    "GNU Awk 5.2.1 compatible (wasm-awk {})",
                    env!("CARGO_PKG_VERSION")
                );
                return 0;
            }
            'h' => {
                print!("{USAGE}");
                return 0;
            }
            'i' | 'l' => {
                if take_arg(&mut i, inline, opt).is_err() {
                    return 1;
                }
            }
            'b' | 'c' | 'C' | 'g' | 'M' | 'N' | 'n' | 'O' | 'P' | 'r' | 's' | 'S' | 't' | 'd'
            | 'D' | 'o' | 'p' | 'L' | 'I' => {}
            _ => {
                return usage_error(Some(format!("invalid option -- '{opt}'")));
            }
        }
        i += 1;
    }
    let mut operands: Vec<String> = args[i.min(args.len())..].to_vec();
    if sources.is_empty() {
        if operands.is_empty() {
            return usage_error(None);
        }
        sources.push(Source::Text(operands.remove(0)));
    }
    // Tokenize every source; they form one program.
    let mut names: Vec<String> = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    let mut toks = Vec::new();
    for (k, s) in sources.into_iter().enumerate() {
        let (name, text) = match s {
            Source::Text(t) => ("cmd. line".to_string(), t),
            Source::File(p) => match read_source_file(&p) {
                Ok(t) => (p, t),
                Err(m) => {
                    eprintln!("{m}");
                    return 2;
                }
            },
        };
        match lexer::tokenize(&text, k as u16) {
            Ok(mut t) => {
                if !toks.is_empty() {
                    // Sources are separate units; keep a line break between them.
                }
                toks.append(&mut t);
            }
            Err(e) => {
                names.push(name);
                texts.push(text);
                report_parse_error(&names, &texts, e.pos, &e.msg, true);
                return 1;
            }
        }
        names.push(name);
        texts.push(text);
    }
    toks.push(lexer::Token {
        tok: lexer::Tok::Eof,
        pos: toks.last().map(|t| t.pos).unwrap_or_default(),
    });
    let prog = match parser::Parser::new(toks).parse_program() {
        Ok(p) => p,
        Err(e) => {
            report_parse_error(&names, &texts, e.pos, &e.msg, e.caret);
            return 1;
        }
    };
    for (n, _) in &assigns {
        if !valid_name(n) {
            eprintln!("awk: fatal: `{n}' is not a legal variable name");
            return 2;
        }
    }
    let mut it = Interp::new(&prog, host);
    if let Some(c) = cap {
        it.capture = Some(c.out);
        it.stdin_data = Some(c.stdin);
    }
    it.src_names = names;
    it.init_args("awk", &operands);
    if let Some(f) = fs {
        let f = if f == "t" {
            "\t".to_string()
        } else {
            lexer::unescape(&f)
        };
        let _ = it.assign_command_var("FS", &f.replace('\\', "\\\\"));
    }
    for (n, v) in &assigns {
        if let Err(Flow::Fatal(m)) = it.assign_command_var(n, v) {
            return report_fatal(&mut it, &m);
        }
    }
    run(&mut it)
}

fn report_fatal(it: &mut Interp, msg: &str) -> i32 {
    it.flush_stdout();
    if let Some(rest) = msg.strip_prefix('\u{0}') {
        eprintln!("awk: fatal: {rest}");
    } else {
        eprintln!("{}fatal: {msg}", it.location());
    }
    2
}

fn run(it: &mut Interp) -> i32 {
    let mut exited = false;
    match it.run_begin() {
        Ok(()) => {}
        Err(Flow::Exit) => exited = true,
        Err(Flow::Fatal(m)) => return report_fatal(it, &m),
        Err(_) => {}
    }
    if !exited && it.needs_main_loop() {
        match it.run_main() {
            Ok(()) => {}
            Err(Flow::Exit) => {}
            Err(Flow::Fatal(m)) => return report_fatal(it, &m),
            Err(_) => {}
        }
    }
    match it.run_end() {
        Ok(()) | Err(Flow::Exit) => {}
        Err(Flow::Fatal(m)) => return report_fatal(it, &m),
        Err(_) => {}
    }
    it.close_all();
    it.exit_code
}

fn report_parse_error(names: &[String], texts: &[String], pos: lexer::Pos, msg: &str, caret: bool) {
    let name = names
        .get(pos.src as usize)
        .map(String::as_str)
        .unwrap_or("cmd. line");
    let prefix = format!("awk: {}:{}:", name, pos.line.max(1));
    if caret {
        let line = texts
            .get(pos.src as usize)
            .and_then(|t| t.lines().nth(pos.line.saturating_sub(1) as usize))
            .unwrap_or("");
        eprintln!("{prefix} {line}");
        let pad: String = line
            .chars()
            .take(pos.col as usize)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        eprintln!("{prefix} {pad}^ {msg}");
    } else {
        eprintln!("{prefix} {msg}");
        if msg.contains("is not allowed outside a loop") {
            // gawk reports this one twice.
            eprintln!("{prefix} {msg}");
        }
    }
}

/// A `-v` argument as (name, value); gawk's message and status 2 when it has no `=`.
fn assignment(v: &str) -> Result<(String, String), i32> {
    match v.split_once('=') {
        Some((n, x)) => Ok((n.to_string(), x.to_string())),
        None => {
            eprintln!("awk: fatal: `{v}' argument to `-v' not in `var=value' form");
            Err(2)
        }
    }
}

// The tests run commands through the process host, which exists only natively.
#[cfg(all(test, not(target_os = "wasi")))]
mod tests;

#[cfg(all(test, not(target_os = "wasi")))]
mod tests_support {
    use std::cell::RefCell;
    use std::rc::Rc;

    /// Runs awk on `input` with the process host; returns what it printed and its status.
    pub fn run(args: &[&str], input: &[u8]) -> (Vec<u8>, i32) {
        let out = Rc::new(RefCell::new(Vec::new()));
        let cap = super::Capture {
            stdin: input.to_vec(),
            out: out.clone(),
        };
        let args = args.iter().map(|s| s.to_string()).collect();
        let status = super::main_with(args, &mut super::ProcessHost, Some(cap));
        let v = out.borrow().clone();
        (v, status)
    }
}
