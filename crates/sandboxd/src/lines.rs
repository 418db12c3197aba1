//! Line framing of the input stream with a cap on line length that holds even while a line is
//! still arriving: an oversized line is never buffered whole.

use std::io::{self, Read};

/// What the reader found.
pub enum Event<'a> {
    /// A complete line, without its newline.
    Line(&'a [u8]),
    /// A line longer than the cap began; the rest of it, up to its newline, is skipped.
    TooLarge,
}

const CHUNK: usize = 64 * 1024;

/// Reads `input` to its end, calling `on` for each line or oversized line. `cap` is asked
/// before each read, so a cap changed by a request applies from the next line on. Returns
/// when the input ends or `on` returns false.
pub fn read_lines(
    mut input: impl Read,
    cap: impl Fn() -> usize,
    mut on: impl FnMut(Event<'_>) -> bool,
) -> io::Result<()> {
    let mut line: Vec<u8> = Vec::new();
    let mut discarding = false;
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = match input.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let limit = cap();
        let mut rest = &chunk[..n];
        while !rest.is_empty() {
            let (segment, ended) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (&rest[..i], true),
                None => (rest, false),
            };
            rest = if ended {
                &rest[segment.len() + 1..]
            } else {
                &[]
            };
            if discarding {
                discarding = !ended;
                continue;
            }
            if line.len() + segment.len() > limit {
                line.clear();
                line.shrink_to(CHUNK);
                discarding = !ended;
                if !on(Event::TooLarge) {
                    return Ok(());
                }
                continue;
            }
            line.extend_from_slice(segment);
            if ended {
                let keep_going = on(Event::Line(&line));
                line.clear();
                if !keep_going {
                    return Ok(());
                }
            }
        }
    }
    if !discarding && !line.is_empty() {
        on(Event::Line(&line));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out its bytes a few at a time, as a pipe may.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.0.len().min(self.1).min(buf.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    fn collect(input: &[u8], step: usize, cap: usize) -> Vec<String> {
        let mut out = Vec::new();
        read_lines(
            Trickle(input, step),
            || cap,
            |e| {
                out.push(match e {
                    Event::Line(l) => String::from_utf8_lossy(l).into_owned(),
                    Event::TooLarge => "<too large>".into(),
                });
                true
            },
        )
        .unwrap();
        out
    }

    #[test]
    fn splits_lines_whatever_the_read_sizes() {
        for step in [1, 2, 3, 7, 1000] {
            assert_eq!(collect(b"a\nbb\n\nccc", step, 10), ["a", "bb", "", "ccc"]);
        }
    }

    #[test]
    fn oversized_line_is_reported_once_and_the_next_line_works() {
        let mut input = vec![b'x'; 100];
        input.extend_from_slice(b"\nok\n");
        for step in [1, 5, 64, 1000] {
            assert_eq!(
                collect(&input, step, 10),
                ["<too large>", "ok"],
                "step {step}"
            );
        }
    }

    #[test]
    fn a_line_of_exactly_the_cap_is_accepted() {
        assert_eq!(
            collect(b"0123456789\n01234567890\n", 4, 10),
            ["0123456789", "<too large>"]
        );
    }

    #[test]
    fn oversized_line_at_end_of_input_without_newline() {
        assert_eq!(
            collect(b"ok\nxxxxxxxxxxxxxxx", 3, 10),
            ["ok", "<too large>"]
        );
    }
}
