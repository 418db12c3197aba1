//! A line matcher shared by grep (and usable by others): POSIX BRE/ERE or fixed strings, compiled
//! to `regex::bytes` when possible and to `fancy_regex` only when the pattern has
//! backreferences, which the linear-time engine cannot express.

use crate::posix_re::{self, Flavor};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Syntax {
    Basic,
    Extended,
    Fixed,
}

pub struct MatchOptions {
    pub syntax: Syntax,
    pub ignore_case: bool,
    pub word: bool,
    pub line: bool,
}

enum Engine {
    Fast(regex::bytes::Regex),
    Backtrack(fancy_regex::Regex),
}

pub struct Matcher {
    engine: Engine,
    word: bool,
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

impl Matcher {
    pub fn new(patterns: &[String], opts: &MatchOptions) -> Result<Matcher, String> {
        let mut parts = Vec::new();
        let mut backrefs = false;
        for p in patterns {
            let translated = match opts.syntax {
                Syntax::Fixed => regex::escape(p),
                Syntax::Basic | Syntax::Extended => {
                    let flavor = if opts.syntax == Syntax::Basic {
                        Flavor::Basic
                    } else {
                        Flavor::Extended
                    };
                    let t = posix_re::translate(p, flavor)?;
                    backrefs |= t.has_backrefs;
                    t.pattern
                }
            };
            parts.push(translated);
        }
        // Several patterns with backreferences cannot be joined without renumbering groups.
        if backrefs && parts.len() > 1 {
            return Err("backreferences with several patterns are not supported".into());
        }
        let mut joined = if parts.len() == 1 {
            parts.pop().unwrap()
        } else {
            parts
                .iter()
                .map(|p| format!("(?:{p})"))
                .collect::<Vec<_>>()
                .join("|")
        };
        if opts.line {
            joined = format!("^(?:{joined})$");
        }
        let engine = if backrefs {
            let src = if opts.ignore_case {
                format!("(?i){joined}")
            } else {
                joined
            };
            Engine::Backtrack(fancy_regex::Regex::new(&src).map_err(|e| e.to_string())?)
        } else {
            Engine::Fast(
                regex::bytes::RegexBuilder::new(&joined)
                    .case_insensitive(opts.ignore_case)
                    .unicode(true)
                    .size_limit(64 << 20)
                    .build()
                    .map_err(|e| e.to_string())?,
            )
        };
        Ok(Matcher {
            engine,
            word: opts.word && !opts.line,
        })
    }

    fn raw_find(&self, hay: &[u8], start: usize) -> Option<(usize, usize)> {
        match &self.engine {
            Engine::Fast(re) => re.find_at(hay, start).map(|m| (m.start(), m.end())),
            Engine::Backtrack(re) => {
                let s = String::from_utf8_lossy(hay);
                let start = start.min(s.len());
                if !s.is_char_boundary(start) {
                    return None;
                }
                re.find_from_pos(&s, start)
                    .ok()
                    .flatten()
                    .map(|m| (m.start(), m.end()))
            }
        }
    }

    /// The leftmost match at or after `start`, honouring `-w`: GNU accepts a match only when it
    /// is not glued to word characters on either side, and otherwise keeps looking further on.
    pub fn find_at(&self, hay: &[u8], start: usize) -> Option<(usize, usize)> {
        if !self.word {
            return self.raw_find(hay, start);
        }
        let mut from = start;
        while from <= hay.len() {
            let (s, e) = self.raw_find(hay, from)?;
            let before_ok = s == 0 || !is_word_byte(hay[s - 1]);
            let after_ok = e == hay.len() || !is_word_byte(hay[e]);
            if before_ok && after_ok && e > s {
                return Some((s, e));
            }
            // A shorter match at the same start may still end at a boundary.
            if before_ok {
                for end in (s + 1..e).rev() {
                    if (end == hay.len() || !is_word_byte(hay[end]))
                        && self.raw_find(&hay[..end], s) == Some((s, end))
                    {
                        return Some((s, end));
                    }
                }
            }
            from = s + 1;
        }
        None
    }

    pub fn is_match(&self, hay: &[u8]) -> bool {
        self.find_at(hay, 0).is_some()
    }
}
