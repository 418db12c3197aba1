//! `strings` as GNU binutils prints them: runs of at least N printable characters (ASCII
//! graphic, space and tab; `-w`: all whitespace; `-e S`: bytes >= 128 too), from the whole file.

use std::io::Read;

const HELP: &str = "\
Usage: strings [option(s)] [file(s)]
 Print the runs of printable characters in each file (stdin by default).
  -a, --all                   scan the whole file (always the case here)
  -f, --print-file-name       print the file name before each string
  -n, --bytes=<number>, -<number>
                              the shortest run to print (default 4)
  -t, --radix={o,d,x}         print each string's offset in base 8, 10 or 16
  -o                          the same as --radix=o
  -w, --include-all-whitespace  newlines and other whitespace count as printable
  -e, --encoding={s,S}        s: 7-bit characters (default), S: 8-bit
  -s, --output-separator=<string>  printed after each string (default a newline)
  -h, --help                  display this information
";

fn usage(msg: &str) -> i32 {
    eprintln!("strings: {msg}");
    1
}

pub fn main(args: &[String]) -> i32 {
    let args = crate::split_clusters(args, "ntes");
    let mut min = 4usize;
    let mut radix: Option<char> = None;
    let mut names = false;
    let mut all_ws = false;
    let mut eight_bit = false;
    let mut sep = "\n".to_string();
    let mut files = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let (opt, inline) = match a.split_once('=') {
            Some((k, v)) if a.starts_with("--") => (k.to_string(), Some(v.to_string())),
            _ if !a.starts_with("--") && a.len() >= 2 && a.starts_with('-') => {
                let body = &a[1..];
                if body.bytes().all(|b| b.is_ascii_digit()) {
                    (String::from("-n"), Some(body.to_string()))
                } else if a.len() > 2 {
                    (a[..2].to_string(), Some(a[2..].to_string()))
                } else {
                    (a.to_string(), None)
                }
            }
            _ => (a.to_string(), None),
        };
        if !opt.starts_with('-') || opt == "-" {
            files.push(a.to_string());
            i += 1;
            continue;
        }
        if opt == "--" {
            files.extend(args[i + 1..].iter().cloned());
            break;
        }
        let needs = matches!(
            opt.as_str(),
            "-n" | "--bytes" | "-t" | "--radix" | "-e" | "--encoding" | "-s" | "--output-separator"
        );
        let val = if needs {
            match inline {
                Some(v) => v,
                None => {
                    i += 1;
                    match args.get(i) {
                        Some(v) => v.clone(),
                        None => {
                            return usage(&format!(
                                "option requires an argument -- '{}'",
                                opt.trim_start_matches('-')
                            ));
                        }
                    }
                }
            }
        } else {
            String::new()
        };
        match opt.as_str() {
            "-h" | "--help" => {
                crate::out(HELP.as_bytes());
                return 0;
            }
            "-v" | "-V" | "--version" => {
                crate::out(b"strings (wasmsand)\n");
                return 0;
            }
            "-a" | "--all" | "-d" | "--data" => {}
            "-f" | "--print-file-name" => names = true,
            "-w" | "--include-all-whitespace" => all_ws = true,
            "-o" => radix = Some('o'),
            "-n" | "--bytes" => match val.parse::<usize>() {
                Ok(n) if n > 0 => min = n,
                _ => return usage(&format!("invalid minimum string length {val}")),
            },
            "-t" | "--radix" => match val.as_str() {
                "o" | "d" | "x" => radix = val.chars().next(),
                _ => return usage(&format!("invalid radix: {val}")),
            },
            "-e" | "--encoding" => match val.as_str() {
                "s" => eight_bit = false,
                "S" => eight_bit = true,
                _ => return usage(&format!("invalid encoding {val} (only s and S here)")),
            },
            "-s" | "--output-separator" => sep = val,
            _ if opt.starts_with("--") => return usage(&format!("unrecognized option '{opt}'")),
            _ => return usage(&format!("invalid option -- '{}'", &opt[1..])),
        }
        i += 1;
    }
    let printable = |b: u8| {
        (0x20..0x7f).contains(&b)
            || b == b'\t'
            || (all_ws && matches!(b, b'\n' | b'\r' | 0x0b | 0x0c))
            || (eight_bit && b >= 0x80)
    };
    let mut status = 0;
    let inputs: Vec<Option<String>> = if files.is_empty() {
        vec![None]
    } else {
        files.into_iter().map(Some).collect()
    };
    for f in inputs {
        let data = match &f {
            Some(p) if p == "-" => {
                let mut d = Vec::new();
                let _ = std::io::stdin().read_to_end(&mut d);
                d
            }
            None => {
                let mut d = Vec::new();
                let _ = std::io::stdin().read_to_end(&mut d);
                d
            }
            Some(p) => match std::fs::read(p) {
                Ok(d) => d,
                Err(e) => {
                    let why = if e.kind() == std::io::ErrorKind::NotFound {
                        "No such file".to_string()
                    } else {
                        crate::errno_text(&e)
                    };
                    eprintln!("strings: '{p}': {why}");
                    status = 1;
                    continue;
                }
            },
        };
        let label = f.clone().unwrap_or_else(|| "{standard input}".into());
        let mut out = Vec::new();
        let mut start = 0;
        let mut k = 0;
        while k <= data.len() {
            if k < data.len() && printable(data[k]) {
                k += 1;
                continue;
            }
            if k - start >= min {
                if names {
                    out.extend_from_slice(format!("{label}: ").as_bytes());
                }
                match radix {
                    Some('o') => out.extend_from_slice(format!("{start:7o} ").as_bytes()),
                    Some('d') => out.extend_from_slice(format!("{start:7} ").as_bytes()),
                    Some(_) => out.extend_from_slice(format!("{start:7x} ").as_bytes()),
                    None => {}
                }
                out.extend_from_slice(&data[start..k]);
                out.extend_from_slice(sep.as_bytes());
            }
            k += 1;
            start = k;
        }
        crate::out(&out);
    }
    status
}
