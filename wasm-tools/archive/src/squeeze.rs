//! bzip2/bunzip2/bzcat (bzip2 1.0.8's command line and messages) and xz/unxz/xzcat (XZ Utils'),
//! over the codecs tar uses: compress `f` to `f.bz2`/`f.xz` and remove `f`, decompress back,
//! or write to standard output (`-c`, the `cat` names); `-k -f -t -q -v -1..-9 -z -d`.

use std::fs::{self, File};
use std::io::{self, BufReader, Read, Write};
use std::path::Path;

use crate::Mode;
use crate::codec::{Codec, Encoder};

/// Which program family, for its suffixes and its words.
#[derive(Clone, Copy, PartialEq)]
pub enum Family {
    Bzip2,
    Xz,
}

struct Opts {
    stdout: bool,
    keep: bool,
    force: bool,
    test: bool,
}

/// A failure: the message (empty for none) and the exit status it gives.
struct Fail(String, i32);

impl Family {
    fn codec(self) -> Codec {
        match self {
            Family::Bzip2 => Codec::Bzip2,
            Family::Xz => Codec::Xz,
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            Family::Bzip2 => ".bz2",
            Family::Xz => ".xz",
        }
    }

    /// The name a compressed file decompresses to, when its suffix says.
    fn original(self, f: &str) -> Option<String> {
        let pairs: &[(&str, &str)] = match self {
            Family::Bzip2 => &[
                (".bz2", ""),
                (".bz", ""),
                (".tbz2", ".tar"),
                (".tbz", ".tar"),
            ],
            Family::Xz => &[(".xz", ""), (".txz", ".tar")],
        };
        pairs.iter().find_map(|(suffix, new)| {
            f.strip_suffix(suffix)
                .filter(|stem| !stem.is_empty() && !stem.ends_with('/'))
                .map(|stem| format!("{stem}{new}"))
        })
    }
}

pub fn main(args: &[String], family: Family, mut mode: Mode, tool: &str) -> i32 {
    let mut o = Opts {
        stdout: mode == Mode::Cat,
        keep: false,
        force: false,
        test: false,
    };
    let mut files = Vec::new();
    let mut only_files = false;
    for a in args {
        if only_files || !a.starts_with('-') || a == "-" {
            files.push(a.clone());
            continue;
        }
        let long = match a.as_str() {
            "--" => {
                only_files = true;
                continue;
            }
            "--stdout" | "--to-stdout" => Some('c'),
            "--decompress" | "--uncompress" => Some('d'),
            "--compress" => Some('z'),
            "--keep" => Some('k'),
            "--force" => Some('f'),
            "--test" => Some('t'),
            "--quiet" | "--verbose" | "--small" | "--fast" | "--best" => Some('q'),
            _ if a.starts_with("--") => {
                eprintln!("{tool}: unrecognized option '{a}'");
                return 1;
            }
            _ => None,
        };
        let letters: Vec<char> = match long {
            Some(c) => vec![c],
            None => a[1..].chars().collect(),
        };
        for c in letters {
            match c {
                'c' => o.stdout = true,
                'd' => mode = Mode::Decompress,
                'z' => mode = Mode::Compress,
                'k' => o.keep = true,
                'f' => o.force = true,
                't' => o.test = true,
                'q' | 'v' | 's' | 'T' | '0'..='9' => {}
                _ => {
                    eprintln!("{tool}: invalid option -- '{c}'");
                    return 1;
                }
            }
        }
    }
    if mode == Mode::Cat {
        mode = Mode::Decompress;
        o.stdout = true;
    }
    if o.test {
        mode = Mode::Decompress;
    }
    if files.is_empty() {
        files.push("-".into());
    }
    let mut code = 0;
    for f in &files {
        if let Err(Fail(msg, status)) = one(f, family, mode, &o, tool) {
            if !msg.is_empty() {
                eprintln!("{tool}: {msg}");
            }
            code = code.max(status);
        }
    }
    code
}

fn one(f: &str, family: Family, mode: Mode, o: &Opts, tool: &str) -> Result<(), Fail> {
    let compress = mode == Mode::Compress;
    let bz = family == Family::Bzip2;
    let shown = if f == "-" { "(stdin)" } else { f };
    let input: Box<dyn Read> = if f == "-" {
        Box::new(io::stdin().lock())
    } else {
        let meta = fs::metadata(f).map_err(|e| {
            let why = crate::errno_text(&e);
            match family {
                Family::Bzip2 => Fail(format!("Can't open input file {f}: {why}."), 1),
                Family::Xz => Fail(format!("{f}: {why}"), 1),
            }
        })?;
        if meta.is_dir() {
            return Err(match family {
                Family::Bzip2 => Fail(format!("Input file {f} is a directory."), 1),
                Family::Xz => Fail(format!("{f}: Is a directory, skipping"), 2),
            });
        }
        if compress && !o.stdout && !o.force && family.original(f).is_some() {
            return Err(match family {
                Family::Bzip2 => Fail(
                    format!("Input file {f} already has {} suffix.", family.suffix()),
                    1,
                ),
                Family::Xz => Fail(format!("{f}: File already has `.xz' suffix, skipping"), 2),
            });
        }
        Box::new(BufReader::new(File::open(f).map_err(|e| {
            Fail(format!("{f}: {}", crate::errno_text(&e)), 1)
        })?))
    };
    let mut input = BufReader::new(input);
    if !compress {
        let head = io::BufRead::fill_buf(&mut input).map_err(|e| Fail(e.to_string(), 1))?;
        if Codec::sniff(head) != Some(family.codec()) {
            return Err(match family {
                Family::Bzip2 => Fail(format!("{shown} is not a bzip2 file."), 2),
                Family::Xz => Fail(format!("{shown}: File format not recognized"), 1),
            });
        }
    }
    let to_stdout = o.stdout || f == "-";
    let target = if to_stdout || o.test {
        None
    } else if compress {
        Some(format!("{f}{}", family.suffix()))
    } else {
        match family.original(f) {
            Some(t) => Some(t),
            None if bz => {
                let t = format!("{f}.out");
                eprintln!("{tool}: Can't guess original name for {f} -- using {t}");
                Some(t)
            }
            None => {
                return Err(Fail(
                    format!("{f}: Filename has an unknown suffix, skipping"),
                    2,
                ));
            }
        }
    };
    if let Some(t) = &target
        && Path::new(t).exists()
        && !o.force
    {
        return Err(match family {
            Family::Bzip2 => Fail(format!("Output file {t} already exists."), 1),
            Family::Xz => Fail(format!("{t}: File exists"), 1),
        });
    }
    let out: Box<dyn Write> = match &target {
        _ if o.test => Box::new(io::sink()),
        None => Box::new(io::stdout().lock()),
        Some(t) => {
            Box::new(io::BufWriter::new(File::create(t).map_err(|e| {
                Fail(format!("{t}: {}", crate::errno_text(&e)), 1)
            })?))
        }
    };
    let result = if compress {
        let mut enc: Encoder = Codec::encoder(Some(family.codec()), out);
        io::copy(&mut input, &mut enc).and_then(|_| enc.finish())
    } else {
        let mut out = out;
        family
            .codec()
            .decoder(input)
            .and_then(|mut d| io::copy(&mut d, &mut out))
            .and_then(|_| out.flush())
    };
    match crate::settle(result, f, target.as_deref(), o.keep) {
        Ok(()) => Ok(()),
        Err(None) => Err(Fail(String::new(), 1)),
        Err(Some(e)) => {
            if compress {
                return Err(Fail(format!("{shown}: {}", crate::errno_text(&e)), 1));
            }
            Err(match family {
                Family::Bzip2 => Fail(
                    format!("{shown}: Data integrity error when decompressing."),
                    2,
                ),
                Family::Xz => Fail(format!("{shown}: Compressed data is corrupt"), 1),
            })
        }
    }
}
