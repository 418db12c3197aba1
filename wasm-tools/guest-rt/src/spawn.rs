//! Running a command as a child process would, through the shell that started this program
//! (WASI has no processes): the host runs `argv` in a subshell with this program's standard
//! descriptors and answers with its exit status. Flush buffered output first, so that the
//! command's output lands after it.

/// Why no status came back.
#[derive(Debug)]
pub struct Fail {
    /// `off` when the run offers no spawn door (outside a wasmsand shell), else the host's
    /// class of refusal (`cwd`, `limit`, `cancelled`, ...).
    pub kind: String,
    /// The host's words.
    pub message: String,
}

/// Runs `argv` (a function, builtin or program, found as the shell finds commands) in `cwd`
/// (this program's directory when `None`) and returns its exit status.
pub fn run(argv: &[String], cwd: Option<&str>) -> Result<i32, Fail> {
    let mut frame = String::from(r#"{"v":1,"id":1,"op":"spawn","argv":["#);
    for (i, a) in argv.iter().enumerate() {
        if i > 0 {
            frame.push(',');
        }
        push_json_string(&mut frame, a);
    }
    frame.push(']');
    if let Some(dir) = cwd {
        frame.push_str(r#","cwd":"#);
        push_json_string(&mut frame, dir);
    }
    frame.push('}');
    let answer = crate::host::call(frame.as_bytes()).map_err(|rc| Fail {
        kind: "off".into(),
        message: if rc == -1 {
            "this sandbox cannot start commands from a program here".into()
        } else {
            "the sandbox's host call failed".into()
        },
    })?;
    let text = String::from_utf8_lossy(&answer);
    if let Some(status) = number_after(&text, r#""status":"#) {
        return Ok(status as i32);
    }
    Err(Fail {
        kind: string_after(&text, r#""kind":"#).unwrap_or_else(|| "failed".into()),
        message: string_after(&text, r#""message":"#)
            .unwrap_or_else(|| "the command could not be started".into()),
    })
}

fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The integer after `key` in a flat JSON answer (the host writes no spaces).
fn number_after(text: &str, key: &str) -> Option<i64> {
    let rest = &text[text.find(key)? + key.len()..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '-'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// The JSON string after `key`, unescaped.
fn string_after(text: &str, key: &str) -> Option<String> {
    let rest = text[text.find(key)? + key.len()..].strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_escape_and_answers_parse() {
        let mut s = String::new();
        push_json_string(&mut s, "a\"b\\c\n");
        assert_eq!(s, r#""a\"b\\c\u000a""#);
        assert_eq!(
            number_after(r#"{"ok":true,"status":127}"#, r#""status":"#),
            Some(127)
        );
        assert_eq!(
            string_after(
                r#"{"error":{"kind":"cwd","message":"x \"y\""}}"#,
                r#""message":"#
            ),
            Some("x \"y\"".into())
        );
    }
}
