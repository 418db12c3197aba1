//! sort: uutils' sort, except where it would start a thread, which WASI cannot: its merge
//! (`-m`) and its check (`-c`, `-C`, `--check`) read on a second thread and abort. A merge of
//! sorted inputs is their sort, so `-m` sorts. A check asks uutils' sort itself, with the same
//! ordering options, whether a prefix of the input is unchanged by sorting, and finds the first
//! line out of order by bisection, so every ordering option means what it means in a sort.

use std::ffi::OsString;
use std::io::Read;

#[derive(Clone, Copy, PartialEq)]
enum Check {
    No,
    Diagnose,
    Quiet,
}

/// Short options that take a value (the rest of the cluster, or the next argument).
const SHORT_WITH_VALUE: &str = "koStT";
/// Long options that take a value, when it is not attached with `=`.
const LONG_WITH_VALUE: &[&str] = &[
    "--key",
    "--output",
    "--field-separator",
    "--buffer-size",
    "--temporary-directory",
    "--files0-from",
    "--parallel",
    "--batch-size",
    "--sort",
    "--random-source",
    "--compress-program",
];

struct Parsed {
    /// The arguments without the merge and check options.
    kept: Vec<OsString>,
    merge: bool,
    check: Check,
    output: bool,
    zero: bool,
    files: Vec<OsString>,
}

fn parse(args: &[OsString]) -> Parsed {
    let mut p = Parsed {
        kept: vec![args[0].clone()],
        merge: false,
        check: Check::No,
        output: false,
        zero: false,
        files: Vec::new(),
    };
    let mut i = 1;
    let mut options_done = false;
    while i < args.len() {
        let a = args[i].to_string_lossy().into_owned();
        i += 1;
        if options_done || a == "-" || !a.starts_with('-') {
            p.files.push(args[i - 1].clone());
            p.kept.push(args[i - 1].clone());
            continue;
        }
        if a == "--" {
            options_done = true;
            p.kept.push(args[i - 1].clone());
            continue;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            match (name, value) {
                ("merge", _) => p.merge = true,
                ("check", None | Some("diagnose-first")) => p.check = Check::Diagnose,
                ("check", Some("quiet" | "silent")) => p.check = Check::Quiet,
                _ => {
                    p.output |= name == "output";
                    p.zero |= name == "zero-terminated";
                    p.kept.push(args[i - 1].clone());
                    if value.is_none() && LONG_WITH_VALUE.contains(&a.as_str()) && i < args.len() {
                        p.kept.push(args[i].clone());
                        i += 1;
                    }
                }
            }
            continue;
        }
        let mut cluster = String::from("-");
        for (at, c) in a.char_indices().skip(1) {
            match c {
                'm' => p.merge = true,
                'c' => p.check = Check::Diagnose,
                'C' => p.check = Check::Quiet,
                _ if SHORT_WITH_VALUE.contains(c) => {
                    p.output |= c == 'o';
                    cluster.push_str(&a[at..]);
                    if at + c.len_utf8() == a.len() && i < args.len() {
                        p.kept.push(OsString::from(cluster));
                        p.kept.push(args[i].clone());
                        i += 1;
                        cluster = String::new();
                    }
                    break;
                }
                _ => {
                    p.zero |= c == 'z';
                    cluster.push(c);
                }
            }
        }
        if cluster.len() > 1 {
            p.kept.push(OsString::from(cluster));
        }
    }
    p
}

pub fn uumain(args: std::vec::IntoIter<OsString>) -> i32 {
    let args: Vec<OsString> = args.collect();
    if args.is_empty() {
        return uu_sort::uumain(args.into_iter());
    }
    let p = parse(&args);
    if p.check == Check::No {
        return if p.merge {
            uu_sort::uumain(p.kept.into_iter())
        } else {
            uu_sort::uumain(args.into_iter())
        };
    }
    if p.files.len() > 1 {
        let flag = if p.check == Check::Quiet { 'C' } else { 'c' };
        eprintln!(
            "sort: extra operand '{}' not allowed with -{flag}",
            p.files[1].to_string_lossy()
        );
        return 2;
    }
    let name = p.files.first().cloned().unwrap_or_else(|| "-".into());
    let input = if name == "-" {
        let mut v = Vec::new();
        std::io::stdin().read_to_end(&mut v).map(|_| v)
    } else {
        std::fs::read(&name)
    };
    let input = match input {
        // A check with an output file fails in uutils' own words before its thread starts.
        Ok(_) if p.output => return uu_sort::uumain(args.into_iter()),
        Ok(i) => i,
        Err(e) => {
            let text = e.to_string();
            let text = text.split(" (os error").next().unwrap_or(&text);
            eprintln!("sort: open failed: {}: {text}", name.to_string_lossy());
            return 2;
        }
    };
    check(&p, &name.to_string_lossy(), &input)
}

fn check(p: &Parsed, name: &str, input: &[u8]) -> i32 {
    let sep = if p.zero { b'\0' } else { b'\n' };
    let mut lines: Vec<&[u8]> = input.split(|b| *b == sep).collect();
    if input.last() == Some(&sep) || input.is_empty() {
        lines.pop();
    }
    let mut oracle = match Oracle::new(p, sep) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("sort: cannot check the order here: {e}");
            return 2;
        }
    };
    // The smallest k whose prefix lines[..=k] sorting would change is the first line out of
    // order.
    match oracle.unchanged(&lines) {
        Ok(true) => return 0,
        Ok(false) => {}
        Err(code) => return code,
    }
    // One line is always in order, the whole input is not.
    let (mut lo, mut hi) = (0, lines.len() - 1);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match oracle.unchanged(&lines[..=mid]) {
            Ok(true) => lo = mid,
            Ok(false) => hi = mid,
            Err(code) => return code,
        }
    }
    let first_bad = hi;
    if p.check == Check::Diagnose {
        eprintln!(
            "sort: {name}:{}: disorder: {}",
            first_bad + 1,
            String::from_utf8_lossy(lines[first_bad])
        );
    }
    1
}

/// uutils' sort with the caller's ordering options, on files in the temporary directory.
struct Oracle {
    args: Vec<OsString>,
    sep: u8,
    input: String,
    output: String,
}

impl Oracle {
    fn new(p: &Parsed, sep: u8) -> std::io::Result<Oracle> {
        let dir = std::env::var("TMPDIR").unwrap_or_else(|_| "/tmp".into());
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let base = format!("{}/.sort-check-{stamp}", dir.trim_end_matches('/'));
        let input = format!("{base}.in");
        std::fs::write(&input, b"")?;
        let mut args: Vec<OsString> = p.kept.clone();
        // The operands are the checked file's; the oracle names its own.
        args.retain(|a| !p.files.contains(a));
        Ok(Oracle {
            args,
            sep,
            input,
            output: format!("{base}.out"),
        })
    }

    /// Whether sorting `lines` gives them back as they are; Err(status) when sort failed.
    fn unchanged(&mut self, lines: &[&[u8]]) -> Result<bool, i32> {
        let mut text = Vec::new();
        for l in lines {
            text.extend_from_slice(l);
            text.push(self.sep);
        }
        std::fs::write(&self.input, &text).map_err(|_| 2)?;
        let mut args = self.args.clone();
        args.extend([
            OsString::from("-o"),
            OsString::from(&self.output),
            OsString::from("--"),
            OsString::from(&self.input),
        ]);
        let code = uu_sort::uumain(args.into_iter());
        if code != 0 {
            return Err(code);
        }
        let sorted = std::fs::read(&self.output).map_err(|_| 2)?;
        Ok(sorted == text)
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.input);
        let _ = std::fs::remove_file(&self.output);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn merge_and_check_come_out_of_clusters_and_values_stay() {
        let p = parse(&os(&["sort", "-mnr", "-t", ",", "-k2,2", "-c", "f"]));
        assert!(p.merge);
        assert!(p.check == Check::Diagnose);
        assert_eq!(p.kept, os(&["sort", "-nr", "-t", ",", "-k2,2", "f"]));
        let p = parse(&os(&["sort", "-tc", "--check=quiet", "-o", "x"]));
        assert!(p.check == Check::Quiet && p.output);
        assert_eq!(p.kept, os(&["sort", "-tc", "-o", "x"]));
    }
}
