//! Small pieces shared by the tools in this binary.

use std::io::{self, Write};

/// Buffered stdout that remembers a failed write. A closed pipe (`head` exiting early) must end
/// the tool quietly instead of panicking the way `println!` does.
pub struct Out {
    w: io::BufWriter<io::Stdout>,
    broken: bool,
}

impl Out {
    pub fn stdout() -> Out {
        Out {
            w: io::BufWriter::with_capacity(64 * 1024, io::stdout()),
            broken: false,
        }
    }

    pub fn write(&mut self, b: &[u8]) {
        if !self.broken && self.w.write_all(b).is_err() {
            self.broken = true;
        }
    }

    pub fn flush(&mut self) {
        if !self.broken && self.w.flush().is_err() {
            self.broken = true;
        }
    }

    pub fn broken(&self) -> bool {
        self.broken
    }
}

impl Drop for Out {
    fn drop(&mut self) {
        self.flush();
    }
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Out::write(self, buf);
        if self.broken {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        } else {
            Ok(buf.len())
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Out::flush(self);
        Ok(())
    }
}

/// The C library's wording for an error, as GNU tools print it (`No such file or directory`),
/// without Rust's ` (os error 2)` suffix.
pub fn errno_text(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(p) => s[..p].to_string(),
        None => s,
    }
}

/// fnmatch(3)-style glob without FNM_PATHNAME: `*`, `?`, `[...]`, `\` escapes.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    glob_rec(&p, &n)
}

fn glob_rec(p: &[char], n: &[char]) -> bool {
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, ni));
                    pi += 1;
                    continue;
                }
                '?' => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                '[' => {
                    if let Some((matched, next)) = class_match(p, pi, n[ni]) {
                        if matched {
                            pi = next;
                            ni += 1;
                            continue;
                        }
                    } else if n[ni] == '[' {
                        pi += 1;
                        ni += 1;
                        continue;
                    }
                }
                '\\' if pi + 1 < p.len() => {
                    if p[pi + 1] == n[ni] {
                        pi += 2;
                        ni += 1;
                        continue;
                    }
                }
                c => {
                    if c == n[ni] {
                        pi += 1;
                        ni += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, sn)) => {
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Matches `c` against the bracket expression at `p[start]`; `None` if it is not well formed.
fn class_match(p: &[char], start: usize, c: char) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negate = i < p.len() && (p[i] == '!' || p[i] == '^');
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while i < p.len() {
        if p[i] == ']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        if p[i] == '[' && i + 1 < p.len() && p[i + 1] == ':' {
            let end =
                (i + 2..p.len().saturating_sub(1)).find(|&j| p[j] == ':' && p[j + 1] == ']')?;
            let name: String = p[i + 2..end].iter().collect();
            matched |= match name.as_str() {
                "alpha" => c.is_alphabetic(),
                "digit" => c.is_ascii_digit(),
                "alnum" => c.is_alphanumeric(),
                "upper" => c.is_uppercase(),
                "lower" => c.is_lowercase(),
                "space" => c.is_whitespace(),
                "punct" => c.is_ascii_punctuation(),
                "xdigit" => c.is_ascii_hexdigit(),
                _ => false,
            };
            i = end + 2;
            continue;
        }
        let lo = p[i];
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            matched |= lo <= c && c <= p[i + 2];
            i += 3;
        } else {
            matched |= lo == c;
            i += 1;
        }
    }
    None
}

/// Prints a write error unless it is a closed pipe, which GNU tools treat as a quiet exit.
pub fn report_write_error(tool: &str, e: &io::Error) -> i32 {
    if e.kind() != io::ErrorKind::BrokenPipe {
        eprintln!("{tool}: write error: {}", errno_text(e));
    }
    1
}

/// A temporary file in `$TMPDIR` (or `/tmp`), removed when dropped, so an early return leaves
/// nothing behind. WASI has no pipes between processes: awk's commands and sed's joined inputs
/// pass through these.
pub use guest_rt::{TempFile, temp_file};

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs() {
        assert!(glob_match("*.rs", "main.rs"));
        assert!(!glob_match("*.rs", "main.rc"));
        assert!(glob_match("a?c", "abc"));
        assert!(glob_match("[ab]*", "bcd"));
        assert!(!glob_match("[!ab]*", "bcd"));
        assert!(glob_match("*", ".hidden"));
        assert!(glob_match("x\\*", "x*"));
    }
}
