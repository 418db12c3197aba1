//! awk: the awk-rs interpreter (POSIX awk plus common gawk extensions) behind a front end that
//! follows gawk's command line: -F (with `t` meaning tab), -v, -f (repeatable), `--`, and
//! `var=value` operands. Files open lazily so output from earlier files is written before a
//! missing later file is reported, as gawk does.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};

use awk_rs::{Interpreter, Lexer, Parser};

/// Same escape processing as a string literal in the program, which POSIX requires for -v.
fn unescape(v: &str) -> String {
    let mut out = String::new();
    let mut it = v.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('\\') => out.push('\\'),
            Some('"') => out.push('"'),
            Some('/') => out.push('/'),
            Some('a') => out.push('\x07'),
            Some('b') => out.push('\x08'),
            Some('f') => out.push('\x0c'),
            Some('v') => out.push('\x0b'),
            Some(d @ '0'..='7') => {
                let mut n = d.to_digit(8).unwrap();
                for _ in 0..2 {
                    match it.peek().and_then(|c| c.to_digit(8)) {
                        Some(x) => {
                            n = n * 8 + x;
                            it.next();
                        }
                        None => break,
                    }
                }
                out.push(char::from_u32(n).unwrap_or('?'));
            }
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    out
}

enum Source {
    Stdin,
    Path(String),
}

/// Opens its file on first read; a file that cannot be opened ends awk the way gawk does.
struct LazyInput {
    source: Source,
    reader: Option<Box<dyn BufRead>>,
}

impl LazyInput {
    fn reader(&mut self) -> io::Result<&mut Box<dyn BufRead>> {
        if self.reader.is_none() {
            let r: Box<dyn BufRead> = match &self.source {
                Source::Stdin => Box::new(BufReader::new(io::stdin())),
                Source::Path(p) => match File::open(p) {
                    Ok(f) => Box::new(BufReader::new(f)),
                    Err(e) => {
                        let _ = io::stdout().flush();
                        eprintln!(
                            "awk: fatal: cannot open file `{p}' for reading: {}",
                            crate::util::errno_text(&e)
                        );
                        std::process::exit(2);
                    }
                },
            };
            self.reader = Some(r);
        }
        Ok(self.reader.as_mut().expect("just set"))
    }
}

impl Read for LazyInput {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reader()?.read(buf)
    }
}

impl BufRead for LazyInput {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.reader()?.fill_buf()
    }
    fn consume(&mut self, n: usize) {
        if let Some(r) = self.reader.as_mut() {
            r.consume(n);
        }
    }
}

fn is_assignment(s: &str) -> bool {
    match s.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

const USAGE: &str = "Usage: awk [POSIX or GNU style options] -f progfile [--] file ...\nUsage: awk [POSIX or GNU style options] [--] 'program' file ...";

pub fn main(args: Vec<String>) -> i32 {
    let mut fs: Option<String> = None;
    let mut vars: Vec<(String, String)> = Vec::new();
    let mut program: Option<String> = None;
    let mut progfiles: Vec<String> = Vec::new();
    let mut operands: Vec<String> = Vec::new();
    let mut i = 1;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "--" {
            operands.extend(args[i..].iter().cloned());
            break;
        }
        if !a.starts_with('-') || a == "-" {
            operands.push(a.clone());
            operands.extend(args[i..].iter().cloned());
            break;
        }
        let value = |flag: &str, inline: &str, i: &mut usize| -> Option<String> {
            if !inline.is_empty() {
                return Some(inline.to_string());
            }
            let v = args.get(*i).cloned();
            if v.is_none() {
                eprintln!("awk: option requires an argument -- {flag}\n{USAGE}");
            }
            *i += 1;
            v
        };
        if let Some(rest) = a.strip_prefix("-F") {
            let Some(v) = value("F", rest, &mut i) else {
                return 2;
            };
            fs = Some(if v == "t" { "\t".into() } else { unescape(&v) });
        } else if let Some(rest) = a.strip_prefix("--field-separator") {
            let Some(v) = value("F", rest.trim_start_matches('='), &mut i) else {
                return 2;
            };
            fs = Some(unescape(&v));
        } else if let Some(rest) = a.strip_prefix("-v").or_else(|| a.strip_prefix("--assign")) {
            let Some(v) = value("v", rest.trim_start_matches('='), &mut i) else {
                return 2;
            };
            match v.split_once('=') {
                Some((n, val)) if is_assignment(&v) => vars.push((n.to_string(), unescape(val))),
                _ => {
                    eprintln!("awk: `{v}' argument to `-v' not in `var=value' form\n{USAGE}");
                    return 2;
                }
            }
        } else if let Some(rest) = a.strip_prefix("-f").or_else(|| a.strip_prefix("--file")) {
            let Some(v) = value("f", rest.trim_start_matches('='), &mut i) else {
                return 2;
            };
            progfiles.push(v);
        } else if a == "--version" || a == "-V" {
            println!("awk (wasmsand, awk-rs interpreter)");
            return 0;
        } else if a == "--posix" || a == "-P" || a == "--traditional" || a == "-c" {
            // Accepted for compatibility; the interpreter's defaults suit both.
        } else {
            eprintln!("awk: unknown option `{a}'\n{USAGE}");
            return 2;
        }
    }
    let source = if progfiles.is_empty() {
        if operands.is_empty() {
            eprintln!("{USAGE}");
            return 2;
        }
        program.get_or_insert(operands.remove(0)).clone()
    } else {
        let mut s = String::new();
        for f in &progfiles {
            let text = if f == "-" {
                let mut t = String::new();
                io::stdin().read_to_string(&mut t).map(|_| t)
            } else {
                std::fs::read_to_string(f)
            };
            match text {
                Ok(t) => {
                    s.push_str(&t);
                    s.push('\n');
                }
                Err(e) => {
                    eprintln!(
                        "awk: fatal: can't open source file `{f}' for reading: {}",
                        crate::util::errno_text(&e)
                    );
                    return 2;
                }
            }
        }
        s
    };

    let tokens = match Lexer::new(&source).tokenize() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("awk: cmd. line:1: {e}");
            return 2;
        }
    };
    let prog = match Parser::new(tokens).parse() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("awk: cmd. line:1: {e}");
            return 2;
        }
    };
    let mut interp = Interpreter::new(&prog);
    if let Some(fs) = &fs {
        interp.set_fs(fs);
    }
    let mut argv = vec!["awk".to_string()];
    argv.extend(operands.iter().cloned());
    interp.set_args(argv);
    for (n, v) in &vars {
        interp.set_variable(n, v);
    }

    // `var=value` operands are applied up front: the interpreter takes all inputs at once, so
    // an assignment placed between two files also affects the first (a known difference).
    let mut inputs = Vec::new();
    let mut names = Vec::new();
    for op in &operands {
        if is_assignment(op) {
            let (n, v) = op.split_once('=').expect("checked");
            interp.set_variable(n, &unescape(v));
            continue;
        }
        let source = if op == "-" || op == "/dev/stdin" {
            Source::Stdin
        } else {
            Source::Path(op.clone())
        };
        inputs.push(LazyInput {
            source,
            reader: None,
        });
        names.push(op.clone());
    }
    if names.is_empty() {
        inputs.push(LazyInput {
            source: Source::Stdin,
            reader: None,
        });
        names.push(String::new());
    }
    interp.set_filenames(names);
    let mut out = crate::util::Out::stdout();
    let code = match interp.run(inputs, &mut out) {
        Ok(c) => c,
        Err(e) => {
            out.flush();
            eprintln!("awk: {e}");
            2
        }
    };
    out.flush();
    code
}
