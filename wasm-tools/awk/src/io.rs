//! Record reading (RS in all its forms) and error texts for I/O failures.

use std::io::{self, Read};
use std::rc::Rc;

use crate::regex::AwkRegex;
use crate::value::decode;

/// How records are separated.
#[derive(Clone)]
pub enum RsMode {
    Byte(u8),
    Paragraph,
    Regex(Rc<AwkRegex>),
}

pub struct RecordReader {
    src: Box<dyn Read>,
    buf: Vec<u8>,
    pos: usize,
    eof: bool,
    /// Once a regex RS is used the rest of the input is decoded here and read from it.
    text: Option<(String, usize)>,
}

enum Found {
    /// Record is data[..end], separator data[end..sep_end].
    At(usize, usize),
    NeedMore,
    /// The rest (possibly trimmed to `end`) is the last record; separator data[end..].
    Last(usize),
    None,
}

fn find_sep(data: &[u8], mode: &RsMode, eof: bool) -> Found {
    match mode {
        RsMode::Byte(b) => match memchr::memchr(*b, data) {
            Some(i) => Found::At(i, i + 1),
            None if eof => {
                if data.is_empty() {
                    Found::None
                } else {
                    Found::Last(data.len())
                }
            }
            None => Found::NeedMore,
        },
        RsMode::Paragraph => match memchr::memmem::find(data, b"\n\n") {
            Some(i) => {
                let mut j = i + 2;
                while j < data.len() && data[j] == b'\n' {
                    j += 1;
                }
                if j < data.len() {
                    Found::At(i, j)
                } else if eof {
                    Found::Last(i)
                } else {
                    Found::NeedMore
                }
            }
            None if eof => {
                if data.is_empty() {
                    return Found::None;
                }
                let mut end = data.len();
                while end > 0 && data[end - 1] == b'\n' {
                    end -= 1;
                }
                Found::Last(end)
            }
            None => Found::NeedMore,
        },
        RsMode::Regex(_) => Found::NeedMore,
    }
}

impl RecordReader {
    pub fn new(src: Box<dyn Read>) -> RecordReader {
        RecordReader {
            src,
            buf: Vec::new(),
            pos: 0,
            eof: false,
            text: None,
        }
    }

    fn fill(&mut self) -> io::Result<()> {
        if self.pos > 0 && self.pos * 2 >= self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let old = self.buf.len();
        let want = (old - self.pos).max(65536);
        self.buf.resize(old + want, 0);
        loop {
            match self.src.read(&mut self.buf[old..]) {
                Ok(n) => {
                    self.buf.truncate(old + n);
                    if n == 0 {
                        self.eof = true;
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.buf.truncate(old);
                    self.eof = true;
                    return Err(e);
                }
            }
        }
    }

    fn enter_text_mode(&mut self) -> io::Result<()> {
        while !self.eof {
            self.fill()?;
        }
        let t = decode(&self.buf[self.pos..]);
        self.buf = Vec::new();
        self.pos = 0;
        self.text = Some((t, 0));
        Ok(())
    }

    /// The next record and the text that ended it (RT).
    pub fn read_record(&mut self, mode: &RsMode) -> io::Result<Option<(String, String)>> {
        if matches!(mode, RsMode::Regex(_)) && self.text.is_none() {
            self.enter_text_mode()?;
        }
        if let Some((text, tpos)) = &mut self.text {
            let data = &text[*tpos..];
            if let RsMode::Paragraph = mode {
                let skip = data.len() - data.trim_start_matches('\n').len();
                *tpos += skip;
            }
            let data = &text[*tpos..];
            let found = match mode {
                RsMode::Regex(re) => {
                    let mut at = *tpos;
                    let mut res = Found::None;
                    while let Some((s, e)) = re.find_at(text, at) {
                        if e > s {
                            res = Found::At(s - *tpos, e - *tpos);
                            break;
                        }
                        // Empty matches do not separate records.
                        match text[s..].chars().next() {
                            Some(c) => at = s + c.len_utf8(),
                            None => break,
                        }
                    }
                    if let Found::None = res
                        && !data.is_empty()
                    {
                        res = Found::Last(data.len());
                    }
                    res
                }
                _ => find_sep(data.as_bytes(), mode, true),
            };
            let data = &text[*tpos..];
            return Ok(match found {
                Found::At(end, sep_end) => {
                    let rec = data[..end].to_string();
                    let rt = data[end..sep_end].to_string();
                    *tpos += sep_end;
                    Some((rec, rt))
                }
                Found::Last(end) => {
                    let rec = data[..end].to_string();
                    let rt = data[end..].to_string();
                    *tpos = text.len();
                    Some((rec, rt))
                }
                _ => None,
            });
        }
        loop {
            if let RsMode::Paragraph = mode {
                while self.pos < self.buf.len() && self.buf[self.pos] == b'\n' {
                    self.pos += 1;
                }
                if self.pos == self.buf.len() && !self.eof {
                    self.fill()?;
                    continue;
                }
            }
            let data = &self.buf[self.pos..];
            match find_sep(data, mode, self.eof) {
                Found::At(end, sep_end) => {
                    let rec = decode(&data[..end]);
                    let rt = decode(&data[end..sep_end]);
                    self.pos += sep_end;
                    return Ok(Some((rec, rt)));
                }
                Found::Last(end) => {
                    let rec = decode(&data[..end]);
                    let rt = decode(&data[end..]);
                    self.pos = self.buf.len();
                    return Ok(Some((rec, rt)));
                }
                Found::None => return Ok(None),
                Found::NeedMore => self.fill()?,
            }
        }
    }
}

/// The C library's wording for an I/O error, which is what gawk prints.
pub fn errno_text(e: &io::Error) -> String {
    use io::ErrorKind::*;
    match e.kind() {
        NotFound => "No such file or directory".into(),
        PermissionDenied => "Permission denied".into(),
        AlreadyExists => "File exists".into(),
        IsADirectory => "Is a directory".into(),
        NotADirectory => "Not a directory".into(),
        _ => {
            let s = e.to_string();
            match s.find(" (os error") {
                Some(i) => s[..i].to_string(),
                None => s,
            }
        }
    }
}
