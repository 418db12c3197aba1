//! `patch` for unified diffs, with GNU patch's messages: `-p N`, `-R`, `--dry-run`, `-i`,
//! `-o`, `-N`, `-s`, `-E`, `-b`; hunks placed at an offset or with fuzz up to 2 (leading and
//! trailing context ignored), new and deleted files, `\ No newline at end of file`, failed
//! hunks saved to `FILE.rej`, and `FILE.orig` kept when the patch did not match exactly.

use std::io::Read;

const HELP: &str = "\
Usage: patch [OPTION]... [ORIGFILE [PATCHFILE]]
Apply a unified diff (read from PATCHFILE, -i FILE, or standard input).
  -p NUM, --strip=NUM   strip NUM leading components from file names
  -R, --reverse         undo the patch (swap old and new)
  --dry-run             report what would happen, change no file
  -i FILE, --input=FILE read the patch from FILE
  -o FILE, --output=FILE write the result to FILE
  -N, --forward         skip patches that seem reversed or already applied
  -F NUM, --fuzz=NUM    context lines that may be ignored (default 2)
  -s, --silent, --quiet say nothing unless there is an error
  -E, --remove-empty-files  remove files left empty
  -b, --backup          keep FILE.orig
  --no-backup-if-mismatch   no FILE.orig when hunks needed an offset or fuzz
  -f, --force            ask nothing, and do not look for reversed patches
  -t, --batch            ask nothing; apply a reversed patch reversed
Exit status: 0 if every hunk applied, 1 if some failed, 2 for trouble.
";

#[derive(Clone)]
struct Hunk {
    old_start: usize,
    old_len: usize,
    new_start: usize,
    new_len: usize,
    /// (kind, text): ' ', '-', '+'; the text has no line end.
    lines: Vec<(char, String)>,
    old_no_eol: bool,
    new_no_eol: bool,
    header: String,
}

struct FilePatch {
    old: String,
    new: String,
    old_header: String,
    new_header: String,
    hunks: Vec<Hunk>,
    /// The patch's lines since the previous file's patch, up to the `+++` line: what GNU patch
    /// shows when it cannot find the file.
    leading: Vec<String>,
    /// The 1-based line of the patch where the first hunk starts.
    hunk_line: usize,
}

/// The file name a `---`/`+++` header names after `-p N`: the smallest prefix holding N slashes
/// goes, a run of adjacent slashes counting as one (GNU patch).
fn strip_name(name: &str, p: Option<usize>) -> String {
    let name = name.split('\t').next().unwrap_or(name).trim_end();
    match p {
        None => name.rsplit('/').next().unwrap_or(name).to_string(),
        Some(n) => {
            let mut rest = name;
            for _ in 0..n {
                match rest.find('/') {
                    Some(at) => rest = rest[at..].trim_start_matches('/'),
                    None => return name.rsplit('/').next().unwrap_or(name).to_string(),
                }
            }
            rest.to_string()
        }
    }
}

fn parse_range(s: &str) -> Option<(usize, usize)> {
    let (a, b) = match s.split_once(',') {
        Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
        None => (s.parse().ok()?, 1),
    };
    Some((a, b))
}

fn parse(text: &str) -> Result<Vec<FilePatch>, String> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut since = 0;
    while i < lines.len() {
        let l = lines[i].trim_end_matches('\n');
        if let Some(old) = l.strip_prefix("--- ")
            && i + 1 < lines.len()
            && lines[i + 1].starts_with("+++ ")
        {
            let new = lines[i + 1].trim_end_matches('\n')[4..].to_string();
            let mut fp = FilePatch {
                old: old.to_string(),
                new: new.clone(),
                old_header: old.to_string(),
                new_header: new,
                hunks: Vec::new(),
                leading: lines[since..i + 2]
                    .iter()
                    .map(|l| l.trim_end_matches('\n').to_string())
                    .collect(),
                hunk_line: i + 3,
            };
            i += 2;
            while i < lines.len() && lines[i].starts_with("@@ ") {
                let h = lines[i].trim_end_matches('\n');
                let inner = h[3..].split(" @@").next().unwrap_or("");
                let mut it = inner.split_whitespace();
                let (Some(o), Some(n)) = (it.next(), it.next()) else {
                    return Err(format!("malformed hunk header: {h}"));
                };
                let (Some((os, ol)), Some((ns, nl))) = (
                    o.strip_prefix('-').and_then(parse_range),
                    n.strip_prefix('+').and_then(parse_range),
                ) else {
                    return Err(format!("malformed hunk header: {h}"));
                };
                let mut hunk = Hunk {
                    old_start: os,
                    old_len: ol,
                    new_start: ns,
                    new_len: nl,
                    lines: Vec::new(),
                    old_no_eol: false,
                    new_no_eol: false,
                    header: h.to_string(),
                };
                i += 1;
                let (mut seen_old, mut seen_new) = (0, 0);
                while i < lines.len() && (seen_old < ol || seen_new < nl) {
                    let raw = lines[i];
                    let body = raw.strip_suffix('\n').unwrap_or(raw);
                    let (kind, rest) = match body.chars().next() {
                        Some(c @ (' ' | '-' | '+')) => (c, &body[1..]),
                        // A blank line stands for an empty context line (some tools drop
                        // the space).
                        None => (' ', ""),
                        Some('\\') => {
                            match hunk.lines.last().map(|l| l.0) {
                                Some('-') => hunk.old_no_eol = true,
                                Some('+') => hunk.new_no_eol = true,
                                _ => {
                                    hunk.old_no_eol = true;
                                    hunk.new_no_eol = true;
                                }
                            }
                            i += 1;
                            continue;
                        }
                        _ => return Err(format!("malformed patch at line {}: {body}", i + 1)),
                    };
                    match kind {
                        ' ' => {
                            seen_old += 1;
                            seen_new += 1;
                        }
                        '-' => seen_old += 1,
                        _ => seen_new += 1,
                    }
                    hunk.lines.push((kind, rest.to_string()));
                    i += 1;
                }
                // `\ No newline at end of file` after the last old or new line.
                while i < lines.len() && lines[i].starts_with('\\') {
                    match hunk.lines.last().map(|l| l.0) {
                        Some('-') => hunk.old_no_eol = true,
                        Some('+') => hunk.new_no_eol = true,
                        _ => {
                            hunk.old_no_eol = true;
                            hunk.new_no_eol = true;
                        }
                    }
                    i += 1;
                }
                if seen_old < ol || seen_new < nl {
                    return Err("unexpected end of file in patch".into());
                }
                fp.hunks.push(hunk);
            }
            out.push(fp);
            since = i;
            continue;
        }
        i += 1;
    }
    Ok(out)
}

fn reverse(h: &Hunk) -> Hunk {
    Hunk {
        old_start: h.new_start,
        old_len: h.new_len,
        new_start: h.old_start,
        new_len: h.old_len,
        lines: h
            .lines
            .iter()
            .map(|(k, t)| {
                let k = match k {
                    '-' => '+',
                    '+' => '-',
                    c => *c,
                };
                (k, t.clone())
            })
            .collect(),
        old_no_eol: h.new_no_eol,
        new_no_eol: h.old_no_eol,
        header: format!(
            "@@ -{},{} +{},{} @@",
            h.new_start, h.new_len, h.old_start, h.old_len
        ),
    }
}

/// Where a hunk's old lines (`old`, all its lines but the added ones) match `file` at this fuzz
/// level, as GNU patch places them: returns (the line where the lines left after the cut
/// context start, context lines cut at the start and at the end).
/// The longer context sets the level's reach: a hunk whose context is shorter at one end by
/// more than the fuzz must match at that end of the file (as a hunk `diff` wrote there would).
fn place(
    file: &[String],
    old: &[&str],
    (lead, trail): (usize, usize),
    fuzz: usize,
    want: usize,
    floor: usize,
) -> Option<(usize, usize, usize)> {
    let context = lead.max(trail);
    let lead_fuzz = (fuzz + lead) as isize - context as isize;
    let trail_fuzz = (fuzz + trail) as isize - context as isize;
    let cut_lead = (lead_fuzz.max(0) as usize).min(lead);
    let cut_trail = (trail_fuzz.max(0) as usize).min(trail);
    if cut_lead + cut_trail > old.len() {
        return None;
    }
    let core = &old[cut_lead..old.len() - cut_trail];
    let fits = |at: usize| {
        at + core.len() <= file.len() && (0..core.len()).all(|k| file[at + k] == core[k])
    };
    if trail_fuzz < 0 || lead_fuzz < 0 {
        let at = if trail_fuzz < 0 {
            file.len().checked_sub(core.len())?
        } else {
            0
        };
        let start_ok = lead_fuzz >= 0 || at == 0;
        return (start_ok && at >= floor && fits(at)).then_some((at, cut_lead, cut_trail));
    }
    let at = locate(file, core, want + cut_lead, floor)?;
    Some((at, cut_lead, cut_trail))
}

/// Where `old` matches `file`, nearest to `want` first.
fn locate(file: &[String], old: &[&str], want: usize, lo: usize) -> Option<usize> {
    let fits =
        |at: usize| at + old.len() <= file.len() && (0..old.len()).all(|k| file[at + k] == old[k]);
    let max = file.len().saturating_sub(old.len());
    for d in 0..=file.len() {
        let mut hit = None;
        if want >= d && want - d >= lo && want - d <= max && fits(want - d) {
            hit = Some(want - d);
        } else if want + d <= max && want + d >= lo && fits(want + d) {
            hit = Some(want + d);
        }
        if hit.is_some() {
            return hit;
        }
        if want < d && want + d > max {
            break;
        }
    }
    None
}

struct Opts {
    strip: Option<usize>,
    reverse: bool,
    dry: bool,
    forward: bool,
    /// -f: no questions, and no check for a reversed patch.
    force: bool,
    /// -t: no questions; a reversed patch is applied reversed.
    batch: bool,
    /// Set on the second pass over a file whose patch was found reversed under -t.
    assumed_reversed: bool,
    fuzz: usize,
    silent: bool,
    remove_empty: bool,
    backup: bool,
    backup_mismatch: bool,
    output: Option<String>,
}

pub fn main(args: &[String]) -> i32 {
    let args = crate::split_clusters(args, "pioFdBrz");
    let mut o = Opts {
        strip: None,
        reverse: false,
        dry: false,
        forward: false,
        force: false,
        batch: false,
        assumed_reversed: false,
        fuzz: 2,
        silent: false,
        remove_empty: false,
        backup: false,
        backup_mismatch: true,
        output: None,
    };
    let mut input: Option<String> = None;
    let mut pos = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].clone();
        let (opt, inline) = if a.starts_with("--") {
            match a.split_once('=') {
                Some((k, v)) => (k.to_string(), Some(v.to_string())),
                None => (a.clone(), None),
            }
        } else if a.starts_with('-') && a.len() > 2 {
            (a[..2].to_string(), Some(a[2..].to_string()))
        } else {
            (a.clone(), None)
        };
        let mut value = |name: &str| -> Result<String, i32> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            i += 1;
            args.get(i).cloned().ok_or_else(|| {
                eprintln!("patch: option requires an argument -- '{name}'");
                2
            })
        };
        match opt.as_str() {
            "--help" | "-h" => {
                crate::out(HELP.as_bytes());
                return 0;
            }
            "-v" | "--version" => {
                crate::out(b"patch (wasmsand)\n");
                return 0;
            }
            "-p" | "--strip" => match value("p").map(|v| v.parse::<usize>()) {
                Ok(Ok(n)) => o.strip = Some(n),
                Ok(Err(_)) => {
                    eprintln!("patch: strip count must be a number");
                    return 2;
                }
                Err(c) => return c,
            },
            "-F" | "--fuzz" => match value("F").map(|v| v.parse::<usize>()) {
                Ok(Ok(n)) => o.fuzz = n,
                Ok(Err(_)) => {
                    eprintln!("patch: fuzz factor must be a number");
                    return 2;
                }
                Err(c) => return c,
            },
            "-i" | "--input" => match value("i") {
                Ok(v) => input = Some(v),
                Err(c) => return c,
            },
            "-o" | "--output" => match value("o") {
                Ok(v) => o.output = Some(v),
                Err(c) => return c,
            },
            "-R" | "--reverse" => o.reverse = true,
            "--dry-run" => o.dry = true,
            "-N" | "--forward" => o.forward = true,
            "-s" | "--silent" | "--quiet" => o.silent = true,
            "-E" | "--remove-empty-files" => o.remove_empty = true,
            "-b" | "--backup" => o.backup = true,
            "--no-backup-if-mismatch" => o.backup_mismatch = false,
            "--backup-if-mismatch" => o.backup_mismatch = true,
            "-f" | "--force" => o.force = true,
            "-t" | "--batch" => o.batch = true,
            "-u" | "--unified" | "-l" | "--ignore-whitespace" => {}
            "--" => {
                pos.extend(args[i + 1..].iter().cloned());
                break;
            }
            s if s.starts_with('-') && s.len() > 1 => {
                eprintln!(
                    "patch: unrecognized option '{s}'\npatch: Try 'patch --help' for more information."
                );
                return 2;
            }
            _ => pos.push(a.clone()),
        }
        i += 1;
    }
    let explicit = pos.first().cloned();
    if input.is_none() {
        input = pos.get(1).cloned();
    }
    let text = match &input {
        Some(f) if f != "-" => match std::fs::read(f) {
            Ok(d) => String::from_utf8_lossy(&d).into_owned(),
            Err(e) => {
                eprintln!(
                    "patch: **** Can't open patch file {f} : {}",
                    crate::errno_text(&e)
                );
                return 2;
            }
        },
        _ => {
            let mut d = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut d);
            String::from_utf8_lossy(&d).into_owned()
        }
    };
    let patches = match parse(&text) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("patch: **** {e}");
            return 2;
        }
    };
    if patches.is_empty() {
        if text.trim().is_empty() {
            return 0;
        }
        eprintln!("patch: **** Only garbage was found in the patch input.");
        return 2;
    }
    let mut status = 0;
    let mut msgs = String::new();
    for fp in &patches {
        let s = apply_file(&o, fp, explicit.as_deref(), &mut msgs);
        status = status.max(s);
    }
    crate::out(msgs.as_bytes());
    status
}

fn read_lines(data: &str) -> (Vec<String>, bool) {
    let no_eol = !data.is_empty() && !data.ends_with('\n');
    let lines = data.lines().map(str::to_string).collect();
    (lines, no_eol)
}

fn apply_file(o: &Opts, fp: &FilePatch, explicit: Option<&str>, msgs: &mut String) -> i32 {
    let (old_h, new_h) = if o.reverse {
        (&fp.new, &fp.old)
    } else {
        (&fp.old, &fp.new)
    };
    let old_name = strip_name(old_h, o.strip);
    let new_name = strip_name(new_h, o.strip);
    // `diff -N` names both files and marks the missing side by an empty range at 0.
    let hunks_from_nothing = |old_side: bool| {
        !fp.hunks.is_empty()
            && fp.hunks.iter().all(|h| {
                let (start, len) = if old_side == o.reverse {
                    (h.new_start, h.new_len)
                } else {
                    (h.old_start, h.old_len)
                };
                start == 0 && len == 0
            })
    };
    let creating = old_h.split('\t').next() == Some("/dev/null") || hunks_from_nothing(true);
    // Removing the file needs more than an empty result: /dev/null, or the epoch timestamp
    // `diff -N` gives the missing side (GNU patch leaves an empty file otherwise).
    let deleting = new_h.split('\t').next() == Some("/dev/null")
        || (hunks_from_nothing(false) && new_h.contains("\t1970-01-01"));
    let target = match explicit {
        Some(f) => f.to_string(),
        None if creating => new_name.clone(),
        None if std::path::Path::new(&old_name).exists() => old_name.clone(),
        None if std::path::Path::new(&new_name).exists() => new_name.clone(),
        None => return cannot_find(o, fp, msgs),
    };
    let say = |msgs: &mut String, s: &str| {
        if !o.silent {
            msgs.push_str(s);
        }
    };
    let original = if creating && !std::path::Path::new(&target).exists() {
        String::new()
    } else {
        match std::fs::read(&target) {
            Ok(d) => String::from_utf8_lossy(&d).into_owned(),
            Err(e) => {
                crate::out(msgs.as_bytes());
                msgs.clear();
                eprintln!(
                    "patch: **** Can't open file {target} : {}",
                    crate::errno_text(&e)
                );
                return 2;
            }
        }
    };
    let shown = match &o.output {
        Some(out) => format!("{out} (read from {target})"),
        None => target.clone(),
    };
    if !o.assumed_reversed {
        say(
            msgs,
            &format!(
                "{} file {shown}\n",
                if o.dry { "checking" } else { "patching" }
            ),
        );
    }
    let (mut lines, mut no_eol) = read_lines(&original);
    let hunks: Vec<Hunk> = if o.reverse {
        fp.hunks.iter().map(reverse).collect()
    } else {
        fp.hunks.clone()
    };
    let mut failed: Vec<&Hunk> = Vec::new();
    let mut mismatch = false;
    // Lines added or removed by the hunks placed so far shift the later ones.
    let mut delta: isize = 0;
    let mut floor = 0usize;
    for (n, h) in hunks.iter().enumerate() {
        let old: Vec<&str> = h
            .lines
            .iter()
            .filter(|(k, _)| *k != '+')
            .map(|(_, t)| t.as_str())
            .collect();
        let new: Vec<String> = h
            .lines
            .iter()
            .filter(|(k, _)| *k != '-')
            .map(|(_, t)| t.clone())
            .collect();
        let lead = h.lines.iter().take_while(|(k, _)| *k == ' ').count();
        let trail = h.lines.iter().rev().take_while(|(k, _)| *k == ' ').count();
        let want0 = if h.old_len == 0 {
            h.old_start
        } else {
            h.old_start.saturating_sub(1)
        };
        let want = (want0 as isize + delta).max(0) as usize;
        let mut placed = None;
        for fuzz in 0..=o.fuzz.min(lead.max(trail)) {
            if let Some(p) = place(&lines, &old, (lead, trail), fuzz, want, floor) {
                placed = Some((p, fuzz));
                break;
            }
            // GNU patch asks whether the first hunk is reversed (or already applied) when it
            // does not match at a fuzz level but its new side does.
            if n == 0 && !o.force && !o.assumed_reversed && placed.is_none() {
                let new_side: Vec<&str> = new.iter().map(String::as_str).collect();
                if place(&lines, &new_side, (lead, trail), fuzz, want, floor).is_some() {
                    return reversed(o, fp, explicit, &hunks, &target, msgs);
                }
            }
        }
        let Some(((at_core, cut_lead, cut_trail), fuzz)) = placed else {
            say(
                msgs,
                &format!("Hunk #{} FAILED at {}.\n", n + 1, h.old_start),
            );
            failed.push(h);
            continue;
        };
        let at = at_core.saturating_sub(cut_lead);
        let offset = at as isize - want0 as isize - delta;
        let shown = if h.old_len == 0 { at } else { at + 1 };
        let mut note = String::new();
        if fuzz > 0 {
            note = format!(" with fuzz {fuzz}");
        }
        if offset != 0 {
            let m = offset.unsigned_abs();
            note.push_str(&format!(
                " (offset {offset} line{})",
                if m == 1 { "" } else { "s" }
            ));
        }
        if !note.is_empty() {
            mismatch = true;
            say(
                msgs,
                &format!("Hunk #{} succeeded at {shown}{note}.\n", n + 1),
            );
        }
        // Replace the matched old lines, keeping the file's own context lines under fuzz.
        let replace_from = at_core;
        let replace_len = old.len() - cut_lead - cut_trail;
        let new_core: Vec<String> = new[cut_lead..new.len() - cut_trail].to_vec();
        let touches_end = replace_from + replace_len == lines.len();
        lines.splice(replace_from..replace_from + replace_len, new_core.clone());
        if touches_end || at + old.len() >= lines.len() {
            if h.new_no_eol {
                no_eol = true;
            } else if h.old_no_eol {
                no_eol = false;
            }
        }
        delta += new_core.len() as isize - replace_len as isize;
        floor = replace_from + new_core.len();
    }
    let mut result = lines.join("\n");
    if !lines.is_empty() && !no_eol {
        result.push('\n');
    }
    let status = if failed.is_empty() { 0 } else { 1 };
    if !failed.is_empty() {
        let total = hunks.len();
        let rej = format!("{target}.rej");
        let tail = if o.dry {
            String::new()
        } else {
            format!(" -- saving rejects to file {rej}")
        };
        say(
            msgs,
            &format!(
                "{} out of {total} hunk{} FAILED{tail}\n",
                failed.len(),
                if total == 1 { "" } else { "s" },
            ),
        );
        if !o.dry {
            let _ = std::fs::write(&rej, rejects(fp, &target, &failed));
        }
    }
    if o.dry {
        return status;
    }
    if (o.backup || (mismatch || !failed.is_empty()) && o.backup_mismatch) && !creating {
        let _ = std::fs::write(format!("{target}.orig"), &original);
    }
    let dest = o.output.clone().unwrap_or_else(|| target.clone());
    if (deleting || o.remove_empty) && result.is_empty() && o.output.is_none() {
        if let Err(e) = std::fs::remove_file(&dest) {
            eprintln!(
                "patch: **** Can't remove file {dest} : {}",
                crate::errno_text(&e)
            );
            return 2;
        }
        return status;
    }
    if let Some(dir) = std::path::Path::new(&dest).parent()
        && !dir.as_os_str().is_empty()
    {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(e) = std::fs::write(&dest, result) {
        eprintln!(
            "patch: **** Can't create file {dest} : {}",
            crate::errno_text(&e)
        );
        return 2;
    }
    status
}

/// The first hunk matched only reversed: what GNU patch does when it asks "Assume -R?" and
/// nobody can answer (no terminal: the default, no), or under -N, or under -t.
fn reversed(
    o: &Opts,
    fp: &FilePatch,
    explicit: Option<&str>,
    hunks: &[Hunk],
    target: &str,
    msgs: &mut String,
) -> i32 {
    let what = if o.reverse {
        "Unreversed"
    } else {
        "Reversed (or previously applied)"
    };
    let mut text = format!("{what} patch detected!  ");
    if o.forward {
        text.push_str("Skipping patch.\n");
    } else if o.batch {
        text.push_str(if o.reverse {
            "Ignoring -R.\n"
        } else {
            "Assuming -R.\n"
        });
        if !o.silent {
            msgs.push_str(&text);
        }
        let again = Opts {
            reverse: !o.reverse,
            assumed_reversed: true,
            output: o.output.clone(),
            ..*o
        };
        return apply_file(&again, fp, explicit, msgs);
    } else {
        let question = if o.reverse {
            "Ignore -R?"
        } else {
            "Assume -R?"
        };
        text.push_str(&format!(
            "{question} [n] \nApply anyway? [n] \nSkipping patch.\n"
        ));
    }
    if !o.silent {
        msgs.push_str(&text);
    }
    ignored(o, fp, hunks, Some(target), msgs)
}

/// Neither file a patch names exists: GNU patch would ask which file to patch, and without a
/// terminal to answer skips the patch.
fn cannot_find(o: &Opts, fp: &FilePatch, msgs: &mut String) -> i32 {
    let mut text = format!(
        "can't find file to patch at input line {}\nPerhaps you {} the wrong -p or --strip option?\n",
        fp.hunk_line,
        if o.strip.is_some() {
            "used"
        } else {
            "should have used"
        }
    );
    text.push_str("The text leading up to this was:\n--------------------------\n");
    for l in &fp.leading {
        text.push('|');
        text.push_str(l);
        text.push('\n');
    }
    text.push_str("--------------------------\n");
    text.push_str(if o.force || o.batch {
        "No file to patch.  Skipping patch.\n"
    } else {
        "File to patch: \nSkip this patch? [y] \nSkipping patch.\n"
    });
    if !o.silent {
        msgs.push_str(&text);
    }
    ignored(o, fp, &fp.hunks, None, msgs)
}

/// Every hunk of a skipped patch is ignored, and saved to TARGET.rej when there is a target.
fn ignored(
    o: &Opts,
    fp: &FilePatch,
    hunks: &[Hunk],
    target: Option<&str>,
    msgs: &mut String,
) -> i32 {
    let total = hunks.len();
    let plural = if total == 1 { "" } else { "s" };
    let mut line = format!("{total} out of {total} hunk{plural} ignored");
    if let Some(target) = target
        && !o.dry
    {
        let rej = format!("{target}.rej");
        line.push_str(&format!(" -- saving rejects to file {rej}"));
        let failed: Vec<&Hunk> = hunks.iter().collect();
        let _ = std::fs::write(&rej, rejects(fp, target, &failed));
    }
    line.push('\n');
    if !o.silent {
        msgs.push_str(&line);
    }
    1
}

/// A .rej file: the file's headers named after the target, then the hunks that did not apply.
fn rejects(fp: &FilePatch, target: &str, hunks: &[&Hunk]) -> String {
    let stamp = |h: &str| {
        h.split_once('\t')
            .map(|(_, t)| format!("\t{t}"))
            .unwrap_or_default()
    };
    let mut r = format!("--- {target}{}\n", stamp(&fp.old_header));
    r.push_str(&format!("+++ {target}{}\n", stamp(&fp.new_header)));
    for h in hunks {
        r.push_str(&h.header);
        r.push('\n');
        for (k, t) in &h.lines {
            r.push(*k);
            r.push_str(t);
            r.push('\n');
        }
    }
    r
}
