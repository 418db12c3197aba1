//! `column` as util-linux 2.38 lays text out: by default entries fill columns of tab stops
//! across the width (`-x`: rows first); `-t` makes a table of the input's fields.

use std::io::Read;

const HELP: &str = "\
Usage: column [options] [file ...]

Columnate lists.

  -t, --table                  make a table of the input's fields
  -s, --separator <string>     characters that delimit fields (-t; default
                               whitespace, where runs count as one)
  -o, --output-separator <s>   text between table columns (default two spaces)
  -N, --table-columns <names>  comma-separated header line for the table
  -R, --table-right <columns>  right-align these columns (numbers or names)
  -c, --output-width <width>   width of the output (default $COLUMNS or 80)
  -x, --fillrows               fill rows before columns
  -h, --help                   display this help
";

struct Opts {
    table: bool,
    sep: Option<String>,
    osep: String,
    names: Option<Vec<String>>,
    right: Vec<String>,
    width: usize,
    fillrows: bool,
}

fn usage(msg: &str) -> i32 {
    eprintln!("column: {msg}\nTry 'column --help' for more information.");
    1
}

pub fn main(args: &[String]) -> i32 {
    let args = &crate::split_clusters(args, "soNRc");
    let mut o = Opts {
        table: false,
        sep: None,
        osep: "  ".into(),
        names: None,
        right: Vec::new(),
        width: std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.parse().ok())
            .filter(|&c: &usize| c > 0)
            .unwrap_or(80),
        fillrows: false,
    };
    let mut files = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            files.extend(args[i + 1..].iter().cloned());
            break;
        }
        if !a.starts_with('-') || a == "-" {
            files.push(a.to_string());
            i += 1;
            continue;
        }
        let (opt, inline) = if let Some(long) = a.strip_prefix("--") {
            match long.split_once('=') {
                Some((k, v)) => (format!("--{k}"), Some(v.to_string())),
                None => (a.to_string(), None),
            }
        } else {
            (
                a[..2].to_string(),
                (a.len() > 2).then(|| a[2..].to_string()),
            )
        };
        let takes = matches!(
            opt.as_str(),
            "-s" | "--separator"
                | "-o"
                | "--output-separator"
                | "-N"
                | "--table-columns"
                | "-R"
                | "--table-right"
                | "-c"
                | "--output-width"
        );
        let val = if takes {
            match inline {
                Some(v) => Some(v),
                None => {
                    i += 1;
                    match args.get(i) {
                        Some(v) => Some(v.clone()),
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
            None
        };
        match opt.as_str() {
            "-h" | "--help" => {
                crate::out(HELP.as_bytes());
                return 0;
            }
            "-V" | "--version" => {
                crate::out(b"column (wasmsand)\n");
                return 0;
            }
            "-t" | "--table" => o.table = true,
            "-x" | "--fillrows" => o.fillrows = true,
            "-s" | "--separator" => o.sep = val,
            "-o" | "--output-separator" => o.osep = val.unwrap_or_default(),
            "-N" | "--table-columns" => {
                o.names = val.map(|v| v.split(',').map(str::to_string).collect())
            }
            "-R" | "--table-right" => {
                o.right = val
                    .unwrap_or_default()
                    .split(',')
                    .map(str::to_string)
                    .collect()
            }
            "-c" | "--output-width" => match val.as_deref().map(str::parse::<usize>) {
                Some(Ok(w)) => o.width = w,
                _ => {
                    return usage(&format!(
                        "invalid columns argument: '{}'",
                        val.unwrap_or_default()
                    ));
                }
            },
            _ if opt.starts_with("--") => {
                return usage(&format!("unrecognized option '{opt}'"));
            }
            _ => return usage(&format!("invalid option -- '{}'", &opt[1..])),
        }
        i += 1;
    }
    if o.table && o.fillrows {
        eprintln!("column: mutually exclusive arguments: --table --fillrows");
        return 1;
    }
    run(&o, &files)
}

fn read_all(files: &[String]) -> Result<String, i32> {
    let mut text = Vec::new();
    if files.is_empty() {
        let _ = std::io::stdin().read_to_end(&mut text);
    }
    for f in files {
        let r = if f == "-" {
            std::io::stdin().read_to_end(&mut text).map(|_| ())
        } else {
            std::fs::read(f).map(|d| text.extend(d))
        };
        if let Err(e) = r {
            eprintln!("column: {f}: {}", crate::errno_text(&e));
            return Err(1);
        }
    }
    Ok(String::from_utf8_lossy(&text).into_owned())
}

fn width(s: &str) -> usize {
    s.chars().count()
}

fn run(o: &Opts, files: &[String]) -> i32 {
    let text = match read_all(files) {
        Ok(t) => t,
        Err(c) => return c,
    };
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_start().is_empty())
        .collect();
    let out = if o.table {
        table(o, &lines)
    } else {
        fill(o, &lines)
    };
    crate::out(out.as_bytes());
    0
}

fn table(o: &Opts, lines: &[&str]) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    if let Some(n) = &o.names {
        rows.push(n.clone());
    }
    for l in lines {
        let cells: Vec<String> = match &o.sep {
            None => l
                .split([' ', '\t'])
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect(),
            Some(s) => l.split(|c| s.contains(c)).map(str::to_string).collect(),
        };
        rows.push(cells);
    }
    let ncols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0; ncols];
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(width(c));
        }
    }
    let right: Vec<bool> = (0..ncols)
        .map(|i| {
            o.right.iter().any(|r| {
                r.parse::<usize>().is_ok_and(|n| n == i + 1)
                    || o.names.as_ref().and_then(|n| n.get(i)) == Some(r)
            })
        })
        .collect();
    let mut out = String::new();
    for r in &rows {
        let mut line = String::new();
        for i in 0..ncols {
            let c = r.get(i).map(String::as_str).unwrap_or("");
            let pad = widths[i] - width(c);
            if right[i] {
                line.push_str(&" ".repeat(pad));
                line.push_str(c);
            } else {
                line.push_str(c);
                if i + 1 < ncols {
                    line.push_str(&" ".repeat(pad));
                }
            }
            if i + 1 < ncols {
                line.push_str(&o.osep);
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// util-linux's layout: every column is the longest entry rounded up past the next tab stop,
/// entries are followed by tabs up to their column's end.
fn fill(o: &Opts, ents: &[&str]) -> String {
    let mut out = String::new();
    if ents.is_empty() {
        return out;
    }
    let maxlen = ents.iter().map(|e| width(e)).max().unwrap_or(0);
    let maxlength = (maxlen + 8) & !7;
    if maxlength >= o.width {
        for e in ents {
            out.push_str(e);
            out.push('\n');
        }
        return out;
    }
    let numcols = (o.width / maxlength).max(1);
    let pad_to = |out: &mut String, chcnt: &mut usize, endcol: usize| {
        loop {
            let cnt = (*chcnt + 8) & !7;
            if cnt > endcol {
                break;
            }
            out.push('\t');
            *chcnt = cnt;
        }
    };
    if o.fillrows {
        let (mut chcnt, mut col, mut endcol) = (0, 0, maxlength);
        for (k, e) in ents.iter().enumerate() {
            out.push_str(e);
            chcnt += width(e);
            if k + 1 == ents.len() {
                break;
            }
            col += 1;
            if col == numcols {
                chcnt = 0;
                col = 0;
                endcol = maxlength;
                out.push('\n');
            } else {
                pad_to(&mut out, &mut chcnt, endcol);
                endcol += maxlength;
            }
        }
        if chcnt > 0 {
            out.push('\n');
        }
    } else {
        let numrows = ents.len().div_ceil(numcols);
        for row in 0..numrows {
            let mut endcol = maxlength;
            let mut chcnt = 0;
            let mut base = row;
            for _ in 0..numcols {
                out.push_str(ents[base]);
                chcnt += width(ents[base]);
                base += numrows;
                if base >= ents.len() {
                    break;
                }
                pad_to(&mut out, &mut chcnt, endcol);
                endcol += maxlength;
            }
            out.push('\n');
        }
    }
    out
}
