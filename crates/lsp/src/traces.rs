//! Failures found in a run's output: stack traces of Python, Node.js, Go and Java, shell
//! `line N:` errors, and compiler errors in the `file:line:col: message` family (`go build`,
//! `gcc`, `tsc --pretty false`, `javac`'s `File.java:N: error:`). Each parser gives frames
//! innermost first, so the first frame that maps to the workspace is the one nearest the
//! failure.

/// Which parser found a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    /// A `Traceback (most recent call last):` block, or a `SyntaxError` report.
    Python,
    /// A V8 stack (`    at f (/path/file.js:3:9)`).
    Node,
    /// A `panic:` or `fatal error:` with its goroutine trace.
    Go,
    /// `Exception in thread ...` with `\tat pkg.Class.method(File.java:N)` lines.
    Java,
    /// A shell's `script.sh: line N: message`.
    Shell,
    /// A compiler's `path:line[:col]: message` or `path(line,col): error ...`.
    Compiler,
}

impl Lang {
    /// The name shown in a diagnostic's `source`.
    pub fn name(self) -> &'static str {
        match self {
            Lang::Python => "python",
            Lang::Node => "node",
            Lang::Go => "go",
            Lang::Java => "java",
            Lang::Shell => "shell",
            Lang::Compiler => "compiler",
        }
    }
}

/// One place in a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The path as printed. For Java, the package path and file name (`com/acme/Main.java`),
    /// since its traces name no directory.
    pub path: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, when the format has one.
    pub column: Option<u32>,
    /// Java frames are found by their package path's suffix in the workspace.
    pub by_suffix: bool,
}

/// A failure and where it happened, innermost frame first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The parser that found it.
    pub lang: Lang,
    /// The error's own text (`ValueError: bad`, `panic: boom`, `undefined: x`).
    pub message: String,
    /// Innermost first; runtime frames are kept here and skipped when mapping.
    pub frames: Vec<Frame>,
}

/// Every failure in `text`, in the order the parsers are tried: the language traces first
/// (they name the exception), then shell and compiler lines.
pub fn parse(text: &str) -> Vec<Failure> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    out.extend(python(&lines));
    out.extend(node(&lines));
    out.extend(go(&lines));
    out.extend(java(&lines));
    out.extend(shell(&lines));
    out.extend(compiler(&lines));
    out
}

/// Whether a path is a language runtime's or a vendored dependency's, which a developer did
/// not write: such frames are never chosen even when they sit under the workspace.
pub fn is_vendor(path: &str) -> bool {
    const PARTS: &[&str] = &[
        "/site-packages/",
        "/dist-packages/",
        "/node_modules/",
        "/vendor/",
        "/.venv/",
        "/usr/lib/python3",
        "/usr/local/lib/python3",
        "/usr/lib/go",
        "/usr/local/go/",
        "/go/pkg/mod/",
        "/src/runtime/",
    ];
    let p = format!("/{}", path.trim_start_matches('/'));
    path.starts_with("node:")
        || path.starts_with("java.")
        || path.starts_with("jdk.")
        || path.starts_with("internal/")
        || path.starts_with('<')
        || PARTS.iter().any(|s| p.contains(s))
        || p.starts_with("/usr/lib/node")
        || p.starts_with("/usr/share/nodejs/")
        || p.starts_with("/usr/lib/jvm/")
}

fn python(lines: &[&str]) -> Vec<Failure> {
    // The last traceback is the one that ended the program (earlier ones are "During
    // handling of the above exception" context).
    let mut found: Option<Failure> = None;
    let mut i = 0;
    while i < lines.len() {
        let starts = lines[i].trim_end() == "Traceback (most recent call last):";
        // A SyntaxError raised while compiling the main file has no "Traceback" header.
        let bare =
            !starts && python_file_line(lines[i]).is_some() && syntax_error_follows(lines, i);
        if !starts && !bare {
            i += 1;
            continue;
        }
        let mut frames = Vec::new();
        let mut j = if starts { i + 1 } else { i };
        let mut message = String::new();
        while j < lines.len() {
            let l = lines[j];
            if let Some(f) = python_file_line(l) {
                frames.push(f);
            } else if !l.starts_with(' ') && !l.starts_with('\t') && !l.trim().is_empty() {
                message = l.trim().to_string();
                break;
            }
            j += 1;
        }
        if !frames.is_empty() {
            frames.reverse();
            found = Some(Failure {
                lang: Lang::Python,
                message,
                frames,
            });
        }
        i = j.max(i + 1);
    }
    found.into_iter().collect()
}

fn syntax_error_follows(lines: &[&str], i: usize) -> bool {
    lines[i + 1..]
        .iter()
        .take(6)
        .find(|l| !l.starts_with(' ') && !l.trim().is_empty())
        .is_some_and(|l| {
            let l = l.trim_start();
            l.starts_with("SyntaxError")
                || l.starts_with("IndentationError")
                || l.starts_with("TabError")
        })
}

/// `  File "/w/app.py", line 3, in main` or `  File "/w/app.py", line 3`.
fn python_file_line(l: &str) -> Option<Frame> {
    let rest = l.trim_start().strip_prefix("File \"")?;
    let (path, rest) = rest.split_once("\", line ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some(Frame {
        path: path.to_string(),
        line: digits.parse().ok()?,
        column: None,
        by_suffix: false,
    })
}

fn node(lines: &[&str]) -> Vec<Failure> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if node_at(lines[i]).is_none() || i == 0 {
            i += 1;
            continue;
        }
        // The first `at` line of a block: the message is the line above it.
        let message = lines[i - 1].trim().to_string();
        let mut frames = Vec::new();
        while i < lines.len() {
            match node_at(lines[i]) {
                Some(Some(f)) => frames.push(f),
                Some(None) => {}
                None => break,
            }
            i += 1;
        }
        if !frames.is_empty() {
            out.push(Failure {
                lang: Lang::Node,
                message,
                frames,
            });
        }
    }
    // The first stack is the uncaught error's; later ones are usually its `cause`.
    out.truncate(1);
    out
}

/// `    at f (/w/a.js:3:9)`, `    at /w/a.js:3:9`, `    at async f (file:///w/a.mjs:1:2)`:
/// `Some(Some(frame))`; an `at` line without a location (`at new Promise (<anonymous>)`):
/// `Some(None)`; anything else: `None`.
fn node_at(l: &str) -> Option<Option<Frame>> {
    let rest = l.trim_start().strip_prefix("at ")?;
    if !l.starts_with(' ') && !l.starts_with('\t') {
        return None;
    }
    let loc = match (rest.rfind('('), rest.ends_with(')')) {
        (Some(p), true) => &rest[p + 1..rest.len() - 1],
        _ => rest.rsplit(' ').next().unwrap_or(rest),
    };
    let loc = loc.strip_prefix("file://").unwrap_or(loc);
    let mut parts = loc.rsplitn(3, ':');
    let col = parts.next().and_then(|c| c.parse::<u32>().ok());
    let line = parts.next().and_then(|c| c.parse::<u32>().ok());
    let path = parts.next();
    Some(match (path, line, col) {
        (Some(p), Some(line), Some(col)) if !p.is_empty() => Some(Frame {
            path: p.to_string(),
            line,
            column: Some(col),
            by_suffix: false,
        }),
        _ => None,
    })
}

fn go(lines: &[&str]) -> Vec<Failure> {
    let Some(start) = lines
        .iter()
        .position(|l| l.starts_with("panic: ") || l.starts_with("fatal error: "))
    else {
        return Vec::new();
    };
    let message = lines[start].trim().to_string();
    let mut frames = Vec::new();
    let mut in_goroutine = false;
    for l in &lines[start + 1..] {
        if l.starts_with("goroutine ") {
            // Only the first goroutine: the one that panicked.
            if in_goroutine {
                break;
            }
            in_goroutine = true;
            continue;
        }
        if !in_goroutine {
            continue;
        }
        let Some(loc) = l.strip_prefix('\t') else {
            continue;
        };
        let loc = loc.split(" +0x").next().unwrap_or(loc).trim();
        if let Some((path, line)) = loc.rsplit_once(':')
            && let Ok(line) = line.parse()
        {
            frames.push(Frame {
                path: path.to_string(),
                line,
                column: None,
                by_suffix: false,
            });
        }
    }
    if frames.is_empty() {
        return Vec::new();
    }
    vec![Failure {
        lang: Lang::Go,
        message,
        frames,
    }]
}

fn java(lines: &[&str]) -> Vec<Failure> {
    let mut blocks: Vec<Failure> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        let header = l.starts_with("Exception in thread ")
            || l.starts_with("Caused by: ")
            || (java_at(lines.get(i + 1).copied().unwrap_or("")).is_some()
                && java_at(l).is_none()
                && !l.starts_with(' ')
                && !l.starts_with('\t'));
        if !header {
            i += 1;
            continue;
        }
        let message = l
            .strip_prefix("Caused by: ")
            .map(str::to_string)
            .unwrap_or_else(|| match l.strip_prefix("Exception in thread ") {
                // `Exception in thread "main" java.lang.X: msg` → `java.lang.X: msg`
                Some(rest) => rest
                    .split_once("\" ")
                    .map(|(_, m)| m)
                    .unwrap_or(rest)
                    .to_string(),
                None => l.trim().to_string(),
            });
        let mut frames = Vec::new();
        i += 1;
        while i < lines.len() {
            let l = lines[i];
            if let Some(f) = java_at(l) {
                frames.extend(f);
            } else if !l.trim_start().starts_with("... ") {
                break;
            }
            i += 1;
        }
        if !frames.is_empty() {
            blocks.push(Failure {
                lang: Lang::Java,
                message,
                frames,
            });
        }
    }
    // The top exception first; its causes after, tried when its own frames do not map.
    blocks
}

/// `\tat com.acme.Main.run(Main.java:12)` → `com/acme/Main.java:12`; `\tat
/// java.base/java.util.X.y(X.java:3)` is a runtime frame (its module prefix says so).
fn java_at(l: &str) -> Option<Option<Frame>> {
    if !l.starts_with('\t') && !l.starts_with("    ") {
        return None;
    }
    let rest = l.trim_start().strip_prefix("at ")?;
    let open = rest.find('(')?;
    let inside = rest[open + 1..].strip_suffix(')')?;
    let qualified = &rest[..open];
    let Some((file, line)) = inside.rsplit_once(':') else {
        return Some(None);
    };
    let Ok(line) = line.parse() else {
        return Some(None);
    };
    if let Some((module, _)) = qualified.split_once('/') {
        // A named module's frame (`java.base/...`, a library's): not the developer's code.
        return Some(Some(Frame {
            path: format!("{module}/{file}"),
            line,
            column: None,
            by_suffix: false,
        }));
    }
    // Drop the method, then the class (and any nested `$Inner`): the rest is the package.
    let mut parts: Vec<&str> = qualified.split('.').collect();
    parts.pop();
    parts.pop();
    let mut path = parts.join("/");
    if !path.is_empty() {
        path.push('/');
    }
    path.push_str(file);
    Some(Some(Frame {
        path,
        line,
        column: None,
        by_suffix: true,
    }))
}

fn shell(lines: &[&str]) -> Vec<Failure> {
    let mut out = Vec::new();
    for l in lines {
        // `./build.sh: line 4: foo: command not found` (bash -c's `bash: line 4:` names no
        // file and is left to the exit summary).
        let Some((path, rest)) = l.split_once(": line ") else {
            continue;
        };
        if path.is_empty() || path == "bash" || path == "sh" || path.contains(' ') {
            continue;
        }
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let (Ok(line), Some(msg)) = (digits.parse(), rest[digits.len()..].strip_prefix(": "))
        else {
            continue;
        };
        out.push(Failure {
            lang: Lang::Shell,
            message: msg.trim().to_string(),
            frames: vec![Frame {
                path: path.to_string(),
                line,
                column: None,
                by_suffix: false,
            }],
        });
    }
    out
}

fn compiler(lines: &[&str]) -> Vec<Failure> {
    let mut out = Vec::new();
    for l in lines {
        if let Some(f) = colon_form(l).or_else(|| paren_form(l)) {
            out.push(f);
        }
    }
    out
}

/// `path:line:col: message`, `path:line: message`, and `tsc`'s pretty
/// `path:line:col - error TS2322: message`.
fn colon_form(l: &str) -> Option<Failure> {
    if l.starts_with(' ') || l.starts_with('\t') {
        return None;
    }
    let mut it = l.splitn(4, ':');
    let path = it.next()?;
    let line: u32 = it.next()?.parse().ok()?;
    let third = it.next()?;
    let (column, message) = match third.trim().parse::<u32>() {
        Ok(c) => (Some(c), it.next().unwrap_or("").trim().to_string()),
        Err(_) => {
            // `path:12:5 - error TS..: msg` splits as ["path","12","5 - error TS..", " msg"].
            if let Some((c, m)) = third.split_once(" - ") {
                let c: u32 = c.trim().parse().ok()?;
                let tail = it.next().map(|t| format!(":{t}")).unwrap_or_default();
                (Some(c), format!("{}{}", m.trim(), tail))
            } else {
                let tail = it.next().map(|t| format!(":{t}")).unwrap_or_default();
                (None, format!("{}{}", third.trim(), tail))
            }
        }
    };
    if !looks_like_source(path) || message.is_empty() {
        return None;
    }
    Some(Failure {
        lang: Lang::Compiler,
        message,
        frames: vec![Frame {
            path: path.to_string(),
            line,
            column,
            by_suffix: false,
        }],
    })
}

/// `src/a.ts(3,7): error TS2322: message` (tsc without `--pretty`, MSBuild-style tools).
fn paren_form(l: &str) -> Option<Failure> {
    let open = l.find('(')?;
    let close = open + l[open..].find("): ")?;
    let path = &l[..open];
    let (line, col) = l[open + 1..close].split_once(',')?;
    if !looks_like_source(path) {
        return None;
    }
    Some(Failure {
        lang: Lang::Compiler,
        message: l[close + 3..].trim().to_string(),
        frames: vec![Frame {
            path: path.to_string(),
            line: line.trim().parse().ok()?,
            column: col.trim().parse().ok(),
            by_suffix: false,
        }],
    })
}

/// A path with a source file's extension and no spaces: keeps `Error: 3: x` and log lines
/// with times (`12:30:01`) out.
fn looks_like_source(path: &str) -> bool {
    const EXT: &[&str] = &[
        "go", "java", "ts", "tsx", "js", "mjs", "cjs", "jsx", "py", "c", "h", "cc", "cpp", "hpp",
        "rs", "sh", "kt", "scala", "rb",
    ];
    !path.is_empty()
        && !path.contains(' ')
        && path
            .rsplit_once('.')
            .is_some_and(|(_, ext)| EXT.contains(&ext))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(path: &str, line: u32) -> Frame {
        Frame {
            path: path.into(),
            line,
            column: None,
            by_suffix: false,
        }
    }

    #[test]
    fn python_traceback_innermost_first_with_the_final_exception() {
        let t = "Traceback (most recent call last):\n  File \"/home/user/app/main.py\", line 5, in <module>\n    main()\n  File \"/home/user/app/lib.py\", line 2, in main\n    raise ValueError(\"bad\")\nValueError: bad\n";
        let f = parse(t);
        assert_eq!(f[0].lang, Lang::Python);
        assert_eq!(f[0].message, "ValueError: bad");
        assert_eq!(
            f[0].frames,
            vec![
                frame("/home/user/app/lib.py", 2),
                frame("/home/user/app/main.py", 5)
            ]
        );
    }

    #[test]
    fn python_syntax_error_without_a_traceback_header() {
        let t =
            "  File \"/w/x.py\", line 3\n    def f(:\n          ^\nSyntaxError: invalid syntax\n";
        let f = parse(t);
        assert_eq!(f[0].message, "SyntaxError: invalid syntax");
        assert_eq!(f[0].frames, vec![frame("/w/x.py", 3)]);
    }

    #[test]
    fn node_stack_with_its_message_and_internal_frames() {
        let t = "/workspace/app.js:3\n  throw new Error('boom');\n  ^\n\nError: boom\n    at fail (/workspace/lib.js:2:9)\n    at Object.<anonymous> (/workspace/app.js:3:3)\n    at Module._compile (node:internal/modules/cjs/loader:1256:14)\n    at new Promise (<anonymous>)\n    at file:///workspace/m.mjs:1:2\n\nNode.js v20.1.0\n";
        let f = parse(t);
        let n = f.iter().find(|f| f.lang == Lang::Node).unwrap();
        assert_eq!(n.message, "Error: boom");
        assert_eq!(n.frames[0].path, "/workspace/lib.js");
        assert_eq!(n.frames[0].column, Some(9));
        assert_eq!(n.frames[2].path, "node:internal/modules/cjs/loader");
        assert!(is_vendor(&n.frames[2].path));
        assert_eq!(n.frames[3].path, "/workspace/m.mjs");
    }

    #[test]
    fn go_panic_first_goroutine_only() {
        let t = "panic: boom\n\ngoroutine 1 [running]:\nmain.fail(...)\n\t/workspace/main.go:8\nmain.main()\n\t/workspace/main.go:12 +0x1d\n\ngoroutine 2 [sleep]:\n\t/workspace/other.go:1\nexit status 2\n";
        let f = parse(t);
        assert_eq!(f[0].lang, Lang::Go);
        assert_eq!(f[0].message, "panic: boom");
        assert_eq!(
            f[0].frames,
            vec![
                frame("/workspace/main.go", 8),
                frame("/workspace/main.go", 12)
            ]
        );
    }

    #[test]
    fn java_frames_become_package_paths_and_causes_follow() {
        let t = "Exception in thread \"main\" java.lang.IllegalStateException: boom\n\tat java.base/java.util.Objects.requireNonNull(Objects.java:233)\n\tat com.acme.App$Inner.run(App.java:12)\n\tat Main.main(Main.java:3)\nCaused by: java.io.IOException: disk\n\tat com.acme.Io.read(Io.java:7)\n\t... 2 more\n";
        let f = parse(t);
        let j: Vec<_> = f.iter().filter(|f| f.lang == Lang::Java).collect();
        assert_eq!(j[0].message, "java.lang.IllegalStateException: boom");
        assert_eq!(j[0].frames[0].path, "java.base/Objects.java");
        assert!(is_vendor(&j[0].frames[0].path));
        assert_eq!(j[0].frames[1].path, "com/acme/App.java");
        assert!(j[0].frames[1].by_suffix);
        assert_eq!(j[0].frames[2].path, "Main.java");
        assert_eq!(j[1].message, "java.io.IOException: disk");
    }

    #[test]
    fn shell_and_compiler_lines() {
        let f = parse(
            "./build.sh: line 4: nope: command not found\nbash: line 1: x: command not found\n",
        );
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].frames[0], frame("./build.sh", 4));
        assert_eq!(f[0].message, "nope: command not found");

        let f = parse("# command-line-arguments\n./main.go:5:2: undefined: x\n");
        assert_eq!(f[0].frames[0].column, Some(2));
        assert_eq!(f[0].message, "undefined: x");

        let f = parse("Main.java:5: error: cannot find symbol\n");
        assert_eq!(f[0].frames[0], frame("Main.java", 5));
        assert_eq!(f[0].message, "error: cannot find symbol");

        let f = parse(
            "src/a.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.\n",
        );
        assert_eq!(f[0].frames[0].line, 3);
        assert!(f[0].message.starts_with("error TS2322"));

        let f = parse("src/a.ts:3:7 - error TS2322: Type 'string' is not assignable.\n");
        assert_eq!(f[0].frames[0].column, Some(7));
        assert_eq!(
            f[0].message,
            "error TS2322: Type 'string' is not assignable."
        );

        assert!(parse("at 12:30:01: started\nError: 3: x\n").is_empty());
    }
}
