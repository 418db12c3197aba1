//! The `.Z` format of Unix `compress`, which GNU `gunzip`/`zcat` also read: LZW codes of 9 up
//! to `maxbits` bits, packed least significant bit first. The original reads codes in groups
//! of eight (one group is `n_bits` bytes) and skips the rest of a group whenever the code
//! width grows or the table is cleared; a decoder must skip the same bits to stay in step.

/// The magic bytes a `.Z` file starts with.
pub const MAGIC: [u8; 2] = [0x1f, 0x9d];

const INIT_BITS: u32 = 9;
const CLEAR: usize = 256;
const BLOCK_MODE: u8 = 0x80;
const BITS_MASK: u8 = 0x1f;

/// Why a `.Z` stream cannot be read, in gzip's words.
#[derive(Debug)]
pub struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// Decompresses a whole `.Z` stream (magic included).
pub fn decompress(data: &[u8]) -> Result<Vec<u8>, Error> {
    if data.len() < 3 || data[..2] != MAGIC {
        return Err(Error("not in gzip format".into()));
    }
    let flags = data[2];
    let maxbits = u32::from(flags & BITS_MASK);
    if maxbits > 16 {
        return Err(Error(format!(
            "compressed with {maxbits} bits, can only handle 16 bits"
        )));
    }
    let block_mode = flags & BLOCK_MODE != 0;
    let codes = &data[3..];
    let total_bits = codes.len() * 8;
    let maxmaxcode = 1usize << maxbits;

    // A header may claim fewer bits than codes start with: the tables still hold 9 bits.
    let size = maxmaxcode.max(1 << INIT_BITS);
    let mut prefix = vec![0u16; size];
    let mut suffix: Vec<u8> = (0..size).map(|c| c as u8).collect();
    let mut out = Vec::new();
    let mut stack = Vec::new();

    let mut n_bits = INIT_BITS;
    let mut maxcode = (1usize << n_bits) - 1;
    let mut free_ent = if block_mode { CLEAR + 1 } else { CLEAR };
    // Bits are counted from the start of the current group run: the position the original
    // rounds up to a whole group (n_bits bytes) when the width changes or the table clears.
    let mut base = 0usize;
    let mut pos = 0usize;
    let mut oldcode: Option<usize> = None;
    let mut finchar = 0u8;
    let round_up = |pos: usize, n_bits: u32| {
        let group = n_bits as usize * 8;
        pos.div_ceil(group) * group
    };

    loop {
        if free_ent > maxcode {
            // As compress does, also past a 9-bit maximum (its 512 codes are then written
            // in 10 bits).
            base += round_up(pos, n_bits);
            pos = 0;
            n_bits += 1;
            maxcode = if n_bits == maxbits {
                maxmaxcode
            } else {
                (1usize << n_bits) - 1
            };
        }
        let at = base + pos;
        if at + n_bits as usize > total_bits {
            break;
        }
        let code = read_bits(codes, at, n_bits);
        pos += n_bits as usize;

        let Some(old) = oldcode else {
            if code >= CLEAR {
                return Err(Error("corrupt input.".into()));
            }
            finchar = code as u8;
            oldcode = Some(code);
            out.push(finchar);
            continue;
        };
        if code == CLEAR && block_mode {
            prefix.iter_mut().take(CLEAR).for_each(|p| *p = 0);
            free_ent = CLEAR;
            base += round_up(pos, n_bits);
            pos = 0;
            n_bits = INIT_BITS;
            maxcode = (1usize << n_bits) - 1;
            continue;
        }
        let incode = code;
        let mut code = code;
        if code >= free_ent {
            // The code being defined by this very step (cScSc): its text is the previous
            // one's plus that one's first character.
            if code > free_ent {
                return Err(Error("corrupt input.".into()));
            }
            stack.push(finchar);
            code = old;
        }
        while code >= CLEAR {
            stack.push(suffix[code]);
            code = usize::from(prefix[code]);
        }
        finchar = suffix[code];
        stack.push(finchar);
        out.extend(stack.drain(..).rev());
        if free_ent < maxmaxcode {
            prefix[free_ent] = old as u16;
            suffix[free_ent] = finchar;
            free_ent += 1;
        }
        oldcode = Some(incode);
    }
    Ok(out)
}

/// `n` bits at bit `at` of `data`, least significant first.
fn read_bits(data: &[u8], at: usize, n: u32) -> usize {
    let mut v = 0usize;
    for i in 0..n as usize {
        let bit = at + i;
        if data[bit / 8] >> (bit % 8) & 1 != 0 {
            v |= 1 << i;
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::decompress;

    #[test]
    fn short_streams_decode() {
        assert_eq!(decompress(b"\x1f\x9d\x90\x61\x14\x00").unwrap(), b"a\n");
        assert_eq!(decompress(b"\x1f\x9d\x90\x00").unwrap(), b"");
        assert_eq!(
            decompress(b"\x1f\x9d\x90\x48\x8a\x30\x61\xf2\x44\x01").unwrap(),
            b"HELLO\n"
        );
    }

    #[test]
    fn bad_streams_are_errors() {
        assert!(decompress(b"\x1f\x8b\x08").is_err());
        assert!(decompress(b"\x1f\x9d\x91").is_err());
        // A first code that is not a byte.
        assert!(decompress(b"\x1f\x9d\x90\xff\xff").is_err());
        // Fewer bits than codes start with, and garbage after.
        for flags in [0x80u8, 0x85, 0x08, 0x00] {
            let mut data = vec![0x1f, 0x9d, flags];
            data.extend((0..4000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8));
            let _ = decompress(&data);
        }
    }
}
