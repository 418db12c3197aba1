//! The compressions tar reads and writes: gzip (flate2), bzip2 (the bzip2 crate on its pure-Rust
//! libbz2 port) and xz (lzma-rs). Reading recognises each by its magic number, as GNU tar does.

use std::io::{self, BufRead, Read, Write};

use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Gzip,
    Bzip2,
    Xz,
}

impl Codec {
    /// The compression a stream starting with `head` is in, if any.
    pub fn sniff(head: &[u8]) -> Option<Codec> {
        if head.starts_with(&[0x1f, 0x8b]) {
            Some(Codec::Gzip)
        } else if head.starts_with(b"BZh") {
            Some(Codec::Bzip2)
        } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
            Some(Codec::Xz)
        } else {
            None
        }
    }

    /// The decompressed stream. xz is decoded whole first (lzma-rs decodes into a writer);
    /// a corrupt stream is an `InvalidData` error.
    pub fn decoder<'a>(self, input: impl BufRead + 'a) -> io::Result<Box<dyn Read + 'a>> {
        Ok(match self {
            Codec::Gzip => Box::new(MultiGzDecoder::new(input)),
            Codec::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(input)),
            Codec::Xz => {
                let mut input = input;
                let mut out = Vec::new();
                lzma_rs::xz_decompress(&mut input, &mut out)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                Box::new(io::Cursor::new(out))
            }
        })
    }

    /// A writer that compresses into `out` (or passes through, for `None`);
    /// [`Encoder::finish`] writes the stream's end.
    pub fn encoder<'a>(codec: Option<Self>, out: Box<dyn Write + 'a>) -> Encoder<'a> {
        let Some(codec) = codec else {
            return Encoder::Plain(out);
        };
        match codec {
            Codec::Gzip => Encoder::Gzip(GzEncoder::new(out, Compression::default())),
            Codec::Bzip2 => Encoder::Bzip2(bzip2::write::BzEncoder::new(
                out,
                bzip2::Compression::best(),
            )),
            Codec::Xz => Encoder::Xz(Vec::new(), out),
        }
    }
}

pub enum Encoder<'a> {
    /// No compression.
    Plain(Box<dyn Write + 'a>),
    Gzip(GzEncoder<Box<dyn Write + 'a>>),
    Bzip2(bzip2::write::BzEncoder<Box<dyn Write + 'a>>),
    /// lzma-rs compresses a whole input: gathered here until the end.
    Xz(Vec<u8>, Box<dyn Write + 'a>),
}

impl Encoder<'_> {
    pub fn finish(self) -> io::Result<()> {
        let mut out = match self {
            Encoder::Plain(out) => out,
            Encoder::Gzip(e) => e.finish()?,
            Encoder::Bzip2(e) => e.finish()?,
            Encoder::Xz(data, mut out) => {
                lzma_rs::xz_compress(&mut &data[..], &mut out)?;
                out
            }
        };
        out.flush()
    }
}

impl Write for Encoder<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Encoder::Plain(w) => w.write(buf),
            Encoder::Gzip(e) => e.write(buf),
            Encoder::Bzip2(e) => e.write(buf),
            Encoder::Xz(data, _) => {
                data.extend_from_slice(buf);
                Ok(buf.len())
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Encoder::Plain(w) => w.flush(),
            Encoder::Gzip(e) => e.flush(),
            Encoder::Bzip2(e) => e.flush(),
            Encoder::Xz(..) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_codec_reads_back_what_it_wrote() {
        let text = b"hello, tar\n".repeat(500);
        for codec in [Codec::Gzip, Codec::Bzip2, Codec::Xz] {
            let mut packed = Vec::new();
            let mut enc = Codec::encoder(Some(codec), Box::new(&mut packed));
            enc.write_all(&text).unwrap();
            enc.finish().unwrap();
            assert_eq!(Codec::sniff(&packed), Some(codec));
            let mut back = Vec::new();
            codec
                .decoder(&packed[..])
                .unwrap()
                .read_to_end(&mut back)
                .unwrap();
            assert_eq!(back, text, "{codec:?}");
        }
        assert_eq!(Codec::sniff(b"ustar"), None);
    }
}
