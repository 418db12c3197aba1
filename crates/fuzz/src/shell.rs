//! The shell: `shell_parse` holds the parser and the printer to each other, `shell_run` runs
//! whatever parses in a sandbox (expansions, builtins, redirections, guests) under tight
//! limits.

use std::sync::OnceLock;

use regex::Regex;
use wasmsand::{Limits, Sandbox, SandboxOptions};
use wasmsand_shell::ast::Script;

/// The tree without what the printer spells differently and means the same: positions (a
/// reprinted script has its commands on other lines), `$x` against `${x}`, an arithmetic
/// text's blanks (in its error's message too), the default descriptor of `>&2` and `<&3`
/// (which bash's printer writes out, `1>&2`), and how a text is cut into literal and quoted
/// parts: only which characters are quoted where quoting changes what they mean.
fn shape(s: &Script) -> String {
    const TEXT: &str = r#"(Literal|Quoted)\("((?:[^"\\]|\\.)*)"\)"#;
    static RES: OnceLock<[Regex; 6]> = OnceLock::new();
    let [lines, dup, run, item, char, arith_err] = RES.get_or_init(|| {
        let re = |p: &str| Regex::new(p).expect("a valid pattern");
        [
            // Positions, `$x` against `${x}`, and an arithmetic text's blanks (its parsed
            // expression stays, and says what it means).
            re(r#"\b((?:end_)?line: \d+|bare: (true|false)|Arith \{ source: "(?:[^"\\]|\\.)*")"#),
            re(
                r#"Redirect \{ fd: None, fd_var: None, op: (DupWrite|DupRead), target: Word\(Word \{ parts: \[Literal\("(-|\d+)"\)\] \}\) \}"#,
            ),
            // A run of adjacent text parts, and one part of it.
            re(&format!(r"\b{TEXT}(?:, {TEXT})*")),
            re(&format!(r"\b{TEXT}")),
            // One character of the debug text: an escape or a character.
            re(r"\\u\{[0-9a-f]+\}|\\.|."),
            // An arithmetic text's error, which quotes the text, blanks and all.
            re(r#"expr: Err\("((?:[^"\\]|\\.)*)"\)"#),
        ]
    });
    let tree = format!("{s:?}");
    let tree = arith_err.replace_all(&tree, |c: &regex::Captures<'_>| {
        let kept: String = char
            .find_iter(&c[1])
            .map(|ch| ch.as_str())
            .filter(|ch| !matches!(*ch, " " | "\\t" | "\\n"))
            .collect();
        format!("expr: Err(\"{kept}\")")
    });
    let text = lines.replace_all(&tree, "_");
    let text = dup.replace_all(&text, |c: &regex::Captures<'_>| {
        let fd = if &c[1] == "DupWrite" { 1 } else { 0 };
        format!(
            r#"Redirect {{ fd: Some({fd}), fd_var: None, op: {}, target: Word(Word {{ parts: [Literal("{}")] }}) }}"#,
            &c[1], &c[2]
        )
    });
    // A run of text parts becomes one text in which a quoted character is marked only where
    // quoting changes its meaning (a pattern's or a brace's characters, a tilde, a
    // backslash): `"t[\$"` (`t[` quoted, then a plain `$`) and `"t[$"` are the same text.
    run.replace_all(&text, |c: &regex::Captures<'_>| {
        let mut out = String::from("Text(\"");
        for part in item.captures_iter(&c[0]) {
            let quoted = &part[1] == "Quoted";
            for ch in char.find_iter(&part[2]) {
                let ch = ch.as_str();
                let special = ch == "\\\\" || (ch.len() == 1 && "*?[]{}~!@+|()".contains(ch));
                if quoted && special {
                    out.push('\u{e000}');
                }
                out.push_str(ch);
            }
        }
        out.push_str("\")");
        out
    })
    .into_owned()
}

/// `shell_parse`: the parser never panics, on any bytes, nor does the printer on any tree it
/// builds, nor the parser again on what the printer wrote. Arithmetic parses the same bytes.
pub fn parse(data: &[u8]) {
    let src = String::from_utf8_lossy(data);
    let _ = wasmsand_shell::parse_arith(&src);
    if let Ok(script) = wasmsand_shell::parse(&src) {
        let _ = wasmsand_shell::parse(&wasmsand_shell::script_text(&script));
    }
}

/// `shell_print`: a script the parser accepts prints (as `declare -f` prints a function's
/// body) to text that parses to the same tree.
pub fn print(data: &[u8]) {
    let src = String::from_utf8_lossy(data);
    let Ok((script, unterminated)) =
        wasmsand_shell::parse_chunk(&src, &wasmsand_shell::ParseOptions::default())
    else {
        return;
    };
    let printed = wasmsand_shell::script_text(&script);
    let again = match wasmsand_shell::parse(&printed) {
        Ok(s) => s,
        Err(e) => panic!(
            "the printed script does not parse ({e:?})\n--- source\n{src}\n--- printed\n{printed}"
        ),
    };
    // A here-document the text ended inside gets its delimiter when printed, and with it the
    // newline its last line lacked: only that its print parses is asked of it.
    if unterminated {
        return;
    }
    let (a, b) = (shape(&script), shape(&again));
    if a != b {
        // Where the trees part, from their common prefix to their common suffix: the
        // difference may be one part in a long script.
        let at = a
            .bytes()
            .zip(b.bytes())
            .position(|(x, y)| x != y)
            .unwrap_or(a.len().min(b.len()));
        let tail = a
            .bytes()
            .rev()
            .zip(b.bytes().rev())
            .take(a.len().min(b.len()) - at)
            .take_while(|(x, y)| x == y)
            .count();
        let around = |t: &str| {
            let lo = t.floor_char_boundary(at.saturating_sub(120));
            let hi = t.ceil_char_boundary((t.len() - tail + 120).min(t.len()));
            t[lo..hi].to_string()
        };
        panic!(
            "printing changed the script\n--- source\n{src}\n--- printed\n{printed}\n--- tree, where they part\n{}\n--- tree of the printed text, there\n{}",
            around(&a),
            around(&b)
        );
    }
}

/// Tight bounds: a fuzzer's loop must end in a second, and its output, files and processes
/// stay small (the stdio target's root sandbox has them too).
pub(crate) fn limits() -> Limits {
    Limits {
        timeout_ms: 1_000,
        memory_bytes: 64 << 20,
        stdout_bytes: 64 << 10,
        stderr_bytes: 64 << 10,
        file_count: 200,
        fs_bytes: 4 << 20,
        pids: 16,
        background_processes: 2,
        ..Limits::default()
    }
}

pub(crate) fn root() -> &'static Sandbox {
    static ROOT: OnceLock<Sandbox> = OnceLock::new();
    ROOT.get_or_init(|| {
        let sb = Sandbox::new(SandboxOptions {
            limits: limits(),
            ..SandboxOptions::default()
        });
        sb.run("mkdir -p /tmp/work && cd /tmp/work && printf 'a b\\nc\\n' > f.txt && x=1")
            .expect("the root sandbox runs its set-up");
        sb
    })
}

/// `shell_run`: any text runs in a fork of a prepared sandbox and ends, within its limits,
/// with an exit status or a typed error; the fork still takes a command afterwards, and
/// the sandbox it was forked from is untouched.
pub fn run(data: &[u8]) {
    let src = String::from_utf8_lossy(data);
    let root = root();
    let sb = root.fork().expect("a fork of a live sandbox");
    let l = limits();
    if let Ok(r) = sb.run(&src) {
        assert!(
            r.stdout.len() as u64 <= l.stdout_bytes + 4096,
            "stdout past its limit: {} bytes",
            r.stdout.len()
        );
        assert!(
            r.stderr.len() as u64 <= l.stderr_bytes + 4096,
            "stderr past its limit: {} bytes",
            r.stderr.len()
        );
    }
    // The script may have redefined any command, closed stdout or left the shell: whatever
    // answers is fine, as long as the sandbox answers.
    let _ = sb.run("true");
    sb.destroy();
    let probe = root
        .fork()
        .expect("a fork of the root")
        .run("printf '%s' \"$x:$(cat /tmp/work/f.txt | wc -l)\"")
        .expect("the root still runs");
    assert_eq!(probe.stdout, "1:2", "a fork changed the root");
}
